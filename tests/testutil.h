/*
 * testutil.h - helpers for tests that run real processes: a switch in a child process on a
 * free loopback port (readiness through a pipe, never a sleep), worker processes forked per
 * rank, shared memory for their results, and the switch's counters read over its control
 * port.
 */
#ifndef INAGG_TESTUTIL_H
#define INAGG_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "switchd/switchd.h"

typedef struct test_switch {
    pid_t pid;
    uint16_t port;
    char addr[32];
} test_switch_t;

/* Start a switch child with cfg (listen forced to 127.0.0.1:0). Fails the test on error. */
void ts_start(test_switch_t *ts, const switch_config_t *cfg);
void ts_stop(test_switch_t *ts);
/* The switch's counters as JSON (STATS json over its control port) into buf. */
void ts_stats_json(const test_switch_t *ts, char *buf, size_t len);
/* An in-process switch's stats as text (json 0) or JSON (1), malloc'd: free it. */
char *ts_switch_stats_text(inagg_switch_t *sw, int json);
/* The number after "key": in an in-process switch's JSON stats (fails the test when absent). */
double ts_switch_stat(inagg_switch_t *sw, const char *key);
/* Read a number that follows "key": in text; fails the test if absent. */
double ts_number(const char *text, const char *key);
/* A switch configuration whose jobs get multicast group 239.B.0.<job id> (PROTOCOL.md 9.6):
 * each suite its own B, and the port this process's, so that two suites running at once never
 * hear each other's group. */
switch_config_t ts_mcast_config(uint8_t b);

typedef int (*worker_fn)(uint32_t rank, void *arg);
/* Fork n workers running fn(rank, arg); wait for all (at most timeout_s); returns how many
 * exited non-zero (a worker still running at the deadline is killed and counts). */
int run_workers(uint32_t n, worker_fn fn, void *arg, int timeout_s);
/* Fork without waiting: pids[r] for each rank. */
void spawn_workers(uint32_t n, worker_fn fn, void *arg, pid_t *pids);
/* Wait for one pid with a deadline; returns its exit code, -1 if a signal ended it (as
 * launch_exit_code), or launch_wait's -ETIMEDOUT (then killed) or -ECHILD. */
int wait_pid(pid_t pid, int timeout_s);

/* Real loss on loopback: an nftables table (named after this process and `tag`) that drops
 * `percent`% of the UDP packets to and from `port`, both directions. Skips the test (after
 * cleaning up) where there is no root, no nft, or no permission. */
typedef struct nft_loss {
    char table[64];
} nft_loss_t;
void nft_loss_start(nft_loss_t *n, const char *tag, uint16_t port, int percent,
                    test_switch_t *ts_to_stop_on_skip);
/* Whether the rules dropped anything so far. */
int nft_loss_dropped(const nft_loss_t *n);
void nft_loss_stop(nft_loss_t *n);

/* The fault specs of a lossy test: the workers' (drop, duplicate and reorder each with
 * probability p) into workers, the switch's (p/2 each, the next seed) into sw. */
void lossy_fault_specs(double p, uint64_t seed, char *workers, char *sw, size_t len);

/* Is liblinear-train (Debian liblinear-tools) an executable on PATH? 1 or 0. */
int liblinear_available(void);

/* liblinear as the external reference optimum: run `liblinear-train -s 0 -c C -e EPS data
 * model` (no bias term, matching the trainers) with the model in a temp dir, output to
 * /dev/null, killed after timeout_s seconds; parse the model file (glm/reference.h) and
 * return its weights (malloc'd, *n_weights = nr_feature) and their objective in the trainers'
 * normalisation: mean logistic loss over the data + l2/2 ||w||^2 with l2 = 1/(C * S)
 * (liblinear minimises C * sum loss + 1/2 ||w||^2, the same problem scaled by C * S). Temp
 * files are removed. 0, or a negative errno with the reason in err (the reader's, -ENOENT
 * when liblinear-train is not installed, launch_run's when it fails). */
int liblinear_reference(const char *data_path, double C, double eps, int timeout_s,
                        double **weights, size_t *n_weights, double *objective, char *err,
                        size_t errlen);

/* A thread body that holds a job of 4 slots ("hog", one rank, 16 values per packet) on the
 * switch at arg (a "host:port" string) for one second, then leaves: for tests of a JOIN
 * refused as busy and retried. Start it with pthread_create(&t, NULL, hog_job_main, addr). */
void *hog_job_main(void *arg);

/* Anonymous shared memory that forked children can write and the parent read. */
void *shared_alloc(size_t bytes);

#endif /* INAGG_TESTUTIL_H */
