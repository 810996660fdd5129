/*
 * authlimit.h - the rate limit on failed JOIN authentications (PROTOCOL.md "Admission"),
 * counted per (client address, job name): past AUTH_FAIL_LIMIT failures within
 * AUTH_WINDOW_MS, that address's JOINs of that job are refused until the window ends. Other
 * jobs from the same address (co-located users behind one host or NAT) are not affected.
 * The table is bounded; when full, the entry whose window started first makes room (a
 * guesser who cycles names to push a job's entry out pays a failure per name). Used by the
 * control thread only.
 */
#ifndef INAGG_SWITCH_AUTHLIMIT_H
#define INAGG_SWITCH_AUTHLIMIT_H

#include <stdint.h>

typedef struct auth_ent {
    uint8_t addr[16]; /* peers.h's key of the address */
    uint64_t job; /* hash of the job name */
    uint32_t fails; /* 0: free */
    uint64_t window_ms; /* when the first failure of the current window happened */
} auth_ent_t;

typedef struct auth_limit {
    auth_ent_t *e;
    uint32_t cap;
    uint32_t limit; /* failures allowed per window */
    uint64_t window_ms;
} auth_limit_t;

/* 0 or -ENOMEM. */
int authlimit_init(auth_limit_t *t, uint32_t cap, uint32_t limit, uint64_t window_ms);
void authlimit_free(auth_limit_t *t);
/* How many ms the pair stays locked out (0: it may try). */
uint64_t authlimit_locked_ms(const auth_limit_t *t, const uint8_t addr[16], const char *job,
                             uint64_t now_ms);
/* One more failure of the pair. */
void authlimit_fail(auth_limit_t *t, const uint8_t addr[16], const char *job, uint64_t now_ms);

#endif /* INAGG_SWITCH_AUTHLIMIT_H */
