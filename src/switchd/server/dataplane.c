/*
 * dataplane.c - one dataplane thread of the switch: run to completion over batches.
 *
 * Each thread serves one queue of the transport (UDP: port base + index) and the slots that
 * map to it. The loop receives a burst, checks every packet, hands it to its job's protocol
 * (proto.h), acts on the outcome, and sends what that queued in one burst. No allocation,
 * lock or log line per packet: bad packets are counted per reason and dropped. Result packets
 * point straight at the slot's result, which is in network order once complete and is not
 * reused before every rank has received it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/transport/txgroup.h"
#include "lib/wire/dpauth.h"
#include "switchd/server/server.h"

#define DP_MAX_BATCH 256
#define DP_TX_CAP 2048

struct dp_txq {
    int n;
    transport_tx_t pkts[DP_TX_CAP];
    uint8_t hdr[DP_TX_CAP][WIRE_HEADER_MAX];
    transport_tx_t grouped[DP_TX_CAP]; /* pkts by destination, for one flush (txgroup.h) */
    uint8_t group_of[DP_TX_CAP];
};

/* Fault injection (a wrapping transport) decided since the last look: the drops go to
 * injected_drops, and *net is what it added to (duplicates) or took from (drops) the packets
 * that passed, so packets in and out count what crossed the wire; duplicates and reorders are
 * counted too, so a lossy test can assert that its faults happened. */
static void fault_delta(dp_thread_t *t, int64_t *net)
{
    uint64_t dropped, duplicated, reordered;
    transport_fault_counts(t->tp, &dropped, &duplicated, &reordered);
    STAT_ADD(t->c.v[STAT_INJECTED_DROPS], dropped - t->fault_dropped);
    STAT_ADD(t->c.v[STAT_INJECTED_DUPS], duplicated - t->fault_duplicated);
    STAT_ADD(t->c.v[STAT_INJECTED_REORDERS], reordered - t->fault_reordered);
    *net = (int64_t)(duplicated - t->fault_duplicated) - (int64_t)(dropped - t->fault_dropped);
    t->fault_dropped = dropped;
    t->fault_duplicated = duplicated;
    t->fault_reordered = reordered;
}

static void tx_flush(dp_thread_t *t)
{
    struct dp_txq *q = t->txq;
    if (q->n == 0)
        return;
    int64_t net;
    int sent = transport_send(t->tp, txgroup_by_destination(q->pkts, q->n, q->grouped, q->group_of),
                              q->n, 100);
    fault_delta(t, &net);
    if (sent > 0 && sent + net > 0)
        STAT_ADD(t->c.v[STAT_PACKETS_OUT], (uint64_t)(sent + net));
    q->n = 0;
}

/* One round's result to every rank: under the job's down key a result's MAC leaves the rank
 * field out (wire/dpauth.h), so the copies whose other header bytes agree (all of them, but
 * for a P4SGD confirmation riding on one) share one seal. Valid for one payload only: a
 * seal is never reused for other bytes (that would reuse a one-time key). */
typedef struct seal_once {
    int valid;
    uint8_t covered[WIRE_HEADER_SIZE]; /* dpauth_down_header of the sealed copy */
    uint8_t mac[WIRE_MAC_BYTES]; /* its nonce and tag */
} seal_once_t;

/* Seal the packet in hdr toward the ranks, or take the seal of an identical copy in *once. */
static void seal_down(const uint8_t *key, uint8_t *hdr, const uint32_t *payload, size_t len,
                      seal_once_t *once)
{
    uint8_t covered[WIRE_HEADER_SIZE];
    if (once) {
        dpauth_down_header(hdr, covered);
        if (once->valid && memcmp(covered, once->covered, sizeof(covered)) == 0) {
            memcpy(hdr + WIRE_HEADER_SIZE, once->mac, WIRE_MAC_BYTES);
            return;
        }
    }
    dpauth_seal_down(key, hdr, payload, len);
    if (once) { /* the latest seal serves the copies like it that follow */
        memcpy(once->covered, covered, sizeof(covered));
        memcpy(once->mac, hdr + WIRE_HEADER_SIZE, WIRE_MAC_BYTES);
        once->valid = 1;
    }
}

