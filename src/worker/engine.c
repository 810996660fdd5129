/* engine.c - the worker's streaming engine (see engine.h for the protocol). */
#include "worker/engine.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transport/faults.h"
#include "base/util.h"
#include "kernels/vec.h"
#include "transport/udp.h"
#include "wire/wire.h"
#include "worker/quant.h"
#include "worker/rto.h"

#define ENGINE_RX_BATCH 64
#define ENGINE_POLL_MS 5

enum phase { PHASE_IDLE = 0, PHASE_PROBE, PHASE_DATA };

typedef struct wslot {
    uint32_t slot;          /* index in the job's pool */
    uint32_t round;         /* round of the packet in flight, or the next one when idle */
    uint64_t chunk;         /* chunk in flight */
    int phase;
    int16_t exp;            /* agreed exponent of the chunk in flight (fixed point) */
    int16_t sent_next_exp;  /* look-ahead exponent this rank sent with the packet in flight */
    int retransmitted;      /* Karn: no RTT sample from a retransmitted packet */
    uint64_t sent_ns, deadline_ns;
    uint32_t rto_us;        /* this packet's timeout, doubled on each retransmission */
    uint8_t *pkt;
    uint32_t pkt_len;
    struct sockaddr_in dst;
} wslot_t;

typedef struct engine_counters {
    _Atomic uint64_t sent, received, retransmissions, duplicates, invalid, bytes_sent,
        bytes_received;
    _Atomic uint32_t srtt_us, rto_us;
} engine_counters_t;

#define CNT_ADD(f, n)                                                                           \
    atomic_store_explicit(&(f), atomic_load_explicit(&(f), memory_order_relaxed) + (n),         \
                          memory_order_relaxed)

struct engine {
    engine_params_t p;
    int fd;
    uint32_t nlocal;        /* slots this engine owns */
    wslot_t *ws;            /* [nlocal]: local k is pool slot index + k * nthreads */
    uint8_t *pkt_arena;
    uint8_t *rx_arena;
    size_t pkt_cap;
    struct mmsghdr rx_msgs[ENGINE_RX_BATCH];
    struct iovec rx_iov[ENGINE_RX_BATCH];
    struct sockaddr_in rx_from[ENGINE_RX_BATCH];
    int rx_order[2 * ENGINE_RX_BATCH];
    struct mmsghdr *tx_msgs, *tx_faulted;
    struct iovec *tx_iov;
    int tx_n;
    faults_t faults_in, faults_out;
    rto_estimator_t rto;
    engine_counters_t c;
};

static void update_rto(engine_t *e, double sample_us)
{
    rto_sample(&e->rto, sample_us);
    atomic_store_explicit(&e->c.srtt_us, (uint32_t)e->rto.srtt_us, memory_order_relaxed);
    atomic_store_explicit(&e->c.rto_us, e->rto.rto_us, memory_order_relaxed);
}

struct sockaddr_in engine_slot_addr(const engine_params_t *p, uint32_t slot)
{
    struct sockaddr_in a = p->sw_addr;
    a.sin_port = htons((uint16_t)(ntohs(p->sw_addr.sin_port) + engine_slot_thread(p, slot)));
    return a;
}

int engine_faults_init(const engine_params_t *p, uint32_t stream, faults_t *in, faults_t *out,
                       char *err, size_t errlen)
{
    char ferr[128];
    if (faults_parse(in, p->faults, ferr, sizeof(ferr)) != 0 ||
        faults_parse(out, p->faults, ferr, sizeof(ferr)) != 0) {
        snprintf(err, errlen, "bad fault spec: %s", ferr);
        return -1;
    }
    util_rng_seed(&in->rng, in->seed * 1000003u + p->rank * 131u + stream);
    util_rng_seed(&out->rng, out->seed * 7919u + p->rank * 137u + stream + 0x5bd1e995u);
    return 0;
}

int engine_open_socket(int buffer, char *err, size_t errlen)
{
    int fd = udp_open_any(buffer);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open a UDP socket: %s", strerror(-fd));
        return -1;
    }
    return fd;
}

