/*
 * bench_allreduce_rank.c - one rank of `inagg bench allreduce`: fills its tensor with the
 * known values of bench/benchdata.h, joins the job, runs warmups and timed allreduces (each
 * after a barrier), verifies every result (int32 exactly, float32 within the fixed-point
 * bound of worker/quant.h or the float-addition bound in native mode; compressed: against an
 * offline codec round trip, per element, see build_reference) and reports its times,
 * when it ran, its CPU time and a checksum of the last result. The same code runs as a forked
 * local rank (report through a pipe) and as one rank on its own host (`--rank`: report as one
 * JSON line), which is how the testbed runs ranks, so both measure the same thing.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "apps/bench/bench_allreduce.h"
#include "apps/bench/benchdata.h"
#include "apps/bench/harness.h"
#include "lib/base/util.h"
#include "lib/codec/codec.h"
#include "lib/json/json.h"
#include "lib/worker/quant.h"

typedef struct expected {
    float *ref; /* compressed: the offline reference (build_reference) */
    float *tol; /* compressed: per element, the error allowed against it */
    int32_t *i32;
    double *f64; /* exact sum */
    float *abs; /* sum of magnitudes (native float bound) */
    int16_t *exp; /* per chunk: the exponent every rank will agree on (fixed point) */
} expected_t;

static int build_reference(const ar_opts_t *o, expected_t *ex);

static int build_expected(const ar_opts_t *o, expected_t *ex)
{
    uint64_t n = o->elems;
    if (!o->dtype_float) {
        ex->i32 = malloc(n * sizeof(int32_t));
        if (!ex->i32)
            return -ENOMEM;
        for (uint64_t i = 0; i < n; i++)
            ex->i32[i] = bench_expected_i32(o->seed, o->workers, i);
        return 0;
    }
    uint64_t nchunks = (n + o->packet_elems - 1) / o->packet_elems;
    ex->f64 = malloc(n * sizeof(double));
    ex->abs = malloc(n * sizeof(float));
    ex->exp = malloc(nchunks * sizeof(int16_t));
    float *tmp = malloc(o->packet_elems * sizeof(float));
    if (!ex->f64 || !ex->abs || !ex->exp || !tmp) {
        free(tmp);
        return -ENOMEM;
    }
    for (uint64_t i = 0; i < n; i++) {
        double a;
        ex->f64[i] = bench_expected_f32(o->seed, o->workers, i, &a);
        ex->abs[i] = (float)a;
    }
    for (uint64_t c = 0; c < nchunks; c++) {
        uint64_t off = c * o->packet_elems;
        size_t len = (size_t)util_min_u64(o->packet_elems, n - off);
        int16_t m = QUANT_EXP_ZERO;
        for (uint32_t r = 0; r < o->workers; r++) {
            for (size_t k = 0; k < len; k++)
                tmp[k] = bench_value_f32(o->seed, r, off + k);
            m = quant_exp_max(m, quant_block_exponent(tmp, len));
        }
        ex->exp[c] = m;
    }
    free(tmp);
    return o->compress ? build_reference(o, ex) : 0;
}

/* Orders of W ranks' additions checked one by one: W!/2 (a + b == b + a) up to this many. */
#define REF_MAX_ORDERS 12u

/* The next permutation of p[0..w) in lexicographic order; 0 after the last. */
static int next_order(uint32_t *p, uint32_t w)
{
    uint32_t i = w - 1;
    while (i > 0 && p[i - 1] >= p[i])
        i--;
    if (i == 0)
        return 0;
    uint32_t j = w - 1;
    while (p[j] <= p[i - 1])
        j--;
    uint32_t t = p[i - 1];
    p[i - 1] = p[j];
    p[j] = t;
    for (uint32_t a = i, b = w - 1; a < b; a++, b--) {
        t = p[a];
        p[a] = p[b];
        p[b] = t;
    }
    return 1;
}

/* The chunk's sum of the decoded contributions y (w rows of len) in rank order p, coded and
 * decoded as the switch does, into out. 0, or -EIO. */