/* Queue one packet; with `key`, sealed with its MAC (wire/dpauth.h): `down` for what goes to
 * the ranks (the job's key, sealed once per `once` when given), else a contribution upstream. */
static void queue_packet(proto_ctx_t *x, const wire_header_t *h, const uint32_t *payload,
                         const transport_addr_t *to, const uint8_t *key, int down,
                         seal_once_t *once)
{
    struct dp_txq *q = x->dp->txq;
    if (q->n == DP_TX_CAP)
        tx_flush(x->dp);
    int k = q->n++;
    wire_header_t sealed = *h;
    if (key)
        sealed.flags |= WIRE_FLAG_MAC;
    wire_encode_header(&sealed, q->hdr[k]);
    if (key && down)
        seal_down(key, q->hdr[k], payload, (size_t)h->count * 4u, once);
    else if (key)
        dpauth_seal(key, q->hdr[k], payload, (size_t)h->count * 4u);
    q->pkts[k] = (transport_tx_t){
        .head = q->hdr[k],
        .head_len = (uint32_t)wire_header_len(&sealed),
        .body = payload,
        .body_len = (uint32_t)h->count * 4u,
        .to = *to,
    };
}

/* A packet to a rank; the seal of an identical copy in *once (NULL: none) is reused. */
static void send_down(proto_ctx_t *x, const wire_header_t *h, const uint32_t *payload,
                      const transport_addr_t *to, seal_once_t *once)
{
    const job_t *j = x->job;
    queue_packet(x, h, payload, to, j->dp_auth ? j->keys[h->rank].down : NULL, 1, once);
}

void dp_send(proto_ctx_t *x, const wire_header_t *h, const uint32_t *payload,
             const transport_addr_t *to)
{
    send_down(x, h, payload, to, NULL);
}

/* The header of outcome o's result on `slot` to `rank` (WIRE_RANK_ALL: the job's group). */
static wire_header_t result_header(const proto_ctx_t *x, const proto_outcome_t *o, uint32_t slot,
                                   uint32_t rank)
{
    wire_header_t h = o->result;
    h.version = INAGG_PROTOCOL_VERSION;
    h.type = WIRE_RESULT;
    h.job = x->job->id;
    h.token = x->job->token;
    h.slot = slot;
    h.rank = (uint16_t)rank;
    return h;
}

/* One result packet of outcome o to `rank` (the seal shared through *once, or NULL). */
static void send_result(proto_ctx_t *x, const proto_outcome_t *o, uint32_t slot, uint32_t rank,
                        const transport_addr_t *to, seal_once_t *once)
{
    const job_t *j = x->job;
    wire_header_t h = result_header(x, o, slot, rank);
    if (j->proto->result_header)
        j->proto->result_header(x, &h);
    send_down(x, &h, o->data, to, once);
}

void dp_send_upstream(proto_ctx_t *x, wire_header_t *h, const uint32_t *payload)
{
    const job_up_t *up = &x->job->up;
    transport_addr_t to;
    h->version = INAGG_PROTOCOL_VERSION;
    h->job = up->job;
    h->rank = (uint16_t)up->rank;
    h->token = up->token;
    if (transport_queue_addr(x->dp->tp, &up->queue0,
                             transport_slot_queue(up->base, up->queues, h->slot), &to) != 0)
        return; /* cannot happen: a udp queue's address is its port */
    queue_packet(x, h, payload, &to, up->auth ? up->keys.up : NULL, 0, NULL);
    STAT_ADD(x->c->v[STAT_BYTES_OUT],
             WIRE_HEADER_SIZE + (up->auth ? WIRE_MAC_BYTES : 0u) + (uint64_t)h->count * 4u);
}

/* A leaf switch: the round's partial sum (outcome o) to the upstream switch, as this
 * switch's contribution there. */
static void send_upstream(proto_ctx_t *x, const proto_outcome_t *o, uint32_t slot)
{
    wire_header_t u = o->result;
    u.type = WIRE_CONTRIB;
    u.slot = slot;
    u.flags &= (uint8_t)~WIRE_FLAG_OVERFLOW; /* the leaf keeps its own overflow */
    dp_send_upstream(x, &u, o->data);
}

