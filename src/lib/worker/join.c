/*
 * join.c - the communicator's control connection to the switch (control/ctl.h): joining
 * through the one JOIN client (control/join_client.h) with this rank's JOIN line, job secret
 * and result codes, the monitor thread that reads barrier completions, the switch's verdict
 * that the job failed and the connection dropping, inagg_barrier, and LEAVE.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "lib/base/env.h"
#include "lib/base/errmsg.h"
#include "lib/base/util.h"
#include "lib/client/join_client.h"
#include "lib/wire/auth.h"
#include "lib/worker/comm.h"

/* One line from shard k's control connection (or its closing): what it means for the
 * communicator. Caller holds mu. */
static void monitor_line(inagg_comm_t *c, uint32_t k, int rc, const char *line)
{
    if (rc != 0) {
        if (!c->shard_bye[k]) {
            char d[160];
            snprintf(d, sizeof(d), "lost the control connection to the switch%s (%s)",
                     c->nshards > 1 ? " of a shard" : "",
                     rc == -ECONNRESET ? "closed" : strerror(-rc));
            if (!comm_lost_locked(c, COMM_LOST_CLOSED, d))
                comm_fail_locked(c, INAGG_ERR_CONNECTION, d);
        }
        pthread_cond_broadcast(&c->cv);
        return;
    }
    enum wire_verb verb = wire_verb_of(line);
    if (verb == WIRE_VERB_SHUTDOWN) {
        char d[COMM_DETAIL_MAX];
        snprintf(d, sizeof(d), "switch shutting down: %s", wire_shutdown_parse(line));
        if (!comm_lost_locked(c, COMM_LOST_SHUTDOWN, d)) /* a planned hand-over */
            comm_fail_locked(c, INAGG_ERR_CONNECTION, d);
    } else if (verb == WIRE_VERB_FAILED) {
        char d[COMM_DETAIL_MAX];
        snprintf(d, sizeof(d), "job '%s' failed on the switch: %s", c->job, ctlline_rest(line));
        comm_fail_locked(c, INAGG_ERR_JOB_FAILED, d);
    } else if (verb == WIRE_VERB_BARRIER_DONE && k == 0) { /* barriers run on shard 0 */
        c->barriers_done++;
        pthread_cond_broadcast(&c->cv);
    } else if (verb == WIRE_VERB_BYE && !c->shard_bye[k]) {
        c->shard_bye[k] = 1;
        uint32_t byes = 0;
        for (uint32_t i = 0; i < c->nshards; i++)
            byes += c->shard_bye[i];
        c->bye = byes == c->nshards;
        pthread_cond_broadcast(&c->cv);
    }
}

/* Read what shard k's connection holds and act on its complete lines; on EOF or an error
 * mark it closed. Caller holds no lock. */
static void monitor_drain(inagg_comm_t *c, uint32_t k, uint8_t *closed)
{
    char line[CTL_LINE_MAX];
    for (int round = 0; round < 64 && !closed[k]; round++) { /* bounded: a line flood yields */
        long got = ctl_fill(c->ctl_fd[k], &c->rd[k]);
        if (got > 0)
            c->last_heard_ns = util_now_ns(); /* any line: the switch is alive */
        int rc = 0;
        if (got == 0)
            rc = -ECONNRESET;
        else if (got < 0 && got != -EAGAIN)
            rc = (int)got;
        while (rc == 0 && ctl_take_line(&c->rd[k], line, sizeof(line))) {
            pthread_mutex_lock(&c->mu);
            monitor_line(c, k, 0, line);
            pthread_mutex_unlock(&c->mu);
        }
        if (rc != 0) {
            closed[k] = 1;
            pthread_mutex_lock(&c->mu);
            monitor_line(c, k, rc, "");
            pthread_mutex_unlock(&c->mu);
        }
        if (got == -EAGAIN)
            return;
    }
}

/* Fail-over's heartbeat (one shard): PING every quarter of INAGG_SWITCH_TIMEOUT_MS; a switch
 * that answered nothing for the whole of it is lost. The poll's timeout in ms. */
static int monitor_heartbeat(inagg_comm_t *c, uint8_t *closed)
{
    if (!c->failover_on || closed[0])
        return 1000;
    uint64_t now = util_now_ns(), every = (uint64_t)c->switch_timeout_ms * 250000ull;
    /* This process was not running (stopped, or starved) for longer than two heartbeats: the
     * switch's silence meanwhile says nothing; it gets a whole timeout from now. */
    if (now - c->monitor_tick_ns > 2 * every)
        c->last_heard_ns = now;
    c->monitor_tick_ns = now;
    if (now - c->last_heard_ns > (uint64_t)c->switch_timeout_ms * 1000000ull) {
        char d[160];
        snprintf(d, sizeof(d), "the switch answered nothing on the control connection for %u ms",
                 c->switch_timeout_ms);
        pthread_mutex_lock(&c->mu);
        if (comm_lost_locked(c, COMM_LOST_SILENT, d))
            c->lost_ns = c->last_heard_ns; /* the stall counts from its last sign of life */
        pthread_mutex_unlock(&c->mu);
        closed[0] = 1; /* the fail-over closes it */
        return 1000;
    }
    if (now - c->ping_ns >= every) {
        (void)ctl_write_line(c->ctl_fd[0], wire_verb_name(WIRE_VERB_PING), 50);
        c->ping_ns = now;
    }
    return (int)(every / 1000000ull) + 1;
}