static int code_sum(codec_ctx_t *c, const float *y, uint32_t w, const uint32_t *p, size_t len,
                    float *out, uint8_t *buf, size_t cap)
{
    memset(out, 0, len * sizeof(float));
    for (uint32_t r = 0; r < w; r++)
        for (size_t k = 0; k < len; k++)
            out[k] += y[(size_t)p[r] * len + k];
    long l = codec_encode(c, out, len, buf, cap);
    return l < 0 || codec_decode(c, buf, (size_t)l, out, len, NULL, 0) != 0 ? -EIO : 0;
}

/* A compressed job's offline reference and the error allowed per element, chunk by chunk as
 * the switch sees it: each rank's chunk coded and decoded, the decoded chunks summed in float,
 * the sum coded and decoded once more. The switch adds in arrival order, and a code of a sum
 * that differs in its last bits may differ by a quantization step, so for up to 4 ranks every
 * order of the additions is coded (W!/2 orders, as two ranks' sum is the same either way) and
 * an element may differ from the rank-order reference only as much as some order's result
 * does: with 2 ranks not at all (the result must be the reference bit for bit), with 3 or 4
 * by the codec's own spread at that element. Beyond 4 ranks the bound is per 4-value block of
 * the code: twice the reference's largest error in the block (each of the two codings errs
 * by at most the codec's error there) plus W float roundings of the magnitudes. */
static int build_reference(const ar_opts_t *o, expected_t *ex)
{
    codec_spec_t s;
    if (codec_parse(o->compress, &s, NULL, 0) != 0)
        return -EINVAL;
    const uint32_t w = o->workers, pe = o->packet_elems;
    uint64_t n = o->elems, nchunks = (n + pe - 1) / pe;
    size_t cap = codec_max_bytes(&s, pe);
    codec_ctx_t *c = NULL;
    ex->ref = malloc((n ? n : 1) * sizeof(float));
    ex->tol = malloc((n ? n : 1) * sizeof(float));
    float *x = malloc(pe * sizeof(float)), *y = malloc((size_t)w * pe * sizeof(float));
    float *alt = malloc(pe * sizeof(float));
    uint32_t *order = malloc(w * sizeof(uint32_t));
    uint8_t *buf = malloc(cap);
    int rc = -1;
    if (!ex->ref || !ex->tol || !x || !y || !alt || !order || !buf ||
        codec_ctx_open(&s, pe, &c, NULL, 0) != 0)
        goto out;
    uint32_t orders = 1;
    for (uint32_t r = 3; r <= w; r++)
        orders *= r; /* W!/2 */
    for (uint64_t ch = 0; ch < nchunks; ch++) {
        uint64_t off = ch * pe;
        size_t len = (size_t)util_min_u64(pe, n - off);
        float *ref = ex->ref + off, *tol = ex->tol + off;
        for (uint32_t r = 0; r < w; r++) {
            for (size_t k = 0; k < len; k++)
                x[k] = bench_value_f32(o->seed, r, off + k);
            long l = codec_encode(c, x, len, buf, cap);
            if (l < 0 || codec_decode(c, buf, (size_t)l, y + (size_t)r * len, len, NULL, 0) != 0)
                goto out;
            order[r] = r;
        }
        if (code_sum(c, y, w, order, len, ref, buf, cap) != 0)
            goto out;
        if (orders <= REF_MAX_ORDERS) {
            memset(tol, 0, len * sizeof(float));
            while (next_order(order, w)) {
                if (w >= 2 && order[0] > order[1])
                    continue; /* the same sum as with the first two swapped */
                if (code_sum(c, y, w, order, len, alt, buf, cap) != 0)
                    goto out;
                for (size_t k = 0; k < len; k++)
                    tol[k] = fmaxf(tol[k], fabsf(alt[k] - ref[k]));
            }
            continue;
        }
        for (size_t b = 0; b < len; b += 4) {
            size_t e = b + 4 < len ? b + 4 : len;
            double dev = 0;
            for (size_t k = b; k < e; k++)
                dev = fmax(dev, fabs((double)ref[k] - ex->f64[off + k]));
            for (size_t k = b; k < e; k++)
                tol[k] =
                    (float)(2.0 * dev + 2.0 * w * ldexp((double)ex->abs[off + k], -24) + 1e-30);
        }
    }
    rc = 0;
out:
    codec_ctx_close(c);
    free(x);
    free(y);
    free(alt);
    free(order);
    free(buf);
    return rc;
}

