/*
 * test_compress.c - compressed allreduce end to end (switch child, worker children, loopback):
 * in every mode, under 2% injected loss, duplication and reordering both ways, each rank gets
 * the same result, and it equals the offline reference (each rank's chunk coded and decoded,
 * summed in float, the sum coded and decoded once more) within float rounding of the sum's
 * order; zfp:reversible is exact. Also: int32 refused on a lossy job with a clear message,
 * a rank asking for another mode is refused at join, and hostile coded packets are counted.
 * The coding counters (inagg_get_codec_stats) and the timeout's coding floor are checked too.
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "inagg.h"
#include "lib/codec/codec.h"
#include "lib/worker/rto.h"
#include "switchd/server/codecjob.h"
#include "testutil.h"

#define WORLD 3u
#define ELEMS 20000u
#define PKT 256u

typedef struct cjob {
    const char *addr, *mode, *faults;
    int ef; /* error feedback on (the library's default for lossy modes) */
    uint32_t threads; /* engine threads per rank (0: 1) */
    float *out; /* shared: WORLD * ELEMS */
    int32_t *rc; /* shared: WORLD */
    char *msg; /* shared: WORLD * 256 */
} cjob_t;

/* Rank r's gradient: normal-looking values of mixed magnitude (integers / 64 in reversible
 * mode so that sums are exact in any order). */
static float value(const char *mode, uint32_t r, size_t i)
{
    double u = sin((double)(i * 7 + r * 13) * 0.37) * (1.0 + (double)(i % 17));
    if (strcmp(mode, "zfp:reversible") == 0)
        return (float)(round(u * 64.0) / 64.0);
    return (float)(u * 1e-2);
}

static int cworker(uint32_t rank, void *arg)
{
    cjob_t *j = arg;
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.packet_elems = PKT;
    o.slots = 16;
    o.compress = j->mode;
    o.no_error_feedback = !j->ef;
    o.threads = j->threads ? j->threads : 1;
    o.faults = j->faults;
    o.rto_us = 1000;
    o.rto_min_us = 1000;
    inagg_comm_t *comm;
    char detail[256];
    inagg_result_t rc =
        inagg_comm_create(&comm, j->addr, "c", rank, WORLD, &o, detail, sizeof detail);
    if (rc != INAGG_OK) {
        snprintf(j->msg + rank * 256, 256, "%s", detail);
        j->rc[rank] = rc;
        return 1;
    }
    float *x = malloc(ELEMS * 4);
    for (size_t i = 0; i < ELEMS; i++)
        x[i] = value(j->mode, rank, i);
    for (int it = 0; it < 2 && rc == INAGG_OK; it++)
        rc = inagg_allreduce(comm, x, j->out + (size_t)rank * ELEMS, ELEMS, INAGG_FLOAT32,
                             INAGG_SUM);
    if (rc == INAGG_OK) { /* int32 on this job: refused if lossy, exact if reversible */
        int32_t a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[8];
        rc = inagg_allreduce(comm, a, b, 8, INAGG_INT32, INAGG_SUM);
        snprintf(j->msg + rank * 256, 256, "%s", rc == INAGG_OK ? "" : inagg_last_error(comm));
        if (rc == INAGG_OK && b[7] != 8 * (int)WORLD)
            rc = INAGG_ERR_PROTOCOL;
    } else {
        snprintf(j->msg + rank * 256, 256, "%s", inagg_last_error(comm));
    }
    j->rc[rank] = rc;
    inagg_comm_destroy(comm);
    free(x);
    return 0;
}

/* The result of the second of two allreduces of the same tensor; with error feedback each
 * rank's second contribution is x + (x - D(E(x))), as the engine computes it. */
