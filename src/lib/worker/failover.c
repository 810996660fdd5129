/*
 * failover.c - a communicator outlives its switch (docs/OPERATIONS.md, "Upgrades and
 * failures"). When the monitor (join.c) finds the switch lost - its control connection
 * closed, a SHUTDOWN, or no heartbeat answered for INAGG_SWITCH_TIMEOUT_MS - the engines stop
 * and the blocking call that sees it (an allreduce, a barrier, the destroy) fails over here:
 *
 *   1. the protocol's state and the control connection go; generation g+1 is joined on entry
 *      (g+1) % n of the switch list (endpoints.h), retried until INAGG_REJOIN_MS, then on to
 *      the next generation, INAGG_FAILOVER_MAX rounds of the list at most;
 *   2. the ranks agree, through ordinary int32 allreduces on the new switch, on their state
 *      (recovery.h): which allreduce is interrupted and, per chunk, who holds its result;
 *   3. a chunk some rank holds is handed on bit for bit (the lowest holder contributes the
 *      result's payload words and exponent, every other rank zeros), a chunk no rank holds is
 *      reduced again from the inputs (padded to whole packets, so its fixed-point exponent is
 *      the one a run without the fault agrees on);
 *   4. the call completes, or (a rank that had not started it) runs again from its inputs.
 *
 * A rank may be one allreduce ahead of another (it got every result of op k; another still
 * waits for one): each communicator keeps the record of its last op (worker_oprec_t, written
 * by the engines as results arrive) until the next one finishes, which proves every rank has
 * finished it. Requests of inagg_iallreduce in flight when the switch is lost fail it, as
 * without fail-over.
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/base/env.h"
#include "lib/base/errmsg.h"
#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/worker/comm.h"
#include "lib/worker/recovery.h"

#define REJOIN_BACKOFF_MIN_MS 20u
#define REJOIN_BACKOFF_MAX_MS 250u

static const char *const lost_names[] = {"none", "closed", "shutdown", "silent"};

int comm_failover_setup(inagg_comm_t *c, char *detail, size_t dlen)
{
    c->switch_timeout_ms = 2000;
    c->rejoin_ms = 10000;
    c->failover_max = 3;
    uint32_t v;
    int set = env_u32(ENV_SWITCH_TIMEOUT_MS, 3600000u, &v, detail, dlen);
    if (set < 0)
        return -EINVAL;
    if (set && v < 100)
        return set_err(detail, dlen, -EINVAL, "INAGG_SWITCH_TIMEOUT_MS=%u: at least 100", v);
    if (set)
        c->switch_timeout_ms = v;
    if (c->switch_timeout_ms > c->opts.timeout_ms) /* before the engines give up */
        c->switch_timeout_ms = c->opts.timeout_ms;
    set = env_u32(ENV_REJOIN_MS, 3600000u, &v, detail, dlen);
    if (set < 0)
        return -EINVAL;
    if (set && v < 100)
        return set_err(detail, dlen, -EINVAL, "INAGG_REJOIN_MS=%u: at least 100", v);
    if (set)
        c->rejoin_ms = v;
    set = env_u32(ENV_FAILOVER_MAX, 100, &v, detail, dlen);
    if (set < 0)
        return -EINVAL;
    if (set)
        c->failover_max = v;
    const char *tp = c->opts.transport;
    c->salvage_on = c->proto->protocol == INAGG_PROTO_SWITCHML && c->nshards == 1 &&
                    !c->opt.present && c->codec.mode == CODEC_NONE &&
                    (!tp || strcmp(tp, "udp") == 0);
    c->failover_on =
        !c->opts.no_failover && env_flag(ENV_FAILOVER) && c->failover_max > 0 && c->salvage_on;
    if (c->endpoints.n > 1 && !c->failover_on)
        return set_err(detail, dlen, -EINVAL,
                       "a switch list ('%s;...') needs fail-over, which this communicator "
                       "cannot do: only switchml over udp, without an in-switch optimizer or "
                       "compression, and not with INAGG_FAILOVER=0 or options.no_failover",
                       c->endpoints.text[0]);
    c->fo.enabled = (uint32_t)c->failover_on;
    snprintf(c->fo.endpoint, sizeof(c->fo.endpoint), "%s", c->endpoints.text[0]);
    return 0;
}