static void free_expected(expected_t *ex)
{
    free(ex->ref);
    free(ex->tol);
    free(ex->i32);
    free(ex->f64);
    free(ex->abs);
    free(ex->exp);
}

/* One float element against the error allowed: counts it wrong, or keeps the worst ratio. */
static void check_f32(double got, double exact, double allowed, uint64_t *bad, double *worst)
{
    double err = fabs(got - exact);
    if (!(err <= allowed))
        (*bad)++;
    else if (allowed > 0 && err / allowed > *worst)
        *worst = err / allowed;
}

/* Fixed point: each chunk's quantization term once, then each element's bound around it
 * (quant_error_bound in two steps: a per-element scalbn had been most of the verifier's
 * time). */
static uint64_t verify_fixed(const ar_opts_t *o, const expected_t *ex, const float *got,
                             double *worst)
{
    uint64_t bad = 0;
    for (uint64_t off = 0; off < o->elems; off += o->packet_elems) {
        uint64_t end = util_min_u64(off + o->packet_elems, o->elems);
        int16_t m = ex->exp[off / o->packet_elems];
        int plain = !quant_is_sentinel(m);
        double q = plain ? quant_block_error(m, o->workers) : 0.0;
        for (uint64_t i = off; i < end; i++) {
            double exact = ex->f64[i];
            double allowed = plain ? quant_error_bound_of_block(q, exact)
                                   : quant_error_bound(m, o->workers, exact);
            check_f32(got[i], exact, allowed, &bad, worst);
        }
    }
    return bad;
}

/* Check one result; returns the number of wrong elements (0: verified). */
static uint64_t verify(const ar_opts_t *o, const expected_t *ex, const void *recv, double *worst)
{
    uint64_t bad = 0;
    if (!o->dtype_float) {
        const int32_t *got = recv;
        for (uint64_t i = 0; i < o->elems; i++)
            bad += got[i] != ex->i32[i];
        return bad;
    }
    const float *got = recv;
    if (!ex->ref && o->float_mode == INAGG_FLOAT_FIXED)
        return verify_fixed(o, ex, got, worst);
    for (uint64_t i = 0; i < o->elems; i++) {
        double exact = ex->f64[i], allowed;
        if (ex->ref) {
            exact = ex->ref[i];
            allowed = ex->tol[i];
        } else {
            allowed = (double)o->workers * ldexp((double)ex->abs[i], -24) + 1e-30;
        }
        check_f32(got[i], exact, allowed, &bad, worst);
    }
    return bad;
}

/* Test only: INAGG_BENCH_CORRUPT=I changes element I of rank 0's last result before it is
 * verified, so a test can see the benchmark report verified=false (tests/cli.sh). */
static void corrupt_for_test(const ar_opts_t *o, void *recv)
{
    const char *v = getenv("INAGG_BENCH_CORRUPT");
    if (!v || !*v)
        return;
    uint64_t i = strtoull(v, NULL, 10);
    if (i >= o->elems)
        return;
    if (o->dtype_float)
        ((float *)recv)[i] = ((float *)recv)[i] * 2.0f + 1.0f;
    else
        ((int32_t *)recv)[i] += 1;
}

/* Test only: INAGG_BENCH_STALL=R makes rank R go silent before its first allreduce, for
 * longer than the job's timeout (as a stopped or starved process would), so a test can see
 * the benchmark name the rank where the failure started (tests/cli.sh). */
static void stall_for_test(const ar_opts_t *o, uint32_t rank)
{
    const char *v = getenv("INAGG_BENCH_STALL");
    if (v && *v && strtoul(v, NULL, 10) == rank)
        usleep((o->timeout_ms + 1500u) * 1000u);
}

