/*
 * recovery.h - the decisions of a fail-over's recovery (failover.c), as pure functions: what
 * the ranks' state vectors say must be recovered, and for each chunk of the interrupted
 * allreduce who contributes what. Every rank computes them from the same allreduced vectors,
 * so every rank reaches the same plan without another message.
 *
 * The vectors travel as int32 allreduces on the new switch: each rank fills only its own
 * words (or bits) and zeros elsewhere, so the sum is everyone's values side by side.
 *   state:   3 words per rank: the op it is at (ops finished, or the one it is in), whether it
 *            is in that op's call, the barriers it passed (each modulo 2^31).
 *   holders: per chunk, RECOVERY_WORDS(world) words; bit r % 31 of word r / 31 is set when
 *            rank r holds the chunk's result (31 bits a word: the sum never wraps).
 */
#ifndef INAGG_WORKER_RECOVERY_H
#define INAGG_WORKER_RECOVERY_H

#include <stddef.h>
#include <stdint.h>

#define RECOVERY_STATE_WORDS 3u
#define RECOVERY_WORDS(world) (((world) + 30u) / 31u)
#define RECOVERY_MASK 0x7fffffffu

/* This rank's words of the state vector (the vector zeroed by the caller). */
void recovery_state_fill(uint32_t *state, uint32_t rank, uint64_t op, int in_call,
                         uint64_t barriers);

typedef struct recovery_verdict {
    uint32_t op_low, op_high; /* the lowest and highest op of any rank (mod 2^31) */
    int recover; /* 1: op_low is recovered chunk by chunk (every rank is in it or past it) */
    uint32_t barriers_max; /* the most barriers any rank passed (mod 2^31) */
} recovery_verdict_t;

/* The verdict of the allreduced state vector: 0, or -EPROTO with the reason in err (ranks
 * more than one op apart, or one past an op another has not started: states no run
 * reaches). */
int recovery_decide(uint32_t world, const uint32_t *state, recovery_verdict_t *v, char *err,
                    size_t errlen);

/* Set rank's bit for chunk in holders (nchunks * RECOVERY_WORDS(world) words). */
void recovery_mark(uint32_t *holders, uint32_t world, uint64_t chunk, uint32_t rank);

enum recovery_action {
    RECOVERY_DONE = 0, /* every rank holds the chunk's result */
    RECOVERY_DELIVER, /* some rank does: the lowest one (from[chunk]) hands its result on */
    RECOVERY_REDUCE /* none does: every rank's input is reduced again */
};

typedef struct recovery_counts {
    uint64_t done, deliver, reduce;
} recovery_counts_t;

/* For each chunk of the allreduced holders: its action, and for RECOVERY_DELIVER the rank
 * that contributes its result (every other rank contributes zeros). */
void recovery_plan(uint32_t world, uint64_t nchunks, const uint32_t *holders, uint8_t *action,
                   uint32_t *from, recovery_counts_t *counts);

#endif /* INAGG_WORKER_RECOVERY_H */