int comm_lost_locked(inagg_comm_t *c, enum comm_lost cause, const char *detail)
{
    if (!c->failover_on || c->fail_code != INAGG_OK)
        return 0;
    if (c->lost == COMM_LOST_NONE) {
        c->lost = (int)cause;
        c->lost_ns = util_now_ns();
        snprintf(c->lost_detail, sizeof(c->lost_detail), "%s", detail);
    }
    atomic_store_explicit(&c->abort_flag, 1, memory_order_release);
    pthread_cond_broadcast(&c->cv);
    worker_signal_raise(&c->signal);
    return 1;
}

static int is_lost(inagg_comm_t *c)
{
    pthread_mutex_lock(&c->mu);
    int lost = c->lost != COMM_LOST_NONE;
    pthread_mutex_unlock(&c->mu);
    return lost;
}

void comm_oprec_free(worker_oprec_t *r)
{
    free(r->words);
    free(r->exp);
    free(r->held);
    memset(r, 0, sizeof(*r));
}

void comm_failover_free(inagg_comm_t *c)
{
    comm_oprec_free(&c->rec[0]);
    comm_oprec_free(&c->rec[1]);
}

/* Room in r for an op of count elements in nchunks chunks, nothing held yet. 0 or -ENOMEM. */
int comm_oprec_prepare(worker_oprec_t *r, size_t count, size_t nchunks)
{
    if (count > r->cap_words) {
        uint32_t *w = realloc(r->words, count * sizeof(uint32_t));
        if (!w)
            return -ENOMEM;
        r->words = w;
        r->cap_words = count;
    }
    if (nchunks > r->cap_chunks || !r->held) {
        size_t n = nchunks ? nchunks : 1;
        int16_t *e = realloc(r->exp, n * sizeof(int16_t));
        if (e)
            r->exp = e;
        uint8_t *h = realloc(r->held, n);
        if (h)
            r->held = h;
        if (!e || !h)
            return -ENOMEM;
        r->cap_chunks = n;
    }
    r->count = count;
    r->nchunks = nchunks;
    memset(r->held, 0, r->cap_chunks);
    return 0;
}

static size_t chunk_len_of(const inagg_comm_t *c, size_t count, uint64_t chunk)
{
    size_t off = (size_t)chunk * c->opts.packet_elems;
    return count - off < c->opts.packet_elems ? count - off : c->opts.packet_elems;
}

/* An int32 allreduce of n words (send and recv may be the same) on the current engines. */
static int exchange(inagg_comm_t *c, const uint32_t *send, uint32_t *recv, size_t n, char *detail,
                    size_t dlen)
{
    if (n == 0)
        return 0;
    if (c->channel) /* a salvage: the caller's channel, not a switch */
        return c->channel->allreduce(c->channel->ctx, send, recv, n, INAGG_INT32, INAGG_SUM)
                   ? set_err(detail, dlen, -EIO, "the salvage channel failed")
                   : 0;
    if (!c->ps)
        return set_err(detail, dlen, -ECANCELED, "no switch");
    worker_call_t x = {
        .send = send, .recv = recv, .count = n, .dtype = INAGG_INT32, .op = INAGG_SUM};
    int rc = c->proto->allreduce(c->ps, &x, detail, dlen);
    return rc == -EOVERFLOW ? 0 : rc; /* a handed-on word and zeros never wrap */
}

/* ---- the pieces of a recovery -------------------------------------------------------------- */

