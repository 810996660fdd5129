/*
 * recovery.c - a fail-over's recovery decisions (recovery.h): the state verdict and the
 * per-chunk plan, pure functions of the allreduced vectors.
 */
#include "lib/worker/recovery.h"

#include <errno.h>

#include "lib/base/errmsg.h"

void recovery_state_fill(uint32_t *state, uint32_t rank, uint64_t op, int in_call,
                         uint64_t barriers)
{
    state[RECOVERY_STATE_WORDS * rank] = (uint32_t)(op & RECOVERY_MASK);
    state[RECOVERY_STATE_WORDS * rank + 1] = in_call ? 1u : 0u;
    state[RECOVERY_STATE_WORDS * rank + 2] = (uint32_t)(barriers & RECOVERY_MASK);
}

/* a - b modulo 2^31, as a signed distance */
static int32_t op_diff(uint32_t a, uint32_t b)
{
    uint32_t d = (a - b) & RECOVERY_MASK;
    return d & 0x40000000u ? (int32_t)(d | 0x80000000u) : (int32_t)d;
}

int recovery_decide(uint32_t world, const uint32_t *state, recovery_verdict_t *v, char *err,
                    size_t errlen)
{
    *v = (recovery_verdict_t){.op_low = state[0], .op_high = state[0]};
    for (uint32_t r = 0; r < world; r++) {
        const uint32_t *s = state + RECOVERY_STATE_WORDS * r;
        if (op_diff(s[0], v->op_low) < 0)
            v->op_low = s[0];
        if (op_diff(s[0], v->op_high) > 0)
            v->op_high = s[0];
        if (op_diff(s[2], v->barriers_max) > 0 || r == 0)
            v->barriers_max = s[2];
        if (s[1] > 1)
            return set_err(err, errlen, -EPROTO, "rank %u sent a bad recovery state", r);
    }
    if (op_diff(v->op_high, v->op_low) > 1)
        return set_err(err, errlen, -EPROTO,
                       "the ranks are %d allreduces apart (at most one can be)",
                       op_diff(v->op_high, v->op_low));
    /* op_low can hold results somewhere only when every rank contributed to it: each one is
     * in its call, or past it. */
    v->recover = 1;
    for (uint32_t r = 0; r < world; r++) {
        const uint32_t *s = state + RECOVERY_STATE_WORDS * r;
        if (s[0] == v->op_low && !s[1])
            v->recover = 0;
    }
    if (!v->recover && v->op_high != v->op_low)
        return set_err(err, errlen, -EPROTO,
                       "a rank finished allreduce %u that another one has not started", v->op_low);
    return 0;
}

void recovery_mark(uint32_t *holders, uint32_t world, uint64_t chunk, uint32_t rank)
{
    holders[chunk * RECOVERY_WORDS(world) + rank / 31u] |= 1u << (rank % 31u);
}

void recovery_plan(uint32_t world, uint64_t nchunks, const uint32_t *holders, uint8_t *action,
                   uint32_t *from, recovery_counts_t *counts)
{
    const uint32_t words = RECOVERY_WORDS(world);
    *counts = (recovery_counts_t){0};
    for (uint64_t c = 0; c < nchunks; c++) {
        const uint32_t *h = holders + c * words;
        uint32_t held = 0, lowest = UINT32_MAX;
        for (uint32_t r = 0; r < world; r++)
            if (h[r / 31u] & (1u << (r % 31u))) {
                held++;
                if (lowest == UINT32_MAX)
                    lowest = r;
            }
        from[c] = lowest;
        if (held == world) {
            action[c] = RECOVERY_DONE;
            counts->done++;
        } else if (held > 0) {
            action[c] = RECOVERY_DELIVER;
            counts->deliver++;
        } else {
            action[c] = RECOVERY_REDUCE;
            counts->reduce++;
        }
    }
}
