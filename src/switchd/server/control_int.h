/*
 * control_int.h - what the control thread's files share: the connection and the control
 * thread's state, and the connections' output (conn.c). The files, each calling only those
 * below it: control.c (the thread's loop: sockets, requests, deadlines, the drain) above
 * admit.c (JOIN, its limits and job secrets) and watch.c (the jobs' deadlines), above
 * lifecycle.c (a job's states, lifecycle.h), above conn.c and upstream.c; limits.c beside.
 * Only src/switchd/server/ includes this.
 */
#ifndef INAGG_SWITCH_CONTROL_INT_H
#define INAGG_SWITCH_CONTROL_INT_H

#include <stdint.h>

#include "lib/client/ctl.h"
#include "lib/wire/auth.h"
#include "lib/wire/ctlmsg.h"
#include "switchd/server/authlimit.h"
#include "switchd/server/lifecycle.h"
#include "switchd/server/peers.h"
#include "switchd/server/server.h"

#define CTL_MAX_CLIENTS 1024
#define CTL_MAX_JOINING_PER_ADDR                                                                   \
    32 /* jobs one address registered that are still waiting for
                                       their ranks; one more removes the oldest of them */
#define CTL_TICK_MS 50
#define CTL_ACCEPT_BURST 64 /* connections accepted per pass */
#define CTL_OUTPUT_MAX (4u << 20) /* bytes of replies queued per connection */
#define CTL_OUTPUT_HIGH (64u << 10) /* past this, a connection's requests wait */
#define CTL_LINES_PER_PASS 16 /* requests served per connection per pass */
#define SWITCH_MAX_POOL_BYTES (1ull << 30) /* per job */
#define AUTH_WINDOW_MS 10000 /* failed authentications are counted over this */
#define AUTH_FAIL_LIMIT                                                                            \
    5 /* ... per address and job, and past this many,
                                              that address's JOINs of that job are refused */
#define AUTH_TABLE 4096 /* (address, job) pairs with failures tracked */

typedef struct client {
    int fd;
    ctl_reader_t rd;
    ctl_writer_t wr;
    peer_t *peer;
    job_t *job; /* NULL until JOIN succeeded */
    uint32_t rank;
    uint64_t last_in_ms; /* when bytes last arrived */
    uint64_t partial_since_ms; /* an incomplete line has waited since (0: none) */
    int doomed; /* close at the end of this pass */
    int has_nonce; /* a CHALLENGE was sent and not yet used */
    uint8_t nonce[WIRE_NONCE_BYTES];
} client_t;

/* A job unpublished but not yet freed: freed once the dataplane threads passed epoch. */
typedef struct retiring {
    job_t *j;
    uint64_t record; /* its record among the retired jobs' counters (stats_retire) */
    uint64_t epoch[SWITCH_MAX_THREADS];
} retiring_t;

typedef struct control {
    struct inagg_switch *sw;
    retiring_t *retiring; /* [SWITCH_MAX_JOBS] */
    uint32_t nretiring;
    client_t *clients[CTL_MAX_CLIENTS];
    int nclients;
    client_t **by_fd; /* [by_fd_cap]: the client of a descriptor */
    int by_fd_cap;
    peer_table_t peers;
    auth_limit_t auth;
    uint32_t request_ms, idle_ms, max_conns_per_addr, max_job_slots, max_addr_slots;
    uint64_t accept_paused_until; /* ms: out of descriptors, the listener rests until then */
    uint64_t illegal_transitions; /* events a job's state does not take (lifecycle.h) */
} control_t;

/* limits.c: put limits l (0: default) in force, publish them for switch_get_limits, and
 * log them when `why` is not NULL; and take limits set by switch_set_limits (1) or not (0). */
void control_use_limits(control_t *ctl, const switch_limits_t *l, const char *why);
int control_take_limits(control_t *ctl);

/* conn.c: count a refusal under "control" in the stats. */
void conn_count(struct inagg_switch *sw, enum ctl_stat s);
/* conn.c: close cl at the end of this pass, counting why (reason < 0: not a refusal). */
void conn_doom(control_t *ctl, client_t *cl, int reason);
/* conn.c: queue a line for fd's client (a client whose replies pile up past CTL_OUTPUT_MAX
 * is closed, never waited for). */
void conn_send_line(control_t *ctl, int fd, const char *line);
/* conn.c: "ERR <refusal> <text>" to fd. Returns -ECONNREFUSED, so a refusing function can
 * `return conn_send_err(...)` as set_err is returned (base/errmsg.h). */
int conn_send_err(control_t *ctl, int fd, enum wire_refusal r, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* conn.c: a line to every connected member of j. */
void conn_broadcast(control_t *ctl, job_t *j, const char *line);
/* conn.c: close every connection of job j at the end of this pass. */
void conn_close_job(control_t *ctl, const job_t *j);

/* watch.c: each tick, every job's deadlines (its join, a barrier, a silent rank) and a leaf's
 * upstream link, applied to the job as lifecycle events. */
void watch_jobs(control_t *ctl);

/* admit.c: HELLO (a challenge for the connection's next JOIN) and JOIN; admit_join returns
 * 0 if the client stays, -ECONNREFUSED if it was refused and must be closed after the
 * reply. */
void admit_hello(control_t *ctl, client_t *cl, const char *line);
int admit_join(control_t *ctl, client_t *cl, const char *line);

#endif /* INAGG_SWITCH_CONTROL_INT_H */