typedef struct recovery {
    inagg_comm_t *c;
    worker_call_t *call; /* the op being recovered is this rank's call (NULL: it is past it) */
    worker_oprec_t *rec; /* that op's record */
    uint8_t *action;
    uint32_t *from;
    recovery_counts_t counts;
} recovery_t;

/* The chunks some rank holds go from the lowest holder to everyone else (step 3). */
static int hand_on(recovery_t *rv, char *detail, size_t dlen)
{
    inagg_comm_t *c = rv->c;
    worker_oprec_t *rec = rv->rec;
    size_t words = 0;
    for (uint64_t k = 0; k < rec->nchunks; k++)
        if (rv->action[k] == RECOVERY_DELIVER)
            words += chunk_len_of(c, rec->count, k) + 1;
    if (words == 0)
        return 0;
    uint32_t *buf = calloc(words, sizeof(uint32_t));
    if (!buf)
        return set_err(detail, dlen, -ENOMEM, "out of memory for the recovery");
    size_t at = 0;
    for (uint64_t k = 0; k < rec->nchunks; k++) {
        if (rv->action[k] != RECOVERY_DELIVER)
            continue;
        size_t len = chunk_len_of(c, rec->count, k), off = (size_t)k * c->opts.packet_elems;
        if (rv->from[k] == c->rank) { /* ours to hand on: the words as the switch sent them */
            for (size_t i = 0; i < len; i++)
                buf[at + i] = be32toh(rec->words[off + i]);
            buf[at + len] = (uint32_t)(int32_t)rec->exp[k];
        }
        at += len + 1;
    }
    int rc = exchange(c, buf, buf, words, detail, dlen);
    at = 0;
    for (uint64_t k = 0; k < rec->nchunks && rc == 0; k++) {
        if (rv->action[k] != RECOVERY_DELIVER)
            continue;
        size_t len = chunk_len_of(c, rec->count, k), off = (size_t)k * c->opts.packet_elems;
        if (!rec->held[k] && rv->call) {
            for (size_t i = 0; i < len; i++)
                rec->words[off + i] = htobe32(buf[at + i]);
            rec->exp[k] = (int16_t)(int32_t)buf[at + len];
            rec->held[k] = 1;
            const worker_call_t *call = rv->call;
            worker_decode_result(
                call->dtype,
                call->dtype == INAGG_FLOAT32 && c->opts.float_mode == INAGG_FLOAT_FIXED, call->op,
                c->eff_world, rec->words + off, rec->exp[k], (char *)call->recv + off * 4u, len);
        }
        at += len + 1;
    }
    free(buf);
    return rc;
}

/* The chunks nobody holds are reduced again from every rank's input (step 4): gathered, each
 * padded with zeros to a whole packet so its chunks are the original ones. */
static int reduce_again(recovery_t *rv, char *detail, size_t dlen)
{
    inagg_comm_t *c = rv->c;
    worker_oprec_t *rec = rv->rec;
    const worker_call_t *call = rv->call;
    size_t n = (size_t)rv->counts.reduce, elems = c->opts.packet_elems;
    if (n == 0 || !call)
        return 0;
    uint32_t *in = calloc(n * elems, 4), *out = calloc(n * elems, 4);
    worker_oprec_t tmp = {0};
    int rc = in && out ? comm_oprec_prepare(&tmp, n * elems, n) : -ENOMEM;
    if (rc != 0) {
        free(in);
        free(out);
        comm_oprec_free(&tmp);
        return set_err(detail, dlen, -ENOMEM, "out of memory for the recovery");
    }
    size_t at = 0;
    for (uint64_t k = 0; k < rec->nchunks; k++)
        if (rv->action[k] == RECOVERY_REDUCE) {
            size_t off = (size_t)k * elems;
            memcpy(in + at * elems, (const char *)call->send + off * 4u,
                   chunk_len_of(c, rec->count, k) * 4u);
            at++;
        }
    worker_call_t x = {.send = in,
                       .recv = out,
                       .count = n * elems,
                       .dtype = call->dtype,
                       .op = call->op,
                       .rec = &tmp};
    if (c->channel) /* a salvage: the caller's channel adds (no wire words to keep) */
        rc = c->channel->allreduce(c->channel->ctx, in, out, n * elems, call->dtype, call->op)
                 ? set_err(detail, dlen, -EIO, "the salvage channel failed")
                 : 0;
    else
        rc = c->ps ? c->proto->allreduce(c->ps, &x, detail, dlen) : -ECANCELED;
    at = 0;
    for (uint64_t k = 0; k < rec->nchunks && (rc == 0 || rc == -EOVERFLOW || rc == -EDOM); k++)
        if (rv->action[k] == RECOVERY_REDUCE) {
            size_t off = (size_t)k * elems, len = chunk_len_of(c, rec->count, k);
            if (!c->channel) {
                memcpy(rec->words + off, tmp.words + at * elems, len * 4u);
                rec->exp[k] = tmp.exp[at];
            }
            rec->held[k] = 1;
            memcpy((char *)call->recv + off * 4u, out + at * elems, len * 4u);
            at++;
        }
    free(in);
    free(out);
    comm_oprec_free(&tmp);
    return rc;
}

