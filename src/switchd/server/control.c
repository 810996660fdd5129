/*
 * control.c - the switch's control thread: one thread serving TCP connections with the text
 * protocol of lib/client/ctl.h. This file holds the sockets and the lines: accepting and
 * closing connections, reading requests and handing each to its handler (JOIN and HELLO to
 * admit.c; BARRIER, LEAVE, STATS and FABRIC here), the connections' deadlines, and, when the
 * switch stops, the drain. A job's life (joined, failed, retired) is lifecycle.c's: a member
 * whose connection closes without LEAVE, the last member gone and the switch stopping are
 * events this file applies to the job; the jobs' deadlines are watch.c's, run every tick.
 *
 * No client can hold the thread: sockets are non-blocking and replies wait in a bounded
 * queue per connection (conn.c); a request (a line being received, or a reply not yet taken)
 * has a deadline, a connection without a job an idle timeout; connections and slots are
 * limited per client address and slots per job; jobs registered with a secret admit only
 * ranks that prove it (PROTOCOL.md "Admission" and "Authentication"). Every refusal is
 * counted.
 */
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/base/log.h"
#include "switchd/server/control_int.h"

static int job_has_members(const job_t *j)
{
    for (uint32_t r = 0; r < j->world; r++)
        if (j->member_fd[r] >= 0)
            return 1;
    return 0;
}

static void handle_barrier(control_t *ctl, client_t *cl)
{
    job_t *j = cl->job;
    if (!j) {
        conn_send_err(ctl, cl->fd, WIRE_REFUSED_INVALID, "BARRIER before JOIN");
        return;
    }
    if (atomic_load(&j->state) == LIFE_FAILED) {
        life_tell_failed(ctl, cl->fd, j, cl->rank);
        return;
    }
    if (j->in_barrier[cl->rank])
        return;
    if (j->barrier_count == 0)
        j->barrier_since_ms = server_now_ms();
    j->in_barrier[cl->rank] = 1;
    if (++j->barrier_count < j->world)
        return;
    memset(j->in_barrier, 0, sizeof(j->in_barrier));
    j->barrier_count = 0;
    j->barrier_epoch++;
    conn_broadcast(ctl, j, wire_verb_name(WIRE_VERB_BARRIER_DONE));
}

static void handle_stats(control_t *ctl, client_t *cl, const char *line)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) {
        conn_send_err(ctl, cl->fd, WIRE_REFUSED_SYSTEM, "out of memory");
        return;
    }
    switch_write_stats(ctl->sw, f, strstr(line, "json") != NULL);
    fclose(f);
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
        conn_send_line(ctl, cl->fd, l);
    conn_send_line(ctl, cl->fd, wire_verb_name(WIRE_VERB_END));
    free(text);
}

/* FABRIC: the fabric carrying the dataplane answers (switch_config_t.extra_ctl). */
static void handle_fabric(control_t *ctl, client_t *cl, const char *line)
{
    const switch_config_t *c = &ctl->sw->cfg;
    if (!c->extra_ctl) {
        conn_send_err(ctl, cl->fd, WIRE_REFUSED_UNSUPPORTED,
                      "FABRIC: this switch runs without an L2 fabric (inagg switch --l2)");
        return;
    }
    char reply[CTL_LINE_MAX];
    c->extra_ctl(c->extra_ctx, line, cl->peer->addr, reply, sizeof(reply));
    conn_send_line(ctl, cl->fd, reply);
}

static void drop_client(control_t *ctl, int idx)
{
    client_t *cl = ctl->clients[idx];
    job_t *j = cl->job;
    if (j && j->member_fd[cl->rank] == cl->fd) {
        j->member_fd[cl->rank] = -1;
        if (!j->left[cl->rank])
            life_apply(ctl, j, LIFE_RANK_LOST, &(life_cause_t){.rank = cl->rank});
        if (!job_has_members(j))
            life_apply(ctl, j, LIFE_ALL_LEFT, NULL);
    }
    ctl_flush(cl->fd, &cl->wr); /* a last refusal usually fits in the socket's buffer */
    ctl->by_fd[cl->fd] = NULL;
    close(cl->fd);
    ctl_writer_free(&cl->wr);
    cl->peer->conns--;
    peers_release(cl->peer);
    atomic_fetch_sub(&ctl->sw->ctl_connections, 1);
    free(cl);
    ctl->clients[idx] = ctl->clients[--ctl->nclients];
}

/* Close every doomed client; closing one may doom others (its job fails and they cannot
 * take the news), so repeat until none is left. */
