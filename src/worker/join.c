/*
 * join.c - the communicator's control connection to the switch (control/ctl.h): JOIN and its
 * answer, the monitor thread that reads barrier completions, the switch's verdict that the
 * job failed and the connection dropping, inagg_barrier, and LEAVE.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/env.h"
#include "base/errmsg.h"
#include "base/util.h"
#include "wire/auth.h"
#include "wire/dpauth.h"
#include "worker/comm.h"

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
            comm_fail_locked(c, INAGG_ERR_CONNECTION, d);
        }
        pthread_cond_broadcast(&c->cv);
        return;
    }
    enum wire_verb verb = wire_verb_of(line);
    if (verb == WIRE_VERB_SHUTDOWN) {
        char d[COMM_DETAIL_MAX];
        snprintf(d, sizeof(d), "switch shutting down: %s", wire_shutdown_parse(line));
        comm_fail_locked(c, INAGG_ERR_CONNECTION, d);
    } else if (verb == WIRE_VERB_FAILED) {
        char d[COMM_DETAIL_MAX];
        snprintf(d, sizeof(d), "job '%s' failed on the switch: %s", c->job, ctl_rest(line));
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

/* Waits in poll(2) on every shard's control connection and on the wake eventfd, which
 * comm_close_control writes: closing a communicator never waits for a poll slice. */