static double now_real(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_self(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void ar_effective_rto(const ar_opts_t *o, uint32_t *rto_us, uint32_t *min_us, uint32_t *max_us)
{
    inagg_options_t d = INAGG_OPTIONS_INIT;
    uint32_t rto = d.rto_us, lo = o->rto_min_us ? o->rto_min_us : d.rto_min_us,
             hi = o->rto_max_us ? o->rto_max_us : d.rto_max_us;
    lo = lo > hi ? hi : lo;
    rto = rto < lo ? lo : rto > hi ? hi : rto;
    *rto_us = rto;
    *min_us = lo;
    *max_us = hi;
}

/* The communicator's options of a rank of o: every benchmark's, and its float mode, engine
 * threads, codec, transport and retransmission timeouts. */
static inagg_options_t rank_options(const ar_opts_t *o)
{
    inagg_options_t opts =
        bench_comm_options(o->protocol, o->window, o->packet_elems, o->timeout_ms, o->faults);
    opts.float_mode = o->float_mode;
    opts.threads = o->threads;
    opts.compress = o->compress;
    opts.no_error_feedback = 1; /* each result is checked against one fixed reference */
    opts.transport = o->transport;
    ar_effective_rto(o, &opts.rto_us, &opts.rto_min_us, &opts.rto_max_us);
    return opts;
}

uint64_t ar_rank_bytes(const ar_opts_t *o)
{
    uint64_t n = o->elems, pe = o->packet_elems ? o->packet_elems : 1;
    uint64_t bytes = 2 * n * 4; /* send, recv */
    if (!o->dtype_float)
        return bytes + n * sizeof(int32_t); /* build_expected: i32 */
    bytes += n * (sizeof(double) + sizeof(float)) + (n + pe - 1) / pe * sizeof(int16_t);
    if (o->compress)
        bytes += 2 * n * sizeof(float); /* build_reference: ref, tol */
    return bytes;
}

int ar_check_memory(const ar_opts_t *o, char *err, size_t errlen)
{
    ar_opts_t largest = *o;
    for (int i = 0; i < o->nsizes; i++)
        largest.elems = o->sizes[i] / 4 > largest.elems ? o->sizes[i] / 4 : largest.elems;
    uint32_t ranks = o->single ? 1 : o->workers;
    uint64_t each = ar_rank_bytes(&largest);
    char what[160], e[48] = "";
    if (ranks > 1) {
        char t[32];
        snprintf(e, sizeof(e), " (%s each)", launch_mem_text(each, t, sizeof(t)));
    }
    snprintf(what, sizeof(what), "%u %s of %llu %s elements%s", ranks,
             ranks == 1 ? "rank" : "ranks", (unsigned long long)largest.elems,
             o->dtype_float ? "float32" : "int32", e);
    return launch_mem_check(each * ranks, what, err, errlen);
}

int ar_rank_run(const ar_opts_t *o, uint32_t rank, const char *addr, const char *job,
                ar_rank_report_t *rep)
{
    bench_rank_report_reset(rep);
    rep->rank = (int32_t)rank;
    size_t bytes = o->elems * 4;
    void *send = malloc(bytes ? bytes : 4), *recv = malloc(bytes ? bytes : 4);
    expected_t ex = {0};
    inagg_comm_t *comm = NULL;
    inagg_result_t rc = INAGG_OK;
    if (!send || !recv || build_expected(o, &ex) != 0) {
        rc = INAGG_ERR_NOMEM;
        snprintf(rep->error, sizeof(rep->error), "rank %u: out of memory for %llu elements", rank,
                 (unsigned long long)o->elems);
        goto done;
    }
    for (uint64_t i = 0; i < o->elems; i++) {
        if (o->dtype_float)
            ((float *)send)[i] = bench_value_f32(o->seed, rank, i);
        else
            ((int32_t *)send)[i] = bench_value_i32(o->seed, rank, i);
    }
    inagg_options_t opts = rank_options(o);
    char detail[256];
    /* Two levels: this rank joins its leaf's job of hosts_per_leaf ranks; its data and the
     * check are those of global rank `rank` of o->workers. */
    uint32_t jrank = o->hosts_per_leaf ? rank % o->hosts_per_leaf : rank;
    uint32_t jworld = o->hosts_per_leaf ? o->hosts_per_leaf : o->workers;
    rc = inagg_comm_create(&comm, addr, job, jrank, jworld, &opts, detail, sizeof(detail));
    if (rc != INAGG_OK) {
        snprintf(rep->error, sizeof(rep->error), "rank %u: joining job %s at %s: %s: %s", rank, job,
                 addr, inagg_strerror(rc), detail);
        goto done;
    }
    inagg_dtype_t dt = o->dtype_float ? INAGG_FLOAT32 : INAGG_INT32;
    rep->verified = 1;
    int show = rank == 0 && !o->single && isatty(STDERR_FILENO);
    double cpu0 = 0;
    for (uint32_t it = 0; it < o->warmup + o->iters; it++) {
        memset(recv, 0xA5, bytes); /* neither a plausible int32 sum nor a finite float */
        rc = inagg_barrier(comm);
        if (rc == INAGG_OK) {
            if (it == o->warmup) {
                rep->t_start = now_real();
                cpu0 = cpu_self();
            }
            if (it == 0)
                stall_for_test(o, rank);
            uint64_t t0 = util_now_ns();
            rc = inagg_allreduce(comm, send, recv, o->elems, dt, INAGG_SUM);
            uint64_t t1 = util_now_ns();
            if (it >= o->warmup && rep->iters < rep->cap)
                rep->times_s[rep->iters++] = (double)(t1 - t0) / 1e9;
            if (it + 1 == o->warmup + o->iters) {
                rep->t_end = now_real();
                rep->cpu_s = cpu_self() - cpu0;
            }
            if (show)
                fprintf(stderr, "\r  %s %u/%u: %.2f ms   ", it < o->warmup ? "warmup" : "iter",
                        it < o->warmup ? it + 1 : it - o->warmup + 1,
                        it < o->warmup ? o->warmup : o->iters, (double)(t1 - t0) / 1e6);
        }
        if (rc != INAGG_OK) {
            rep->t_fail = now_real();
            snprintf(rep->error, sizeof(rep->error), "rank %u, iteration %u: %s: %s", rank, it,
                     inagg_strerror(rc), inagg_last_error(comm));
            rep->verified = 0;
            break;
        }
        if (rank == 0 && it + 1 == o->warmup + o->iters)
            corrupt_for_test(o, recv);
        uint64_t bad = verify(o, &ex, recv, &rep->max_err);
        rep->wrong += bad;
        if (bad) {
            if (rep->t_fail == 0)
                rep->t_fail = now_real();
            rep->verified = 0;
            snprintf(rep->error, sizeof(rep->error),
                     "rank %u, iteration %u: %llu of %llu elements wrong", rank, it,
                     (unsigned long long)bad, (unsigned long long)o->elems);
        }
    }
    if (show)
        fprintf(stderr, "\r%60s\r", "");
    rep->checksum = bench_checksum(recv, o->elems);
    inagg_get_stats(comm, &rep->stats);
    rep->codec.size = sizeof(rep->codec);
    inagg_get_codec_stats(comm, &rep->codec);
    rep->transport.struct_size = sizeof(rep->transport);
    inagg_get_transport_stats(comm, &rep->transport);
    rep->failover.struct_size = sizeof(rep->failover);
    inagg_get_failover_stats(comm, &rep->failover);
    for (uint32_t i = 0; i < rep->transport.ncounters; i++)
        rep->transport_names[i] = inagg_transport_counter_name(comm, i);
done:
    rep->rc = rc;
    if (comm)
        inagg_comm_destroy(comm);
    free(send);
    free(recv);
    free_expected(&ex);
    return rc == INAGG_OK && rep->verified ? 0 : -EIO;
}

bench_rank_meta_t ar_rank_meta(const ar_opts_t *o)
{
    return (bench_rank_meta_t){.name = "inagg",
                               .world = o->workers,
                               .elems = o->elems,
                               .dtype = o->dtype_float ? "float32" : "int32",
                               .packet_elems = o->packet_elems,
                               .window = o->window};
}
