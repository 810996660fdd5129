/*
 * proto_switchml.c - the switchml protocol on the worker side: SwitchML's throughput-centric
 * streaming engine (Algorithm 4), one per engine thread (`threads` per communicator; the
 * threads and the ring of requests they take in call order are sml_ring.c).
 *
 * Each engine thread has its own endpoint (transport.h) and owns the slots s with
 * s % threads == its index. A tensor is cut into chunks of `elems` elements; chunk c uses slot c % slots. The
 * engine sends the first chunk of each of its slots (the initial window), and every result
 * that comes back clocks out the next chunk on the same slot, one round later (so in the
 * other copy of the slot). Each outstanding packet has a timer; on expiry the same packet is
 * sent again, with exponential backoff. The timeout adapts to the measured round-trip time
 * (rto.h: RFC 6298, Karn's rule).
 *
 * float32 in block fixed point needs every rank to scale a chunk with the same exponent.
 * Each packet carries the exponent of the next chunk on its slot (look-ahead) and the switch
 * returns the maximum with the result; the first chunk on each slot is preceded by an
 * exponent probe: a round with no payload whose only job is to agree on that exponent.
 *
 * The ring of requests and the protocol's ops table are sml_ring.c; this file is one engine.
 *
 * Compressed jobs: each engine thread has an encoder helper thread that encodes a slot's next
 * chunk into the slot's spare buffer while the engine is busy with the network and with
 * decoding results (encode overlapped with communication); the engine swaps the buffer in.
 * A packet's timer starts when it leaves, and coded packets get a timeout floor for the
 * switch's coding time (rto.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/base/errmsg.h"
#include "lib/base/util.h"
#include "lib/kernels/vec.h"
#include "lib/transport/transport.h"
#include "lib/wire/wire.h"
#include "lib/worker/proto.h"
#include "lib/worker/quant.h"
#include "lib/worker/rto.h"
#include "lib/worker/sml_engine.h"

#include "lib/worker/sml_engine_int.h"

void sml_engine_destroy(engine_t *e)
{
    if (!e)
        return;
    if (e->helper_started) {
        pthread_mutex_lock(&e->hmu);
        e->hstop = 1;
        pthread_cond_broadcast(&e->hcv);
        pthread_mutex_unlock(&e->hmu);
        pthread_join(e->helper, NULL);
    }
    pthread_mutex_destroy(&e->hmu);
    pthread_cond_destroy(&e->hcv);
    codec_ctx_close(e->hcd.ctx);
    free(e->hcd.dec);
    free(e->hcd.xbuf);
    free(e->spare_arena);
    transport_close(e->tp);
    if (e->mc_tp)
        transport_close(e->mc_tp);
    free(e->ws);
    free(e->pkt_arena);
    worker_txq_free(&e->tx);
    codec_ctx_close(e->codec);
    free(e->dec);
    free(e->xbuf);
    free(e->resid);
    free(e);
}

/* Engine thread `index`: its slots, buffers and endpoint. 0, or -errno with a reason in err. */
int sml_engine_create(const worker_params_t *p, uint32_t index, engine_t **out, char *err,
                      size_t errlen)
{
    engine_t *e = calloc(1, sizeof(*e));
    if (!e)
        return set_err(err, errlen, -ENOMEM, "out of memory");
    e->p = *p;
    pthread_mutex_init(&e->hmu, NULL);
    pthread_cond_init(&e->hcv, NULL);
    e->index = index;
    e->nthreads = p->threads;
    worker_counters_init(&e->c, &e->rto, p);
    for (uint32_t i = index; i < p->slots; i += e->nthreads)
        e->nlocal++;
    e->pkt_cap = worker_hdr_bytes(p) + worker_payload_cap(p);
    e->ws = calloc(e->nlocal ? e->nlocal : 1, sizeof(wslot_t));
    e->pkt_arena = malloc((e->nlocal ? e->nlocal : 1) * e->pkt_cap);
    int rc = 0;
    if (!e->ws || !e->pkt_arena) {
        rc = set_err(err, errlen, -ENOMEM, "out of memory for %u slots of %u elements", e->nlocal,
                     p->elems);
        goto fail;
    }
    if (p->codec.mode != CODEC_NONE) {
        rc = codec_ctx_open(&p->codec, p->elems, &e->codec, err, errlen);
        if (rc == 0)
            rc = codec_ctx_open(&p->codec, p->elems, &e->hcd.ctx, err, errlen);
        e->dec = malloc((size_t)p->elems * sizeof(float));
        e->xbuf = malloc((size_t)p->elems * sizeof(float));
        e->hcd.dec = malloc((size_t)p->elems * sizeof(float));
        e->hcd.xbuf = malloc((size_t)p->elems * sizeof(float));
        e->hcd.c = &e->hc;
        e->spare_arena = malloc((e->nlocal ? e->nlocal : 1) * e->pkt_cap);
        if (rc == 0 && (!e->dec || !e->xbuf || !e->hcd.dec || !e->hcd.xbuf || !e->spare_arena)) {
            rc = set_err(err, errlen, -ENOMEM, "out of memory");
        }
        if (rc != 0)
            goto fail;
    }
    rc = worker_open_endpoint(p, p->socket_buffer, index, &e->tp, err, errlen);
    /* Results the switch sends once to the job's group (PROTOCOL.md 9.6) come to a second
     * endpoint bound to it; a rank offers the group only with one engine, which owns every
     * slot. Resends stay unicast, to tp. */
    if (rc == 0 && p->mcast_group)
        rc = worker_open_mcast_endpoint(p, p->socket_buffer, WORKER_MAX_THREADS, &e->mc_tp, err,
                                        errlen);
    if (rc == 0 && worker_txq_init(&e->tx, e->tp, (int)e->nlocal + 1) != 0)
        rc = set_err(err, errlen, -ENOMEM, "out of memory");
    for (uint32_t k = 0; k < e->nlocal && rc == 0; k++) {
        wslot_t *w = &e->ws[k];
        w->slot = index + k * e->nthreads;
        w->pkt = e->pkt_arena + (size_t)k * e->pkt_cap;
        w->spare = e->spare_arena ? e->spare_arena + (size_t)k * e->pkt_cap : NULL;
        w->want = NO_CHUNK;
        rc = worker_slot_addr(p, e->tp, w->slot, &w->dst);
        if (rc != 0)
            rc = set_err(err, errlen, rc, "no address for the switch queue of slot %u", w->slot);
    }
    /* INAGG_CODEC_HELPER=0 runs without the helper (every chunk coded on the engine thread,
     * nothing overlapped): to measure what the overlap is worth (inagg model validate). */
    if (rc == 0 && e->codec && !p->codec_no_helper) {
        rc = -pthread_create(&e->helper, NULL, sml_helper_main, e);
        if (rc != 0)
            rc = set_err(err, errlen, rc, "cannot start the encoder helper thread");
        else
            e->helper_started = 1;
    }
    if (rc != 0)
        goto fail;
    *out = e;
    return 0;
fail:
    sml_engine_destroy(e);
    return rc;
}

