/*
 * bench_floor.h - the medium's floor for `inagg bench latency --testbed N`: a raw UDP
 * ping-pong from every host namespace to an echo server in the switch namespace, through the
 * same links and fabric as the allreduce, with datagrams as large as inagg's packets. One
 * ping-pong is two one-way crossings of the medium, as one small allreduce is (worker to
 * switch, switch to worker), so inagg's p50 over the floor's p50 is what the software adds.
 *
 * The echo server and the pinging clients are this binary in hidden one-role modes of
 * `inagg bench latency` (--floor-echo, --floor-ping), started in the namespaces through
 * tools/testbed exec.
 */
#ifndef INAGG_CLI_BENCH_FLOOR_H
#define INAGG_CLI_BENCH_FLOOR_H

#include <stddef.h>
#include <stdint.h>

#include "apps/launch/launch.h"

#define BENCH_FLOOR_PORT                                                                           \
    7400 /* the echo server's port in the switch namespace: clear of the
                                 switch's (and the inagg fabric's) UDP queues from 7000 */

typedef struct bench_floor_result {
    uint32_t samples; /* round trips measured, over all hosts */
    uint32_t lost; /* pings that timed out and were sent again */
    double p50_us, p99_us;
} bench_floor_result_t;

/* Whether argv (a `bench latency` argv, argv[0] "latency") asks for one of the floor's
 * hidden roles (--floor-echo or --floor-ping as its first option). */
int bench_floor_is_role(int argc, char **argv);

/* Run that role: the echo server, or one host's pinging client writing its round trips
 * (microseconds, doubles after a count) to --report-file. The exit code (0 ok, 1 failed with
 * the reason on stderr, 2 usage). */
int bench_floor_role_main(int argc, char **argv);

/* What to measure: `iters` timed round trips of `size`-byte datagrams per host after `warmup`
 * untimed ones; the echo server waits as echo_poll says and each client as ping_poll (poll
 * modes as `inagg switch --poll` takes them; NULL: the default), so that the floor's ends
 * wait as the switch and the workers they stand for. */
typedef struct bench_floor_spec {
    uint32_t size, iters, warmup;
    const char *echo_poll, *ping_poll;
    int pin_hosts; /* host k's client on the (k-1)-th CPU, as the workers (--pin-hosts) */
} bench_floor_spec_t;

/* On testbed j (up): the echo server in the switch namespace, then one client per host h1..hN
 * at once, as fs says; every echoed byte is checked. self: this inagg binary. 0 with *out
 * filled, or -1 with the reason in err (the server and clients are stopped either way). */
int bench_floor_measure(const launch_tbjob_t *j, const char *self, const bench_floor_spec_t *fs,
                        bench_floor_result_t *out, char *err, size_t errlen);

#endif /* INAGG_CLI_BENCH_FLOOR_H */