static void reference(const char *mode, int ef, float *ref)
{
    codec_spec_t s;
    CHECK(codec_parse(mode, &s, NULL, 0) == 0);
    codec_ctx_t *c;
    CHECK(codec_ctx_open(&s, PKT, &c, NULL, 0) == 0);
    uint8_t buf[8192];
    float x[PKT], y[PKT];
    for (size_t off = 0; off < ELEMS; off += PKT) {
        size_t n = ELEMS - off < PKT ? ELEMS - off : PKT;
        float sum[PKT] = {0};
        for (uint32_t r = 0; r < WORLD; r++) {
            for (size_t i = 0; i < n; i++)
                x[i] = value(mode, r, off + i);
            long l = codec_encode(c, x, n, buf, sizeof buf);
            CHECK(l > 0 && codec_decode(c, buf, (size_t)l, y, n, NULL, 0) == 0);
            if (ef && codec_is_lossy(&s)) {
                for (size_t i = 0; i < n; i++) {
                    float res = x[i] - y[i];
                    x[i] = x[i] + res;
                }
                l = codec_encode(c, x, n, buf, sizeof buf);
                CHECK(l > 0 && codec_decode(c, buf, (size_t)l, y, n, NULL, 0) == 0);
            }
            for (size_t i = 0; i < n; i++)
                sum[i] += y[i];
        }
        long l = codec_encode(c, sum, n, buf, sizeof buf);
        CHECK(l > 0 && codec_decode(c, buf, (size_t)l, ref + off, n, NULL, 0) == 0);
    }
    codec_ctx_close(c);
}

static void run_mode_threads(const char *mode, int ef, uint32_t threads)
{
    char wf[128], sf[128];
    lossy_fault_specs(0.02, 14, wf, sf, sizeof wf);
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    cfg.transport.faults_in = sf;
    cfg.transport.faults_out = sf;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    cjob_t j = {.addr = ts.addr, .mode = mode, .faults = wf, .ef = ef, .threads = threads};
    j.out = shared_alloc((size_t)WORLD * ELEMS * 4);
    j.rc = shared_alloc(WORLD * sizeof(int32_t));
    j.msg = shared_alloc(WORLD * 256);
    CHECK_EQ_INT(run_workers(WORLD, cworker, &j, 100), 0);
    char stats[65536];
    ts_stats_json(&ts, stats, sizeof stats);
    ts_stop(&ts);
    /* the switch measured its codec: at least every contribution decoded and sum encoded */
    CHECK_MSG(ts_number(stats, "codec_values") >= 2.0 * (WORLD + 1) * ELEMS, "%s", stats);
    CHECK(ts_number(stats, "codec_ns") > 0);
    codec_spec_t s;
    CHECK(codec_parse(mode, &s, NULL, 0) == 0);
    for (uint32_t r = 0; r < WORLD; r++) {
        if (codec_is_lossy(&s)) {
            CHECK_MSG(j.rc[r] == INAGG_ERR_INVALID && strstr(j.msg + r * 256, "int32"),
                      "rank %u: int32 on %s: rc %d '%s'", r, mode, j.rc[r], j.msg + r * 256);
        } else {
            CHECK_MSG(j.rc[r] == INAGG_OK, "rank %u: %s", r, j.msg + r * 256);
        }
        CHECK(memcmp(j.out, j.out + (size_t)r * ELEMS, ELEMS * 4) == 0); /* same everywhere */
    }
    float *ref = malloc(ELEMS * 4);
    reference(mode, ef, ref);
    double maxref = 0, maxdiff = 0;
    for (size_t i = 0; i < ELEMS; i++) {
        maxref = fmax(maxref, fabs(ref[i]));
        maxdiff = fmax(maxdiff, fabs((double)ref[i] - j.out[i]));
    }
    if (!codec_is_lossy(&s))
        CHECK_MSG(maxdiff == 0, "%s: max difference %g from the exact sum", mode, maxdiff);
    else /* only the order of the float sum may differ; a lost or doubled chunk would not */
        CHECK_MSG(maxdiff <= 1e-3 * maxref, "%s: max difference %g (reference max %g)", mode,
                  maxdiff, maxref);
    free(ref);
}

static void run_mode(const char *mode, int ef) { run_mode_threads(mode, ef, 1); }

TEST(compress_zfp_rate_exactly_once_under_loss, 120) { run_mode("zfp:rate=8", 0); }
/* Two engine threads per rank, each with its encoder helper, error feedback on: every chunk
 * still coded once with its own residual, under loss. */