static int16_t chunk_exponent(const engine_t *e, const run_t *run, uint64_t chunk)
{
    if (chunk >= run->nchunks)
        return QUANT_EXP_ZERO;
    const float *x = (const float *)run->r->send + chunk * e->p.elems;
    return quant_block_exponent(x, sml_chunk_len(e, run, chunk));
}

/* Queue the slot's packet. Its timer starts when the packet leaves (arm_sent after the
 * flush), not now: coding the rest of a batch of results may take long before the flush. */
static void queue_send(engine_t *e, wslot_t *w)
{
    worker_txq_push(&e->tx, w->pkt, w->pkt_len, &w->dst, &e->c);
    if (w->armed) {
        w->armed = 0;
        e->onwire--;
    }
}

/* After a flush: the timers of the packets that just left start now. */
static void arm_sent(engine_t *e)
{
    uint64_t now = util_now_ns();
    for (uint32_t k = 0; k < e->nlocal; k++) {
        wslot_t *w = &e->ws[k];
        if (w->phase == PHASE_IDLE || w->armed)
            continue;
        worker_timer_arm(&w->tm, now);
        w->armed = 1;
        e->onwire++;
    }
}

/* The slot's packet was answered: it is no longer on the wire. */
static void answered(engine_t *e, wslot_t *w)
{
    if (w->armed) {
        w->armed = 0;
        e->onwire--;
    }
}

