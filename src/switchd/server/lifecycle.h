/*
 * lifecycle.h - a job's life on the switch: its states, the events that move it between
 * them, and the one function that applies an event (lifecycle.c).
 *
 *   JOINING --JOIN_COMPLETE--> ACTIVE                 every rank joined (JOINED to all)
 *   JOINING --JOIN_COMPLETE--> LINKING                a leaf switch: joining its upstream
 *   LINKING --UPSTREAM_JOINED--> ACTIVE               the upstream job was joined
 *   JOINING, LINKING --JOIN_REFUSED--> FAILED         ERR to every member, connections closed
 *   LINKING --UPSTREAM_LOST--> FAILED                 refused as JOIN_REFUSED is
 *   ACTIVE --FAULT, UPSTREAM_LOST--> FAILED           FAILED <reason> to every member
 *   ACTIVE --RANK_LOST--> FAILED                      a member closed without LEAVE
 *   JOINING, LINKING --RANK_LOST--> (same)            its seat is free again
 *   JOINING, LINKING, ACTIVE --SHUTDOWN--> DRAINING   SHUTDOWN <reason> to every member
 *   FAILED --SHUTDOWN, RANK_LOST, FAULT--> FAILED     (told already)
 *   DRAINING --RANK_LOST--> DRAINING                  (SHUTDOWN told the members why)
 *   any but RETIRED --ALL_LEFT--> RETIRED             unpublished, freed after a grace period
 *   JOINING, LINKING --SUPERSEDED--> FAILED           refused as JOIN_REFUSED is
 *   ACTIVE, FAILED --SUPERSEDED--> FAILED             FAILED <reason>, connections closed
 *   DRAINING --SUPERSEDED--> DRAINING                 (the switch stops: nothing to do)
 *
 * Any other pair is refused: counted (control_t.illegal_transitions), logged, and the job is
 * left as it was. The callers are the control thread's files: admission (admit.c) applies
 * JOIN_COMPLETE and JOIN_REFUSED, the job checks (watch.c) the deadlines and the upstream
 * link's state, the connection loop (control.c) RANK_LOST, ALL_LEFT and SHUTDOWN. The
 * lifecycle acts through the connections' output (conn.c), the upstream link (upstream.c) and
 * the retired jobs' counters (stats.c), and calls none of its callers.
 *
 * Fail-over (a job whose ranks lost their switch joins a switch again under generation g+1,
 * JOIN gen=): a switch that still holds the job's older generation - it was frozen, or the
 * ranks moved faster than it noticed they left - supersedes it (SUPERSEDED, admit.c), and the
 * new generation registers once the old one retired. A restarted switch has no old job: the
 * new generation simply joins, and counts as rejoined when it activates.
 *
 * The dataplane reads a job's state (atomically) only to serve it or not: job_serves().
 */
#ifndef INAGG_SWITCH_LIFECYCLE_H
#define INAGG_SWITCH_LIFECYCLE_H

#include <stdatomic.h>
#include <stdint.h>

#include "lib/wire/ctlmsg.h"
#include "switchd/server/job.h"

enum life_state {
    LIFE_JOINING = 0, /* registered, waiting for its ranks */
    LIFE_LINKING, /* a leaf switch: every rank joined, joining the upstream switch's job */
    LIFE_ACTIVE, /* aggregating */
    LIFE_DRAINING, /* the switch stops: the members were told SHUTDOWN */
    LIFE_FAILED, /* the members were told why; retires when the last one closes */
    LIFE_RETIRED, /* unpublished; freed once no dataplane thread can hold it */
    LIFE_STATES
};

enum life_event {
    LIFE_JOIN_COMPLETE = 0, /* the last rank joined */
    LIFE_UPSTREAM_JOINED, /* a leaf switch: the upstream job was joined */
    LIFE_JOIN_REFUSED, /* the job cannot be joined: cause.refusal, cause.text */
    LIFE_UPSTREAM_LOST, /* the upstream switch's job failed or its link broke: cause.text */
    LIFE_FAULT, /* an active job fails: cause.text (a barrier missed, a rank silent) */
    LIFE_RANK_LOST, /* rank cause.rank's connection closed without LEAVE */
    LIFE_SHUTDOWN, /* the switch stops: cause.text is what SHUTDOWN says */
    LIFE_ALL_LEFT, /* the job's last member connection closed */
    LIFE_SUPERSEDED, /* its ranks joined it again under a newer generation: cause.text */
    LIFE_EVENTS
};

typedef struct life_cause {
    uint32_t rank; /* LIFE_RANK_LOST */
    enum wire_refusal refusal; /* LIFE_JOIN_REFUSED: the ERR line's refusal */
    const char *text; /* the reason the members are told */
} life_cause_t;

typedef struct control control_t;

/* Apply event ev to job j (cause: its details, NULL when it has none), doing the transition's
 * side effects. 0, or -EPERM when ev is illegal in j's state (counted, logged, nothing done). */
int life_apply(control_t *ctl, job_t *j, enum life_event ev, const life_cause_t *cause);

/* The state event ev moves a job in state `from` to (the leaf switch's JOIN_COMPLETE aside,
 * which goes to LINKING), or -1 when ev is illegal there. */
int life_next(enum life_state from, enum life_event ev);

/* FAILED <reason> to rank `rank` of failed job j on fd (a rank that failed it by its silence
 * is told so in its own words). */
void life_tell_failed(control_t *ctl, int fd, const job_t *j, uint32_t rank);

/* Free the retired jobs whose grace period has passed (all of them, waiting, if `wait`). */
void life_reap(control_t *ctl, int wait);

const char *life_event_name(enum life_event ev);

/* A state's name in STATS, `inagg top` and /metrics: a leaf's job joining its upstream is
 * still "joining" to its members. */
static inline const char *life_state_name(int s)
{
    static const char *const names[LIFE_STATES] = {"joining",  "joining", "active",
                                                   "draining", "failed",  "retired"};
    return s >= 0 && s < LIFE_STATES ? names[s] : "unknown";
}

/* Joining: a JOIN of the job's name takes a seat in it. */
static inline int life_is_joining(int s) { return s == LIFE_JOINING || s == LIFE_LINKING; }

/* The dataplane serves the job's packets: an active job's, and a draining one's that was
 * active (its members were told SHUTDOWN and may still be finishing a call). */
static inline int job_serves(const job_t *j)
{
    int s = atomic_load_explicit(&j->state, memory_order_acquire);
    return s == LIFE_ACTIVE || (s == LIFE_DRAINING && j->activated_ms != 0);
}

#endif /* INAGG_SWITCH_LIFECYCLE_H */
