/*
 * optjob.h - a job's model parameters and optimizer state, held by the switch (the in-switch
 * optimizer: workers push gradients, the switch applies the optimizer as soon as a chunk's
 * gradients are summed, and returns the chunk's new parameters).
 *
 * The parameter vector is cut into chunks of the job's elements per packet; chunk c holds
 * parameters [c * elems, c * elems + len_c). Its optimizer state is a block of its own (the
 * layout kernels/optim.h expects for len_c parameters) and it has its own step counter.
 *
 * A round of chunk c completes once, whatever the losses (the slot protocols guarantee it);
 * optjob_complete() is called exactly then:
 *   - a gradient round: g = sum / world (the AVERAGE of the workers' gradients, in float32),
 *     one optimizer step with step = ++steps[c], and the new parameters become the round's
 *     result, which is what retransmissions get back too;
 *   - an upload round (WIRE_FLAG_SET): the sum becomes the parameters (rank 0 sends the
 *     values, the others zeros), no step.
 * Pure state: no sockets; chunk c is only ever touched by the dataplane thread that owns the
 * slot its round runs on.
 */
#ifndef INAGG_SWITCH_OPTJOB_H
#define INAGG_SWITCH_OPTJOB_H

#include <stddef.h>
#include <stdint.h>

#include "lib/kernels/optim.h"

enum optjob_init { OPTJOB_INIT_ZERO = 0, OPTJOB_INIT_SEEDED = 1 };

typedef struct optjob {
    optim_config_t cfg;
    uint64_t nparams;
    uint32_t elems; /* parameters per chunk (the job's elements per packet) */
    uint64_t nchunks;
    unsigned words; /* optimizer state words per parameter */
    float *params; /* [nparams] */
    float *state; /* chunk c's block at c * elems * words */
    uint64_t *steps; /* [nchunks] optimizer steps applied to each chunk */
} optjob_t;

/* Bytes optjob_create would allocate. */
uint64_t optjob_bytes(const optim_config_t *c, uint64_t nparams, uint32_t elems);

/* The seeded initial value of parameter i (what OPTJOB_INIT_SEEDED stores): uniform in
 * [-0.05, 0.05), a function of (seed, i) only, so a worker can compute it too. */
float optjob_seeded_value(uint64_t seed, uint64_t i);

/* Allocate and initialise into *out: 0, or -EINVAL (bad config) or -ENOMEM with a reason in
 * err (*out NULL). */
int optjob_create(const optim_config_t *c, uint64_t nparams, uint32_t elems, enum optjob_init init,
                  uint64_t seed, optjob_t **out, char *err, size_t errlen);
void optjob_free(optjob_t *o);

/* Elements a round of chunk `chunk` must carry, or 0 if there is no such chunk. */
uint32_t optjob_chunk_len(const optjob_t *o, uint64_t chunk);

/* A round of `chunk` completed with `sum_be` (n float32 in network order, n ==
 * optjob_chunk_len) summed over `world` ranks. Applies the step (or the upload when `set`)
 * and overwrites sum_be with the chunk's parameters in network order. scratch holds n floats.
 * Returns 0, or -EINVAL if chunk/n do not match (nothing touched). */
int optjob_complete(optjob_t *o, uint64_t chunk, uint32_t *sum_be, uint32_t n, uint32_t world,
                    int set, float *scratch);

#endif /* INAGG_SWITCH_OPTJOB_H */