TEST(compress_two_engine_threads_under_loss, 120) { run_mode_threads("zfp:rate=8", 1, 2); }
TEST(compress_zfp_precision_exactly_once_under_loss, 120) { run_mode("zfp:precision=16", 0); }
TEST(compress_zfp_accuracy_exactly_once_under_loss, 120) { run_mode("zfp:accuracy=0.0001", 0); }
TEST(compress_zfp_reversible_exact_under_loss, 120) { run_mode("zfp:reversible", 0); }
TEST(compress_fp16_exactly_once_under_loss, 120) { run_mode("fp16", 0); }
/* Error feedback (the default): the second step carries the first step's residual. */
TEST(compress_error_feedback_rate_under_loss, 120) { run_mode("zfp:rate=8", 1); }
TEST(compress_error_feedback_fp16_under_loss, 120) { run_mode("fp16", 1); }

/* The switch's decode of a contribution: a chunk in another mode, truncated or with a wrong
 * bit count is refused (the protocol counts it as bad_chunk_code); a good one comes out as
 * network-order float32 words. */
TEST(compress_switch_rejects_bad_chunks, 10)
{
    codec_spec_t s;
    CHECK(codec_parse("zfp:rate=8", &s, NULL, 0) == 0);
    codecjob_t *cj = codecjob_create(&s, 1, 2, 4, PKT);
    CHECK(cj != NULL);
    codec_ctx_t *c, *other;
    CHECK(codec_ctx_open(&s, PKT, &c, NULL, 0) == 0);
    codec_spec_t o = {CODEC_ZFP_RATE, 16};
    CHECK(codec_ctx_open(&o, PKT, &other, NULL, 0) == 0);
    float x[PKT];
    for (size_t i = 0; i < PKT; i++)
        x[i] = value("zfp:rate=8", 0, i);
    uint32_t good[2048], bad[2048];
    long l = codec_encode(c, x, PKT, good, sizeof good);
    CHECK(l > 0);
    const uint32_t *be = NULL;
    int sat = 0;
    CHECK_EQ_INT(codecjob_decode(cj, 1, good, (uint32_t)(l / 4), &be, &sat), PKT);
    CHECK(be != NULL && sat == 0);
    CHECK_EQ_INT(codecjob_decode(cj, 1, good, (uint32_t)(l / 4) - 1, &be, &sat), 0);
    CHECK_EQ_INT(codecjob_decode(cj, 1, good, 1, &be, &sat), 0);
    memcpy(bad, good, (size_t)l);
    ((uint8_t *)bad)[7] ^= 0x08; /* bit count */
    CHECK_EQ_INT(codecjob_decode(cj, 1, bad, (uint32_t)(l / 4), &be, &sat), 0);
    long l2 = codec_encode(other, x, PKT, bad, sizeof bad); /* another rate */
    CHECK(l2 > 0);
    CHECK_EQ_INT(codecjob_decode(cj, 0, bad, (uint32_t)(l2 / 4), &be, &sat), 0);
    codec_ctx_close(c);
    codec_ctx_close(other);
    codecjob_free(cj);
}

static int mismatch_worker(uint32_t rank, void *arg)
{
    cjob_t *j = arg;
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.compress = rank == 0 ? "zfp:rate=8" : "zfp:rate=16";
    o.timeout_ms = 3000;
    inagg_comm_t *comm;
    char detail[256];
    inagg_result_t rc = inagg_comm_create(&comm, j->addr, "m", rank, 2, &o, detail, sizeof detail);
    j->rc[rank] = rc;
    snprintf(j->msg + rank * 256, 256, "%s", detail);
    if (rc == INAGG_OK)
        inagg_comm_destroy(comm);
    return 0;
}

/* Ranks asking for different modes: the later one is refused, naming both modes. */
TEST(compress_join_mode_mismatch_refused, 30)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    cjob_t j = {.addr = ts.addr};
    j.rc = shared_alloc(2 * sizeof(int32_t));
    j.msg = shared_alloc(2 * 256);
    CHECK_EQ_INT(run_workers(2, mismatch_worker, &j, 20), 0);
    ts_stop(&ts);
    int refused = 0;
    for (int r = 0; r < 2; r++)
        if (j.rc[r] != INAGG_OK && strstr(j.msg + r * 256, "compresses with"))
            refused++;
    CHECK_MSG(refused >= 1, "rank 0: %d '%s'; rank 1: %d '%s'", j.rc[0], j.msg, j.rc[1],
              j.msg + 256);
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.compress = "zfp:rate=99";
    inagg_comm_t *comm;
    char detail[256] = "";
    CHECK(inagg_comm_create(&comm, "127.0.0.1:1", "x", 0, 1, &o, detail, sizeof detail) ==
          INAGG_ERR_INVALID);
    CHECK(strstr(detail, "compress") != NULL);
}