/* Steps 2-4 on the new switch: *completed when this rank's call (call, NULL when in none) is
 * now done. *barriers_max: the most barriers any rank passed. 0 or -errno. */
static int recover(inagg_comm_t *c, worker_call_t *call, int *completed, uint64_t *barriers_max,
                   recovery_counts_t *counts, char *detail, size_t dlen)
{
    *completed = 0;
    *counts = (recovery_counts_t){0};
    const uint32_t world = c->world;
    uint32_t *state = calloc((size_t)world * RECOVERY_STATE_WORDS, sizeof(uint32_t));
    if (!state)
        return set_err(detail, dlen, -ENOMEM, "out of memory for the recovery");
    recovery_state_fill(state, c->rank, c->ops_done, call != NULL, c->barriers_passed);
    int rc = exchange(c, state, state, (size_t)world * RECOVERY_STATE_WORDS, detail, dlen);
    recovery_verdict_t v;
    if (rc == 0)
        rc = recovery_decide(world, state, &v, detail, dlen);
    free(state);
    if (rc != 0)
        return rc;
    uint32_t mine = (uint32_t)(c->ops_done & RECOVERY_MASK);
    *barriers_max = v.barriers_max; /* mod 2^31, as barriers_passed is compared */
    if (!v.recover)
        return 0; /* nobody holds a result of op_low: a call in it runs again from inputs */
    worker_oprec_t *rec = &c->rec[mine == v.op_low ? c->ops_done % 2 : (c->ops_done + 1) % 2];
    /* op_low's record: the call's own, or (one op ahead) the kept one of the last op */
    rc = comm_recover_op(c, mine == v.op_low ? call : NULL, rec, mine != v.op_low, counts, detail,
                         dlen);
    if (rc == 0)
        *completed = mine == v.op_low && call != NULL;
    return rc;
}

int comm_recover_op(inagg_comm_t *c, worker_call_t *call, worker_oprec_t *rec, int ahead,
                    recovery_counts_t *counts, char *detail, size_t dlen)
{
    const uint32_t world = c->world;
    recovery_t rv = {.c = c, .call = call, .rec = rec};
    if (ahead) /* finished it: every chunk is held here */
        memset(rv.rec->held, 1, rv.rec->nchunks);
    size_t nch = rv.rec->nchunks, hw = (size_t)RECOVERY_WORDS(world);
    uint32_t *holders = calloc(nch * hw + 1, sizeof(uint32_t));
    rv.action = malloc(nch + 1);
    rv.from = malloc((nch + 1) * sizeof(uint32_t));
    int rc = 0;
    if (!holders || !rv.action || !rv.from)
        rc = set_err(detail, dlen, -ENOMEM, "out of memory for the recovery");
    for (size_t k = 0; k < nch && rc == 0; k++)
        if (rv.rec->held[k])
            recovery_mark(holders, world, k, c->rank);
    if (rc == 0)
        rc = exchange(c, holders, holders, nch * hw, detail, dlen);
    if (rc == 0) {
        recovery_plan(world, nch, holders, rv.action, rv.from, &rv.counts);
        rc = hand_on(&rv, detail, dlen);
    }
    if (rc == 0)
        rc = reduce_again(&rv, detail, dlen);
    if (rc == 0)
        *counts = rv.counts;
    free(holders);
    free(rv.action);
    free(rv.from);
    return rc;
}