/* Build the packet for the slot's current phase and chunk, and queue it. */
static void send_current(engine_t *e, run_t *run, wslot_t *w)
{
    wire_header_t h = worker_header(&e->p, WIRE_CONTRIB, w->slot, w->round);
    h.chunk = (uint32_t)w->chunk;
    h.flags |= run->r->set ? WIRE_FLAG_SET : 0;
    h.dtype = run->wire_dtype;
    uint32_t *payload = (uint32_t *)(void *)(w->pkt + worker_hdr_bytes(&e->p));
    if (w->phase == PHASE_PROBE) {
        h.count = 0;
        h.exp = QUANT_EXP_ZERO;
        h.next_exp = chunk_exponent(e, run, w->chunk);
        w->sent_next_exp = h.next_exp;
    } else {
        size_t off = w->chunk * e->p.elems, len = sml_chunk_len(e, run, w->chunk);
        h.count = (uint16_t)len;
        if (run->coded) {
            uint8_t fl = 0;
            uint16_t words = 0;
            if (!sml_take_spare(e, run, w, &words, &fl)) {
                coder_t self = {e->codec, e->dec, e->xbuf, &e->c};
                uint64_t dt = 0;
                words = sml_encode_chunk(e, &self, run, w->chunk, payload, &fl, &dt);
                sml_engine_mean(e, 1, dt);
            }
            if (fl & WIRE_FLAG_OVERFLOW) {
                h.flags |= WIRE_FLAG_OVERFLOW;
                run->nonfinite = 1;
            }
            h.count = words;
        } else if (!run->fixed) {
            worker_encode_plain(run->r->dtype, (const char *)run->r->send + off * 4u, payload, len);
        } else {
            h.exp = w->exp;
            h.next_exp = chunk_exponent(e, run, w->chunk + e->p.slots);
            w->sent_next_exp = h.next_exp;
            quant_encode((const float *)run->r->send + off, payload, len, w->exp, e->p.world);
        }
    }
    w->pkt_len = worker_seal(&e->p, &h, w->pkt);
    worker_timer_fresh(&w->tm, &e->rto);
    if (run->coded && w->tm.rto_us < e->code_floor_us)
        w->tm.rto_us = e->code_floor_us;
    queue_send(e, w);
}

static void deliver(engine_t *e, run_t *run, const wslot_t *w, const wire_header_t *h,
                    const uint32_t *payload)
{
    size_t off = w->chunk * e->p.elems, len = h->count;
    if (run->coded) { /* accept_result decoded it into e->dec */
        len = sml_chunk_len(e, run, w->chunk);
        float *out = (float *)run->r->recv + off;
        memcpy(out, e->dec, len * sizeof(float));
        if (h->flags & WIRE_FLAG_OVERFLOW) /* the sum left the float range: saturated */
            run->nonfinite = 1;
        if (run->r->op == INAGG_AVG)
            vec_f32_scale(out, len, 1.0f / (float)e->p.world);
        return;
    }
    worker_oprec_t *rec = run->r->rec;
    if (rec) { /* fail-over: the result as it came, to hand on bit for bit */
        memcpy(rec->words + off, payload, len * 4u);
        rec->exp[w->chunk] = run->fixed ? h->exp : 0;
        rec->held[w->chunk] = 1;
    }
    worker_decode_result(run->r->dtype, run->fixed, run->r->op, e->p.world, payload, h->exp,
                         (char *)run->r->recv + off * 4u, len);
    if (!run->fixed && run->r->dtype == INAGG_INT32 && (h->flags & WIRE_FLAG_OVERFLOW))
        run->overflow = 1;
    if (run->fixed && h->exp == QUANT_EXP_NONFINITE)
        run->nonfinite = 1;
}

