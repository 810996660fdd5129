/*
 * stats.h - every counter of the switch, drop reasons included, in one table (stats.c): its
 * name, what it counts, where it is kept and where it is shown. The text and JSON stats and
 * the log line of a retiring job are all written from that table.
 *
 * Where a counter is kept:
 *   STAT_SWITCH   per dataplane thread (dp_thread_t): packets in and out, fault injection,
 *                 and the drops that happen before a packet can be attributed to a job
 *   STAT_JOB      per (job, dataplane thread) (job_thread_t), summed when read
 * Every counter has one writer (STAT_ADD: a relaxed atomic store), so the packet path takes
 * no lock and does no atomic read-modify-write.
 */
#ifndef INAGG_SWITCH_STATS_H
#define INAGG_SWITCH_STATS_H

#include <stdatomic.h>
#include <stdint.h>

#include "lib/wire/wire.h"

enum stat_id {
    /* Drop reasons (PROTOCOL.md section 6). The first WIRE_STATUS_COUNT are wire_decode()'s
     * (index 0, WIRE_OK, is never counted). */
    DROP_UNKNOWN_JOB = WIRE_STATUS_COUNT,
    DROP_BAD_TOKEN,
    DROP_NOT_RESULT_PATH,
    DROP_JOB_NOT_ACTIVE,
    DROP_BAD_RANK,
    DROP_BAD_SLOT,
    DROP_WRONG_THREAD,
    DROP_BAD_COUNT,
    DROP_DTYPE_NOT_ALLOWED,
    DROP_DUP_OPEN,
    DROP_STALE,
    DROP_AHEAD,
    DROP_MISMATCH,
    DROP_WRONG_PROTOCOL,
    DROP_DUP_ACK,
    DROP_BAD_CHUNK,
    DROP_BAD_CODE,
    DROP_UP_STALE,
    DROP_BAD_MAC,
    DROP_MISSING_MAC,
    DROP_UNEXPECTED_MAC,
    DROP_REASON_COUNT,
    /* What happened, switch-wide ... */
    STAT_PACKETS_IN = DROP_REASON_COUNT,
    STAT_PACKETS_OUT,
    STAT_INJECTED_DROPS,
    STAT_INJECTED_DUPS,
    STAT_INJECTED_REORDERS,
    STAT_POLLS_EMPTY,
    STAT_SPIN_BANS,
    /* ... and per job. */
    STAT_CONTRIBUTIONS,
    STAT_ROUNDS,
    STAT_RESULTS_SENT,
    STAT_RESULTS_MULTICAST,
    STAT_RESENDS,
    STAT_ACKS,
    STAT_CONFIRMS_SENT,
    STAT_CONFIRMS_PIGGYBACKED,
    STAT_CONFIRM_RESENDS,
    STAT_OPT_STEPS,
    STAT_OPT_UPLOADS,
    STAT_BYTES_IN,
    STAT_BYTES_OUT,
    STAT_CODEC_NS,
    STAT_CODEC_VALUES,
    STAT_UP_SENT,
    STAT_UP_RESENT,
    STAT_UP_RESULTS,
    STAT_UP_ACKS,
    STAT_UP_CONFIRMS,
    STAT_COUNT
};

/* The control plane's refusals (PROTOCOL.md "Admission"): switch-wide, written by the control
 * thread, shown under "control" in the stats. */
enum ctl_stat {
    CTL_CONN_LIMIT = 0, /* connection refused: the switch's connection table is full */
    CTL_CONN_PER_ADDR, /* connection refused: too many from one address */
    CTL_IDLE_CLOSED, /* connection without a job closed after the idle timeout */
    CTL_CONN_EVICTED, /* connection without a job closed to make room (a limit reached) */
    CTL_JOINING_EVICTED, /* a job still waiting for ranks removed: its address registered too
                            many such (CTL_MAX_JOINING_PER_ADDR) */
    CTL_REQUEST_TIMEOUT, /* closed: a request line, or its reply, not done within the deadline */
    CTL_OUTPUT_FULL, /* closed: replies piled up past the output limit (a peer not reading) */
    CTL_LINE_TOO_LONG, /* closed: a line longer than CTL_LINE_MAX */
    CTL_JOB_QUOTA, /* JOIN refused: more slots than one job may hold */
    CTL_ADDR_QUOTA, /* JOIN refused: the address's jobs would hold more than its quota */
    CTL_POOL_FULL, /* JOIN refused: not enough free slots */
    CTL_AUTH_FAILED, /* JOIN refused: wrong or missing job secret proof */
    CTL_AUTH_LIMITED, /* JOIN refused: too many failed authentications from the address */
    CTL_STAT_COUNT
};
extern const char *const ctl_stat_names[CTL_STAT_COUNT];

/* Where a counter is shown. */
enum stat_flags {
    STAT_SWITCH = 1u << 0, /* kept per dataplane thread (else per job and thread) */
    STAT_DROP = 1u << 1, /* a drop reason: listed under "drops" */
    STAT_TEXT = 1u << 2, /* on the text line of a job (or of the switch) */
    STAT_JSON = 1u << 3, /* in a job's JSON object (or the switch's) */
    STAT_RETIRED_TEXT = 1u << 4, /* on the text line of a retired job */
    STAT_RETIRED_JSON = 1u << 5, /* in a retired job's JSON object */
    STAT_LOG = 1u << 6, /* in the log line of a retiring job (see `log`) */
    STAT_PROTOCOL = 1u << 7, /* ... but only for protocols that report it (proto.h) */
};

typedef struct stat_info {
    const char *name; /* the text and JSON key; a drop reason's name */
    const char *meaning; /* one line: when it is incremented */
    unsigned flags; /* enum stat_flags */
    const char *log; /* its words in the retiring job's log line ("result resends") */
    int log_under; /* > 0: shown in parentheses after counter log_under ("(N on results)") */
} stat_info_t;

extern const stat_info_t stat_table[STAT_COUNT];

/* The name of a counter or drop reason ("unknown" out of range). */
const char *stat_name(int id);

#define STAT_ADD(field, n)                                                                         \
    atomic_store_explicit(&(field), atomic_load_explicit(&(field), memory_order_relaxed) + (n),    \
                          memory_order_relaxed)
#define STAT_GET(field) atomic_load_explicit(&(field), memory_order_relaxed)

/* One writer's counters: indexed by enum stat_id. */
typedef struct stat_counters {
    _Atomic uint64_t v[STAT_COUNT];
} stat_counters_t;

#endif /* INAGG_SWITCH_STATS_H */