static void reap(control_t *ctl)
{
    for (int again = 1; again;) {
        again = 0;
        for (int i = ctl->nclients - 1; i >= 0; i--)
            if (i < ctl->nclients && ctl->clients[i]->doomed) {
                drop_client(ctl, i);
                again = 1;
            }
    }
}

/* Returns -1 if the client must be dropped. */
/* A client whose replies pile up is not served until it reads them (nor read from). */
static int throttled(const client_t *cl) { return cl->wr.len > CTL_OUTPUT_HIGH; }

/* A complete request is waiting in cl's buffer and cl may be served. */
static int has_request(const client_t *cl)
{
    return !cl->doomed && !throttled(cl) && memchr(cl->rd.buf, '\n', cl->rd.len) != NULL;
}

/* Read what cl sent and serve up to CTL_LINES_PER_PASS requests, so that no client takes
 * the thread from the others. 0, or a negative errno if the client must be dropped
 * (-ECONNREFUSED: its JOIN was refused; the connection's error, or -ECONNRESET: it is gone). */
static int serve_client(control_t *ctl, client_t *cl)
{
    long got = ctl_fill(cl->fd, &cl->rd);
    if (got == -EMSGSIZE)
        conn_count(ctl->sw, CTL_LINE_TOO_LONG);
    int gone = got == 0 || (got < 0 && got != -EAGAIN);
    uint64_t now = server_now_ms();
    if (got > 0)
        cl->last_in_ms = now;
    char line[CTL_LINE_MAX];
    for (int served = 0; served < CTL_LINES_PER_PASS && !cl->doomed && !throttled(cl) &&
                         ctl_take_line(&cl->rd, line, sizeof(line));
         served++) {
        switch (wire_verb_of(line)) {
            case WIRE_VERB_JOIN: {
                int rc = admit_join(ctl, cl, line);
                if (rc < 0)
                    return rc;
                break;
            }
            case WIRE_VERB_BARRIER: handle_barrier(ctl, cl); break;
            case WIRE_VERB_LEAVE:
                if (cl->job)
                    cl->job->left[cl->rank] = 1;
                conn_send_line(ctl, cl->fd, wire_verb_name(WIRE_VERB_BYE));
                break;
            case WIRE_VERB_STATS: handle_stats(ctl, cl, line); break;
            case WIRE_VERB_PING: conn_send_line(ctl, cl->fd, wire_verb_name(WIRE_VERB_PONG)); break;
            case WIRE_VERB_HELLO: admit_hello(ctl, cl, line); break;
            case WIRE_VERB_FABRIC: handle_fabric(ctl, cl, line); break;
            default:
                conn_send_err(ctl, cl->fd, WIRE_REFUSED_INVALID, "unknown request '%.40s'", line);
                break;
        }
    }
    if (cl->rd.len == 0)
        cl->partial_since_ms = 0;
    else if (cl->partial_since_ms == 0)
        cl->partial_since_ms = now;
    return !gone ? 0 : got < 0 ? (int)got : -ECONNRESET;
}

/* The deadlines: a request line or its reply not done within request_ms, and a connection
 * without a job that sent nothing for idle_ms, are closed. */
static void check_clients(control_t *ctl, uint64_t now)
{
    uint64_t now_ns = util_now_ns();
    for (int i = 0; i < ctl->nclients; i++) {
        client_t *cl = ctl->clients[i];
        if ((cl->wr.since_ns && now_ns - cl->wr.since_ns > ctl->request_ms * 1000000ull) ||
            (cl->partial_since_ms && now - cl->partial_since_ms > ctl->request_ms))
            conn_doom(ctl, cl, CTL_REQUEST_TIMEOUT);
        else if (!cl->job && now - cl->last_in_ms > ctl->idle_ms)
            conn_doom(ctl, cl, CTL_IDLE_CLOSED);
    }
}

/* At the table's size (p NULL) or address p's limit: close the connection without a job that
 * has been quiet longest (of p's), to make room for a new one (an address's idle or stuck
 * connections cannot lock out its members' JOINs). 1 if one was closed. */
static int evict_idle(control_t *ctl, const peer_t *p)
{
    int victim = -1;
    for (int i = 0; i < ctl->nclients; i++) {
        const client_t *cl = ctl->clients[i];
        if (cl->job || cl->doomed || (p && cl->peer != p))
            continue;
        if (victim < 0 || cl->last_in_ms < ctl->clients[victim]->last_in_ms)
            victim = i;
    }
    if (victim < 0)
        return 0;
    static const char bye[] = "ERR busy closed: the longest-idle connection without a job, to "
                              "make room for a new one\n";
    ssize_t n = send(ctl->clients[victim]->fd, bye, sizeof(bye) - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)n;
    conn_count(ctl->sw, CTL_CONN_EVICTED);
    drop_client(ctl, victim);
    return 1;
}

