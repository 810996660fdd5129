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
 * memory's copies at every size), and a call of fewer than the threshold's bytes stays with
 * MPI. The threshold comes from, first to last: an explicit setting (INAGG_MIN_BYTES,
 * coll_inagg_min_bytes), the route_min_bytes that `inagg model calibrate` measured on a testbed
 * (the file INAGG_CALIBRATION or coll_inagg_calibration names), ROUTE_MIN_BYTES_DEFAULT.
 */
#ifndef INAGG_ROUTE_H
#define INAGG_ROUTE_H

#include <stddef.h>

/*
 * The default size threshold, 1 MiB, measured: on a 4-host testbed at 1 Gbit/s (the software
 * fabric, Open MPI's own allreduce over TCP, docs/INTEGRATIONS.md) the switch lost at 64 and
 * 256 KiB (0.42x and 0.83x of Open MPI, quiet) and won from 1 MiB up (1.75x, 2.48x, 2.50x at
 * 1, 4 and 16 MiB). The closed-form estimate it replaces (a switch allreduce at 2 hops plus
 * U/B against Open MPI's 2 log2(n) message steps plus 1.5 U/B: a crossover near 31 KB) was
 * wrong by more than ten times, on both sides: through the software switch a small allreduce
 * moves its bytes at 0.4-0.6 of the link (each frame costs the fabric and the switch CPU, and
 * at 64 KiB the frames, not the link, set the time), and Open MPI's 64 KiB messages pass the
 * links' token buckets in one burst, faster than 1.5 U/B. The two costs then grow at nearly the
 * same rate per byte, so they cross only where Open MPI's ring starts to wait for its slowest
 * host at every step: between 256 KiB and 1 MiB. A calibration of the network in use
 * (`inagg model calibrate`, its route_min_bytes) replaces the default.
 */
#define ROUTE_MIN_BYTES_DEFAULT (1024u * 1024u)

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
    char min_bytes_from[200]; /* where min_bytes came from, for INAGG_VERBOSE=2: "set by
                                 NAME", "from calibration FILE" or "the default" */
} route_policy_t;

#define ROUTE_POLICY_INIT                                                                          \
    {                                                                                              \
        ROUTE_MIN_BYTES_DEFAULT, 1, 0, "the default"                                               \
    }

/*
 * The route of one call: NULL when it goes through the switch (and then `why` says its size
 * against the threshold and where the threshold came from), else why MPI keeps it (a sentence,
 * in `why` when it needs numbers, else a static text). The checks run in a fixed order, so the
 * reason is the first that holds: one host first (a communicator on one host may have no job
 * at all), then the job, the op, the datatype, the buffers, the size.
 */
const char *route_decide(const route_policy_t *p, const route_call_t *c, char *why, size_t len);

/*
 * A byte count with an optional K, M or G suffix (powers of 1024), as the environment and the
 * MCA parameters spell the threshold: 0 and the count, or -EINVAL (and a sentence naming
 * `what`) for anything else.
 */
int route_parse_bytes(const char *text, const char *what, size_t *out, char *err, size_t errlen);

/*
 * The threshold `inagg model calibrate` measured: "route_min_bytes" of the file at `path` (the
 * JSON object it writes), a whole number of bytes. 0, or a negative errno and a sentence naming
 * `what` (the setting that named the file) and the cause: the file cannot be read, has no
 * route_min_bytes (calibrated without a testbed), or holds no byte count there.
 */
int route_read_calibration(const char *path, const char *what, size_t *out, char *err,
                           size_t errlen);

/*
 * p->min_bytes and p->min_bytes_from by precedence: `setting` (the explicit threshold, named
 * `setting_name`) when given and valid, else the calibration file `calibration` (named
 * `calibration_name`) when given and usable, else ROUTE_MIN_BYTES_DEFAULT. NULL or "" means not
 * given. 0, or -EINVAL when a given source was unusable: then err says why each was passed
 * over and what the threshold is instead (the policy is set all the same).
 */
int route_set_min_bytes(route_policy_t *p, const char *setting, const char *setting_name,
                        const char *calibration, const char *calibration_name, char *err,
                        size_t errlen);

#endif
