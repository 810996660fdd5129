/*
 * route.h - which way one MPI allreduce goes: through the inagg switch or to MPI's own
 * collective. The one decision the PMPI interposer (pmpi.c) and the Open MPI component
 * (src/apps/ompi/) share, pure C without MPI: the caller states the call's facts (is the op a
 * sum, is the datatype one the switch adds, its size, its communicator's locality) and the
 * policy (the size threshold, whether communicators on one host go through the switch), and
 * gets the route and, for MPI, the reason in words.
 *
 * The default policy cannot lose against MPI: a communicator whose ranks all share one host
 * stays with MPI's shared memory (the switch's loopback round trip costs more than shared
 * memory's copies at every size), and a call of fewer than ROUTE_MIN_BYTES_DEFAULT bytes stays
 * with MPI (below that, MPI's few message steps finish before a switch round trip does).
 */
#ifndef INAGG_ROUTE_H
#define INAGG_ROUTE_H

#include <stddef.h>

/*
 * The default size threshold, 64 KiB: docs/MODEL.md's calibration puts a switch allreduce at
 * 2 hop_s (153 us) plus U/B, and Open MPI's 4-rank allreduce at 2 log2(4) msg_s (60 us) plus
 * 1.5 U/B (the ring's 2(n-1)/n); at 1 Gbit/s they cross near 31 KB, doubled for a margin.
 */
#define ROUTE_MIN_BYTES_DEFAULT (64u * 1024u)

/* Where every rank of a communicator runs. */
typedef enum route_locality {
    ROUTE_HOSTS_UNKNOWN = 0, /* not found out (treated as several hosts) */
    ROUTE_ONE_HOST, /* every rank on this host */
    ROUTE_MANY_HOSTS /* at least one rank elsewhere */
} route_locality_t;

/* The facts of one allreduce, as the caller found them. */
typedef struct route_call {
    int has_job; /* the communicator has a switch job (joined, not finalized) */
    int op_is_sum; /* MPI_SUM */
    int dtype_ok; /* a datatype the switch adds (4-byte int or float, and allowed) */
    long count; /* elements */
    size_t elem_bytes; /* bytes per element */
    int has_recv; /* a receive buffer */
    int buffers_overlap; /* send and receive buffers overlap (MPI_IN_PLACE is not overlap) */
    route_locality_t hosts; /* the communicator's locality */
} route_call_t;

/* What the user asked for. */
typedef struct route_policy {
    size_t min_bytes; /* calls of fewer bytes stay with MPI (0: none do for their size) */
    long min_count; /* calls of fewer elements stay with MPI (the interposer's older knob) */
    int one_host_switch; /* 1: a communicator on one host goes through the switch anyway */
} route_policy_t;

#define ROUTE_POLICY_INIT                                                                          \
    {                                                                                              \
        ROUTE_MIN_BYTES_DEFAULT, 1, 0                                                              \
    }

/*
 * The route of one call: NULL when it goes through the switch, else why MPI keeps it (a
 * sentence, in `why` when it needs numbers, else a static text). The checks run in a fixed
 * order, so the reason is the first that holds: one host first (a communicator on one host
 * may have no job at all), then the job, the op, the datatype, the buffers, the size.
 */
const char *route_decide(const route_policy_t *p, const route_call_t *c, char *why, size_t len);

/*
 * A byte count with an optional K, M or G suffix (powers of 1024), as the environment and the
 * MCA parameters spell the threshold: 0 and the count, or -EINVAL (and a sentence naming
 * `what`) for anything else.
 */
int route_parse_bytes(const char *text, const char *what, size_t *out, char *err, size_t errlen);

#endif