/* Waits in poll(2) on every shard's control connection and on the wake eventfd, which
 * comm_close_control writes: closing a communicator never waits for a poll slice. */
static void *monitor_main(void *arg)
{
    inagg_comm_t *c = arg;
    uint8_t closed[WORKER_MAX_SHARDS] = {0};
    c->last_heard_ns = c->ping_ns = c->monitor_tick_ns = util_now_ns();
    for (;;) {
        int wait_ms = monitor_heartbeat(c, closed);
        pthread_mutex_lock(&c->mu);
        int stopping = c->stopping;
        pthread_mutex_unlock(&c->mu);
        if (stopping)
            break;
        struct pollfd p[WORKER_MAX_SHARDS + 1];
        uint32_t shard_of[WORKER_MAX_SHARDS];
        nfds_t n = 0;
        for (uint32_t k = 0; k < c->nshards; k++)
            if (!closed[k]) {
                p[n] = (struct pollfd){.fd = c->ctl_fd[k], .events = POLLIN};
                shard_of[n++] = k;
            }
        if (n == 0)
            break;
        nfds_t nshard_fds = n;
        p[n++] = (struct pollfd){.fd = c->wake_fd, .events = POLLIN};
        /* The timeout only bounds the wait should a wake-up be lost; the eventfd ends it. */
        if (poll(p, n, wait_ms) < 0 && errno != EINTR)
            break;
        for (nfds_t i = 0; i < nshard_fds; i++)
            if (p[i].revents)
                monitor_drain(c, shard_of[i], closed);
    }
    return NULL;
}

int comm_start_monitor(inagg_comm_t *c)
{
    c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (c->wake_fd < 0)
        return -errno;
    int rc = pthread_create(&c->monitor_tid, NULL, monitor_main, c);
    if (rc != 0)
        return -rc;
    c->monitor_started = 1;
    return 0;
}

void comm_close_control(inagg_comm_t *c)
{
    pthread_mutex_lock(&c->mu);
    c->stopping = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    if (c->wake_fd >= 0) {
        uint64_t one = 1;
        if (write(c->wake_fd, &one, sizeof(one)) < 0) {
            /* an eventfd only refuses at its maximum count: the monitor is awake anyway */
        }
    }
    if (c->monitor_started)
        pthread_join(c->monitor_tid, NULL);
    c->monitor_started = 0;
    if (c->wake_fd >= 0)
        close(c->wake_fd);
    c->wake_fd = -1;
    for (uint32_t k = 0; k < WORKER_MAX_SHARDS; k++) {
        if (c->ctl_fd[k] >= 0)
            close(c->ctl_fd[k]);
        c->ctl_fd[k] = -1;
    }
}

/* The result code of each refusal word of an ERR line. */
static const inagg_result_t refusal_results[WIRE_REFUSAL_COUNT] = {
    [WIRE_REFUSED] = INAGG_ERR_REFUSED,
    [WIRE_REFUSED_VERSION] = INAGG_ERR_VERSION,
    [WIRE_REFUSED_TIMEOUT] = INAGG_ERR_TIMEOUT,
    [WIRE_REFUSED_INVALID] = INAGG_ERR_INVALID,
    [WIRE_REFUSED_UNSUPPORTED] = INAGG_ERR_UNSUPPORTED,
    [WIRE_REFUSED_SYSTEM] = INAGG_ERR_REFUSED, /* the switch ran short: it refused the job */
    [WIRE_REFUSED_BUSY] = INAGG_ERR_REFUSED, /* ... and still did after the retries */
};

/* The job's verifier from the secret of the options, $INAGG_JOB_SECRET, the secret file or
 * $INAGG_JOB_SECRET_FILE (in that order). 1 with *v set, 0 when there is no secret, or
 * -EINVAL (or the file's -errno) with a reason (which never quotes the secret). The secret is wiped after use. */
