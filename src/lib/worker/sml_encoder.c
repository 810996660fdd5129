/*
 * sml_encoder.c - the coding of a switchml engine (compressed jobs): one chunk encoded with
 * error feedback, the coding time's means and the timeout floor they set, and the encoder
 * helper thread that codes each slot's next chunk into the slot's spare buffer while the
 * engine (proto_switchml.c) sends, receives and decodes.
 */
#include <errno.h>
#include <string.h>

#include "lib/base/util.h"
#include "lib/kernels/vec.h"
#include "lib/wire/wire.h"
#include "lib/worker/quant.h"
#include "lib/worker/sml_engine_int.h"

/* The coding floor may pass rto_max_us (rto.h) but stays below half the progress timeout,
 * so a lost packet is still sent again before the call gives up. */
static uint32_t code_floor_cap_us(const worker_params_t *p)
{
    uint64_t cap = (uint64_t)p->timeout_ms * 500u;
    return cap > UINT32_MAX ? UINT32_MAX : (uint32_t)cap;
}

/* Count one coding step of dt ns in c; overlapped when `others` of the engine's packets
 * were on the wire meanwhile. */
void sml_count_step(worker_counters_t *c, int encode, uint64_t dt, uint32_t others)
{
    if (encode) {
        WORKER_CNT_ADD(c->chunks_encoded, 1);
        WORKER_CNT_ADD(c->encode_ns, dt);
    } else {
        WORKER_CNT_ADD(c->chunks_decoded, 1);
        WORKER_CNT_ADD(c->decode_ns, dt);
    }
    if (others > 0)
        WORKER_CNT_ADD(c->overlap_ns, dt);
}

/* A coding time into the engine's mean times, and the timeout's coding floor refreshed. */
void sml_engine_mean(engine_t *e, int encode, uint64_t dt)
{
    rto_code_mean(encode ? &e->enc_ns : &e->dec_ns, (double)dt);
    e->code_floor_us = rto_code_floor_us(e->enc_ns, e->dec_ns, e->p.world, e->p.slots,
                                         e->p.sw_queues, code_floor_cap_us(&e->p));
    atomic_store_explicit(&e->c.code_floor_us, e->code_floor_us, memory_order_relaxed);
}

/* Encode chunk `chunk` of the run with cd into payload (with error feedback: the chunk plus
 * its residual, and the residual then updated): the payload's words. A chunk holding NaN or
 * Inf goes as coded zeros with WIRE_FLAG_OVERFLOW in *flags. *enc_ns: the encode time.
 * Called by the engine thread or its helper, never both for one chunk. */
uint16_t sml_encode_chunk(engine_t *e, const coder_t *cd, const run_t *run, uint64_t chunk,
                          uint32_t *payload, uint8_t *flags, uint64_t *enc_ns)
{
    size_t off = chunk * e->p.elems, len = sml_chunk_len(e, run, chunk);
    size_t cap = e->pkt_cap - worker_hdr_bytes(&e->p);
    const float *src = (const float *)run->r->send + off;
    float *res = run->resid ? run->resid + off : NULL;
    if (res) { /* error feedback: send the chunk plus what was dropped last time */
        for (size_t i = 0; i < len; i++)
            cd->xbuf[i] = src[i] + res[i];
        src = cd->xbuf;
    }
    uint64_t t0 = util_now_ns();
    long l = codec_encode(cd->ctx, src, len, payload, cap);
    *enc_ns = util_now_ns() - t0;
    sml_count_step(cd->c, 1, *enc_ns, atomic_load_explicit(&e->onwire, memory_order_relaxed));
    if (l < 0) { /* a NaN or infinity: send zeros flagged, every rank's result is */
        memset(cd->dec, 0, len * sizeof(float));
        l = codec_encode(cd->ctx, cd->dec, len, payload, cap);
        *flags |= WIRE_FLAG_OVERFLOW;
        if (res)
            memset(res, 0, len * sizeof(float));
    } else if (res) { /* what the codec dropped goes into the next step */
        uint64_t t1 = util_now_ns();
        int drc = codec_decode(cd->ctx, payload, (size_t)l, cd->dec, len, NULL, 0);
        sml_count_step(cd->c, 0, util_now_ns() - t1,
                       atomic_load_explicit(&e->onwire, memory_order_relaxed));
        if (drc >= 0)
            for (size_t i = 0; i < len; i++)
                res[i] = src[i] - cd->dec[i];
        else
            memset(res, 0, len * sizeof(float));
    }
    return (uint16_t)((size_t)(l < 0 ? 0 : l) / 4u);
}