static int nan_worker(uint32_t rank, void *arg)
{
    cjob_t *j = arg;
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.packet_elems = PKT;
    o.compress = "zfp:rate=8";
    o.timeout_ms = 5000;
    inagg_comm_t *comm;
    char detail[256];
    if (inagg_comm_create(&comm, j->addr, "nan", rank, 2, &o, detail, sizeof detail) != INAGG_OK)
        return 1;
    float x[1000];
    for (size_t i = 0; i < 1000; i++)
        x[i] = (float)i;
    if (rank == 1)
        x[700] = NAN;
    j->rc[rank] = inagg_allreduce(comm, x, x, 1000, INAGG_FLOAT32, INAGG_SUM);
    j->out[rank] = x[10]; /* a chunk without the NaN: delivered */
    inagg_comm_destroy(comm);
    return 0;
}

/* A NaN on one rank: that chunk travels as zeros flagged, and every rank's call reports
 * INAGG_ERR_NONFINITE (no rank is left waiting); the other chunks are delivered. */
TEST(compress_nonfinite_input_reported_everywhere, 30)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    cjob_t j = {.addr = ts.addr};
    j.rc = shared_alloc(2 * sizeof(int32_t));
    j.out = shared_alloc(2 * sizeof(float));
    CHECK_EQ_INT(run_workers(2, nan_worker, &j, 20), 0);
    ts_stop(&ts);
    for (int r = 0; r < 2; r++) {
        CHECK_EQ_INT(j.rc[r], INAGG_ERR_NONFINITE);
        CHECK(fabs(j.out[r] - 20.0f) < 0.5f);
    }
}

/* The timeout's coding floor (worker/rto.h): twice one switch queue's coding work for a
 * window, from the measured times; decode taken as encode until measured; capped. */
TEST(compress_rto_code_floor, 5)
{
    /* 16 slots on 2 queues, world 4: 2 * 8 * (4 * 2000 + 1000) ns = 144 us */
    CHECK_EQ_INT(rto_code_floor_us(1000, 2000, 4, 16, 2, 1000000), 144);
    CHECK_EQ_INT(rto_code_floor_us(1000, 0, 4, 16, 2, 1000000), 80); /* decode as encode */
    CHECK_EQ_INT(rto_code_floor_us(0, 2000, 4, 16, 2, 1000000), 160);
    CHECK_EQ_INT(rto_code_floor_us(0, 0, 4, 16, 2, 1000000), 0); /* nothing measured */
    CHECK_EQ_INT(rto_code_floor_us(1000, 2000, 4, 17, 2, 1000000), 162); /* 9 slots ahead */
    CHECK_EQ_INT(rto_code_floor_us(1000, 2000, 4, 16, 0, 1000000), 288); /* no queues: 1 */
    CHECK_EQ_INT(rto_code_floor_us(1e9, 1e9, 64, 64, 1, 70000), 70000); /* capped */
    double m = 0;
    rto_code_mean(&m, 800);
    CHECK(m == 800);
    rto_code_mean(&m, 1600);
    CHECK(m == 900);
}