static int job_verifier(const inagg_comm_t *c, uint8_t v[SHA256_BYTES], char *detail, size_t dlen)
{
    const char *s = c->opts.secret ? c->opts.secret : env_get(ENV_JOB_SECRET);
    if (s) {
        size_t n = strlen(s);
        if (n == 0 || n > WIRE_SECRET_MAX) {
            return set_err(detail, dlen, -EINVAL, "the job secret must be 1..%d bytes",
                           WIRE_SECRET_MAX);
        }
        wire_auth_verifier(s, n, c->job, v);
        return 1;
    }
    const char *path = c->opts.secret_file ? c->opts.secret_file : env_get(ENV_JOB_SECRET_FILE);
    if (!path)
        return 0;
    char buf[WIRE_SECRET_MAX + 2];
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return set_err(detail, dlen, -errno, "cannot open the job secret file %s: %s", path,
                       strerror(errno));
    ssize_t n = read(fd, buf, sizeof(buf)); /* bounded: at most one secret's worth */
    close(fd);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        n--;
    if (n <= 0 || n > WIRE_SECRET_MAX) {
        explicit_bzero(buf, sizeof(buf));
        return set_err(detail, dlen, -EINVAL, "the job secret file %s must hold 1..%d bytes", path,
                       WIRE_SECRET_MAX);
    }
    wire_auth_verifier(buf, (size_t)n, c->job, v);
    explicit_bzero(buf, sizeof(buf));
    return 1;
}

/* Does this rank ask for an authenticated dataplane when it has a secret? Yes unless
 * options.no_dataplane_auth or $INAGG_NO_DATAPLANE_AUTH=1 say otherwise. */
static int wants_dpauth(const inagg_comm_t *c)
{
    const char *env = env_get(ENV_NO_DATAPLANE_AUTH);
    return !c->opts.no_dataplane_auth && !(env && strcmp(env, "1") == 0);
}

/* Does this rank offer to take results from the job's multicast group (PROTOCOL.md 9.6)?
 * Over udp, with one switch, for p4sgd, and for switchml with one engine thread (whose
 * endpoint takes every slot's results), unless $INAGG_MULTICAST=0. */
static int wants_mcast(const inagg_comm_t *c)
{
    const char *env = env_get(ENV_MULTICAST);
    int proto_ok = c->proto->protocol == INAGG_PROTO_P4SGD ||
                   (c->proto->protocol == INAGG_PROTO_SWITCHML && c->opts.threads <= 1);
    return proto_ok && c->nshards == 1 &&
           (!c->opts.transport || strcmp(c->opts.transport, "udp") == 0) &&
           !(env && strcmp(env, "0") == 0);
}

/* The JOIN this rank sends (its secret's fields are the join client's). */
static wire_join_t join_line_of(const inagg_comm_t *c)
{
    wire_join_t j = {
        .version = INAGG_PROTOCOL_VERSION,
        .rank = c->rank,
        .world = c->world,
        .slots = c->opts.slots,
        .elems = c->opts.packet_elems,
        .float_mode = c->proto->native_float ? INAGG_FLOAT_NATIVE : c->opts.float_mode,
        .protocol = c->proto->protocol,
        .timeout_ms = c->opts.timeout_ms,
        .opt = c->opt,
        .mcast = (uint32_t)wants_mcast(c),
        .gen = c->gen,
    };
    snprintf(j.job, sizeof(j.job), "%s", c->job);
    if (c->codec.mode != CODEC_NONE) {
        codec_format(&c->codec, j.compress, sizeof(j.compress));
        j.no_feedback = c->opts.no_error_feedback != 0;
    }
    return j;
}

/* The inagg result of a failed join (control/join_client.h's codes). */
static inagg_result_t join_result(int rc, const join_answer_t *a)
{
    if (a->refusal >= 0 && a->refusal < WIRE_REFUSAL_COUNT)
        return refusal_results[a->refusal];
    switch (rc) {
        case -ETIMEDOUT: return INAGG_ERR_TIMEOUT;
        case -EPROTO: return INAGG_ERR_PROTOCOL;
        case -EINVAL: return INAGG_ERR_INVALID;
        default: return INAGG_ERR_CONNECTION;
    }
}

/* Join through shard k's switch with the one JOIN client, which retries transient refusals
 * ("busy", "system": PROTOCOL.md 5.10) until the join timeout has passed. */
inagg_result_t comm_join(inagg_comm_t *c, uint32_t k, const char *addr_text, wire_joined_t *out,
                         char *detail, size_t dlen)
{
    uint8_t v[SHA256_BYTES];
    int has = job_verifier(c, v, detail, dlen);
    if (has < 0)
        return INAGG_ERR_INVALID;
    join_request_t rq = {
        .addr = addr_text,
        .join = join_line_of(c),
        .verifier = has ? v : NULL,
        .block_ms = (int)c->opts.timeout_ms,
        .answer_ms = (int)c->opts.timeout_ms + 1000,
        .retry_ms = c->opts.timeout_ms,
    };
    rq.join.no_dpauth = has && !wants_dpauth(c);
    join_answer_t a;
    int rc = join_client_run(&rq, &c->rd[k], &a, detail, dlen);
    explicit_bzero(v, sizeof(v));
    explicit_bzero(&rq.join.mac, sizeof(rq.join.mac));
    if (rc < 0)
        return join_result(rc, &a);
    c->ctl_fd[k] = a.fd;
    *out = a.joined;
    if (a.keyed) {
        c->dp_keys[k] = a.keys;
        c->dp_keyed = 1;
    }
    explicit_bzero(&a.keys, sizeof(a.keys));
    return INAGG_OK;
}

