/*
 * conn.c - the control connections' output: a line queued for a connection and sent as far
 * as its socket takes it (a connection whose replies pile up is closed, never waited for),
 * refusals, a line to every member of a job, and closing a connection at the end of the
 * control thread's pass (control.c closes it). Beneath everything else of the control thread:
 * it calls none of it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "switchd/server/control_int.h"

void conn_count(struct inagg_switch *sw, enum ctl_stat s)
{
    atomic_fetch_add_explicit(&sw->ctl_counts[s], 1, memory_order_relaxed);
}

void conn_doom(control_t *ctl, client_t *cl, int reason)
{
    if (cl->doomed)
        return;
    cl->doomed = 1;
    if (reason >= 0)
        conn_count(ctl->sw, (enum ctl_stat)reason);
}

static client_t *client_of(control_t *ctl, int fd)
{
    return fd >= 0 && fd < ctl->by_fd_cap ? ctl->by_fd[fd] : NULL;
}

void conn_send_line(control_t *ctl, int fd, const char *line)
{
    client_t *cl = client_of(ctl, fd);
    if (!cl || cl->doomed)
        return;
    int rc = ctl_queue_line(&cl->wr, line);
    if (rc == -ENOBUFS)
        conn_doom(ctl, cl, CTL_OUTPUT_FULL);
    else if (rc != 0 || ctl_flush(cl->fd, &cl->wr) < 0)
        conn_doom(ctl, cl, -1);
}

int conn_send_err(control_t *ctl, int fd, enum wire_refusal r, const char *fmt, ...)
{
    char text[CTL_LINE_MAX - 32], line[CTL_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    wire_err_format(r, text, line, sizeof(line));
    conn_send_line(ctl, fd, line);
    return -ECONNREFUSED;
}

void conn_broadcast(control_t *ctl, job_t *j, const char *line)
{
    for (uint32_t r = 0; r < j->world; r++)
        if (j->member_fd[r] >= 0)
            conn_send_line(ctl, j->member_fd[r], line);
}

void conn_close_job(control_t *ctl, const job_t *j)
{
    for (int i = ctl->nclients - 1; i >= 0; i--)
        if (ctl->clients[i]->job == j)
            conn_doom(ctl, ctl->clients[i], -1);
}