static void *monitor_main(void *arg)
{
    inagg_comm_t *c = arg;
    uint8_t closed[WORKER_MAX_SHARDS] = {0};
    for (;;) {
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
        if (poll(p, n, 1000) < 0 && errno != EINTR)
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
    [WIRE_REFUSED_BUSY] = INAGG_ERR_REFUSED,   /* ... and still did after the retries */
};

/* The job's verifier from the secret of the options, $INAGG_JOB_SECRET, the secret file or
 * $INAGG_JOB_SECRET_FILE (in that order). 1 with *v set, 0 when there is no secret, or -1
 * with a reason (which never quotes the secret). The secret is wiped after use. */
static int job_verifier(const inagg_comm_t *c, uint8_t v[SHA256_BYTES], char *detail,
                        size_t dlen)
{
    const char *s = c->opts.secret ? c->opts.secret : env_get(ENV_JOB_SECRET);
    if (s) {
        size_t n = strlen(s);
        if (n == 0 || n > WIRE_SECRET_MAX) {
            set_err_msg(detail, dlen, "the job secret must be 1..%d bytes", WIRE_SECRET_MAX);
            return -1;
        }
        wire_auth_verifier(s, n, c->job, v);
        return 1;
    }
    const char *path = c->opts.secret_file ? c->opts.secret_file : env_get(ENV_JOB_SECRET_FILE);
    if (!path)
        return 0;
    char buf[WIRE_SECRET_MAX + 2];
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        set_err_msg(detail, dlen, "cannot open the job secret file %s: %s", path, strerror(errno));
        return -1;
    }
    ssize_t n = read(fd, buf, sizeof(buf)); /* bounded: at most one secret's worth */
    close(fd);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        n--;
    if (n <= 0 || n > WIRE_SECRET_MAX) {
        set_err_msg(detail, dlen, "the job secret file %s must hold 1..%d bytes", path,
                WIRE_SECRET_MAX);
        explicit_bzero(buf, sizeof(buf));
        return -1;
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

/* With a secret: HELLO, then the JOIN carries the verifier (a new job) or the proof for the
 * switch's nonce (a job that exists), and the dataplane keys of shard k come from the
 * verifier and that nonce (wire/dpauth.h). 0, or an inagg result with the reason in
 * detail; *transient says a refusal may pass if the JOIN is tried again. */
static inagg_result_t authenticate(inagg_comm_t *c, uint32_t k, int fd, ctl_reader_t *rd,
                                   wire_join_t *j, const char *addr_text, int *transient,
                                   char *detail,
                                   size_t dlen)
{
    uint8_t v[SHA256_BYTES];
    int has = job_verifier(c, v, detail, dlen);
    if (has <= 0)
        return has < 0 ? INAGG_ERR_INVALID : INAGG_OK;
    int timeout_ms = (int)c->opts.timeout_ms;
    char line[CTL_LINE_MAX], nonce_hex[2 * WIRE_NONCE_BYTES + 2], exists[16] = "";
    snprintf(line, sizeof(line), "%s job=%s", wire_verb_name(WIRE_VERB_HELLO), c->job);
    int io = ctl_write_line(fd, line, timeout_ms);
    if (io == 0)
        io = ctl_read_line(fd, rd, line, sizeof(line), timeout_ms + 1000);
    if (io != 0) {
        set_err_msg(detail, dlen, "no answer to HELLO from the switch at %s: %s", addr_text,
                io == -ETIMEDOUT ? "timed out" : strerror(-io));
        return io == -ETIMEDOUT ? INAGG_ERR_TIMEOUT : INAGG_ERR_CONNECTION;
    }
    if (wire_shutdown_parse(line)) {
        set_err_msg(detail, dlen, "switch at %s shutting down: %s", addr_text,
                wire_shutdown_parse(line));
        return INAGG_ERR_CONNECTION;
    }
    uint8_t nonce[WIRE_NONCE_BYTES];
    if (wire_verb_of(line) == WIRE_VERB_ERR) { /* refused before the JOIN (a busy switch) */
        const char *text;
        enum wire_refusal r = wire_err_parse(line, &text);
        set_err_msg(detail, dlen, "switch at %s: %s %s", addr_text, wire_refusal_name(r), text);
        *transient = r == WIRE_REFUSED_BUSY || r == WIRE_REFUSED_SYSTEM;
        explicit_bzero(v, sizeof(v));
        return refusal_results[r];
    }
    if (wire_verb_of(line) != WIRE_VERB_CHALLENGE ||
        ctl_get(line, "nonce", nonce_hex, sizeof(nonce_hex)) != 0 ||
        hex_decode(nonce_hex, nonce, sizeof(nonce)) != 0 ||
        ctl_get(line, "job", exists, sizeof(exists)) != 0) {
        set_err_msg(detail, dlen, "unexpected answer to HELLO from the switch at %s: '%.100s'",
                addr_text, line);
        return INAGG_ERR_PROTOCOL;
    }
    if (strcmp(exists, "exists") == 0) {
        j->auth = WIRE_AUTH_PROOF;
        wire_auth_proof(v, nonce, c->job, c->rank, j->mac);
    } else {
        j->auth = WIRE_AUTH_VERIFIER;
        memcpy(j->mac, v, sizeof(v));
    }
    j->no_dpauth = !wants_dpauth(c);
    if (!j->no_dpauth) {
        dpauth_derive(v, nonce, c->job, c->rank, &c->dp_keys[k]);
        c->dp_keyed = 1;
    }
    explicit_bzero(v, sizeof(v));
    return INAGG_OK;
}

/* One attempt at joining through shard k's switch. *transient is set when the switch
 * refused with "busy" or "system" (a limit that frees up, a resource it ran short of). */
static inagg_result_t join_once(inagg_comm_t *c, uint32_t k, const char *addr_text,
                                wire_joined_t *out, int *transient, char *detail, size_t dlen)
{
    int timeout_ms = (int)c->opts.timeout_ms;
    *transient = 0;
    c->rd[k].len = 0;
    int fd = ctl_connect_to(addr_text, timeout_ms);
    if (fd < 0) {
        set_err_msg(detail, dlen, "cannot connect to the switch at %s: %s", addr_text,
                strerror(-fd));
        return fd == -ETIMEDOUT ? INAGG_ERR_TIMEOUT : INAGG_ERR_CONNECTION;
    }
    c->ctl_fd[k] = fd;
    ctl_reader_t *rd = &c->rd[k];
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
    };
    snprintf(j.job, sizeof(j.job), "%s", c->job);
    if (c->codec.mode != CODEC_NONE) {
        codec_format(&c->codec, j.compress, sizeof(j.compress));
        j.no_feedback = c->opts.no_error_feedback != 0;
    }
    inagg_result_t arc = authenticate(c, k, fd, rd, &j, addr_text, transient, detail, dlen);
    if (arc != INAGG_OK)
        return arc;
    char line[CTL_LINE_MAX];
    if (wire_join_format(&j, line, sizeof(line)) != 0) {
        set_err_msg(detail, dlen, "the JOIN line does not fit in %d bytes", CTL_LINE_MAX);
        return INAGG_ERR_INVALID;
    }
    int io = ctl_write_line(fd, line, timeout_ms);
    if (io == 0)
        io = ctl_read_line(fd, rd, line, sizeof(line), timeout_ms + 1000);
    if (io != 0) {
        set_err_msg(detail, dlen, "no answer to JOIN from the switch at %s: %s", addr_text,
                io == -ETIMEDOUT ? "timed out" : strerror(-io));
        return io == -ETIMEDOUT ? INAGG_ERR_TIMEOUT : INAGG_ERR_CONNECTION;
    }
    if (wire_shutdown_parse(line)) {
        set_err_msg(detail, dlen, "switch at %s shutting down: %s", addr_text,
                wire_shutdown_parse(line));
        return INAGG_ERR_CONNECTION;
    }
    if (wire_verb_of(line) == WIRE_VERB_ERR) {
        const char *text;
        enum wire_refusal r = wire_err_parse(line, &text);
        set_err_msg(detail, dlen, "switch at %s: %s %s", addr_text, wire_refusal_name(r), text);
        *transient = r == WIRE_REFUSED_BUSY || r == WIRE_REFUSED_SYSTEM;
        return refusal_results[r];
    }
    if (wire_joined_parse(line, out, detail, dlen) != 0)
        return INAGG_ERR_PROTOCOL;
    if (out->dpauth && !c->dp_keyed) {
        set_err_msg(detail, dlen, "switch at %s: job '%s' authenticates its dataplane but this rank "
                "has no keys for it (no secret, or dataplane authentication turned off)",
                addr_text, c->job);
        return INAGG_ERR_PROTOCOL;
    }
    if (c->dp_keyed)
        dpauth_bind_job(&c->dp_keys[k], out->token); /* the job's down key (wire/dpauth.h) */
    return INAGG_OK;
}

/* Join, retrying transient refusals ("busy", "system": PROTOCOL.md 5.10) on a new connection
 * after a backoff that starts at JOIN_BACKOFF_MIN_MS and doubles up to JOIN_BACKOFF_MAX_MS
 * (each wait drawn from its upper half, so ranks turned away together come back apart),
 * until the join timeout (opts.timeout_ms from the first attempt) has passed. Every other
 * refusal is final at once. */
#define JOIN_BACKOFF_MIN_MS 20u
#define JOIN_BACKOFF_MAX_MS 1000u

inagg_result_t comm_join(inagg_comm_t *c, uint32_t k, const char *addr_text,
                         wire_joined_t *out, char *detail, size_t dlen)
{
    uint64_t deadline = util_now_ns() + (uint64_t)c->opts.timeout_ms * 1000000ull;
    uint64_t rng = util_now_ns() ^ ((uint64_t)c->rank << 32) ^ (uint64_t)getpid();
    uint32_t backoff = JOIN_BACKOFF_MIN_MS, tries = 0;
    for (;;) {
        int transient;
        inagg_result_t rc = join_once(c, k, addr_text, out, &transient, detail, dlen);
        tries++;
        if (rc == INAGG_OK || !transient)
            return rc;
        close(c->ctl_fd[k]);
        c->ctl_fd[k] = -1;
        uint64_t wait_ms = backoff / 2 + util_splitmix64(&rng) % (backoff / 2 + 1);
        uint64_t now = util_now_ns();
        if (now + wait_ms * 1000000ull >= deadline) {
            size_t n = strlen(detail);
            if (n + 1 < dlen)
                snprintf(detail + n, dlen - n, " (still refused after %u attempts within the "
                         "join timeout of %u ms)", tries, c->opts.timeout_ms);
            return rc;
        }
        usleep((useconds_t)(wait_ms * 1000u));
        backoff = backoff * 2 > JOIN_BACKOFF_MAX_MS ? JOIN_BACKOFF_MAX_MS : backoff * 2;
    }
}

int comm_wait_until(inagg_comm_t *c, uint64_t deadline_ns)
{
    return worker_cond_wait_until(&c->cv, &c->mu, deadline_ns);
}

#define BARRIER_VERDICT_MS 1000u

inagg_result_t inagg_barrier(inagg_comm_t *comm)
{
    if (!comm)
        return INAGG_ERR_INVALID;
    pthread_mutex_lock(&comm->mu);
    uint64_t target = comm->barriers_done + 1;
    pthread_mutex_unlock(&comm->mu);
    inagg_result_t rc = comm_failure(comm);
    if (rc != INAGG_OK)
        return rc;
    const char *barrier = wire_verb_name(WIRE_VERB_BARRIER);
    if (ctl_write_line(comm->ctl_fd[0], barrier, (int)comm->opts.timeout_ms) != 0)
        return comm_set_error(comm, INAGG_ERR_CONNECTION, "cannot send BARRIER to the switch");
    /* the switch fails a barrier that waited the job's timeout, naming the ranks that did not
     * arrive: its verdict gets BARRIER_VERDICT_MS to come before this rank's own timeout */
    uint64_t deadline =
        util_now_ns() + ((uint64_t)comm->opts.timeout_ms + BARRIER_VERDICT_MS) * 1000000ull;
    pthread_mutex_lock(&comm->mu);
    while (comm->barriers_done < target && comm->fail_code == INAGG_OK)
        if (comm_wait_until(comm, deadline))
            break;
    if (comm->barriers_done >= target)
        rc = INAGG_OK;
    else if (comm->fail_code != INAGG_OK)
        rc = comm_set_error(comm, comm->fail_code, "%s", comm->fail_detail);
    else
        rc = comm_set_error(comm, INAGG_ERR_TIMEOUT,
                            "barrier: not every rank arrived within %u ms", comm->opts.timeout_ms);
    pthread_mutex_unlock(&comm->mu);
    return rc;
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