/* The result of outcome o once, to the job's multicast group (rank WIRE_RANK_ALL, under the
 * job's down key), when every rank's copy would be the same. 1 if it went, else 0. */
static int send_group(proto_ctx_t *x, const proto_outcome_t *o, uint32_t slot)
{
    const job_t *j = x->job;
    wire_header_t h = result_header(x, o, slot, WIRE_RANK_ALL);
    if (j->proto->result_header_shared && !j->proto->result_header_shared(x, &h))
        return 0;
    queue_packet(x, &h, o->data, &j->mcast_to, j->dp_auth ? j->keys[0].down : NULL, 1, NULL);
    STAT_ADD(x->c->v[STAT_RESULTS_SENT], 1);
    STAT_ADD(x->c->v[STAT_RESULTS_MULTICAST], 1);
    STAT_ADD(x->c->v[STAT_BYTES_OUT], job_header_bytes(j) + (uint64_t)o->result.count * 4u);
    return 1;
}

/* The result of outcome o to every rank: once to the job's group where it has one. */
static void send_all(proto_ctx_t *x, const proto_outcome_t *o, uint32_t slot)
{
    const job_t *j = x->job;
    if (j->mcast_on && send_group(x, o, slot))
        return;
    uint64_t result_bytes = job_header_bytes(j) + (uint64_t)o->result.count * 4u;
    seal_once_t once = {.valid = 0};
    for (uint32_t r = 0; r < j->world; r++)
        send_result(x, o, slot, r, &j->addrs[(size_t)slot * j->world + r], &once);
    STAT_ADD(x->c->v[STAT_RESULTS_SENT], j->world);
    STAT_ADD(x->c->v[STAT_BYTES_OUT], result_bytes * j->world);
}

/* In-switch optimizer (optjob.h): the round of `chunk` is complete; its sum (network order)
 * becomes the chunk's new parameters, once. */
static void apply_optimizer(proto_ctx_t *x, const proto_outcome_t *o)
{
    const job_t *j = x->job;
    float *scratch = j->opt_scratch + (size_t)x->thread * j->elems;
    if (optjob_complete(j->opt, o->chunk, o->data, o->result.count, j->world, o->set, scratch) != 0)
        return; /* cannot happen: every contribution's chunk and length were checked */
    STAT_ADD(x->c->v[o->set ? STAT_OPT_UPLOADS : STAT_OPT_STEPS], 1);
}

/* What follows from a packet the protocol handled: the one place its outcome is counted. */
static void act(proto_ctx_t *x, const wire_header_t *h, const proto_outcome_t *o)
{
    const job_t *j = x->job;
    stat_counters_t *c = x->c;
    uint64_t result_bytes;
    switch (o->action) {
        case PROTO_PARTIAL: STAT_ADD(c->v[STAT_CONTRIBUTIONS], 1); break;
        case PROTO_COMPLETE:
            STAT_ADD(c->v[STAT_CONTRIBUTIONS], 1);
            STAT_ADD(c->v[STAT_ROUNDS], 1);
            if (j->opt)
                apply_optimizer(x, o);
            send_all(x, o, h->slot);
            break;
        case PROTO_UP_SEND:
            STAT_ADD(c->v[STAT_CONTRIBUTIONS], 1);
            STAT_ADD(c->v[STAT_UP_SENT], 1);
            send_upstream(x, o, h->slot);
            break;
        case PROTO_UP_AGAIN:
            STAT_ADD(c->v[STAT_UP_RESENT], 1);
            send_upstream(x, o, h->slot);
            break;
        case PROTO_UP_DONE:
            STAT_ADD(c->v[STAT_ROUNDS], 1);
            STAT_ADD(c->v[STAT_UP_RESULTS], 1);
            send_all(x, o, h->slot);
            break;
        case PROTO_RESEND: /* to where the rank's accepted contribution came from */
            send_result(x, o, h->slot, h->rank, &j->addrs[(size_t)h->slot * j->world + h->rank],
                        NULL);
            result_bytes = job_header_bytes(j) + (uint64_t)o->result.count * 4u;
            STAT_ADD(c->v[STAT_RESENDS], 1);
            STAT_ADD(c->v[STAT_RESULTS_SENT], 1);
            STAT_ADD(c->v[STAT_BYTES_OUT], result_bytes);
            break;
        case PROTO_DROP: STAT_ADD(c->v[o->drop], 1); break;
        default: break;
    }
}