int comm_wait_until(inagg_comm_t *c, uint64_t deadline_ns)
{
    return worker_cond_wait_until(&c->cv, &c->mu, deadline_ns);
}

#define BARRIER_VERDICT_MS 1000u

/* One barrier on the current switch. */
static inagg_result_t barrier_once(inagg_comm_t *comm)
{
    pthread_mutex_lock(&comm->mu);
    uint64_t target = comm->barriers_done + 1;
    pthread_mutex_unlock(&comm->mu);
    inagg_result_t rc = comm_failure(comm);
    if (rc != INAGG_OK)
        return rc;
    const char *barrier = wire_verb_name(WIRE_VERB_BARRIER);
    if (ctl_write_line(comm->ctl_fd[0], barrier, (int)comm->opts.timeout_ms) != 0) {
        pthread_mutex_lock(&comm->mu);
        int lost = comm_lost_locked(comm, COMM_LOST_CLOSED, "cannot send BARRIER to the switch");
        pthread_mutex_unlock(&comm->mu);
        if (lost)
            return INAGG_ERR_CONNECTION;
        return comm_set_error(comm, INAGG_ERR_CONNECTION, "cannot send BARRIER to the switch");
    }
    /* the switch fails a barrier that waited the job's timeout, naming the ranks that did not
     * arrive: its verdict gets BARRIER_VERDICT_MS to come before this rank's own timeout */
    uint64_t deadline =
        util_now_ns() + ((uint64_t)comm->opts.timeout_ms + BARRIER_VERDICT_MS) * 1000000ull;
    pthread_mutex_lock(&comm->mu);
    while (comm->barriers_done < target && comm->fail_code == INAGG_OK &&
           comm->lost == COMM_LOST_NONE)
        if (comm_wait_until(comm, deadline))
            break;
    if (comm->barriers_done >= target)
        rc = INAGG_OK;
    else if (comm->fail_code != INAGG_OK)
        rc = comm_set_error(comm, comm->fail_code, "%s", comm->fail_detail);
    else if (comm->lost != COMM_LOST_NONE)
        rc = INAGG_ERR_CONNECTION; /* the caller fails over */
    else
        rc = comm_set_error(comm, INAGG_ERR_TIMEOUT, "barrier: not every rank arrived within %u ms",
                            comm->opts.timeout_ms);
    pthread_mutex_unlock(&comm->mu);
    return rc;
}

inagg_result_t inagg_barrier(inagg_comm_t *comm)
{
    if (!comm)
        return INAGG_ERR_INVALID;
    char detail[COMM_DETAIL_MAX] = "";
    for (uint32_t round = 0; round <= 100; round++) { /* each round a fail-over, bounded */
        int pend = comm_failover_pending(comm, detail, sizeof(detail));
        if (pend < 0)
            return comm_set_error(comm, INAGG_ERR_CONNECTION, "%s", detail);
        /* after a fail-over: a rank that passed this barrier proves every rank arrived */
        if (pend > 0 && comm->barriers_seen > (comm->barriers_passed & 0x7fffffffu)) {
            comm->barriers_passed++;
            return INAGG_OK;
        }
        inagg_result_t rc = barrier_once(comm);
        if (rc == INAGG_OK)
            comm->barriers_passed++;
        pthread_mutex_lock(&comm->mu);
        int lost = comm->lost != COMM_LOST_NONE && comm->fail_code == INAGG_OK;
        pthread_mutex_unlock(&comm->mu);
        if (rc == INAGG_OK || !lost)
            return rc;
    }
    return comm_set_error(comm, INAGG_ERR_CONNECTION, "barrier: the switch kept being lost");
}

void comm_leave(inagg_comm_t *c)
{
    for (uint32_t k = 0; k < c->nshards; k++)
        if (ctl_write_line(c->ctl_fd[k], wire_verb_name(WIRE_VERB_LEAVE), 1000) != 0)
            return;
    uint64_t deadline = util_now_ns() + 2000000000ull;
    pthread_mutex_lock(&c->mu);
    while (!c->bye && c->fail_code == INAGG_OK)
        if (comm_wait_until(c, deadline))
            break;
    pthread_mutex_unlock(&c->mu);
}
