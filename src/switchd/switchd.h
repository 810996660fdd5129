/*
 * switchd.h - the switch daemon's interface, the one header of src/switchd/ that an application
 * includes (tests/layering.sh): the aggregation switch as a library (start it: it binds and
 * spawns its threads; ask its port, print its counters, stop it), and at the end the daemon's
 * other outward parts: the L2 fabric it can run on (fabric/fabric.h), the /metrics endpoint
 * (server/httpmetrics.h) and its config file (server/switch_conf.h), and the daemon as a
 * program (switchd_run: start everything, serve until a signal). `inagg switch` and the
 * benchmarks' and trainer's embedded switch are thin wrappers around this.
 */
#ifndef INAGG_SWITCHD_H
#define INAGG_SWITCHD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/base/pollmode.h"
#include "lib/transport/transport.h"

struct json_writer;

#define SWITCH_MAX_THREADS 64u /* dataplane threads (and transport queues) of one switch */

typedef struct switch_config {
    const char *listen; /* "HOST:PORT"; port 0 picks a free one */
    uint32_t threads; /* dataplane threads, transport queues 0 .. threads-1 (UDP:
                                    ports PORT .. PORT+threads-1) */
    uint32_t total_slots; /* slot budget shared by all jobs */
    uint32_t worker_timeout_ms; /* upper bound of a job's silent-rank timeout */
    uint32_t batch; /* packets per receive (1..256) */
    /* The template of every dataplane endpoint: its kind (NULL: "udp") or opener (the L2
     * fabric's aggregation port), socket buffers (buffer_bytes), fault specs (faults_in,
     * faults_out; NULL: none) and the kind's own settings (afpacket.iface). The switch sets
     * bind, queue, batch, sleep_ms and fault_stream per endpoint. */
    transport_config_t transport;
    /* Extra counters of whatever carries the dataplane (the L2 fabric), written after the
     * switch's own: text lines, or members of the switch's JSON object. NULL: none. */
    void (*extra_text)(void *ctx, FILE *out);
    void (*extra_json)(void *ctx, struct json_writer *w);
    void (*extra_metrics)(void *ctx, FILE *out); /* Prometheus text families */
    void *extra_ctx;
    /* Admission (PROTOCOL.md "Admission"); 0 picks the default in brackets. */
    uint32_t request_ms; /* a request line, or its reply, must be done within [10000] */
    uint32_t idle_ms; /* a connection without a job silent this long is closed [60000] */
    uint32_t max_conns_per_addr; /* open control connections per client address [128] */
    uint32_t max_job_slots; /* slots one job may hold [total_slots / 2] */
    uint32_t max_addr_slots; /* slots the jobs registered from one address may hold
                                    [three quarters of total_slots] */
    int require_secret; /* refuse jobs registered without a job secret */
    /* Hierarchy (PROTOCOL.md "Hierarchy"): a leaf switch sends each round's partial sum to
     * the upstream switch at "HOST:PORT" as rank upstream_rank of a job of the same name with
     * upstream_world ranks, and gives its own ranks the upstream result. NULL: none. */
    const char *upstream;
    uint32_t upstream_rank, upstream_world;
    /* A FABRIC control line (wire/fabricmsg.h) from a client at peer (IPv4 as IPv4-mapped
     * IPv6): its one answer line into reply (FABRIC_STATE or ERR). Its ctx is extra_ctx.
     * NULL: such lines are answered ERR unsupported. */
    void (*extra_ctl)(void *ctx, const char *line, const uint8_t peer[16], char *reply, size_t cap);
    /* Inline aggregation: no dataplane threads are started; whoever owns the linked transport
     * (the L2 fabric) runs the aggregation stage on its own thread. switch_start hands it the
     * pass (attach(attach_ctx, switch_dataplane_pass, sw)), and switch_stop takes it back
     * (attach(attach_ctx, NULL, NULL)) once the control thread has ended; attach must not
     * return while a pass is still running. The owner must run a pass of every queue
     * 0..threads-1 regularly, busy or idle (the L2 fabric: each turn of its loop, at most
     * 20 ms apart): the control thread waits for each queue's pass count to move before it
     * frees a retired job. NULL: dataplane threads of its own. */
    void (*inline_attach)(void *ctx, int (*pass)(void *sw, uint32_t queue), void *sw);
    void *attach_ctx;
    /* How the dataplane threads wait for packets (base/pollmode.h; zero: adaptive) and, with
     * n_cpus > 0, the CPUs they are pinned to (thread t on cpus[t % n_cpus]). */
    switch_poll_t poll;
    uint32_t poll_spin_us; /* adaptive: spin this long after the last packet (0: default) */
    uint32_t cpus[SWITCH_MAX_CPUS];
    uint32_t n_cpus;
    /* Multicast of results (PROTOCOL.md 9.6): a p4sgd job whose ranks all said mcast=1 gets
     * the group mcast_job_group(mcast_group, id) at port mcast_port in its JOINED, and a
     * round's result that is the same for every rank goes there once. 0: none. UDP only;
     * sends leave from the listen address (TTL 1). */
    uint32_t mcast_group; /* host order, in 224.0.0.0/4 */
    uint16_t mcast_port;
} switch_config_t;