static int stats_worker(uint32_t rank, void *arg)
{
    cjob_t *j = arg;
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.packet_elems = PKT;
    o.slots = 16;
    o.compress = rank < WORLD ? j->mode : NULL;
    inagg_comm_t *comm;
    char detail[256];
    const char *job = rank < WORLD ? "s" : "u";
    uint32_t r = rank < WORLD ? rank : rank - WORLD;
    inagg_result_t rc = inagg_comm_create(&comm, j->addr, job, r, WORLD, &o, detail, sizeof detail);
    if (rc != INAGG_OK) {
        snprintf(j->msg + rank * 256, 256, "join: %.240s", detail);
        return 1;
    }
    float *x = malloc(ELEMS * 4), *y = malloc(ELEMS * 4);
    for (size_t i = 0; i < ELEMS; i++)
        x[i] = value(j->mode, r, i);
    for (int it = 0; it < 2 && rc == INAGG_OK; it++)
        rc = inagg_allreduce(comm, x, y, ELEMS, INAGG_FLOAT32, INAGG_SUM);
    char *m = j->msg + rank * 256;
    inagg_codec_stats_t cs;
    memset(&cs, 0xa5, sizeof cs);
    cs.size = sizeof cs;
    inagg_result_t grc = inagg_get_codec_stats(comm, &cs);
    uint64_t chunks = 2u * ((ELEMS + PKT - 1) / PKT); /* two calls, no loss */
    if (rc != INAGG_OK)
        snprintf(m, 256, "allreduce: %.240s", inagg_last_error(comm));
    else if (grc != INAGG_OK || cs.size != sizeof cs)
        snprintf(m, 256, "get_codec_stats: rc %d size %u", grc, cs.size);
    else if (rank >= WORLD && (cs.chunks_encoded || cs.encode_ns || cs.codec_threads ||
                               cs.rto_code_floor_us || cs.reserved))
        snprintf(m, 256, "uncompressed job reports coding");
    else if (rank < WORLD &&
             (cs.chunks_encoded != chunks || cs.chunks_decoded != 2 * chunks || cs.encode_ns == 0 ||
              cs.decode_ns == 0 || cs.overlap_ns > cs.encode_ns + cs.decode_ns ||
              cs.codec_threads != 2 || cs.chunks_ahead > cs.chunks_encoded ||
              cs.rto_code_floor_us == 0 || cs.reserved != 0))
        snprintf(m, 256,
                 "counters: enc %llu dec %llu (want %llu, %llu) ns %llu %llu ov %llu "
                 "threads %u floor %u",
                 (unsigned long long)cs.chunks_encoded, (unsigned long long)cs.chunks_decoded,
                 (unsigned long long)chunks, (unsigned long long)(2 * chunks),
                 (unsigned long long)cs.encode_ns, (unsigned long long)cs.decode_ns,
                 (unsigned long long)cs.overlap_ns, cs.codec_threads, cs.rto_code_floor_us);
    if (!m[0]) { /* an older caller's smaller struct: only the fields that fit are written */
        inagg_codec_stats_t small;
        memset(&small, 0xa5, sizeof small);
        small.size = (uint32_t)offsetof(inagg_codec_stats_t, chunks_decoded);
        grc = inagg_get_codec_stats(comm, &small);
        if (grc != INAGG_OK || small.size != offsetof(inagg_codec_stats_t, chunks_decoded) ||
            small.chunks_decoded != 0xa5a5a5a5a5a5a5a5ull)
            snprintf(m, 256, "small struct: rc %d size %u", grc, small.size);
        small.size = 4;
        if (inagg_get_codec_stats(comm, &small) != INAGG_ERR_INVALID ||
            inagg_get_codec_stats(comm, NULL) != INAGG_ERR_INVALID)
            snprintf(m, 256, "a too small struct or NULL was accepted");
    }
    inagg_comm_destroy(comm);
    free(x);
    free(y);
    return m[0] ? 1 : 0;
}

/* inagg_get_codec_stats: exact chunk counts of a lossless-network run, times measured, the
 * overlap no more than the coding, the timeout floor set; zeros on an uncompressed job;
 * size versioning (a smaller struct is filled only as far as it goes; too small refused). */
TEST(compress_codec_stats, 60)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    cjob_t j = {.addr = ts.addr, .mode = "zfp:rate=8", .ef = 1};
    j.msg = shared_alloc(2 * WORLD * 256);
    int rc = run_workers(2 * WORLD, stats_worker, &j, 50);
    ts_stop(&ts);
    for (uint32_t r = 0; r < 2 * WORLD; r++)
        CHECK_MSG(j.msg[r * 256] == 0, "rank %u: %s", r, j.msg + r * 256);
    CHECK_EQ_INT(rc, 0);
}