/* The engines and the control connection of the lost switch go (their counters are kept). */
void comm_teardown(inagg_comm_t *c)
{
    if (c->ps) {
        inagg_stats_t s;
        memset(&s, 0, sizeof(s));
        c->proto->add_stats(c->ps, &s);
        c->stats_before.packets_sent += s.packets_sent;
        c->stats_before.packets_received += s.packets_received;
        c->stats_before.retransmissions += s.retransmissions;
        c->stats_before.duplicates_ignored += s.duplicates_ignored;
        c->stats_before.invalid_dropped += s.invalid_dropped;
        c->stats_before.bytes_sent += s.bytes_sent;
        c->stats_before.bytes_received += s.bytes_received;
        c->proto->destroy(c->ps); /* the engines saw the abort and stopped */
        c->ps = NULL;
    }
    comm_close_control(c);
    pthread_mutex_lock(&c->mu);
    c->stopping = 0;
    c->lost = COMM_LOST_NONE;
    c->bye = 0;
    memset(c->shard_bye, 0, sizeof(c->shard_bye));
    c->barriers_done = 0;
    atomic_store(&c->abort_flag, 0);
    pthread_mutex_unlock(&c->mu);
}

static void sleep_ms(uint32_t ms)
{
    struct timespec ts = {.tv_sec = ms / 1000u, .tv_nsec = (long)(ms % 1000u) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Join generation c->gen on its endpoint, retrying until INAGG_REJOIN_MS passed: 0 with the
 * new engines and monitor running, or -errno (the last attempt's reason in detail). */
static int rejoin(inagg_comm_t *c, char *detail, size_t dlen)
{
    const char *ep = endpoint_of_gen(&c->endpoints, c->gen);
    uint64_t deadline = util_now_ns() + (uint64_t)c->rejoin_ms * 1000000ull;
    uint32_t backoff = REJOIN_BACKOFF_MIN_MS;
    int rc = -ETIMEDOUT;
    while (util_now_ns() < deadline) {
        transport_addr_t sw;
        if (transport_parse_addr("udp", ep, &sw) != 0)
            return set_err(detail, dlen, -EINVAL, "bad switch address '%s'", ep);
        wire_joined_t j;
        inagg_result_t jr = comm_join(c, 0, ep, &j, detail, dlen);
        if (jr == INAGG_OK) {
            transport_addr_set_port(&sw, (uint16_t)j.port);
            c->prev_token = c->token;
            c->job_id = (uint16_t)j.id;
            c->token = j.token;
            rc = comm_start_protocol(c, &sw, &j, detail, dlen);
            if (rc == 0)
                rc = comm_start_monitor(c);
            if (rc == 0)
                return 0;
            comm_teardown(c); /* a local failure: try again */
        }
        uint64_t now = util_now_ns();
        uint64_t left_ms = now < deadline ? (deadline - now) / 1000000ull : 0;
        sleep_ms((uint32_t)util_min_u64(backoff, left_ms));
        backoff = backoff * 2 > REJOIN_BACKOFF_MAX_MS ? REJOIN_BACKOFF_MAX_MS : backoff * 2;
        rc = -ETIMEDOUT;
    }
    return rc;
}

/* The one line each fail-over leaves in the rank's log, and its counters. */
static void note_failover(inagg_comm_t *c, int cause, const char *why, const char *from_ep,
                          uint64_t lost_ns, const recovery_counts_t *n)
{
    uint64_t stall_ms = (util_now_ns() - lost_ns) / 1000000ull;
    pthread_mutex_lock(&c->mu);
    c->fo.failovers++;
    c->fo.generation = c->gen;
    c->fo.chunks_delivered += n->deliver;
    c->fo.chunks_reduced += n->reduce;
    c->fo.stall_ms_total += stall_ms;
    if (stall_ms > c->fo.stall_ms_max)
        c->fo.stall_ms_max = (uint32_t)stall_ms;
    snprintf(c->fo.endpoint, sizeof(c->fo.endpoint), "%s", endpoint_of_gen(&c->endpoints, c->gen));
    pthread_mutex_unlock(&c->mu);
    LOG_W("fail-over: job %s rank %u: switch %s lost (%s: %s); generation %u on %s: %llu chunks "
          "handed on, %llu reduced again, stall %llu ms",
          c->job, c->rank, from_ep, lost_names[cause], why, c->gen,
          endpoint_of_gen(&c->endpoints, c->gen), (unsigned long long)n->deliver,
          (unsigned long long)n->reduce, (unsigned long long)stall_ms);
}

/* Fail over (the switch was lost) and recover: see the top of the file. *completed: call is
 * done; *barriers_max as recover's. 0, or -errno with the communicator failed. */
static int failover_run(inagg_comm_t *c, worker_call_t *call, int *completed,
                        uint64_t *barriers_max, char *detail, size_t dlen)
{
    pthread_mutex_lock(&c->mu);
    int cause = c->lost;
    uint64_t lost_ns = c->lost_ns;
    char why[sizeof(c->lost_detail)];
    snprintf(why, sizeof(why), "%s", c->lost_detail);
    pthread_mutex_unlock(&c->mu);
    char from_ep[ENDPOINT_TEXT_MAX];
    snprintf(from_ep, sizeof(from_ep), "%s", endpoint_of_gen(&c->endpoints, c->gen));
    uint32_t tries = c->failover_max * c->endpoints.n;
    char last[COMM_DETAIL_MAX] = "no switch answered";
    for (uint32_t t = 0; t < tries; t++) {
        comm_teardown(c);
        c->gen++;
        int rc = rejoin(c, last, sizeof(last));
        if (rc != 0) {
            LOG_I("fail-over: job %s rank %u: generation %u on %s not joined within %u ms: %s",
                  c->job, c->rank, c->gen, endpoint_of_gen(&c->endpoints, c->gen), c->rejoin_ms,
                  last);
            continue;
        }
        recovery_counts_t n;
        rc = recover(c, call, completed, barriers_max, &n, last, sizeof(last));
        if (rc == 0) {
            note_failover(c, cause, why, from_ep, lost_ns, &n);
            return 0;
        }
        if (!is_lost(c)) { /* not the switch: the job cannot go on */
            set_err(detail, dlen, rc, "fail-over recovery on %s failed: %s",
                    endpoint_of_gen(&c->endpoints, c->gen), last);
            return rc;
        }
    }
    return set_err(detail, dlen, -ECANCELED,
                   "lost the switch %s (%s: %s) and no switch of the list took the job back "
                   "within %u generations (%s)",
                   from_ep, lost_names[cause], why, tries, last);
}

/* The communicator is failed for good with rc and detail. */
static int fail_for_good(inagg_comm_t *c, int rc, const char *detail)
{
    pthread_mutex_lock(&c->mu);
    comm_fail_locked(c, INAGG_ERR_CONNECTION, detail);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int comm_failover_pending(inagg_comm_t *c, char *detail, size_t dlen)
{
    if (!c->failover_on || !is_lost(c))
        return 0;
    pthread_mutex_lock(&c->mu);
    uint32_t async_out = c->async_out;
    pthread_mutex_unlock(&c->mu);
    if (async_out) {
        set_err(detail, dlen, -ECANCELED,
                "lost the switch with %u asynchronous requests in flight (fail-over recovers "
                "blocking calls only)",
                async_out);
        return fail_for_good(c, -ECANCELED, detail);
    }
    int completed;
    uint64_t bmax;
    int rc = failover_run(c, NULL, &completed, &bmax, detail, dlen);
    if (rc != 0)
        return fail_for_good(c, rc, detail);
    c->barriers_seen = bmax;
    return 1;
}

int comm_failover_allreduce(inagg_comm_t *c, worker_call_t *call, char *detail, size_t dlen)
{
    if (!c->failover_on) { /* recorded all the same where a salvage can finish it */
        uint64_t elems = c->opts.packet_elems;
        worker_oprec_t *rec = c->salvage_on ? &c->rec[c->ops_done % 2] : NULL;
        if (rec &&
            comm_oprec_prepare(rec, call->count, (size_t)((call->count + elems - 1) / elems)) != 0)
            return set_err(detail, dlen, -ENOMEM, "out of memory for the op's record");
        if (rec)
            rec->op_tag = c->ops_done + 1;
        call->rec = rec;
        int rc = c->proto->allreduce(c->ps, call, detail, dlen);
        call->rec = NULL;
        if (rc == 0 || rc == -EOVERFLOW || rc == -EDOM)
            c->ops_done++;
        return rc;
    }
    int pend = comm_failover_pending(c, detail, dlen); /* lost between calls */
    if (pend < 0)
        return pend;
    uint64_t elems = c->opts.packet_elems;
    worker_oprec_t *rec = &c->rec[c->ops_done % 2];
    for (uint32_t round = 0;; round++) {
        if (comm_oprec_prepare(rec, call->count, (size_t)((call->count + elems - 1) / elems)) != 0)
            return set_err(detail, dlen, -ENOMEM, "out of memory for the fail-over record");
        rec->op_tag = c->ops_done + 1;
        call->rec = rec;
        int rc = c->ps ? c->proto->allreduce(c->ps, call, detail, dlen) : -ECANCELED;
        call->rec = NULL;
        if (rc == 0 || rc == -EOVERFLOW || rc == -EDOM || !is_lost(c) || round > 100) {
            if (rc == 0 || rc == -EOVERFLOW || rc == -EDOM)
                c->ops_done++;
            return rc;
        }
        pthread_mutex_lock(&c->mu);
        uint32_t async_out = c->async_out;
        pthread_mutex_unlock(&c->mu);
        if (async_out)
            return comm_failover_pending(c, detail, dlen);
        int completed;
        uint64_t bmax;
        rc = failover_run(c, call, &completed, &bmax, detail, dlen);
        if (rc != 0)
            return fail_for_good(c, rc, detail);
        c->barriers_seen = bmax;
        if (completed) {
            c->ops_done++;
            return 0;
        }
        /* nobody had a result of this call: it runs again from the inputs */
    }
}

inagg_result_t inagg_get_failover_stats(const inagg_comm_t *comm, inagg_failover_stats_t *out)
{
    if (!comm || !out)
        return INAGG_ERR_INVALID;
    inagg_comm_t *c = (inagg_comm_t *)comm; /* the mutex only */
    inagg_failover_stats_t all;
    pthread_mutex_lock(&c->mu);
    all = c->fo;
    pthread_mutex_unlock(&c->mu);
    all.stale_dropped = atomic_load(&c->stale);
    uint32_t asked;
    memcpy(&asked, out, sizeof(asked));
    if (asked < offsetof(inagg_failover_stats_t, generation))
        return INAGG_ERR_INVALID;
    uint32_t fill = asked < sizeof(all) ? asked : (uint32_t)sizeof(all);
    all.struct_size = fill;
    memcpy(out, &all, fill);
    return INAGG_OK;
}

int comm_salvage_check(inagg_comm_t *c, const inagg_channel_t *ch, const inagg_salvage_t *out,
                       inagg_op_t op, char *detail, size_t dlen)
{
    uint32_t asked = 0;
    if (out)
        memcpy(&asked, out, sizeof(asked));
    if (!out || asked < offsetof(inagg_salvage_t, chunk_elems))
        return set_err(detail, dlen, -EINVAL, "salvage needs its inagg_salvage_t");
    if (!ch || ch->struct_size < sizeof(inagg_channel_t) || !ch->allreduce)
        return set_err(detail, dlen, -EINVAL, "salvage needs a channel with its allreduce");
    if (op != INAGG_SUM)
        return set_err(detail, dlen, -EINVAL, "salvage finishes sums only (op %d)", (int)op);
    if (!c->salvage_on)
        return set_err(detail, dlen, -EINVAL,
                       "this communicator cannot salvage: only switchml over udp, without "
                       "compression or an in-switch optimizer");
    pthread_mutex_lock(&c->mu);
    inagg_result_t code = c->fail_code;
    uint32_t async_out = c->async_out;
    pthread_mutex_unlock(&c->mu);
    if (code != INAGG_ERR_CONNECTION && code != INAGG_ERR_TIMEOUT)
        return set_err(detail, dlen, -EINVAL,
                       "nothing to salvage: the communicator has %s (only a lost switch is "
                       "salvaged)",
                       code == INAGG_OK ? "not failed" : inagg_strerror(code));
    if (async_out)
        return set_err(detail, dlen, -EINVAL,
                       "%u asynchronous requests were in flight (salvage finishes blocking "
                       "allreduces only)",
                       async_out);
    return 0;
}

inagg_result_t inagg_allreduce_salvage(inagg_comm_t *comm, const void *send, void *recv,
                                       size_t count, inagg_dtype_t dtype, inagg_op_t op,
                                       const inagg_channel_t *ch, inagg_salvage_t *out)
{
    if (!comm)
        return INAGG_ERR_INVALID;
    inagg_result_t bad = comm_check_buffers(comm, send, recv, count, dtype, op);
    if (bad != INAGG_OK)
        return bad;
    char detail[COMM_DETAIL_MAX] = "";
    if (comm_salvage_check(comm, ch, out, op, detail, sizeof(detail)) != 0)
        return comm_set_error(comm, INAGG_ERR_INVALID, "%s", detail);
    comm_teardown(comm); /* the engines are stopped and joined: the records are settled */
    size_t elems = comm->opts.packet_elems, nchunks = (count + elems - 1) / elems;
    worker_oprec_t *rec = &comm->rec[comm->ops_done % 2];
    if (rec->op_tag != comm->ops_done + 1 || rec->count != count) { /* failed before it began */
        if (comm_oprec_prepare(rec, count, nchunks) != 0)
            return comm_set_error(comm, INAGG_ERR_NOMEM, "out of memory for the salvage");
        rec->op_tag = comm->ops_done + 1;
    }
    inagg_salvage_t s = {.chunk_elems = elems, .nchunks = nchunks};
    for (size_t k = 0; k < rec->nchunks; k++)
        s.chunks_held += rec->held[k] != 0;
    worker_call_t call = {.send = send, .recv = recv, .count = count, .dtype = dtype, .op = op};
    int completed = 0;
    uint64_t bmax;
    recovery_counts_t n;
    comm->channel = ch;
    int rc = recover(comm, &call, &completed, &bmax, &n, detail, sizeof(detail));
    comm->channel = NULL;
    if (rc != 0)
        return comm_set_error(comm, INAGG_ERR_CONNECTION, "salvage: %s", detail);
    s.completed = (uint32_t)completed;
    s.chunks_delivered = n.deliver;
    s.chunks_reduced = n.reduce;
    uint32_t fill = out->struct_size < sizeof(s) ? out->struct_size : (uint32_t)sizeof(s);
    s.struct_size = fill;
    memcpy(out, &s, fill);
    return INAGG_OK;
}