/* Accept what is waiting: a connection past the table's size or its address's limit takes
 * the place of the longest-idle connection without a job (of that address), or is refused
 * with a reason and closed when there is none. */
static void accept_clients(control_t *ctl)
{
    struct inagg_switch *sw = ctl->sw;
    for (int k = 0; k < CTL_ACCEPT_BURST; k++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        int fd = accept4(sw->listen_fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)) {
            /* Out of descriptors: the connection stays queued and the listener readable, so
             * stop polling it for a tick rather than spin. */
            conn_count(sw, CTL_CONN_LIMIT);
            ctl->accept_paused_until = server_now_ms() + CTL_TICK_MS;
        }
        if (fd < 0)
            return;
        peer_t *p = NULL;
        client_t *cl = NULL;
        const char *why = NULL;
        if ((ctl->nclients >= CTL_MAX_CLIENTS && !evict_idle(ctl, NULL)) || fd >= ctl->by_fd_cap ||
            !(p = peers_get(&ctl->peers, &ss))) {
            conn_count(sw, CTL_CONN_LIMIT);
            why = "ERR busy too many control connections\n";
        } else if (p->conns >= ctl->max_conns_per_addr &&
                   (!evict_idle(ctl, p) || !(p = peers_get(&ctl->peers, &ss)))) {
            conn_count(sw, CTL_CONN_PER_ADDR);
            why = "ERR busy too many control connections from this address\n";
        } else if (!(cl = calloc(1, sizeof(*cl)))) {
            why = "ERR system out of memory\n";
        }
        if (why) {
            ssize_t n = send(fd, why, strlen(why), MSG_DONTWAIT | MSG_NOSIGNAL);
            (void)n;
            close(fd);
            peers_release(p);
            continue;
        }
        *cl = (client_t){
            .fd = fd, .peer = p, .last_in_ms = server_now_ms(), .wr = {.max = CTL_OUTPUT_MAX}};
        p->conns++;
        ctl->by_fd[fd] = cl;
        ctl->clients[ctl->nclients++] = cl;
        atomic_fetch_add(&sw->ctl_connections, 1);
    }
}

/* The switch stops: every member of a job gets SHUTDOWN <reason>, and the lines are sent
 * before the connections close (at most SWITCH_DRAIN_MS for members that do not read). */
static void drain(control_t *ctl)
{
    struct inagg_switch *sw = ctl->sw;
    char line[CTL_LINE_MAX];
    wire_shutdown_format(sw->stop_reason, line, sizeof(line));
    uint32_t members = 0;
    for (int i = 0; i < ctl->nclients; i++)
        members += ctl->clients[i]->job && !ctl->clients[i]->doomed;
    life_cause_t why = {.text = sw->stop_reason};
    for (uint32_t id = 0; id < SWITCH_MAX_JOBS; id++) {
        job_t *j = atomic_load_explicit(&sw->jobs[id], memory_order_relaxed);
        if (j)
            life_apply(ctl, j, LIFE_SHUTDOWN, &why);
    }
    if (members == 0)
        return;
    LOG_I("draining: told %u member connection%s that the switch is shutting down (%s)", members,
          members == 1 ? "" : "s", ctlline_rest(line));
    struct pollfd p[CTL_MAX_CLIENTS];
    uint64_t deadline = server_now_ms() + SWITCH_DRAIN_MS;
    for (uint64_t now = server_now_ms(); now < deadline; now = server_now_ms()) {
        int n = 0;
        client_t *waiting[CTL_MAX_CLIENTS];
        for (int i = 0; i < ctl->nclients; i++) {
            client_t *cl = ctl->clients[i];
            if (cl->wr.len && !cl->doomed) {
                waiting[n] = cl;
                p[n++] = (struct pollfd){.fd = cl->fd, .events = POLLOUT};
            }
        }
        if (n == 0)
            return;
        if (poll(p, (nfds_t)n, (int)(deadline - now) + 1) < 0 && errno != EINTR)
            break;
        for (int i = 0; i < n; i++) {
            if (p[i].revents & (POLLERR | POLLHUP))
                conn_doom(ctl, waiting[i], -1); /* gone: nothing to tell it */
            else if (p[i].revents && ctl_flush(waiting[i]->fd, &waiting[i]->wr) < 0)
                conn_doom(ctl, waiting[i], -1);
        }
    }
    LOG_W("draining: some members did not take SHUTDOWN within %u ms; closing them",
          SWITCH_DRAIN_MS);
}