/* decode(encode(x)) chunk by chunk of PKT values, as a rank's engine codes a tensor. */
static void coded_round_trip(const char *mode, const float *x, size_t n, float *out)
{
    codec_spec_t s;
    char err[256];
    CHECK(codec_parse(mode, &s, err, sizeof(err)) == 0);
    codec_ctx_t *ctx;
    CHECK_MSG(codec_ctx_open(&s, PKT, &ctx, err, sizeof(err)) == 0, "%s", err);
    uint8_t buf[8 * PKT];
    for (size_t off = 0; off < n; off += PKT) {
        size_t len = n - off < PKT ? n - off : PKT;
        long l = codec_encode(ctx, x + off, len, buf, sizeof(buf));
        CHECK(l > 0);
        CHECK(codec_decode(ctx, buf, (size_t)l, out + off, len, NULL, 0) == 0);
    }
    codec_ctx_close(ctx);
}

/* One allreduce through the caller's residual; on return the residual must be what the codec
 * dropped of x + the residual it had. */
static void ef_step(inagg_comm_t *c, const char *mode, const float *x, float *resid, size_t n)
{
    float *sent = malloc(n * sizeof(float)), *coded = malloc(n * sizeof(float));
    float *out = malloc(n * sizeof(float));
    CHECK(sent && coded && out);
    for (size_t i = 0; i < n; i++)
        sent[i] = x[i] + resid[i];
    coded_round_trip(mode, sent, n, coded);
    inagg_request_t *req;
    CHECK_EQ_INT(inagg_iallreduce_ef(c, x, out, n, INAGG_FLOAT32, INAGG_SUM, resid, &req),
                 INAGG_OK);
    CHECK_EQ_INT(inagg_wait(req), INAGG_OK);
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++)
        wrong += resid[i] != sent[i] - coded[i];
    CHECK_MSG(wrong == 0, "%zu of %zu residuals are not what the codec dropped", wrong, n);
    free(sent);
    free(coded);
    free(out);
}

/* inagg_iallreduce_ef: each tensor's residual is its own (two tensors of different sizes in
 * turn, as DDP's buckets), carried into that tensor's next call; refused for int32; left as it
 * is on a job without a lossy codec. */
TEST(compress_error_feedback_per_tensor_residual, 30)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    const char *mode = "zfp:rate=4";
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.packet_elems = PKT;
    o.compress = mode;
    inagg_comm_t *c = NULL;
    char detail[256] = "";
    CHECK_MSG(inagg_comm_create(&c, ts.addr, "ef-lossy", 0, 1, &o, detail, sizeof(detail)) ==
                  INAGG_OK,
              "%s", detail);
    enum { NA = 200, NB = 300 };
    float a[NA], b[NB], ra[NA] = {0}, rb[NB] = {0};
    for (size_t i = 0; i < NA; i++)
        a[i] = value("zfp:rate=4", 0, i);
    for (size_t i = 0; i < NB; i++)
        b[i] = value("zfp:rate=4", 1, i);
    for (int step = 0; step < 3; step++) {
        ef_step(c, mode, a, ra, NA);
        ef_step(c, mode, b, rb, NB);
    }
    float nonzero = 0;
    for (size_t i = 0; i < NA; i++)
        nonzero += fabsf(ra[i]);
    CHECK_MSG(nonzero > 0, "rate 4 dropped nothing: the residual was never written");
    int32_t ints[4] = {1, 2, 3, 4};
    inagg_request_t *req = NULL;
    CHECK_EQ_INT(inagg_iallreduce_ef(c, ints, ints, 4, INAGG_INT32, INAGG_SUM, ra, &req),
                 INAGG_ERR_INVALID);
    CHECK(strstr(inagg_last_error(c), "residual") != NULL);
    inagg_comm_destroy(c);

    inagg_options_t plain = INAGG_OPTIONS_INIT;
    plain.packet_elems = PKT;
    CHECK(inagg_comm_create(&c, ts.addr, "ef-plain", 0, 1, &plain, detail, sizeof(detail)) ==
          INAGG_OK);
    for (size_t i = 0; i < NA; i++)
        ra[i] = 1.5f;
    float out[NA];
    CHECK_EQ_INT(inagg_iallreduce_ef(c, a, out, NA, INAGG_FLOAT32, INAGG_SUM, ra, &req), INAGG_OK);
    CHECK_EQ_INT(inagg_wait(req), INAGG_OK);
    for (size_t i = 0; i < NA; i++)
        CHECK(ra[i] == 1.5f && fabsf(out[i] - a[i]) < 1e-3f);
    inagg_comm_destroy(c);
    ts_stop(&ts);
}
