/*
 * join.c - the communicator's control connection to the switch (control/ctl.h): JOIN and its
 * answer, the monitor thread that reads barrier completions, the switch's verdict that the
 * job failed and the connection dropping, inagg_barrier, and LEAVE.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/errmsg.h"
#include "base/util.h"
#include "worker/comm.h"

static void *monitor_main(void *arg)
{
    inagg_comm_t *c = arg;
    char line[CTL_LINE_MAX];
    for (;;) {
        pthread_mutex_lock(&c->mu);
        int stopping = c->stopping;
        pthread_mutex_unlock(&c->mu);
        if (stopping)
            break;
        int rc = ctl_read_line(c->ctl_fd, &c->rd, line, sizeof(line), 100);
        if (rc == -ETIMEDOUT)
            continue;
        pthread_mutex_lock(&c->mu);
        if (rc != 0) {
            if (!c->bye) {
                char d[160];
                snprintf(d, sizeof(d), "lost the control connection to the switch (%s)",
                         rc == -ECONNRESET ? "closed" : strerror(-rc));
                comm_fail_locked(c, INAGG_ERR_CONNECTION, d);
            }
            pthread_cond_broadcast(&c->cv);
            pthread_mutex_unlock(&c->mu);
            break;
        }
        enum wire_verb verb = wire_verb_of(line);
        if (verb == WIRE_VERB_FAILED) {
            char d[COMM_DETAIL_MAX];
            snprintf(d, sizeof(d), "job '%s' failed on the switch: %s", c->job, ctl_rest(line));
            comm_fail_locked(c, INAGG_ERR_JOB_FAILED, d);
        } else if (verb == WIRE_VERB_BARRIER_DONE) {
            c->barriers_done++;
            pthread_cond_broadcast(&c->cv);
        } else if (verb == WIRE_VERB_BYE) {
            c->bye = 1;
            pthread_cond_broadcast(&c->cv);
        }
        pthread_mutex_unlock(&c->mu);
    }
    return NULL;
}

int comm_start_monitor(inagg_comm_t *c)
{
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
    if (c->monitor_started)
        pthread_join(c->monitor_tid, NULL);
    c->monitor_started = 0;
    if (c->ctl_fd >= 0)
        close(c->ctl_fd);
    c->ctl_fd = -1;
}

/* The result code of each refusal word of an ERR line. */
static const inagg_result_t refusal_results[WIRE_REFUSAL_COUNT] = {
    [WIRE_REFUSED] = INAGG_ERR_REFUSED,
    [WIRE_REFUSED_VERSION] = INAGG_ERR_VERSION,
    [WIRE_REFUSED_TIMEOUT] = INAGG_ERR_TIMEOUT,
    [WIRE_REFUSED_INVALID] = INAGG_ERR_INVALID,
    [WIRE_REFUSED_UNSUPPORTED] = INAGG_ERR_UNSUPPORTED,
    [WIRE_REFUSED_SYSTEM] = INAGG_ERR_REFUSED, /* the switch ran short: it refused the job */
};

inagg_result_t comm_join(inagg_comm_t *c, const char *addr_text,
                         wire_joined_t *out, char *detail, size_t dlen)
{
    int timeout_ms = (int)c->opts.timeout_ms;
    int fd = ctl_connect_to(addr_text, timeout_ms);
    if (fd < 0) {
        set_err(detail, dlen, "cannot connect to the switch at %s: %s", addr_text,
                strerror(-fd));
        return fd == -ETIMEDOUT ? INAGG_ERR_TIMEOUT : INAGG_ERR_CONNECTION;
    }
    c->ctl_fd = fd;
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
    char line[CTL_LINE_MAX];
    if (wire_join_format(&j, line, sizeof(line)) != 0) {
        set_err(detail, dlen, "the JOIN line does not fit in %d bytes", CTL_LINE_MAX);
        return INAGG_ERR_INVALID;
    }
    int io = ctl_write_line(fd, line, timeout_ms);
    if (io == 0)
        io = ctl_read_line(fd, &c->rd, line, sizeof(line), timeout_ms + 1000);
    if (io != 0) {
        set_err(detail, dlen, "no answer to JOIN from the switch at %s: %s", addr_text,
                io == -ETIMEDOUT ? "timed out" : strerror(-io));
        return io == -ETIMEDOUT ? INAGG_ERR_TIMEOUT : INAGG_ERR_CONNECTION;
    }
    if (wire_verb_of(line) == WIRE_VERB_ERR) {
        const char *text;
        enum wire_refusal r = wire_err_parse(line, &text);
        set_err(detail, dlen, "switch at %s: %s %s", addr_text, wire_refusal_name(r), text);
        return refusal_results[r];
    }
    if (wire_joined_parse(line, out, detail, dlen) != 0)
        return INAGG_ERR_PROTOCOL;
    return INAGG_OK;
}

int comm_wait_until(inagg_comm_t *c, uint64_t deadline_ns)
{
    return worker_cond_wait_until(&c->cv, &c->mu, deadline_ns);
}

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
    if (ctl_write_line(comm->ctl_fd, barrier, (int)comm->opts.timeout_ms) != 0)
        return comm_set_error(comm, INAGG_ERR_CONNECTION, "cannot send BARRIER to the switch");
    uint64_t deadline = util_now_ns() + (uint64_t)comm->opts.timeout_ms * 1000000ull;
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
    if (ctl_write_line(c->ctl_fd, wire_verb_name(WIRE_VERB_LEAVE), 1000) != 0)
        return;
    uint64_t deadline = util_now_ns() + 2000000000ull;
    pthread_mutex_lock(&c->mu);
    while (!c->bye && c->fail_code == INAGG_OK)
        if (comm_wait_until(c, deadline))
            break;
    pthread_mutex_unlock(&c->mu);
}
