/*
 * server.h - the switch's internal parts and how they share state: the job table (written
 * by the control thread, read by the dataplane threads), the dataplane threads, the control
 * thread. Only src/switchd/server/ includes this.
 *
 * A dataplane thread bumps its `epoch` at every loop head: a retired job is freed once every
 * running thread's epoch changed since it was unpublished (lifecycle.c).
 */
#ifndef INAGG_SWITCH_SERVER_H
#define INAGG_SWITCH_SERVER_H

#include <pthread.h>
#include <stdatomic.h>

#include "switchd/server/job.h"
#include "switchd/server/lifecycle.h"
#include "switchd/switchd.h"

typedef struct dp_thread {
    struct inagg_switch *sw;
    uint32_t index;
    transport_t *tp; /* the transport queue this thread serves */
    pthread_t tid;
    _Atomic uint64_t epoch; /* bumped at every loop head */
    _Atomic int running;
    stat_counters_t c; /* the STAT_SWITCH counters (stats.h) */
    struct dp_txq *txq; /* packets queued while a batch is handled (dataplane.c) */
    transport_rx_t *rx; /* a received batch (dataplane.c) */
    int rx_max;
    /* the transport's fault counts, last seen */
    uint64_t fault_dropped, fault_duplicated, fault_reordered;
} INAGG_ALIGNED dp_thread_t;

/* What remains of a job after it retired, so its counters can still be read. */
typedef struct retired_job {
    uint16_t id;
    char name[64];
    const switch_proto_ops_t *proto;
    uint32_t world;
    uint64_t v[STAT_COUNT]; /* its counters' totals */
} retired_job_t;

#define SWITCH_RETIRED_KEEP 16

struct inagg_switch {
    switch_config_t cfg;
    char listen_text[64];
    uint16_t port;
    _Atomic uint32_t slots_used; /* written by the control thread, read by stats anywhere */
    int listen_fd;
    _Atomic int stop;
    char stop_reason[128]; /* set before stop: what SHUTDOWN tells the members */
    int attached; /* inline aggregation: the pass is attached (switch.h) */
    uint64_t start_ms;
    pthread_t control_tid;
    int control_running;
    dp_thread_t *threads;
    _Atomic(job_t *) jobs[SWITCH_MAX_JOBS];
    uint16_t next_job_id;
    pthread_mutex_t stats_lock; /* serialises stats printing against job retirement */
    retired_job_t retired[SWITCH_RETIRED_KEEP]; /* the last jobs to retire (under stats_lock) */
    uint64_t nretired;
    _Atomic uint64_t jobs_rejoined; /* jobs activated under a generation > 0 (a fail-over) */
    /* Every retired job's counters summed (under stats_lock): with the live jobs' they make
     * the switch-wide per-job totals that /metrics shows, which never go down. */
    uint64_t retired_sum[STAT_COUNT];
    _Atomic uint64_t ctl_counts[CTL_STAT_COUNT]; /* the control plane's refusals (stats.h) */
    _Atomic uint32_t ctl_connections; /* open control connections */
    /* A leaf switch: the local job that is member of upstream job id i (written by the
     * control thread, read by the dataplane for upstream packets), and the upstream threads
     * still running (upstream.c). */
    _Atomic(job_t *) up_jobs[SWITCH_MAX_JOBS];
    _Atomic uint32_t up_threads;
    /* Limits (limits.c): new ones waiting for the control thread, and those in force. */
    pthread_mutex_t limits_lock;
    switch_limits_t limits_pending;
    _Atomic int limits_changed;
    _Atomic uint32_t limits_now[SWITCH_LIMIT_COUNT];
};

void *dataplane_main(void *arg);
/* A dataplane queue's buffers (before its first pass) and their release (after its last):
 * 0 or -ENOMEM. dataplane_main does both itself; inline aggregation (switch.h) uses them. */
int dataplane_setup(dp_thread_t *t);
void dataplane_teardown(dp_thread_t *t);
void *control_main(void *arg);

/* Keep a retiring job's counters in sw->retired as they are now (under stats_lock, when it
 * is unpublished, so stats show it without a gap); returns its record's number. */
uint64_t stats_retire(struct inagg_switch *sw, const job_t *j);
/* After its grace period: bring record k up to the job's final counters (if it is still
 * kept) and log them (under stats_lock). */
void stats_retire_final(struct inagg_switch *sw, const job_t *j, uint64_t k);

static inline uint64_t server_now_ms(void) { return util_now_ns() / 1000000ull; }

#endif /* INAGG_SWITCH_SERVER_H */
