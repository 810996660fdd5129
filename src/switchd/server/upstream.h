/*
 * upstream.h - a leaf switch's membership in its upstream switch (PROTOCOL.md "Hierarchy").
 *
 * When every rank of a local job has joined, the job's lifecycle starts one upstream thread
 * for the job. It joins the upstream switch's job of the same name as rank
 * cfg.upstream_rank of cfg.upstream_world (proving the job's secret from the verifier, when
 * the job has one), then watches that control connection: the upstream job failing or the
 * connection dropping fails the local job. The control thread reads the thread's state every
 * tick (upstream_state, from watch.c): the local job is activated once the upstream job is
 * joined (upstream_attach), or fails with the upstream's reason. When the local job retires
 * cleanly the thread sends LEAVE; when it fails the thread just closes, which fails the
 * upstream job for the other leaves. This file calls nothing else of the control thread.
 *
 * The dataplane never touches this: the control thread copies what it needs (job id, token,
 * rank, the upstream queues) into job->up before activation.
 */
#ifndef INAGG_SWITCH_UPSTREAM_H
#define INAGG_SWITCH_UPSTREAM_H

#include <stddef.h>

#include "switchd/server/server.h"

enum upstream_state { UPSTREAM_JOINING = 0, UPSTREAM_READY, UPSTREAM_FAILED };

/* Start the upstream thread of job j (every local rank joined; `contributors`: the hosts whose
 * data the job sums) and set j->upj. 0, or -ENOMEM (or -pthread_create's error). */
int upstream_begin(struct inagg_switch *sw, job_t *j, uint32_t contributors);
/* The state of job j's upstream thread (j->upj set); UPSTREAM_FAILED with why in reason. */
enum upstream_state upstream_state(const job_t *j, char *reason, size_t cap);
/* UPSTREAM_READY: put the upstream job's dataplane membership into j->up and publish j as
 * the member of that upstream job (sw->up_jobs). 0, or -EINVAL for a bad upstream address. */
int upstream_attach(struct inagg_switch *sw, job_t *j);
/* The local job retires (leave = 1: cleanly, send LEAVE) or failed (leave = 0): the thread
 * ends and frees itself; j->upj is cleared and the upstream id unpublished. */
void upstream_end(struct inagg_switch *sw, job_t *j, int leave);
/* switch_stop: wait (at most timeout_ms) for the upstream threads to end. A thread blocks at
 * most 4 s in a connect or a write, and sees a stop within 100 ms otherwise. */
#define UPSTREAM_STOP_MS 10000
void upstream_wait_all(struct inagg_switch *sw, int timeout_ms);

#endif /* INAGG_SWITCH_UPSTREAM_H */
