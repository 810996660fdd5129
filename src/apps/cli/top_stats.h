/*
 * top_stats.h - what `inagg top` shows, read from a running switch: its text STATS
 * (switch/stats.c) fetched over the control port and parsed into a snapshot, and the rates
 * between two snapshots.
 */
#ifndef INAGG_CLI_TOP_STATS_H
#define INAGG_CLI_TOP_STATS_H

#include <stdint.h>

#define TOP_MAX_JOBS 256

typedef struct top_job {
    uint32_t id, world, slots;
    char name[64], state[16], protocol[16];
    uint32_t gen; /* the job's generation: > 0 after its ranks failed over to this switch */
    uint64_t contributions, rounds, bytes_in, bytes_out, drops;
} top_job_t;

typedef struct top_snapshot {
    uint64_t taken_ns;
    char listen[64];
    uint32_t threads, slots_used, slots_total, connections;
    double uptime_s;
    uint64_t packets_in, packets_out, drops_pre_job, refusals;
    int njobs;
    top_job_t jobs[TOP_MAX_JOBS];
    int retired; /* retired jobs the switch still lists */
    uint64_t rejoined; /* jobs rejoined after a fail-over (jobs_rejoined=) */
    int fabric; /* the switch runs an L2 fabric (inagg switch --l2) */
    uint64_t ip_fragments; /* IP fragments to the switch its fabric dropped (agg_fragment) */
} top_snapshot_t;

/* STATS from the switch at host_port into s: 0, or -errno (the switch is not there or did
 * not answer within timeout_ms). */
int top_fetch(const char *host_port, int timeout_ms, top_snapshot_t *s);

/* Per-second rate of a counter between prev and cur (0 when it went down: a restart). */
double top_rate(uint64_t prev, uint64_t cur, uint64_t prev_ns, uint64_t cur_ns);

/* The job of that id in s, or NULL. */
const top_job_t *top_find_job(const top_snapshot_t *s, uint32_t id);

#endif /* INAGG_CLI_TOP_STATS_H */
