/*
 * sml_engine_int.h - what the switchml engine's two files share: the engine's and its slots'
 * state (proto_switchml.c runs the slots over the network; sml_encoder.c is the encoder
 * helper thread of compressed jobs and the coding both threads do). Private to them.
 */
#ifndef INAGG_WORKER_SML_ENGINE_INT_H
#define INAGG_WORKER_SML_ENGINE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "lib/codec/codec.h"
#include "lib/transport/transport.h"
#include "lib/worker/proto.h"
#include "lib/worker/rto.h"
#include "lib/worker/sml_engine.h"

#define ENGINE_RX_BATCH 64
#define ENGINE_POLL_MS 5

enum phase { PHASE_IDLE = 0, PHASE_PROBE, PHASE_DATA };
enum spare_state { SPARE_FREE = 0, SPARE_BUSY, SPARE_READY };
#define NO_CHUNK UINT64_MAX

typedef struct wslot {
    uint32_t slot; /* index in the job's pool */
    uint32_t round; /* round of the packet in flight, or the next one when idle */
    uint64_t chunk; /* chunk in flight */
    int phase;
    int16_t exp; /* agreed exponent of the chunk in flight (fixed point) */
    int16_t sent_next_exp; /* look-ahead exponent this rank sent with the packet in flight */
    worker_timer_t tm; /* of the packet in flight */
    int armed; /* its packet left (flushed) and its timer runs */
    /* The encoder helper's packet for the slot's next chunk; under the engine's hmu. */
    uint8_t *spare;
    uint64_t spare_chunk; /* the chunk spare holds or is being coded into it */
    uint64_t want; /* the chunk the engine sends next on this slot (NO_CHUNK: none) */
    int spare_state; /* SPARE_FREE, SPARE_BUSY (helper coding), SPARE_READY */
    uint16_t spare_words; /* payload words of the ready packet */
    uint8_t spare_flags; /* WIRE_FLAG_OVERFLOW: the chunk held NaN or Inf */
    uint64_t spare_enc_ns; /* how long its encoding took */
    uint8_t *pkt;
    uint32_t pkt_len;
    transport_addr_t dst; /* the switch queue that serves this slot */
} wslot_t;

typedef struct run run_t;

/* One thread's codec: the engine's own, or its encoder helper's. */
typedef struct coder {
    codec_ctx_t *ctx;
    float *dec, *xbuf; /* [elems]: scratch */
    worker_counters_t *c; /* where its coding is counted */
} coder_t;

struct engine {
    worker_params_t p;
    uint32_t index, nthreads; /* this engine thread and how many there are */
    transport_t *tp; /* this engine's endpoint */
    transport_t *mc_tp; /* the job's multicast group's results (one engine only), or NULL */
    uint32_t nlocal; /* slots this engine owns */
    wslot_t *ws; /* [nlocal]: local k is pool slot index + k * nthreads */
    uint8_t *pkt_arena;
    size_t pkt_cap;
    transport_rx_t rx[2 * ENGINE_RX_BATCH]; /* fault injection may duplicate a batch */
    worker_txq_t tx; /* packets queued for the next send */
    rto_estimator_t rto;
    worker_counters_t c;
    codec_ctx_t *codec; /* the job's codec (NULL: none) */
    float *dec; /* [elems]: the result chunk just decoded, or scratch when sending */
    float *xbuf; /* [elems]: a chunk plus its residual (error feedback) */
    float *resid; /* error feedback: per element of the tensor, what the codec dropped
                               last time (only this engine's chunks are used) */
    size_t resid_len;
    _Atomic uint32_t onwire; /* slots whose packet left and has no answer yet (the helper
                                reads it for the overlap counter) */
    /* The encoder helper (compressed jobs): a second thread that encodes each slot's next
     * chunk into the slot's spare buffer while the engine sends, receives and decodes. */
    pthread_t helper;
    int helper_started, hstop; /* hstop under hmu */
    pthread_mutex_t hmu;
    pthread_cond_t hcv;
    run_t *hrun; /* under hmu: the run the helper codes for (NULL: none) */
    coder_t hcd; /* the helper's codec */
    worker_counters_t hc; /* the helper's coding counters (one writer each) */
    uint8_t *spare_arena;
    double enc_ns, dec_ns; /* mean coding time per chunk (rto_code_mean) */
    uint32_t code_floor_us; /* the timeout's floor for coding time (rto_code_floor_us) */
};

/* The request being run, with what every chunk needs. */
struct run {
    const worker_call_t *r;
    uint64_t nchunks;
    uint8_t wire_dtype;
    int fixed;
    int coded; /* float32 through the job's codec (WIRE_CODED) */
    float *resid; /* ... with error feedback: the tensor's residual (the caller's, or
                     e->resid), NULL without */
    int overflow, nonfinite;
};

static inline size_t sml_chunk_len(const engine_t *e, const run_t *run, uint64_t chunk)
{
    uint64_t off = chunk * e->p.elems;
    uint64_t left = run->r->count - off;
    return left < e->p.elems ? (size_t)left : e->p.elems;
}

/* sml_encoder.c: the coding both threads do and the encoder helper thread. */
/* Count one chunk's coding (encode or decode) taking dt ns while `others` slots were on the
 * wire. */
void sml_count_step(worker_counters_t *c, int encode, uint64_t dt, uint32_t others);
/* Fold one chunk's coding time into the engine's means and its timeout's coding floor. */
void sml_engine_mean(engine_t *e, int encode, uint64_t dt);
/* Encode chunk of run into payload with cd: the payload words; *flags, *dt_ns set. */
uint16_t sml_encode_chunk(engine_t *e, const coder_t *cd, const run_t *run, uint64_t chunk,
                          uint32_t *payload, uint8_t *flags, uint64_t *enc_ns);
/* The helper thread's body (arg: the engine); attach hands it a run, detach takes it back
 * and waits until it codes nothing. */
void *sml_helper_main(void *arg);
void sml_helper_attach(engine_t *e, run_t *run);
void sml_helper_detach(engine_t *e);
/* Take the helper's ready packet for w's next chunk into w's packet: 1 (words, flags set), or
 * 0 when it has none (the engine codes the chunk itself). */
int sml_take_spare(engine_t *e, const run_t *run, wslot_t *w, uint16_t *words, uint8_t *flags);

#endif