/* Check a received datagram; returns the local slot it is for, or (counted) -EBADMSG for one
 * that is not a valid result for this engine, -EALREADY for an answer to a round that is over. */
static int accept_result(engine_t *e, const run_t *run, const uint8_t *buf, size_t len,
                         wire_header_t *h)
{
    int opened = worker_open_packet(&e->p, buf, len, h) == 0;
    if (opened && !worker_packet_ours(&e->p, h) && worker_packet_stale(&e->p, h))
        return -EBADMSG; /* an older generation's switch: counted as stale */
    if (!opened || h->type != WIRE_RESULT || !worker_packet_ours(&e->p, h) ||
        h->slot % e->nthreads != e->index) {
        WORKER_CNT_ADD(e->c.invalid, 1);
        return -EBADMSG;
    }
    int k = (int)(h->slot / e->nthreads);
    const wslot_t *w = &e->ws[k];
    if (w->phase == PHASE_IDLE || h->round != w->round) {
        WORKER_CNT_ADD(e->c.duplicates, 1);
        return -EALREADY;
    }
    size_t want = w->phase == PHASE_PROBE ? 0 : sml_chunk_len(e, run, w->chunk);
    if (run->coded) { /* a chunk of exactly `want` values that decodes cleanly */
        int rc = -1;
        if (h->dtype == WIRE_CODED) {
            uint64_t t0 = util_now_ns();
            rc = codec_decode(e->codec, buf + worker_hdr_bytes(&e->p), (size_t)h->count * 4u,
                              e->dec, want, NULL, 0);
            uint64_t dt = util_now_ns() - t0;
            sml_count_step(&e->c, 0, dt, atomic_load(&e->onwire) - (w->armed ? 1u : 0u));
            sml_engine_mean(e, 0, dt);
        }
        if (rc < 0) {
            WORKER_CNT_ADD(e->c.invalid, 1);
            return -EBADMSG;
        }
        if (rc == 1) /* clamped at the float range: delivered, reported as non-finite */
            h->flags |= WIRE_FLAG_OVERFLOW;
        return k;
    }
    if (h->count != want || h->dtype != run->wire_dtype ||
        (w->phase == PHASE_DATA && run->fixed && h->exp != w->exp)) {
        WORKER_CNT_ADD(e->c.invalid, 1);
        return -EBADMSG;
    }
    /* The agreed exponent is the maximum of everyone's, so at least ours, and encodable. */
    if (run->fixed && h->next_exp != QUANT_EXP_ZERO && h->next_exp != QUANT_EXP_NONFINITE &&
        (h->next_exp < QUANT_EXP_MIN || h->next_exp > QUANT_EXP_MAX ||
         h->next_exp < w->sent_next_exp)) {
        WORKER_CNT_ADD(e->c.invalid, 1);
        return -EBADMSG;
    }
    return k;
}

static void scan_timers(engine_t *e, uint64_t now, uint64_t *next_deadline)
{
    uint64_t next = UINT64_MAX;
    int expired = 0;
    for (uint32_t k = 0; k < e->nlocal; k++) {
        wslot_t *w = &e->ws[k];
        if (w->phase == PHASE_IDLE || !w->armed)
            continue;
        if (now >= w->tm.deadline_ns) {
            /* backoff up to rto_max, or up to the coding floor where that is larger */
            uint32_t cap = e->code_floor_us > e->p.rto_max_us ? e->code_floor_us : e->p.rto_max_us;
            worker_timer_expired(&w->tm, cap, &e->c);
            queue_send(e, w);
            expired = 1;
        }
        if (w->tm.deadline_ns < next)
            next = w->tm.deadline_ns;
    }
    if (expired)
        rto_backoff(&e->rto);
    *next_deadline = next;
}

