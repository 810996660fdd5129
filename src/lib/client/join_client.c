/*
 * join_client.c - joining a switch's job (join_client.h): one attempt (connect, the secret's
 * handshake, JOIN, its answer) and the retries of transient refusals around it.
 */
#include "lib/client/join_client.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "lib/base/errmsg.h"
#include "lib/base/util.h"
#include "lib/wire/auth.h"

/* Read one line within the answer time, in 100 ms slices when a stop flag can end the wait.
 * 0, -ECANCELED (stopped), or ctl_read_line's error. */
static int read_answer(const join_request_t *rq, int fd, ctl_reader_t *rd, char *line, size_t cap)
{
    int timeout_ms = rq->answer_ms;
    if (!rq->stop)
        return ctl_read_line(fd, rd, line, cap, timeout_ms);
    uint64_t deadline = util_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    for (;;) {
        if (atomic_load(rq->stop))
            return -ECANCELED;
        int rc = ctl_read_line(fd, rd, line, cap, 100);
        if (rc != -ETIMEDOUT || util_now_ns() >= deadline)
            return rc;
    }
}

/* Send `line` and read the answer into it. 0, or the I/O error with the reason in err. */
static int exchange(const join_request_t *rq, int fd, ctl_reader_t *rd, const char *what,
                    char *line, size_t cap, char *err, size_t errlen)
{
    int io = ctl_write_line(fd, line, rq->block_ms);
    if (io == 0)
        io = read_answer(rq, fd, rd, line, cap);
    if (io == -ECANCELED)
        return set_err(err, errlen, io, "stopped while joining the switch at %s", rq->addr);
    if (io != 0)
        return set_err(err, errlen, io, "no answer to %s from the switch at %s: %s", what, rq->addr,
                       io == -ETIMEDOUT ? "timed out" : strerror(-io));
    return 0;
}

/* An answer that is not the one hoped for: SHUTDOWN or ERR. 0 when it is neither. */
static int refusal_of(const join_request_t *rq, const char *line, join_answer_t *out, char *err,
                      size_t errlen)
{
    const char *reason = wire_shutdown_parse(line);
    if (reason)
        return set_err(err, errlen, -ESHUTDOWN, "switch at %s shutting down: %s", rq->addr, reason);
    if (wire_verb_of(line) != WIRE_VERB_ERR)
        return 0;
    const char *text;
    enum wire_refusal r = wire_err_parse(line, &text);
    out->refusal = (int)r;
    return set_err(err, errlen, -ECONNREFUSED, "switch at %s: %s %s", rq->addr,
                   wire_refusal_name(r), text);
}

/* HELLO and its CHALLENGE: the JOIN then carries the verifier (a new job) or the proof for
 * the switch's nonce (a job that exists), and the dataplane keys come from the verifier and
 * that nonce (wire/dpauth.h). 0 or -errno with the reason. */
static int authenticate(join_request_t *rq, int fd, ctl_reader_t *rd, join_answer_t *out, char *err,
                        size_t errlen)
{
    wire_join_t *j = &rq->join;
    char line[CTL_LINE_MAX], nonce_hex[2 * WIRE_NONCE_BYTES + 2], exists[16] = "";
    snprintf(line, sizeof(line), "%s job=%s", wire_verb_name(WIRE_VERB_HELLO), j->job);
    int rc = exchange(rq, fd, rd, "HELLO", line, sizeof(line), err, errlen);
    if (rc == 0)
        rc = refusal_of(rq, line, out, err, errlen); /* refused before the JOIN: busy */
    if (rc < 0)
        return rc;
    uint8_t nonce[WIRE_NONCE_BYTES];
    if (wire_verb_of(line) != WIRE_VERB_CHALLENGE ||
        ctlline_get(line, "nonce", nonce_hex, sizeof(nonce_hex)) != 0 ||
        hex_decode(nonce_hex, nonce, sizeof(nonce)) != 0 ||
        ctlline_get(line, "job", exists, sizeof(exists)) != 0)
        return set_err(err, errlen, -EPROTO,
                       "unexpected answer to HELLO from the switch at %s: '%.100s'", rq->addr,
                       line);
    if (strcmp(exists, "exists") == 0) {
        j->auth = WIRE_AUTH_PROOF;
        wire_auth_proof(rq->verifier, nonce, j->job, j->rank, j->mac);
    } else {
        j->auth = WIRE_AUTH_VERIFIER;
        memcpy(j->mac, rq->verifier, sizeof(j->mac));
    }
    out->keyed = !j->no_dpauth;
    if (out->keyed)
        dpauth_derive(rq->verifier, nonce, j->job, j->rank, &out->keys);
    return 0;
}

