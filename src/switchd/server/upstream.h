/*
 * upstream.h - a leaf switch's membership in its upstream switch (PROTOCOL.md "Hierarchy").
 *
 * When every rank of a local job has joined, the control thread starts one upstream thread
 * for the job. It joins the upstream switch's job of the same name as rank
 * cfg.upstream_rank of cfg.upstream_world (proving the job's secret from the verifier, when
 * the job has one), then watches that control connection: the upstream job failing or the
 * connection dropping fails the local job. The control thread polls the thread's state every
 * tick (upstream_poll): it activates the local job once the upstream job is joined, or fails
 * it with the upstream's reason. When the local job retires cleanly the thread sends LEAVE;
 * when it fails the thread just closes, which fails the upstream job for the other leaves.
 *
 * The dataplane never touches this: the control thread copies what it needs (job id, token,
 * rank, the upstream queues) into job->up before activation.
 */
#ifndef INAGG_SWITCH_UPSTREAM_H
#define INAGG_SWITCH_UPSTREAM_H

#include "switchd/server/control_int.h"

/* Start the upstream thread of job j (every local rank joined). 0, or -ENOMEM (or
 * pthread_create's error) after failing the job with the reason. */
int upstream_begin(control_t *ctl, job_t *j);
/* Each tick, for a job with an upstream thread: activate it when the upstream job is joined,
 * fail it when the upstream failed. */
void upstream_poll(control_t *ctl, job_t *j);
/* The local job retires (leave = 1: cleanly, send LEAVE) or failed (leave = 0): the thread
 * ends and frees itself; j->upj is cleared and the upstream id unpublished. */
void upstream_end(struct inagg_switch *sw, job_t *j, int leave);
/* switch_stop: wait (at most timeout_ms) for the upstream threads to end. A thread blocks at
 * most 4 s in a connect or a write, and sees a stop within 100 ms otherwise. */
#define UPSTREAM_STOP_MS 10000
void upstream_wait_all(struct inagg_switch *sw, int timeout_ms);

#endif /* INAGG_SWITCH_UPSTREAM_H */
