/*
 * faults.h - seeded fault injection on a send or receive path: drop, duplicate, reorder.
 *
 * Spec strings: "drop=0.01,dup=0.005,reorder=0.01,seed=7" (each probability in [0, 1]; any
 * subset; empty or NULL disables). The same seed gives the same decisions, so a failing run
 * can be replayed. These are the decisions; the faulty transport (faulty.c) applies them
 * around any other transport, on the worker's and the switch's endpoints alike, configured
 * from options, flags or $INAGG_FAULTS.
 *
 * Sends: a packet chosen for reordering is copied and held back, then sent right after the
 * next packet that goes out (on a later call if need be). Receives: duplicates are processed
 * twice, reordered ones swap places with a later packet of the same batch.
 */
#ifndef INAGG_FAULTS_H
#define INAGG_FAULTS_H

#include <stddef.h>
#include <stdint.h>

#include "lib/base/util.h"
#include "lib/transport/transport.h"

#define FAULTS_MAX_PACKET 65536

typedef struct faults {
    int enabled;
    double drop, dup, reorder;
    uint64_t seed;
    util_rng_t rng;
    uint64_t dropped, duplicated, reordered; /* decisions taken */
    int held_len[2]; /* bytes held in each buffer (-1: empty) */
    int held_cur; /* buffer the next held packet goes to */
    transport_addr_t held_to[2];
    uint8_t *held[2]; /* FAULTS_MAX_PACKET bytes each, allocated when reorder > 0 */
} faults_t;

/* Parse spec into f (zeroed first). Returns 0, or -EINVAL (-ENOMEM) with a reason in err. */
int faults_parse(faults_t *f, const char *spec, char *err, size_t errlen);
void faults_free(faults_t *f);

/* Decide the fate of n outgoing packets. Writes the packets to actually send into out
 * (capacity at least 2 * n + 1) and returns how many. A held packet is copied (header and
 * payload) into f's buffer, which stays valid until the next packet is held. */
int faults_on_send(faults_t *f, const transport_tx_t *in, int n, transport_tx_t *out);

/* Decide the fate of n received messages: writes into order (capacity at least 2 * n) the
 * indices to process, in processing order, and returns how many. */
int faults_on_recv(faults_t *f, int n, int *order);

#endif /* INAGG_FAULTS_H */