static int dtype_allowed(const job_t *j, uint8_t dtype)
{
    if (dtype == WIRE_INT32)
        return !codec_is_lossy(&j->codec);
    if (j->codec.mode != CODEC_NONE) /* float32 travels coded, and only so */
        return dtype == WIRE_CODED;
    if (dtype == WIRE_CODED)
        return 0;
    if (dtype == WIRE_FIXED32)
        return j->float_mode == INAGG_FLOAT_FIXED;
    return j->float_mode == INAGG_FLOAT_NATIVE;
}

/* The context checks of PROTOCOL.md 1.3 for a packet of job j: a drop reason, or -1. */
static int check(const dp_thread_t *t, const job_t *j, const wire_header_t *h)
{
    if (!job_serves(j))
        return DROP_JOB_NOT_ACTIVE;
    if (h->rank >= j->world)
        return DROP_BAD_RANK;
    if (h->slot >= j->nslots)
        return DROP_BAD_SLOT;
    if (job_slot_owner(j, h->slot) != t->index)
        return DROP_WRONG_THREAD;
    if (h->dtype == WIRE_CODED && j->codec.mode != CODEC_NONE
            ? (size_t)h->count * 4u > codec_max_bytes(&j->codec, j->elems)
            : h->count > j->elems)
        return DROP_BAD_COUNT;
    if (!(j->proto->accepts & (1u << h->type)))
        return DROP_WRONG_PROTOCOL;
    if (h->type != WIRE_CONTRIB)
        return -1;
    if (!dtype_allowed(j, h->dtype))
        return DROP_DTYPE_NOT_ALLOWED;
    if (j->opt && h->dtype != WIRE_FLOAT32)
        return DROP_DTYPE_NOT_ALLOWED; /* gradients are float32 */
    if (j->opt && optjob_chunk_len(j->opt, h->chunk) != h->count)
        return DROP_BAD_CHUNK;
    return -1;
}

/* The MAC check of a packet of a job (PROTOCOL.md 1.4): a drop reason, or -1. `auth` and
 * `key` are the job's (or, for what comes from an upstream switch, its membership's), `down`
 * for what a switch sent (wire/dpauth.h: dpauth_check_down). On
 * success the MAC flag is cleared from *h: the protocols see the packet as sent. */
static int check_mac(int auth, const uint8_t *key, int down, wire_header_t *h, const uint8_t *buf)
{
    int has = (h->flags & WIRE_FLAG_MAC) != 0;
    if (!auth)
        return has ? DROP_UNEXPECTED_MAC : -1;
    if (!has)
        return DROP_MISSING_MAC;
    if (!(down ? dpauth_check_down : dpauth_check)(key, buf, (size_t)h->count * 4u))
        return DROP_BAD_MAC;
    h->flags &= (uint8_t)~WIRE_FLAG_MAC;
    return -1;
}

/* The context of a packet for its job's protocol: the job it names in `jobs` (the switch's
 * own, or with `upstream` the memberships in upstream jobs, whose token is the upstream
 * job's). 0 when there is no such job or the token is another, with the drop counted. */
static inline int packet_ctx(dp_thread_t *t, _Atomic(job_t *) *jobs, const wire_header_t *h,
                             int upstream, const transport_addr_t *from, proto_ctx_t *x)
{
    job_t *j =
        h->job < SWITCH_MAX_JOBS ? atomic_load_explicit(&jobs[h->job], memory_order_acquire) : NULL;
    if (!j) {
        STAT_ADD(t->c.v[DROP_UNKNOWN_JOB], 1);
        return 0;
    }
    if (h->token != (upstream ? j->up.token : j->token)) {
        STAT_ADD(t->c.v[DROP_BAD_TOKEN], 1);
        return 0;
    }
    *x = (proto_ctx_t){.dp = t,
                       .job = j,
                       .state = j->proto_state,
                       .thread = t->index,
                       .c = &j->threads[t->index].c,
                       .from = from};
    return 1;
}