/* Run this engine's share of call r: 0, -EOVERFLOW / -EDOM (delivered, see proto.h), or a
 * failure with a reason in detail. */
/* What call r needs of this engine: chunks, wire type, the residual of error feedback. */
static void run_setup(engine_t *e, const worker_call_t *r, run_t *run)
{
    run->nchunks = (r->count + e->p.elems - 1) / e->p.elems;
    run->coded = r->dtype == INAGG_FLOAT32 && e->codec != NULL;
    run->fixed = !run->coded && r->dtype == INAGG_FLOAT32 && e->p.float_mode == INAGG_FLOAT_FIXED;
    run->wire_dtype = r->dtype == INAGG_INT32 ? WIRE_INT32
                      : run->coded            ? WIRE_CODED
                      : run->fixed            ? WIRE_FIXED32
                                              : WIRE_FLOAT32;

    run->resid = NULL;
    if (run->coded && r->resid && codec_is_lossy(&e->p.codec)) {
        run->resid = r->resid; /* the caller keeps one per tensor */
    } else if (run->coded && e->p.error_feedback && r->count > 0) {
        if (e->resid_len != r->count) { /* a new tensor shape: start from no residual */
            float *nr = calloc(r->count, sizeof(float));
            if (nr) {
                free(e->resid);
                e->resid = nr;
                e->resid_len = r->count;
            }
        }
        run->resid = e->resid_len == r->count ? e->resid : NULL;
    }
}

/* The n results just received: each answered slot sends its next chunk or goes idle.
 * Returns the slots that went idle; *last_progress: now when any result was accepted. */
static uint32_t take_results(engine_t *e, run_t *run, int n, uint64_t now, uint64_t *last_progress)
{
    uint32_t finished = 0;
    for (int i = 0; i < n; i++) {
        const uint8_t *buf = e->rx[i].data;
        size_t len = e->rx[i].len;
        wire_header_t h;
        int k = accept_result(e, run, buf, len, &h);
        if (k < 0)
            continue;
        wslot_t *w = &e->ws[k];
        worker_count_received(&e->c, len);
        worker_timer_answered(&w->tm, now, &e->c, &e->rto);
        answered(e, w);
        *last_progress = now;
        const uint32_t *payload = (const uint32_t *)(const void *)(buf + worker_hdr_bytes(&e->p));
        w->round++;
        if (w->phase == PHASE_PROBE) {
            w->exp = h.next_exp;
            w->phase = PHASE_DATA;
            send_current(e, run, w);
            continue;
        }
        deliver(e, run, w, &h, payload);
        w->chunk += e->p.slots;
        if (w->chunk < run->nchunks) {
            w->exp = h.next_exp;
            send_current(e, run, w);
        } else {
            w->phase = PHASE_IDLE;
            finished++;
        }
    }
    return finished;
}

/* Received packets into e->rx, waiting up to wait_ms: from the engine's endpoint, and with
 * a group from both (after a wait, only from those it found ready). A count, or -errno. */
static int engine_receive(engine_t *e, int wait_ms)
{
    if (!e->mc_tp)
        return transport_recv(e->tp, e->rx, 2 * ENGINE_RX_BATCH, wait_ms);
    int ready = -1;
    if (wait_ms > 0) {
        transport_t *const ts[2] = {e->tp, e->mc_tp};
        ready = transport_wait_ready_spin(ts, 2, wait_ms, e->p.poll_us, NULL);
        if (ready < 0)
            return ready;
    }
    int n = 0;
    if (ready < 0 || (ready & 2))
        n = transport_recv(e->mc_tp, e->rx, ENGINE_RX_BATCH, 0);
    if (n >= 0 && (ready < 0 || (ready & 1))) {
        int u = transport_recv(e->tp, e->rx + n, 2 * ENGINE_RX_BATCH - n, 0);
        n = u < 0 ? u : n + u;
    }
    return n;
}