static control_t *control_create(struct inagg_switch *sw)
{
    control_t *ctl = calloc(1, sizeof(*ctl));
    if (!ctl)
        return NULL;
    const switch_config_t *c = &sw->cfg;
    ctl->sw = sw;
    switch_limits_t l = {c->request_ms, c->idle_ms, c->max_conns_per_addr, c->max_job_slots,
                         c->max_addr_slots};
    control_use_limits(ctl, &l, NULL);
    ctl->by_fd_cap = 65536; /* descriptors above this are refused */
    ctl->by_fd = calloc((size_t)ctl->by_fd_cap, sizeof(*ctl->by_fd));
    ctl->retiring = calloc(SWITCH_MAX_JOBS, sizeof(*ctl->retiring));
    if (!ctl->by_fd || !ctl->retiring ||
        peers_init(&ctl->peers, CTL_MAX_CLIENTS + SWITCH_MAX_JOBS) != 0 ||
        authlimit_init(&ctl->auth, AUTH_TABLE, AUTH_FAIL_LIMIT, AUTH_WINDOW_MS) != 0) {
        peers_free(&ctl->peers);
        authlimit_free(&ctl->auth);
        free(ctl->by_fd);
        free(ctl->retiring);
        free(ctl);
        return NULL;
    }
    return ctl;
}

void *control_main(void *arg)
{
    struct inagg_switch *sw = arg;
    control_t *ctl = control_create(sw);
    struct pollfd *pfds = calloc(CTL_MAX_CLIENTS + 1, sizeof(*pfds));
    if (!ctl || !pfds) {
        if (ctl) {
            peers_free(&ctl->peers);
            authlimit_free(&ctl->auth);
            free(ctl->by_fd);
            free(ctl->retiring);
        }
        free(ctl);
        free(pfds);
        LOG_E("control thread: out of memory");
        return NULL;
    }
    uint64_t last_check = 0;
    while (!atomic_load(&sw->stop)) {
        control_take_limits(ctl); /* a reload (SIGHUP) */
        short listen_ev = server_now_ms() < ctl->accept_paused_until ? 0 : POLLIN;
        pfds[0] = (struct pollfd){.fd = sw->listen_fd, .events = listen_ev};
        int pending = 0;
        for (int i = 0; i < ctl->nclients; i++) {
            const client_t *cl = ctl->clients[i];
            short ev =
                (short)(POLLRDHUP | (throttled(cl) ? 0 : POLLIN) | (cl->wr.len ? POLLOUT : 0));
            pfds[i + 1] = (struct pollfd){.fd = cl->fd, .events = ev};
            pending |= has_request(cl);
        }
        int n = ctl->nclients;
        int pr = poll(pfds, (nfds_t)n + 1, pending ? 0 : CTL_TICK_MS);
        if (pr < 0 && errno != EINTR)
            LOG_W("control: poll: %s", strerror(errno));
        if (pr > 0 && (pfds[0].revents & POLLIN))
            accept_clients(ctl);
        /* Serve in reverse so dropping (swap with last) does not skip a client. */
        for (int i = n - 1; i >= 0; i--) {
            client_t *cl = ctl->clients[i];
            short re = pr > 0 ? pfds[i + 1].revents : 0;
            if ((re & POLLOUT) && ctl_flush(cl->fd, &cl->wr) < 0)
                conn_doom(ctl, cl, -1);
            if (throttled(cl) && (re & (POLLRDHUP | POLLHUP | POLLERR)))
                conn_doom(ctl, cl, -1); /* gone without reading its replies */
            else if (((re & (POLLIN | POLLRDHUP | POLLHUP | POLLERR)) || has_request(cl)) &&
                     !cl->doomed && serve_client(ctl, cl) != 0)
                drop_client(ctl, i);
        }
        uint64_t now = server_now_ms();
        if (now - last_check >= CTL_TICK_MS) {
            check_clients(ctl, now);
            watch_jobs(ctl);
            last_check = now;
        }
        reap(ctl);
        life_reap(ctl, 0);
    }
    drain(ctl);
    while (ctl->nclients > 0)
        drop_client(ctl, ctl->nclients - 1);
    life_reap(ctl, 1);
    peers_free(&ctl->peers);
    authlimit_free(&ctl->auth);
    free(ctl->by_fd);
    free(ctl->retiring);
    free(pfds);
    free(ctl);
    return NULL;
}
