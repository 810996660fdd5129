/*
 * mactable.h - the fabric's MAC address table: learning (source MAC -> port), lookup of a
 * destination, ageing. Open addressing with a bounded probe; written and read by the
 * forwarding thread only.
 */
#ifndef INAGG_FABRIC_MACTABLE_H
#define INAGG_FABRIC_MACTABLE_H

#include <stdint.h>

typedef struct mac_entry {
    uint64_t key; /* the MAC in the low 48 bits, bit 63 set when in use */
    uint64_t seen_ns; /* last time a frame came from it */
    uint16_t port;
    uint8_t fixed; /* never ages (the switch's own MAC) */
} mac_entry_t;

typedef struct mactable {
    mac_entry_t *e;
    uint32_t cap; /* a power of two */
    uint64_t age_ns;
    uint64_t learned, moved, aged, full;
} mactable_t;

int mactable_init(mactable_t *t, uint32_t capacity, uint64_t age_ns);
void mactable_free(mactable_t *t);

/* A frame from `mac` arrived on `port` at now_ns. */
void mactable_learn(mactable_t *t, const uint8_t *mac, uint16_t port, uint64_t now_ns);
/* A permanent entry. */
void mactable_fix(mactable_t *t, const uint8_t *mac, uint16_t port);
/* The port of `mac`, or -ENOENT when unknown or aged out (then the entry is removed). */
int mactable_lookup(mactable_t *t, const uint8_t *mac, uint64_t now_ns);
/* Entries in use (for stats; walks the table). */
uint32_t mactable_count(const mactable_t *t, uint64_t now_ns);

#endif /* INAGG_FABRIC_MACTABLE_H */