/* Whether a packet of x's job goes on to its protocol: not when its checks gave a drop
 * reason (>= 0), counted on the job; else its bytes are counted in. */
static inline int passes(const proto_ctx_t *x, int reason, size_t len)
{
    if (reason >= 0) {
        STAT_ADD(x->c->v[reason], 1);
        return 0;
    }
    STAT_ADD(x->c->v[STAT_BYTES_IN], len);
    return 1;
}

/* A leaf switch: a result or confirmation from the upstream switch. Checked against the
 * local job that is member of that upstream job, then handed to its protocol. */
static void handle_upstream(dp_thread_t *t, wire_header_t *h, const uint8_t *buf, size_t len,
                            const transport_addr_t *from, uint64_t now_ms)
{
    (void)now_ms;
    proto_ctx_t x;
    if (!packet_ctx(t, t->sw->up_jobs, h, 1, from, &x))
        return;
    job_t *j = x.job;
    int reason = -1;
    if (!job_serves(j))
        reason = DROP_JOB_NOT_ACTIVE;
    else if (h->rank != j->up.rank)
        reason = DROP_BAD_RANK;
    else if (h->slot >= j->nslots)
        reason = DROP_BAD_SLOT;
    else if (job_slot_owner(j, h->slot) != t->index)
        reason = DROP_WRONG_THREAD;
    else if (h->count > j->elems)
        reason = DROP_BAD_COUNT;
    else
        reason = check_mac(j->up.auth, j->up.keys.down, 1, h, buf);
    if (!passes(&x, reason, len))
        return;
    proto_outcome_t o;
    const uint8_t *payload = buf + (j->up.auth ? WIRE_HEADER_MAX : WIRE_HEADER_SIZE);
    j->proto->upstream(&x, h, (const uint32_t *)(const void *)payload, &o);
    act(&x, h, &o);
}

/* What the packet's verdict lets the switch learn about its sender (proto.h, enum
 * proto_seen), before the outcome's results go out. The rank is alive when the slot accepted
 * the packet or it repeats what a round still open already has from it (a silent rank has
 * nothing there to repeat, so no replay hides it). The rank's first accepted contribution on
 * a slot says where its results on that slot go, for the rest of the job (a worker sends a
 * slot's packets from one endpoint). A replayed, stale or refused packet changes neither;
 * nor can a replay that stands in for a lost original move a slot the rank has used. */
static void learn(const proto_ctx_t *x, const wire_header_t *h, const proto_outcome_t *o,
                  uint64_t now_ms)
{
    job_t *j = x->job;
    job_thread_t *jt = &j->threads[x->thread];
    if (o->seen == PROTO_SEEN_NONE)
        return;
    atomic_store_explicit(&jt->last_seen_ms[h->rank], now_ms, memory_order_relaxed);
    if (o->seen != PROTO_SEEN_ACCEPTED)
        return;
    transport_addr_t *to = &j->addrs[(size_t)h->slot * j->world + h->rank];
    if (h->type == WIRE_CONTRIB && !transport_addr_is_set(to))
        *to = *x->from;
}

static void handle_packet(dp_thread_t *t, uint32_t to_switch, const uint8_t *buf, size_t len,
                          const transport_addr_t *from, uint64_t now_ms)
{
    struct inagg_switch *sw = t->sw;
    wire_header_t h;
    enum wire_status ws = wire_decode(buf, len, &h);
    if (ws != WIRE_OK) {
        STAT_ADD(t->c.v[ws], 1);
        return;
    }
    if (!(to_switch & (1u << h.type))) {
        if (sw->cfg.upstream && (h.type == WIRE_RESULT || h.type == WIRE_CONFIRM))
            handle_upstream(t, &h, buf, len, from, now_ms);
        else
            STAT_ADD(t->c.v[DROP_NOT_RESULT_PATH], 1);
        return;
    }
    proto_ctx_t x;
    if (!packet_ctx(t, sw->jobs, &h, 0, from, &x))
        return;
    job_t *j = x.job;
    int reason = check(t, j, &h);
    if (reason < 0) /* the rank is in range now, and the keys published (job active) */
        reason = check_mac(j->dp_auth, j->keys[h.rank].up, 0, &h, buf);
    if (!passes(&x, reason, len))
        return;
    proto_outcome_t o;
    const uint8_t *payload = buf + job_header_bytes(j);
    j->proto->handle(&x, &h, (const uint32_t *)(const void *)payload, &o);
    learn(&x, &h, &o, now_ms);
    act(&x, &h, &o);
}