/* JOIN on the connection fd and its answer. 0 with out->joined, or -errno. */
static int join_on(join_request_t *rq, int fd, ctl_reader_t *rd, join_answer_t *out, char *err,
                   size_t errlen)
{
    if (rq->verifier) {
        int rc = authenticate(rq, fd, rd, out, err, errlen);
        if (rc < 0)
            return rc;
    }
    char line[CTL_LINE_MAX];
    if (wire_join_format(&rq->join, line, sizeof(line)) != 0)
        return set_err(err, errlen, -EINVAL, "the JOIN line does not fit in %d bytes",
                       CTL_LINE_MAX);
    /* a switch answers once every rank joined, or refuses */
    int rc = exchange(rq, fd, rd, "JOIN", line, sizeof(line), err, errlen);
    if (rc == 0)
        rc = refusal_of(rq, line, out, err, errlen);
    if (rc < 0)
        return rc;
    char why[160];
    if (wire_joined_parse(line, &out->joined, why, sizeof(why)) != 0)
        return set_err(err, errlen, -EPROTO, "switch at %s: %s", rq->addr, why);
    if (out->joined.dpauth && !out->keyed)
        return set_err(err, errlen, -EPROTO,
                       "switch at %s: job '%s' authenticates its dataplane but this side has "
                       "no keys for it (no secret, or dataplane authentication turned off)",
                       rq->addr, rq->join.job);
    if (out->keyed)
        dpauth_bind_job(&out->keys, out->joined.token); /* the job's down key */
    return 0;
}

/* One attempt on a new connection: 0 with out->fd open, or -errno with it closed. */
static int join_once(join_request_t *rq, ctl_reader_t *rd, join_answer_t *out, char *err,
                     size_t errlen)
{
    rd->len = 0;
    out->refusal = -1;
    out->keyed = 0;
    int fd = ctl_connect_to(rq->addr, rq->block_ms);
    if (fd < 0)
        return set_err(err, errlen, fd, "cannot connect to the switch at %s: %s", rq->addr,
                       strerror(-fd));
    int rc = join_on(rq, fd, rd, out, err, errlen);
    if (rc < 0) {
        close(fd);
        explicit_bzero(&out->keys, sizeof(out->keys));
        return rc;
    }
    out->fd = fd;
    return 0;
}

/* Sleep ms, in slices when a stop flag can end the wait. 0, or -ECANCELED. */
static int backoff_sleep(const join_request_t *rq, uint64_t ms)
{
    for (uint64_t slept = 0; slept < ms; slept += 10) {
        if (rq->stop && atomic_load(rq->stop))
            return -ECANCELED;
        usleep((useconds_t)((ms - slept < 10 ? ms - slept : 10) * 1000u));
    }
    return 0;
}

static int transient(const join_answer_t *a)
{
    return a->refusal == WIRE_REFUSED_BUSY || a->refusal == WIRE_REFUSED_SYSTEM;
}

int join_client_run(join_request_t *rq, ctl_reader_t *rd, join_answer_t *out, char *err,
                    size_t errlen)
{
    *out = (join_answer_t){.fd = -1, .refusal = -1};
    uint64_t deadline = util_now_ns() + (uint64_t)rq->retry_ms * 1000000ull;
    uint64_t rng = util_now_ns() ^ ((uint64_t)rq->join.rank << 32) ^ (uint64_t)getpid();
    uint32_t backoff = JOIN_BACKOFF_MIN_MS;
    for (;;) {
        int rc = join_once(rq, rd, out, err, errlen);
        out->attempts++;
        if (rc == 0 || !transient(out))
            return rc;
        uint64_t wait_ms = backoff / 2 + util_splitmix64(&rng) % (backoff / 2 + 1);
        if (util_now_ns() + wait_ms * 1000000ull >= deadline) {
            size_t n = err ? strnlen(err, errlen) : 0;
            if (rq->retry_ms && n + 1 < errlen)
                snprintf(err + n, errlen - n,
                         " (still refused after %u attempts within the "
                         "join timeout of %u ms)",
                         out->attempts, rq->retry_ms);
            return rc;
        }
        if (backoff_sleep(rq, wait_ms) < 0)
            return set_err(err, errlen, -ECANCELED, "stopped while joining the switch at %s",
                           rq->addr);
        backoff = backoff * 2 > JOIN_BACKOFF_MAX_MS ? JOIN_BACKOFF_MAX_MS : backoff * 2;
    }
}
