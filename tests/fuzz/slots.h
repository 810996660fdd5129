/*
 * slots.h - drive the switch's two slot state machines (switchml: src/switchd/server/slot.h, p4sgd:
 * src/switchd/server/p4slot.h) with decoded packets, as the dataplane does, and check their
 * invariants after every packet; abort() on a violation so the fuzzer records the input.
 *
 * This file and slots.c are the only fuzzing code that knows the slot interfaces: when the
 * slot machines are renamed or moved, adapt these two files (and the source list of the
 * `wire` target in tests/fuzz/run).
 */
#ifndef INAGG_FUZZ_SLOTS_H
#define INAGG_FUZZ_SLOTS_H

#include <stdint.h>

#include "lib/wire/wire.h"

#define FUZZ_SLOTS 4 /* slots per machine; a packet's slot is taken modulo this */
#define FUZZ_MAX_ELEMS 16 /* the job's elements per packet is 1..this */

/* A fresh job: `world` ranks (1..64), `elems` elements per packet (1..FUZZ_MAX_ELEMS). */
void slots_reset(uint32_t world, uint32_t elems);

/* A packet that passed wire_decode(); payload_be holds h->count words. Packets the
 * dataplane would drop before the slot (rank >= world, count > elems, results and
 * confirmations) are dropped here too. */
void slots_feed(const wire_header_t *h, const uint32_t *payload_be);

#endif /* INAGG_FUZZ_SLOTS_H */