int sml_engine_run(engine_t *e, const worker_call_t *r, char *detail, size_t dlen)
{
    run_t run = {.r = r};
    run_setup(e, r, &run);
    if (run.coded)
        sml_helper_attach(e, &run);
    uint64_t now = util_now_ns();
    uint32_t active = 0;
    e->onwire = 0;
    for (uint32_t k = 0; k < e->nlocal; k++) {
        e->ws[k].armed = 0;
        wslot_t *w = &e->ws[k];
        if (w->slot >= run.nchunks)
            continue;
        w->chunk = w->slot;
        w->phase = run.fixed ? PHASE_PROBE : PHASE_DATA;
        send_current(e, &run, w);
        active++;
    }
    int rc = worker_txq_flush(&e->tx);
    arm_sent(e);
    if (rc < 0)
        rc = set_err(detail, dlen, -EIO, "send failed: %s", strerror(-rc));
    now = util_now_ns();
    uint64_t last_progress = now, next_deadline = now;
    uint64_t timeout_ns = (uint64_t)e->p.timeout_ms * 1000000ull;
    while (active > 0 && rc == 0) {
        if (atomic_load_explicit(e->p.abort_flag, memory_order_acquire)) {
            rc = set_err(detail, dlen, -ECANCELED, "aborted: the job failed");
            break;
        }
        now = util_now_ns();
        int wait_ms = 0;
        if (next_deadline > now)
            wait_ms = (int)util_min_u64((next_deadline - now) / 1000000ull + 1, ENGINE_POLL_MS);
        int n = engine_receive(e, wait_ms);
        if (n < 0) {
            rc = set_err(detail, dlen, -EIO, "receive failed: %s", strerror(-n));
            break;
        }
        now = util_now_ns();
        active -= take_results(e, &run, n, now, &last_progress);
        /* A full batch means more results may wait unread (answers that came while this
         * thread was coding): read them before any timer may fire. */
        if ((now >= next_deadline || e->tx.n == 0) && n < 2 * ENGINE_RX_BATCH)
            scan_timers(e, util_now_ns(), &next_deadline);
        int frc = worker_txq_flush(&e->tx);
        arm_sent(e);
        if (frc < 0) {
            rc = set_err(detail, dlen, -EIO, "send failed: %s", strerror(-frc));
            break;
        }
        if (now - last_progress > timeout_ns) {
            rc = set_err(detail, dlen, -ETIMEDOUT,
                         "no result from the switch for %u ms (%u of this thread's slots waiting)",
                         e->p.timeout_ms, active);
            break;
        }
    }
    if (run.coded) /* the helper may not read the caller's tensor once this returns */
        sml_helper_detach(e);
    if (rc != 0) {
        /* Leave the slots consistent for no one: the job is unusable after a failure. */
        for (uint32_t k = 0; k < e->nlocal; k++) {
            e->ws[k].phase = PHASE_IDLE;
            e->ws[k].armed = 0;
        }
        e->onwire = 0;
        return rc;
    }
    if (run.overflow)
        return set_err(detail, dlen, -EOVERFLOW,
                       "int32 sum wrapped around in at least one element");
    if (run.nonfinite) {
        return set_err(detail, dlen, -EDOM,
                       "a float32 input held NaN or Inf; affected chunks are NaN");
    }
    return 0;
}

void sml_engine_add_stats(const engine_t *e, inagg_stats_t *acc)
{
    worker_counters_add(&e->c, acc);
}

void sml_engine_add_transport_stats(const engine_t *e, inagg_transport_stats_t *acc)
{
    worker_transport_stats_add(e->tp, acc);
    if (e->mc_tp)
        worker_transport_stats_add(e->mc_tp, acc);
}

int sml_engine_add_codec_stats(const engine_t *e, inagg_codec_stats_t *acc)
{
    worker_counters_add_codec(&e->c, acc);
    worker_counters_add_codec(&e->hc, acc);
    acc->chunks_ahead += atomic_load_explicit(&e->hc.chunks_encoded, memory_order_relaxed);
    return e->codec != NULL;
}
