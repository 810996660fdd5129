/*
 * upstream.c - a leaf switch's membership in its upstream switch's job (upstream.h): the
 * thread that joins it and watches its control connection, and the control thread's side
 * (starting it, reading its state, the dataplane membership, ending it). The data path is in dataplane.c (dp_send_upstream, and
 * the upstream packets it hands to the job's protocol).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/base/log.h"
#include "lib/base/sha256.h"
#include "lib/client/join_client.h"
#include "switchd/server/upstream.h"

/* The longest a connect or a write to the upstream may block: the thread must see a stop
 * soon (switch_stop waits UPSTREAM_STOP_MS at most for it). */
#define UP_BLOCK_MS 4000

typedef struct upjob {
    struct inagg_switch *sw;
    char name[64];
    uint32_t slots, elems, float_mode, protocol, timeout_ms;
    uint32_t contributors; /* the local job's hosts (and theirs, for a leaf of a leaf) */
    int has_verifier;
    uint8_t verifier[32];
    int no_dpauth; /* the local job's dataplane goes without MACs: so does this one's */
    dpauth_keys_t keys; /* UPSTREAM_READY with joined.dpauth: this switch's keys upstream */
    _Atomic int state; /* enum upstream_state: written by the thread, read by the control thread */
    atomic_int stop; /* set once by the control thread: the thread ends and frees this */
    _Atomic int leave; /* with stop: send LEAVE first */
    wire_joined_t joined; /* UPSTREAM_READY: the upstream job */
    char reason[300]; /* UPSTREAM_FAILED: why */
    int fd;
    ctl_reader_t rd;
} upjob_t;

