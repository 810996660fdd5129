/*
 * errors.c - the one place the worker library turns failures into what the API returns:
 * the result texts, last_error, the communicator's failure state, and the settling of a
 * call's result against it (comm.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "lib/base/util.h"
#include "lib/worker/comm.h"

static const char *const result_texts[] = {
    "success",
    "invalid argument",
    "system call failed",
    "out of memory",
    "timed out",
    "refused by the switch",
    "protocol version mismatch",
    "job failed",
    "connection to the switch lost",
    "protocol error",
    "int32 sum overflowed",
    "non-finite float32 input",
    "unsupported",
};

const char *inagg_strerror(inagg_result_t rc)
{
    int i = -(int)rc;
    if (i < 0 || i >= (int)INAGG_ARRAY_LEN(result_texts))
        return "unknown result code";
    return result_texts[i];
}

const char *inagg_last_error(const inagg_comm_t *comm) { return comm ? comm->last_error : ""; }

inagg_result_t comm_set_error(inagg_comm_t *c, inagg_result_t rc, const char *fmt, ...)
{
    if (c) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->last_error, sizeof(c->last_error), fmt, ap);
        va_end(ap);
    }
    return rc;
}

void comm_fail_locked(inagg_comm_t *c, inagg_result_t code, const char *detail)
{
    if (c->fail_code == INAGG_OK) {
        c->fail_code = code;
        snprintf(c->fail_detail, sizeof(c->fail_detail), "%s", detail);
    }
    atomic_store_explicit(&c->abort_flag, 1, memory_order_release);
    pthread_cond_broadcast(&c->cv);
    worker_signal_raise(&c->signal); /* a waiter blocked on the event fd sees the failure */
}

inagg_result_t comm_failure(inagg_comm_t *c)
{
    pthread_mutex_lock(&c->mu);
    inagg_result_t rc = c->fail_code;
    if (rc != INAGG_OK)
        comm_set_error(c, rc, "%s", c->fail_detail);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

inagg_result_t inagg_comm_failure(inagg_comm_t *comm)
{
    return comm ? comm_failure(comm) : INAGG_ERR_INVALID;
}

inagg_result_t comm_result_of_errno(int neg_errno)
{
    switch (neg_errno) {
        case 0: return INAGG_OK;
        case -EINVAL: return INAGG_ERR_INVALID;
        case -ENOMEM: return INAGG_ERR_NOMEM;
        case -ETIMEDOUT: return INAGG_ERR_TIMEOUT;
        case -ECANCELED: return INAGG_ERR_JOB_FAILED;
        case -EOVERFLOW: return INAGG_ERR_OVERFLOW;
        case -EDOM: return INAGG_ERR_NONFINITE;
        case -EPROTO: return INAGG_ERR_PROTOCOL;
        default: return INAGG_ERR_SYSTEM;
    }
}

/* What the path says of a call that got no results (comm_note_path), asked once per
 * communicator: every later failed call repeats the first answer. */
static void path_note_once(inagg_comm_t *c, char *note, size_t len)
{
    pthread_mutex_lock(&c->mu);
    int asked = c->path_noted;
    pthread_mutex_unlock(&c->mu);
    if (!asked) {
        char fresh[COMM_DETAIL_MAX];
        comm_note_path(c, fresh, sizeof(fresh)); /* network I/O: outside the lock */
        pthread_mutex_lock(&c->mu);
        if (!c->path_noted)
            snprintf(c->path_note, sizeof(c->path_note), "%s", fresh);
        c->path_noted = 1;
        pthread_mutex_unlock(&c->mu);
    }
    pthread_mutex_lock(&c->mu);
    snprintf(note, len, "%s", c->path_note);
    pthread_mutex_unlock(&c->mu);
}

inagg_result_t comm_settle(inagg_comm_t *c, int neg_errno, const char *detail)
{
    inagg_result_t rc = comm_result_of_errno(neg_errno);
    if (rc == INAGG_OK)
        return rc;
    char d[COMM_DETAIL_MAX];
    snprintf(d, sizeof(d), "%s", detail);
    char note[COMM_DETAIL_MAX] = "";
    if (neg_errno == -ETIMEDOUT || neg_errno == -ECANCELED)
        path_note_once(c, note, sizeof(note)); /* did the path lose the packets? */
    int failed = 0;
    pthread_mutex_lock(&c->mu);
    if (c->fail_code != INAGG_OK &&
        (rc == INAGG_ERR_JOB_FAILED || rc == INAGG_ERR_TIMEOUT || rc == INAGG_ERR_CONNECTION)) {
        /* The engines only saw the abort (or stalled); the reason came from the switch. */
        rc = c->fail_code;
        snprintf(d, sizeof(d), "%s", c->fail_detail);
    } else if (rc != INAGG_ERR_OVERFLOW && rc != INAGG_ERR_NONFINITE) {
        comm_fail_locked(c, rc, d);
        failed = 1;
    }
    pthread_mutex_unlock(&c->mu);
    if (failed && c->proto->fail)
        c->proto->fail(c->ps);
    return comm_set_error(c, rc, "%s%s%s", d, note[0] ? "; " : "", note);
}