int dataplane_setup(dp_thread_t *t)
{
    struct inagg_switch *sw = t->sw;
    /* Room for a batch twice over: fault injection may duplicate every packet of one. */
    int max = 2 * (int)(sw->cfg.batch < DP_MAX_BATCH ? sw->cfg.batch : DP_MAX_BATCH);
    if (max == 0)
        max = 2;
    t->rx = calloc((size_t)max, sizeof(*t->rx));
    t->txq = calloc(1, sizeof(*t->txq));
    if (!t->rx || !t->txq) {
        dataplane_teardown(t);
        return -ENOMEM;
    }
    t->rx_max = max;
    return 0;
}

void dataplane_teardown(dp_thread_t *t)
{
    INAGG_FREE_CLEAR(t->rx);
    INAGG_FREE_CLEAR(t->txq);
}

/* One pass: receive a batch (waiting up to timeout_ms), handle it, send what it queued. The
 * packets received. */
static int dataplane_pass(dp_thread_t *t, uint32_t to_switch, int timeout_ms)
{
    atomic_fetch_add_explicit(&t->epoch, 1, memory_order_acq_rel);
    int n = transport_recv(t->tp, t->rx, t->rx_max, timeout_ms);
    if (n <= 0)
        return 0;
    int64_t net;
    fault_delta(t, &net);
    if (n - net > 0)
        STAT_ADD(t->c.v[STAT_PACKETS_IN], (uint64_t)(n - net));
    uint64_t now_ms = server_now_ms();
    for (int i = 0; i < n; i++)
        handle_packet(t, to_switch, t->rx[i].data, t->rx[i].len, &t->rx[i].from, now_ms);
    tx_flush(t);
    return n;
}

int switch_dataplane_pass(void *swp, uint32_t queue)
{
    struct inagg_switch *sw = swp;
    if (queue >= sw->cfg.threads || !sw->threads[queue].rx)
        return 0;
    return dataplane_pass(&sw->threads[queue], proto_accepts_any(), 0);
}

void *dataplane_main(void *arg)
{
    dp_thread_t *t = arg;
    struct inagg_switch *sw = t->sw;
    if (dataplane_setup(t) != 0) {
        LOG_E("dataplane thread %u: out of memory", t->index);
        atomic_store(&t->running, 0);
        return NULL;
    }
    uint32_t to_switch = proto_accepts_any();
    const switch_config_t *cfg = &sw->cfg;
    if (cfg->n_cpus) {
        uint32_t cpu = cfg->cpus[t->index % cfg->n_cpus];
        int prc = switch_pin_self(cpu);
        if (prc != 0)
            LOG_W("dataplane thread %u: pinning to CPU %u: %s", t->index, cpu, strerror(-prc));
    }
    /* Sleeping: one system call per wake-up, the receive sleeps until a packet comes (at
     * most 50 ms, so the stop flag is seen). Busy or within an adaptive spin: the receive
     * does not wait, and a pass that found nothing is counted (empty_polls). */
    uint64_t last_traffic = 0;
    while (!atomic_load_explicit(&sw->stop, memory_order_acquire)) {
        uint64_t now = cfg->poll == SWITCH_POLL_SLEEP ? 0 : util_now_ns();
        int wait_ms = switch_poll_timeout(cfg->poll, cfg->poll_spin_us, now, last_traffic, 50);
        if (dataplane_pass(t, to_switch, wait_ms) > 0)
            last_traffic = cfg->poll == SWITCH_POLL_SLEEP ? 0 : util_now_ns();
        else if (wait_ms == 0) {
            STAT_ADD(t->c.v[STAT_POLLS_EMPTY], 1);
            if (switch_poll_idle())
                STAT_ADD(t->c.v[STAT_SPIN_BANS], 1);
        }
    }
    dataplane_teardown(t);
    atomic_store(&t->running, 0);
    return NULL;
}