static void up_fail(upjob_t *u, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void up_fail(upjob_t *u, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(u->reason, sizeof(u->reason), fmt, ap);
    va_end(ap);
    atomic_store_explicit(&u->state, UPSTREAM_FAILED, memory_order_release);
}

static int block_ms(const upjob_t *u)
{
    return u->timeout_ms < UP_BLOCK_MS ? (int)u->timeout_ms : UP_BLOCK_MS;
}

/* Join the upstream job with the one JOIN client (control/join_client.h), retrying its
 * transient refusals for the job's timeout: 0 with u->joined set, or -errno with
 * UPSTREAM_FAILED (-ECANCELED: stopped, no failure to report). */
static int join_upstream(upjob_t *u)
{
    const switch_config_t *cfg = &u->sw->cfg;
    const char *addr = cfg->upstream;
    join_request_t rq = {
        .addr = addr,
        .join =
            {
                .version = INAGG_PROTOCOL_VERSION,
                .rank = cfg->upstream_rank,
                .world = cfg->upstream_world,
                .slots = u->slots,
                .elems = u->elems,
                .float_mode = u->float_mode,
                .protocol = u->protocol,
                .timeout_ms = u->timeout_ms,
                .contributors = u->contributors,
                .no_dpauth = (uint32_t)u->no_dpauth,
            },
        .verifier = u->has_verifier ? u->verifier : NULL,
        .block_ms = block_ms(u),
        .answer_ms = (int)u->timeout_ms + 1000,
        .retry_ms = u->timeout_ms,
        .stop = &u->stop,
    };
    snprintf(rq.join.job, sizeof(rq.join.job), "%s", u->name);
    join_answer_t a;
    char why[sizeof(u->reason) - 20];
    int rc = join_client_run(&rq, &u->rd, &a, why, sizeof(why));
    if (rc == -ECANCELED)
        return rc;
    if (rc < 0) {
        up_fail(u, "upstream switch: %s", why);
        return rc;
    }
    u->fd = a.fd;
    u->joined = a.joined;
    u->keys = a.keys;
    if (u->joined.slots != u->slots || u->joined.elems != u->elems ||
        u->joined.protocol != u->protocol || u->joined.threads == 0) {
        up_fail(u, "upstream switch %s gave the job other parameters", addr);
        return -EPROTO;
    }
    atomic_store_explicit(&u->state, UPSTREAM_READY, memory_order_release);
    return 0;
}

/* Watch the upstream connection until stopped: a FAILED line or the connection closing
 * fails the local job (through the control thread's poll). */
static void watch(upjob_t *u)
{
    char line[CTL_LINE_MAX];
    while (!atomic_load(&u->stop) && atomic_load(&u->state) == UPSTREAM_READY) {
        int rc = ctl_read_line(u->fd, &u->rd, line, sizeof(line), 100);
        if (rc == -ETIMEDOUT)
            continue;
        if (rc != 0)
            up_fail(u, "lost the control connection to the upstream switch at %s (%s)",
                    u->sw->cfg.upstream, rc == -ECONNRESET ? "closed" : strerror(-rc));
        else if (wire_shutdown_parse(line))
            up_fail(u, "the upstream switch at %s is shutting down: %s", u->sw->cfg.upstream,
                    wire_shutdown_parse(line));
        else if (wire_verb_of(line) == WIRE_VERB_FAILED)
            up_fail(u, "the upstream switch's job failed: %s", ctlline_rest(line));
    }
}

static void *up_main(void *arg)
{
    upjob_t *u = arg;
    struct inagg_switch *sw = u->sw;
    if (join_upstream(u) == 0)
        watch(u);
    /* Failed (the control thread reads the reason) or stopped: wait for the stop, bounded
     * by the switch stopping. */
    while (!atomic_load(&u->stop) && !atomic_load(&sw->stop))
        usleep(20000);
    while (!atomic_load(&u->stop))
        usleep(1000); /* switch_stop ends every job, which sets it */
    if (u->fd >= 0 && atomic_load(&u->leave) && atomic_load(&u->state) == UPSTREAM_READY)
        (void)ctl_write_line(u->fd, wire_verb_name(WIRE_VERB_LEAVE), 1000);
    if (u->fd >= 0)
        close(u->fd);
    free(u);
    atomic_fetch_sub(&sw->up_threads, 1);
    return NULL;
}

int upstream_begin(struct inagg_switch *sw, job_t *j, uint32_t contributors)
{
    upjob_t *u = calloc(1, sizeof(*u));
    if (!u)
        return -ENOMEM;
    u->sw = sw;
    u->fd = -1;
    snprintf(u->name, sizeof(u->name), "%s", j->name);
    u->slots = j->nslots;
    u->elems = j->elems;
    u->float_mode = j->float_mode;
    u->protocol = j->proto->id;
    u->timeout_ms = j->timeout_ms;
    u->contributors = contributors;
    u->has_verifier = j->has_verifier;
    memcpy(u->verifier, j->verifier, sizeof(u->verifier));
    u->no_dpauth = j->has_verifier && !j->dp_auth;
    pthread_t tid;
    atomic_fetch_add(&sw->up_threads, 1);
    int rc = pthread_create(&tid, NULL, up_main, u);
    if (rc != 0) {
        atomic_fetch_sub(&sw->up_threads, 1);
        free(u);
        return -rc;
    }
    pthread_detach(tid);
    j->upj = u;
    LOG_I("job '%s' (id %u): every rank joined; joining the upstream switch %s as rank %u of %u",
          j->name, j->id, sw->cfg.upstream, sw->cfg.upstream_rank, sw->cfg.upstream_world);
    return 0;
}

enum upstream_state upstream_state(const job_t *j, char *reason, size_t cap)
{
    const upjob_t *u = j->upj;
    int st = atomic_load_explicit(&u->state, memory_order_acquire);
    if (st == UPSTREAM_FAILED)
        snprintf(reason, cap, "%s", u->reason);
    return (enum upstream_state)st;
}

int upstream_attach(struct inagg_switch *sw, job_t *j)
{
    const upjob_t *u = j->upj;
    const wire_joined_t *jd = &u->joined;
    transport_addr_t q0;
    if (transport_parse_addr("udp", sw->cfg.upstream, &q0) != 0)
        return -EINVAL;
    transport_addr_set_port(&q0, (uint16_t)jd->port);
    j->up = (job_up_t){.on = 1,
                       .job = (uint16_t)jd->id,
                       .token = jd->token,
                       .rank = sw->cfg.upstream_rank,
                       .contributors = jd->contributors,
                       .queues = jd->threads,
                       .base = jd->base,
                       .queue0 = q0,
                       .auth = jd->dpauth && u->has_verifier,
                       .keys = u->keys};
    if (jd->id < SWITCH_MAX_JOBS)
        atomic_store_explicit(&sw->up_jobs[jd->id], j, memory_order_release);
    LOG_I("job '%s' (id %u) joined upstream job %u at %s", j->name, j->id, jd->id,
          sw->cfg.upstream);
    return 0;
}

void upstream_end(struct inagg_switch *sw, job_t *j, int leave)
{
    upjob_t *u = j->upj;
    if (j->up.on && j->up.job < SWITCH_MAX_JOBS) {
        job_t *expected = j;
        atomic_compare_exchange_strong(&sw->up_jobs[j->up.job], &expected, NULL);
    }
    if (!u)
        return;
    j->upj = NULL;
    atomic_store(&u->leave, leave);
    atomic_store(&u->stop, 1); /* u is the thread's from here on */
}

void upstream_wait_all(struct inagg_switch *sw, int timeout_ms)
{
    for (int waited = 0; atomic_load(&sw->up_threads) > 0 && waited < timeout_ms; waited++)
        usleep(1000);
}