/* The helper: encode each slot's next chunk (the lowest one wanted) into its spare buffer. */
void *sml_helper_main(void *arg)
{
    engine_t *e = arg;
    pthread_mutex_lock(&e->hmu);
    while (!e->hstop) {
        wslot_t *w = NULL;
        for (uint32_t k = 0; e->hrun && k < e->nlocal; k++) {
            wslot_t *x = &e->ws[k];
            if (x->spare_state == SPARE_FREE && x->want != NO_CHUNK && (!w || x->want < w->want))
                w = x;
        }
        if (!w) {
            pthread_cond_wait(&e->hcv, &e->hmu);
            continue;
        }
        const run_t *run = e->hrun;
        uint64_t chunk = w->want;
        uint8_t *buf = w->spare;
        w->spare_state = SPARE_BUSY;
        w->spare_chunk = chunk;
        pthread_mutex_unlock(&e->hmu);
        uint8_t fl = 0;
        uint64_t dt = 0;
        uint16_t words = sml_encode_chunk(
            e, &e->hcd, run, chunk, (uint32_t *)(void *)(buf + worker_hdr_bytes(&e->p)), &fl, &dt);
        pthread_mutex_lock(&e->hmu);
        w->spare_words = words;
        w->spare_flags = fl;
        w->spare_enc_ns = dt;
        w->spare_state = SPARE_READY;
        pthread_cond_broadcast(&e->hcv);
    }
    pthread_mutex_unlock(&e->hmu);
    return NULL;
}

/* The helper starts coding for run (nothing wanted yet: send_current asks slot by slot). */
void sml_helper_attach(engine_t *e, run_t *run)
{
    if (!e->helper_started)
        return;
    pthread_mutex_lock(&e->hmu);
    for (uint32_t k = 0; k < e->nlocal; k++) {
        e->ws[k].want = NO_CHUNK;
        e->ws[k].spare_state = SPARE_FREE;
    }
    e->hrun = run;
    pthread_mutex_unlock(&e->hmu);
}

/* The run ends: wait until the helper is done with any chunk, and forget what it coded. */
void sml_helper_detach(engine_t *e)
{
    if (!e->helper_started)
        return;
    pthread_mutex_lock(&e->hmu);
    for (uint32_t k = 0; k < e->nlocal; k++)
        e->ws[k].want = NO_CHUNK;
    for (;;) {
        int busy = 0;
        for (uint32_t k = 0; k < e->nlocal; k++)
            busy |= e->ws[k].spare_state == SPARE_BUSY;
        if (!busy)
            break;
        pthread_cond_wait(&e->hcv, &e->hmu); /* one chunk's encoding: bounded */
    }
    for (uint32_t k = 0; k < e->nlocal; k++)
        e->ws[k].spare_state = SPARE_FREE;
    e->hrun = NULL;
    pthread_mutex_unlock(&e->hmu);
}

/* Sending chunk w->chunk: take the helper's packet for it if it has one (waiting while it is
 * still coding that very chunk), and ask for the slot's next chunk. 1 when taken (w->pkt is
 * now the coded packet: *words and *flags set), 0 when the engine must encode it. */
int sml_take_spare(engine_t *e, const run_t *run, wslot_t *w, uint16_t *words, uint8_t *flags)
{
    if (!e->helper_started)
        return 0;
    int got = 0;
    uint64_t dt = 0;
    pthread_mutex_lock(&e->hmu);
    while (w->spare_state == SPARE_BUSY && w->spare_chunk == w->chunk)
        pthread_cond_wait(&e->hcv, &e->hmu);
    if (w->spare_state == SPARE_READY && w->spare_chunk == w->chunk) {
        uint8_t *t = w->pkt; /* answered: free for the helper */
        w->pkt = w->spare;
        w->spare = t;
        *words = w->spare_words;
        *flags |= w->spare_flags;
        dt = w->spare_enc_ns;
        got = 1;
    }
    if (w->spare_state == SPARE_READY)
        w->spare_state = SPARE_FREE;
    uint64_t next = w->chunk + e->p.slots;
    w->want = next < run->nchunks ? next : NO_CHUNK;
    pthread_cond_broadcast(&e->hcv);
    pthread_mutex_unlock(&e->hmu);
    if (got)
        sml_engine_mean(e, 1, dt);
    return got;
}