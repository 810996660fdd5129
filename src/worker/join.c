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
        if (ctl_is(line, "FAILED")) {
            char d[COMM_DETAIL_MAX];
            snprintf(d, sizeof(d), "job '%s' failed on the switch: %s", c->job, ctl_rest(line));
            comm_fail_locked(c, INAGG_ERR_JOB_FAILED, d);
        } else if (ctl_is(line, "BARRIER_DONE")) {
            c->barriers_done++;
            pthread_cond_broadcast(&c->cv);
        } else if (ctl_is(line, "BYE")) {
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

static inagg_result_t map_refusal(const char *line)
{
    const char *rest = ctl_rest(line);
    if (strncmp(rest, "version", 7) == 0)
        return INAGG_ERR_VERSION;
    if (strncmp(rest, "timeout", 7) == 0)
        return INAGG_ERR_TIMEOUT;
    if (strncmp(rest, "invalid", 7) == 0)
        return INAGG_ERR_INVALID;
    if (strncmp(rest, "unsupported", 11) == 0)
        return INAGG_ERR_UNSUPPORTED;
    return INAGG_ERR_REFUSED;
}

static void format_join(const inagg_comm_t *c, char *line, size_t cap)
{
    const inagg_options_t *opts = &c->opts;
    snprintf(line, cap,
             "JOIN version=%d job=%s rank=%u world=%u slots=%u elems=%u float=%s "
             "protocol=%s timeout=%u",
             INAGG_PROTOCOL_VERSION, c->job, c->rank, c->world, opts->slots, opts->packet_elems,
             opts->float_mode == INAGG_FLOAT_NATIVE || c->proto->native_float ? "native" : "fixed",
             c->proto->name, opts->timeout_ms);
    if (opts->optimizer) {
        static const char *const kinds[] = {"sgd", "adagrad", "adam", "smorms3"};
        const inagg_optimizer_t *z = opts->optimizer;
        size_t used = strlen(line);
        snprintf(line + used, cap - used,
                 " optimizer=%s params=%llu lr=%.9g beta1=%.9g beta2=%.9g eps=%.9g eps_place=%s "
                 "momentum=%.9g wd=%.9g init=%s seed=%llu",
                 kinds[z->kind], (unsigned long long)z->params, (double)z->lr, (double)z->beta1,
                 (double)z->beta2, (double)z->eps, z->eps_outside ? "outside" : "inside",
                 (double)z->momentum, (double)z->weight_decay,
                 z->init == INAGG_INIT_SEEDED ? "seeded" : "zero", (unsigned long long)z->seed);
    }
}

inagg_result_t comm_join(inagg_comm_t *c, const struct sockaddr_in *addr, const char *addr_text,
                         comm_joined_t *out, char *detail, size_t dlen)
{
    int timeout_ms = (int)c->opts.timeout_ms;
    int fd = ctl_connect(addr, timeout_ms);
    if (fd < 0) {
        set_err(detail, dlen, "cannot connect to the switch at %s: %s", addr_text,
                strerror(-fd));
        return fd == -ETIMEDOUT ? INAGG_ERR_TIMEOUT : INAGG_ERR_CONNECTION;
    }
    c->ctl_fd = fd;
    char line[CTL_LINE_MAX];
    format_join(c, line, sizeof(line));
    int io = ctl_write_line(fd, line, timeout_ms);
    if (io == 0)
        io = ctl_read_line(fd, &c->rd, line, sizeof(line), timeout_ms + 1000);
    if (io != 0) {
        set_err(detail, dlen, "no answer to JOIN from the switch at %s: %s", addr_text,
                io == -ETIMEDOUT ? "timed out" : strerror(-io));
        return io == -ETIMEDOUT ? INAGG_ERR_TIMEOUT : INAGG_ERR_CONNECTION;
    }
    if (ctl_is(line, "ERR")) {
        set_err(detail, dlen, "switch at %s: %s", addr_text, ctl_rest(line));
        return map_refusal(line);
    }
    comm_joined_t j = {0};
    if (!ctl_is(line, "JOINED") || ctl_get_u32(line, "id", &j.id) ||
        ctl_get_u32(line, "token", &j.token) || ctl_get_u32(line, "threads", &j.threads) ||
        ctl_get_u32(line, "port", &j.port) || ctl_get_u32(line, "base", &j.base) ||
        j.threads == 0 || j.id > UINT16_MAX || j.port > UINT16_MAX) {
        set_err(detail, dlen, "unexpected answer from the switch: '%.100s'", line);
        return INAGG_ERR_PROTOCOL;
    }
    *out = j;
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
    if (ctl_write_line(comm->ctl_fd, "BARRIER", (int)comm->opts.timeout_ms) != 0)
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
    if (ctl_write_line(c->ctl_fd, "LEAVE", 1000) != 0)
        return;
    uint64_t deadline = util_now_ns() + 2000000000ull;
    pthread_mutex_lock(&c->mu);
    while (!c->bye && c->fail_code == INAGG_OK)
        if (comm_wait_until(c, deadline))
            break;
    pthread_mutex_unlock(&c->mu);
}