void engine_rx_init(struct mmsghdr *msgs, struct iovec *iov, uint8_t *arena, int n, size_t cap)
{
    for (int i = 0; i < n; i++) {
        iov[i] = (struct iovec){arena + (size_t)i * cap, cap};
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
}

engine_t *engine_create(const engine_params_t *p, char *err, size_t errlen)
{
    engine_t *e = calloc(1, sizeof(*e));
    if (!e) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    e->p = *p;
    e->fd = -1;
    rto_init(&e->rto, p->rto_us, p->rto_min_us, p->rto_max_us);
    atomic_store(&e->c.rto_us, p->rto_us);
    for (uint32_t i = p->index; i < p->slots; i += p->nthreads)
        e->nlocal++;
    e->pkt_cap = WIRE_HEADER_SIZE + (size_t)p->elems * 4u;
    e->ws = calloc(e->nlocal ? e->nlocal : 1, sizeof(wslot_t));
    e->pkt_arena = malloc((e->nlocal ? e->nlocal : 1) * e->pkt_cap);
    e->rx_arena = malloc(ENGINE_RX_BATCH * e->pkt_cap);
    e->tx_msgs = calloc(e->nlocal + 1, sizeof(struct mmsghdr));
    e->tx_faulted = calloc(2 * (e->nlocal + 1) + 1, sizeof(struct mmsghdr));
    e->tx_iov = calloc(e->nlocal + 1, sizeof(struct iovec));
    if (!e->ws || !e->pkt_arena || !e->rx_arena || !e->tx_msgs || !e->tx_faulted || !e->tx_iov) {
        snprintf(err, errlen, "out of memory for %u slots of %u elements", e->nlocal, p->elems);
        goto fail;
    }
    if (engine_faults_init(p, p->index, &e->faults_in, &e->faults_out, err, errlen) != 0)
        goto fail;
    for (uint32_t k = 0; k < e->nlocal; k++) {
        wslot_t *w = &e->ws[k];
        w->slot = p->index + k * p->nthreads;
        w->pkt = e->pkt_arena + (size_t)k * e->pkt_cap;
        w->dst = engine_slot_addr(p, w->slot);
    }
    engine_rx_init(e->rx_msgs, e->rx_iov, e->rx_arena, ENGINE_RX_BATCH, e->pkt_cap);
    e->fd = engine_open_socket(p->socket_buffer, err, errlen);
    if (e->fd < 0)
        goto fail;
    return e;
fail:
    engine_destroy(e);
    return NULL;
}

void engine_destroy(engine_t *e)
{
    if (!e)
        return;
    if (e->fd >= 0)
        close(e->fd);
    faults_free(&e->faults_in);
    faults_free(&e->faults_out);
    free(e->ws);
    free(e->pkt_arena);
    free(e->rx_arena);
    free(e->tx_msgs);
    free(e->tx_faulted);
    free(e->tx_iov);
    free(e);
}

/* The request being run, with what every chunk needs. */
typedef struct run {
    const engine_request_t *r;
    uint64_t nchunks;
    uint8_t wire_dtype;
    int fixed;
    int overflow, nonfinite;
} run_t;

static size_t chunk_len(const engine_t *e, const run_t *run, uint64_t chunk)
{
    uint64_t off = chunk * e->p.elems;
    uint64_t left = run->r->count - off;
    return left < e->p.elems ? (size_t)left : e->p.elems;
}

static int16_t chunk_exponent(const engine_t *e, const run_t *run, uint64_t chunk)
{
    if (chunk >= run->nchunks)
        return QUANT_EXP_ZERO;
    const float *x = (const float *)run->r->send + chunk * e->p.elems;
    return quant_block_exponent(x, chunk_len(e, run, chunk));
}

static void queue_send(engine_t *e, wslot_t *w, uint64_t now)
{
    int k = e->tx_n++;
    e->tx_iov[k] = (struct iovec){w->pkt, w->pkt_len};
    memset(&e->tx_msgs[k], 0, sizeof(e->tx_msgs[k]));
    e->tx_msgs[k].msg_hdr.msg_name = &w->dst;
    e->tx_msgs[k].msg_hdr.msg_namelen = sizeof(w->dst);
    e->tx_msgs[k].msg_hdr.msg_iov = &e->tx_iov[k];
    e->tx_msgs[k].msg_hdr.msg_iovlen = 1;
    w->sent_ns = now;
    w->deadline_ns = now + (uint64_t)w->rto_us * 1000u;
    CNT_ADD(e->c.sent, 1);
    CNT_ADD(e->c.bytes_sent, w->pkt_len);
}

static int flush_sends(engine_t *e)
{
    if (e->tx_n == 0)
        return 0;
    int n = faults_on_send(&e->faults_out, e->tx_msgs, e->tx_n, e->tx_faulted);
    int rc = udp_send_batch(e->fd, e->tx_faulted, n, 50);
    e->tx_n = 0;
    return rc < 0 ? rc : 0;
}

/* Build the packet for the slot's current phase and chunk, and queue it. */
static void send_current(engine_t *e, run_t *run, wslot_t *w, uint64_t now)
{
    wire_header_t h = {
        .version = INAGG_PROTOCOL_VERSION,
        .type = WIRE_CONTRIB,
        .job = e->p.job,
        .rank = (uint16_t)e->p.rank,
        .token = e->p.token,
        .slot = w->slot,
        .round = w->round,
        .chunk = (uint32_t)w->chunk,
        .flags = (uint8_t)(wire_ver_of_round(w->round) | (run->r->set ? WIRE_FLAG_SET : 0)),
        .dtype = run->wire_dtype,
    };
    uint32_t *payload = (uint32_t *)(void *)(w->pkt + WIRE_HEADER_SIZE);
    if (w->phase == PHASE_PROBE) {
        h.count = 0;
        h.exp = QUANT_EXP_ZERO;
        h.next_exp = chunk_exponent(e, run, w->chunk);
        w->sent_next_exp = h.next_exp;
    } else {
        size_t off = w->chunk * e->p.elems, len = chunk_len(e, run, w->chunk);
        h.count = (uint16_t)len;
        if (run->r->dtype == INAGG_INT32) {
            vec_i32_to_be((const int32_t *)run->r->send + off, payload, len);
        } else if (!run->fixed) {
            vec_f32_to_be((const float *)run->r->send + off, payload, len);
        } else {
            h.exp = w->exp;
            h.next_exp = chunk_exponent(e, run, w->chunk + e->p.slots);
            w->sent_next_exp = h.next_exp;
            quant_encode((const float *)run->r->send + off, payload, len, w->exp, e->p.world);
        }
    }
    wire_encode_header(&h, w->pkt);
    w->pkt_len = WIRE_HEADER_SIZE + (uint32_t)h.count * 4u;
    w->retransmitted = 0;
    w->rto_us = e->rto.rto_us;
    queue_send(e, w, now);
}

static void deliver(engine_t *e, run_t *run, const wslot_t *w, const wire_header_t *h,
                    const uint32_t *payload)
{
    size_t off = w->chunk * e->p.elems, len = h->count;
    int avg = run->r->op == INAGG_AVG;
    if (run->r->dtype == INAGG_INT32) {
        int32_t *out = (int32_t *)run->r->recv + off;
        vec_be_to_i32(payload, out, len);
        if (h->flags & WIRE_FLAG_OVERFLOW)
            run->overflow = 1;
        if (avg)
            vec_i32_div(out, len, (int32_t)e->p.world);
        return;
    }
    float *out = (float *)run->r->recv + off;
    if (run->fixed) {
        quant_decode(payload, out, len, h->exp, e->p.world);
        if (h->exp == QUANT_EXP_NONFINITE)
            run->nonfinite = 1;
    } else {
        vec_be_to_f32(payload, out, len);
    }
    if (avg)
        vec_f32_scale(out, len, 1.0f / (float)e->p.world);
}

/* Check a received datagram; returns the local slot it is for, or -1 (counted). */
static int accept_result(engine_t *e, const run_t *run, const uint8_t *buf, size_t len,
                         wire_header_t *h)
{
    if (wire_decode(buf, len, h) != WIRE_OK || h->type != WIRE_RESULT || h->job != e->p.job ||
        h->token != e->p.token || h->rank != e->p.rank || h->slot >= e->p.slots ||
        h->slot % e->p.nthreads != e->p.index) {
        CNT_ADD(e->c.invalid, 1);
        return -1;
    }
    int k = (int)(h->slot / e->p.nthreads);
    const wslot_t *w = &e->ws[k];
    if (w->phase == PHASE_IDLE || h->round != w->round) {
        CNT_ADD(e->c.duplicates, 1);
        return -1;
    }
    size_t want = w->phase == PHASE_PROBE ? 0 : chunk_len(e, run, w->chunk);
    if (h->count != want || h->dtype != run->wire_dtype ||
        (w->phase == PHASE_DATA && run->fixed && h->exp != w->exp)) {
        CNT_ADD(e->c.invalid, 1);
        return -1;
    }
    /* The agreed exponent is the maximum of everyone's, so at least ours, and encodable. */
    if (run->fixed && h->next_exp != QUANT_EXP_ZERO && h->next_exp != QUANT_EXP_NONFINITE &&
        (h->next_exp < QUANT_EXP_MIN || h->next_exp > QUANT_EXP_MAX ||
         h->next_exp < w->sent_next_exp)) {
        CNT_ADD(e->c.invalid, 1);
        return -1;
    }
    return k;
}

static void scan_timers(engine_t *e, uint64_t now, uint64_t *next_deadline)
{
    uint64_t next = UINT64_MAX;
    int expired = 0;
    for (uint32_t k = 0; k < e->nlocal; k++) {
        wslot_t *w = &e->ws[k];
        if (w->phase == PHASE_IDLE)
            continue;
        if (now >= w->deadline_ns) {
            w->rto_us = rto_doubled(w->rto_us, e->p.rto_max_us);
            w->retransmitted = 1;
            queue_send(e, w, now);
            CNT_ADD(e->c.retransmissions, 1);
            expired = 1;
        }
        if (w->deadline_ns < next)
            next = w->deadline_ns;
    }
    if (expired)
        rto_backoff(&e->rto);
    *next_deadline = next;
}

inagg_result_t engine_run(engine_t *e, const engine_request_t *r, char *detail, size_t dlen)
{
    run_t run = {.r = r};
    run.nchunks = (r->count + e->p.elems - 1) / e->p.elems;
    run.fixed = r->dtype == INAGG_FLOAT32 && e->p.float_mode == INAGG_FLOAT_FIXED;
    run.wire_dtype = r->dtype == INAGG_INT32 ? WIRE_INT32 : run.fixed ? WIRE_FIXED32 : WIRE_FLOAT32;

    uint64_t now = util_now_ns();
    uint32_t active = 0;
    for (uint32_t k = 0; k < e->nlocal; k++) {
        wslot_t *w = &e->ws[k];
        if (w->slot >= run.nchunks)
            continue;
        w->chunk = w->slot;
        w->phase = run.fixed ? PHASE_PROBE : PHASE_DATA;
        send_current(e, &run, w, now);
        active++;
    }
    int rc = flush_sends(e);
    uint64_t last_progress = now, next_deadline = now;
    uint64_t timeout_ns = (uint64_t)e->p.timeout_ms * 1000000ull;
    while (active > 0 && rc == 0) {
        if (atomic_load_explicit(e->p.abort_flag, memory_order_acquire)) {
            snprintf(detail, dlen, "aborted: the job failed");
            rc = INAGG_ERR_JOB_FAILED;
            break;
        }
        now = util_now_ns();
        int wait_ms = 0;
        if (next_deadline > now)
            wait_ms = (int)util_min_u64((next_deadline - now) / 1000000ull + 1, ENGINE_POLL_MS);
        for (int i = 0; i < ENGINE_RX_BATCH; i++) {
            e->rx_msgs[i].msg_hdr.msg_name = &e->rx_from[i];
            e->rx_msgs[i].msg_hdr.msg_namelen = sizeof(e->rx_from[i]);
        }
        int n = udp_recv_batch(e->fd, e->rx_msgs, ENGINE_RX_BATCH, wait_ms);
        if (n < 0) {
            snprintf(detail, dlen, "receive failed: %s", strerror(-n));
            rc = INAGG_ERR_SYSTEM;
            break;
        }
        now = util_now_ns();
        int m = faults_on_recv(&e->faults_in, n, e->rx_order);
        for (int i = 0; i < m; i++) {
            int idx = e->rx_order[i];
            const uint8_t *buf = e->rx_arena + (size_t)idx * e->pkt_cap;
            size_t len = e->rx_msgs[idx].msg_len;
            wire_header_t h;
            int k = accept_result(e, &run, buf, len, &h);
            if (k < 0)
                continue;
            wslot_t *w = &e->ws[k];
            CNT_ADD(e->c.received, 1);
            CNT_ADD(e->c.bytes_received, len);
            if (!w->retransmitted)
                update_rto(e, (double)(now - w->sent_ns) / 1000.0);
            last_progress = now;
            const uint32_t *payload = (const uint32_t *)(const void *)(buf + WIRE_HEADER_SIZE);
            w->round++;
            if (w->phase == PHASE_PROBE) {
                w->exp = h.next_exp;
                w->phase = PHASE_DATA;
                send_current(e, &run, w, now);
                continue;
            }
            deliver(e, &run, w, &h, payload);
            w->chunk += e->p.slots;
            if (w->chunk < run.nchunks) {
                w->exp = h.next_exp;
                send_current(e, &run, w, now);
            } else {
                w->phase = PHASE_IDLE;
                active--;
            }
        }
        if (now >= next_deadline || e->tx_n == 0)
            scan_timers(e, now, &next_deadline);
        int frc = flush_sends(e);
        if (frc < 0) {
            snprintf(detail, dlen, "send failed: %s", strerror(-frc));
            rc = INAGG_ERR_SYSTEM;
            break;
        }
        if (now - last_progress > timeout_ns) {
            snprintf(detail, dlen,
                     "no result from the switch for %u ms (%u of this thread's slots waiting)",
                     e->p.timeout_ms, active);
            rc = INAGG_ERR_TIMEOUT;
            break;
        }
    }
    if (rc != 0) {
        /* Leave the slots consistent for no one: the job is unusable after a failure. */
        for (uint32_t k = 0; k < e->nlocal; k++)
            e->ws[k].phase = PHASE_IDLE;
        return (inagg_result_t)rc;
    }
    if (run.overflow) {
        snprintf(detail, dlen, "int32 sum wrapped around in at least one element");
        return INAGG_ERR_OVERFLOW;
    }
    if (run.nonfinite) {
        snprintf(detail, dlen, "a float32 input held NaN or Inf; affected chunks are NaN");
        return INAGG_ERR_NONFINITE;
    }
    return INAGG_OK;
}

void engine_add_stats(const engine_t *e, inagg_stats_t *acc)
{
    acc->packets_sent += atomic_load_explicit(&e->c.sent, memory_order_relaxed);
    acc->packets_received += atomic_load_explicit(&e->c.received, memory_order_relaxed);
    acc->retransmissions += atomic_load_explicit(&e->c.retransmissions, memory_order_relaxed);
    acc->duplicates_ignored += atomic_load_explicit(&e->c.duplicates, memory_order_relaxed);
    acc->invalid_dropped += atomic_load_explicit(&e->c.invalid, memory_order_relaxed);
    acc->bytes_sent += atomic_load_explicit(&e->c.bytes_sent, memory_order_relaxed);
    acc->bytes_received += atomic_load_explicit(&e->c.bytes_received, memory_order_relaxed);
    uint32_t srtt = atomic_load_explicit(&e->c.srtt_us, memory_order_relaxed);
    uint32_t rto = atomic_load_explicit(&e->c.rto_us, memory_order_relaxed);
    if (srtt > acc->srtt_us)
        acc->srtt_us = srtt;
    if (rto > acc->rto_us)
        acc->rto_us = rto;
}
