/*
 * codecjob.h - a compressed job's codec state on the switch: each dataplane thread's codec
 * context and scratch (a contribution decoded to float), and each slot copy's coded result,
 * kept until the slot's next round so resends need no re-encoding.
 *
 * The protocol decodes a WIRE_CODED contribution into network-order float32 words and hands
 * them to its slot as a WIRE_FLOAT32 contribution of the chunk's element count; the slot sums
 * in float; on completion the sum is re-encoded once in the job's mode (codecjob_encode_result)
 * and that chunk is what every rank receives. A chunk that fails to decode is dropped and
 * counted (bad_chunk_code). A sum that left the float range is saturated to +-FLT_MAX before
 * encoding and the result carries WIRE_FLAG_OVERFLOW.
 *
 * Error feedback (lossy modes unless the job joined with feedback=0): what the re-encoding
 * dropped from a slot's sum is kept with the slot, tagged with the chunk index, and added to
 * that chunk's next sum before it is encoded. A slot that carries another chunk than its
 * residual's starts again from zero, so feedback works when a tensor's chunks fit in the
 * job's slots (slots x elems values, 262,144 with the defaults) and never adds one chunk's
 * residual to another.
 */
#ifndef INAGG_SWITCH_CODECJOB_H
#define INAGG_SWITCH_CODECJOB_H

#include <stddef.h>
#include <stdint.h>

#include "lib/codec/codec.h"

typedef struct codecjob codecjob_t;

/* State for nthreads dataplane threads and nslots slots (two copies each) of chunks of at
 * most elems values. NULL when out of memory. */
codecjob_t *codecjob_create(const codec_spec_t *s, int feedback, uint32_t nthreads, uint32_t nslots,
                            uint32_t elems);
void codecjob_free(codecjob_t *cj);
/* Bytes codecjob_create allocates. */
uint64_t codecjob_bytes(const codec_spec_t *s, uint32_t nthreads, uint32_t nslots, uint32_t elems);

/* Decode a coded contribution (words 32-bit words) on dataplane thread `thread` into that
 * thread's scratch as network-order float32 words: the element count, or 0 (a bad chunk);
 * *saturated 1 if values past the float range were clamped. */
uint32_t codecjob_decode(codecjob_t *cj, uint32_t thread, const uint32_t *payload, uint32_t words,
                         const uint32_t **out_be, int *saturated);
/* Encode the completed sum of chunk `chunk` in (slot, copy) (n network-order float32 words),
 * plus the slot's residual when feedback is on, into that copy's result buffer: its length in
 * words, *out the buffer, *saturated 1 if values were clamped. */
uint32_t codecjob_encode_result(codecjob_t *cj, uint32_t thread, uint32_t slot, uint32_t copy,
                                uint32_t chunk, const uint32_t *sum_be, uint32_t n,
                                const uint32_t **out, int *saturated);
/* The coded result last encoded for (slot, copy) and its length in words (resends). */
uint32_t codecjob_result(const codecjob_t *cj, uint32_t slot, uint32_t copy, const uint32_t **out);

#endif /* INAGG_SWITCH_CODECJOB_H */