#define SWITCH_MCAST_PORT_DEFAULT 7399 /* clear of the queues from 7000 and the floor's 7400 */

#define SWITCH_CONFIG_INIT                                                                         \
    {                                                                                              \
        .listen = "127.0.0.1:0", .threads = 1, .total_slots = 8192, .worker_timeout_ms = 30000,    \
        .batch = 64, .transport = {                                                                \
            .buffer_bytes = 32 << 20                                                               \
        }                                                                                          \
    }

typedef struct inagg_switch inagg_switch_t;

/* Bind the TCP control port and the dataplane's transport queues and start the threads. 0, or
 * a negative errno with a reason in err. */
int switch_start(const switch_config_t *cfg, inagg_switch_t **out, char *err, size_t errlen);

/* The port (TCP control, and UDP of dataplane thread 0). */
uint16_t switch_port(const inagg_switch_t *sw);

/* Counters as text (json = 0) or one JSON object (json = 1). */
void switch_write_stats(inagg_switch_t *sw, FILE *out, int json);

/* Inline aggregation (switch_config_t.inline_attach): one pass of dataplane queue `queue`
 * without waiting (receive what is queued, aggregate, send the results): the packets
 * handled. Only the attached thread calls it. */
int switch_dataplane_pass(void *sw, uint32_t queue);

/* The control plane's admission limits (PROTOCOL.md "Admission"); 0 picks the default, as
 * in switch_config_t. */
typedef struct switch_limits {
    uint32_t request_ms, idle_ms, max_conns_per_addr, max_job_slots, max_addr_slots;
} switch_limits_t;
#define SWITCH_LIMIT_COUNT 5

/* Replace the limits of a running switch (SIGHUP after the config file was read again): the
 * control thread takes them at its next pass (within 50 ms) and logs them; jobs and
 * connections stay, and the new limits apply to what comes next (a connection over the new
 * per-address cap is not closed, a further one is refused). */
void switch_set_limits(inagg_switch_t *sw, const switch_limits_t *l);
/* The limits in force (defaults resolved), as the control thread last published them. */
void switch_get_limits(inagg_switch_t *sw, switch_limits_t *l);
/* Their names in the log and in /metrics, in struct order ("request_timeout_ms", ...). */
extern const char *const switch_limit_names[SWITCH_LIMIT_COUNT];

/* Counters in the Prometheus text exposition format (switch/metrics.c). */
void switch_write_metrics(inagg_switch_t *sw, FILE *out);

/* Stop the threads and free everything. Members of jobs still running are drained first:
 * each gets SHUTDOWN <reason> (its library fails its calls with "switch shutting down"), and
 * their connections close once the line is sent, within SWITCH_DRAIN_MS. */
#define SWITCH_DRAIN_MS 2000
void switch_stop_because(inagg_switch_t *sw, const char *reason);
/* switch_stop_because(sw, "the switch is stopping"). */
void switch_stop(inagg_switch_t *sw);

/* The daemon's other outward parts (see the top of this file). */
#include "switchd/fabric/fabric.h"
#include "switchd/server/httpmetrics.h"
#include "switchd/server/switch_conf.h"

/* ---- the daemon as a program (switchd_run.c) ------------------------------------------------ */

/* What `inagg switch` runs, its flags parsed and checked. */
struct switchd_options {
    switch_config_t cfg; /* the switch (with a fabric, its listen address and transport are
                            set to the fabric's aggregation port) */
    fabric_config_t fabric; /* the L2 fabric: ports, ip (resolved) and agg_port (--listen's
                               port) set; ports NULL: none */
    int fabric_inline; /* with a fabric: the aggregation runs on the fabric's thread */
    const char *metrics_addr; /* serve /metrics at HOST:PORT (NULL: no) */
    int ready_fd; /* write the bound port and a newline here once ready, then close it (-1) */
    void (*reload)(inagg_switch_t *sw, void *ctx); /* on SIGHUP (NULL: ignored) */
    void *reload_ctx;
};

/* Start the fabric (if any), the switch and /metrics, say ready, and serve until SIGINT or
 * SIGTERM: SIGUSR1 prints the counters to stdout, SIGHUP calls o->reload; at the end the
 * counters are printed and everything stops, the jobs drained (switch_stop_because). Blocks
 * those signals in the calling thread, and so in every thread started. 0 after a stop by
 * signal, or a negative errno with the reason in err when something did not start. */
int switchd_run(const struct switchd_options *o, char *err, size_t errlen);

#endif /* INAGG_SWITCHD_H */
