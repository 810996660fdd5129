/* authlimit.c - failed authentications per (address, job) (see authlimit.h). */
#include "switchd/server/authlimit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/util.h"

int authlimit_init(auth_limit_t *t, uint32_t cap, uint32_t limit, uint64_t window_ms)
{
    *t = (auth_limit_t){.cap = cap, .limit = limit, .window_ms = window_ms};
    t->e = calloc(cap ? cap : 1, sizeof(*t->e));
    return t->e ? 0 : -ENOMEM;
}

void authlimit_free(auth_limit_t *t)
{
    INAGG_FREE_CLEAR(t->e);
    t->cap = 0;
}

static uint64_t name_hash(const char *s) /* FNV-1a */
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

static int live(const auth_limit_t *t, const auth_ent_t *e, uint64_t now_ms)
{
    return e->fails && now_ms - e->window_ms < t->window_ms;
}

static auth_ent_t *find(const auth_limit_t *t, const uint8_t addr[16], uint64_t job)
{
    for (uint32_t i = 0; i < t->cap; i++)
        if (t->e[i].fails && t->e[i].job == job && memcmp(t->e[i].addr, addr, 16) == 0)
            return &t->e[i];
    return NULL;
}

uint64_t authlimit_locked_ms(const auth_limit_t *t, const uint8_t addr[16], const char *job,
                             uint64_t now_ms)
{
    const auth_ent_t *e = find(t, addr, name_hash(job));
    if (!e || !live(t, e, now_ms) || e->fails < t->limit)
        return 0;
    return t->window_ms - (now_ms - e->window_ms);
}

void authlimit_fail(auth_limit_t *t, const uint8_t addr[16], const char *job, uint64_t now_ms)
{
    uint64_t h = name_hash(job);
    auth_ent_t *e = find(t, addr, h);
    if (e && !live(t, e, now_ms))
        e->fails = 0; /* its window ended: a new one starts */
    if (!e || e->fails == 0) {
        if (!e) { /* a free entry, or the one whose window started first */
            for (uint32_t i = 0; i < t->cap; i++) {
                auth_ent_t *x = &t->e[i];
                if (!live(t, x, now_ms)) {
                    e = x;
                    break;
                }
                if (!e || x->window_ms < e->window_ms)
                    e = x;
            }
            if (!e)
                return;
        }
        memcpy(e->addr, addr, 16);
        e->job = h;
        e->fails = 0;
        e->window_ms = now_ms;
    }
    e->fails++;
}
