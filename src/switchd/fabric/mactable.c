/*
 * mactable.c - MAC learning and ageing (see mactable.h).
 */
#include "switchd/fabric/mactable.h"

#include <errno.h>
#include <stdlib.h>

#include "lib/base/util.h"

#define USED (1ull << 63)
#define PROBE 16

static uint64_t key_of(const uint8_t *m)
{
    return USED | (uint64_t)m[0] << 40 | (uint64_t)m[1] << 32 | (uint64_t)m[2] << 24 |
           (uint64_t)m[3] << 16 | (uint64_t)m[4] << 8 | m[5];
}

static uint32_t hash_of(uint64_t k) { return (uint32_t)((k * 0x9e3779b97f4a7c15ull) >> 32); }

int mactable_init(mactable_t *t, uint32_t capacity, uint64_t age_ns)
{
    uint32_t c = 64;
    while (c < capacity && c < (1u << 22))
        c <<= 1;
    *t = (mactable_t){.cap = c, .age_ns = age_ns};
    t->e = calloc(c, sizeof(*t->e));
    return t->e ? 0 : -ENOMEM;
}

void mactable_free(mactable_t *t) { INAGG_FREE_CLEAR(t->e); }

static int expired(const mactable_t *t, const mac_entry_t *e, uint64_t now)
{
    return !e->fixed && now - e->seen_ns > t->age_ns;
}

void mactable_learn(mactable_t *t, const uint8_t *mac, uint16_t port, uint64_t now_ns)
{
    uint64_t k = key_of(mac);
    uint32_t h = hash_of(k);
    mac_entry_t *free_slot = NULL;
    for (uint32_t i = 0; i < PROBE; i++) {
        mac_entry_t *e = &t->e[(h + i) & (t->cap - 1)];
        if (e->key == k) {
            if (e->fixed)
                return;
            if (expired(t, e, now_ns))
                t->aged++, t->learned++;
            else if (e->port != port)
                t->moved++;
            e->port = port;
            e->seen_ns = now_ns;
            return;
        }
        if (!free_slot && (!(e->key & USED) || expired(t, e, now_ns)))
            free_slot = e;
    }
    if (!free_slot) {
        t->full++;
        return;
    }
    if (free_slot->key & USED)
        t->aged++;
    *free_slot = (mac_entry_t){.key = k, .seen_ns = now_ns, .port = port};
    t->learned++;
}

void mactable_fix(mactable_t *t, const uint8_t *mac, uint16_t port)
{
    uint64_t k = key_of(mac);
    uint32_t h = hash_of(k);
    for (uint32_t i = 0; i < PROBE; i++) {
        mac_entry_t *e = &t->e[(h + i) & (t->cap - 1)];
        if (e->key == k || !(e->key & USED)) {
            *e = (mac_entry_t){.key = k, .port = port, .fixed = 1};
            return;
        }
    }
}

int mactable_lookup(mactable_t *t, const uint8_t *mac, uint64_t now_ns)
{
    uint64_t k = key_of(mac);
    uint32_t h = hash_of(k);
    for (uint32_t i = 0; i < PROBE; i++) {
        mac_entry_t *e = &t->e[(h + i) & (t->cap - 1)];
        if (e->key == k) {
            if (expired(t, e, now_ns)) {
                e->key = 0;
                t->aged++;
                return -ENOENT;
            }
            return e->port;
        }
    }
    return -ENOENT;
}

uint32_t mactable_count(const mactable_t *t, uint64_t now_ns)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < t->cap; i++)
        if ((t->e[i].key & USED) && !expired(t, &t->e[i], now_ns))
            n++;
    return n;
}
