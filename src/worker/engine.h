/*
 * engine.h - the worker's streaming aggregation engine (SwitchML Algorithm 4), one per
 * engine thread, each with its own UDP socket and its own share of the job's slots.
 *
 * A tensor is cut into chunks of `elems` elements; chunk c uses slot c % slots. The engine
 * sends the first chunk of each of its slots (the initial window), and every result that
 * comes back clocks out the next chunk on the same slot, one round later (so in the other
 * copy of the slot). Each outstanding packet has a timer; on expiry the same packet is sent
 * again, with exponential backoff. The timeout adapts to the measured round-trip time
 * (RFC 6298 estimator, Karn's rule: retransmitted packets give no sample).
 *
 * float32 in block fixed point needs every rank to scale a chunk with the same exponent.
 * Each packet carries the exponent of the next chunk on its slot (look-ahead) and the switch
 * returns the maximum with the result; the first chunk on each slot is preceded by an
 * exponent probe: a round with no payload whose only job is to agree on that exponent.
 */
#ifndef INAGG_WORKER_ENGINE_H
#define INAGG_WORKER_ENGINE_H

#include <netinet/in.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/faults.h"
#include "inagg.h"

typedef struct engine_params {
    uint32_t index, nthreads;         /* this engine thread and how many there are */
    uint32_t rank, world;
    uint16_t job;
    uint32_t token;
    uint32_t slots, elems;            /* the job's pool size and elements per packet */
    inagg_float_mode_t float_mode;
    struct sockaddr_in sw_addr;       /* switch address; port = switch's base port */
    uint32_t sw_threads, sw_base;     /* slot i goes to port + (sw_base + i) % sw_threads */
    uint32_t rto_us, rto_min_us, rto_max_us, timeout_ms;
    int socket_buffer;
    const char *faults;               /* fault spec for both directions, or NULL */
    _Atomic int *abort_flag;          /* non-zero: stop and return INAGG_ERR_JOB_FAILED */
    int chunk_tags;                   /* p4sgd: `chunk` carries the chunk index (optimizer
                                         jobs), so acknowledgements never ride on it */
} engine_params_t;

typedef struct engine_request {
    const void *send;
    void *recv;
    size_t count;
    inagg_dtype_t dtype;
    inagg_op_t op;
    int set;                          /* a parameter upload (WIRE_FLAG_SET) */
} engine_request_t;

typedef struct engine engine_t;

/* What both engines (this one and p4engine.h) need from the parameters: */
/* the switch dataplane thread, and so the UDP port offset, that serves pool slot `slot`; */
static inline uint32_t engine_slot_thread(const engine_params_t *p, uint32_t slot)
{
    return (p->sw_base + slot) % p->sw_threads;
}
/* the address the packets of pool slot `slot` go to; */
struct sockaddr_in engine_slot_addr(const engine_params_t *p, uint32_t slot);
/* the fault injection of both directions from p->faults, each rank and `stream` drawing its
 * own decisions from the spec's seed. 0, or -1 with a reason in err. */
int engine_faults_init(const engine_params_t *p, uint32_t stream, faults_t *in, faults_t *out,
                       char *err, size_t errlen);
/* a UDP socket on an ephemeral port with `buffer` bytes of socket buffer: the fd, or -1 with a
 * reason in err; */
int engine_open_socket(int buffer, char *err, size_t errlen);
/* the receive batch: message i reads into arena + i * cap. */
void engine_rx_init(struct mmsghdr *msgs, struct iovec *iov, uint8_t *arena, int n, size_t cap);

/* Open the socket and allocate buffers. NULL with a reason in err on failure. */
engine_t *engine_create(const engine_params_t *p, char *err, size_t errlen);
void engine_destroy(engine_t *e);

/* Run this engine's share of an allreduce to completion. Returns INAGG_OK,
 * INAGG_ERR_OVERFLOW / INAGG_ERR_NONFINITE (result delivered), or a failure
 * (timeout, job failed, system) with a reason in detail. */
inagg_result_t engine_run(engine_t *e, const engine_request_t *r, char *detail, size_t dlen);

/* Add this engine's counters to *acc. */
void engine_add_stats(const engine_t *e, inagg_stats_t *acc);

#endif /* INAGG_WORKER_ENGINE_H */
