/*
 * control.c - the switch's control plane: one thread serving TCP connections with the text
 * protocol of control/ctl.h.
 *
 * It admits jobs (admit.c: JOIN, its limits and job secrets; all ranks get JOINED once the
 * last one arrives, which makes join a barrier), runs barriers,
 * answers STATS, and watches jobs: a member whose connection closes without LEAVE fails its
 * job at once; a rank that sends nothing for the job's timeout while other ranks keep
 * sending fails it too; a job whose ranks do not all join in time is refused. Failing a job
 * tells every member why, on its connection; other jobs carry on.
 *
 * No client can hold the thread: sockets are non-blocking and replies wait in a bounded
 * queue per connection; a request (a line being received, or a reply not yet taken) has a
 * deadline, a connection without a job an idle timeout; connections and slots are limited
 * per client address and slots per job; jobs registered with a secret admit only ranks that
 * prove it (PROTOCOL.md "Admission" and "Authentication"). Every refusal is counted.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.h"
#include "switch/control_int.h"
#include "switch/upstream.h"

void control_count(struct inagg_switch *sw, enum ctl_stat s)
{
    atomic_fetch_add_explicit(&sw->ctl_counts[s], 1, memory_order_relaxed);
}

/* Close cl at the end of this pass, counting why (reason < 0: not a refusal). */
static void doom(control_t *ctl, client_t *cl, int reason)
{
    if (cl->doomed)
        return;
    cl->doomed = 1;
    if (reason >= 0)
        control_count(ctl->sw, (enum ctl_stat)reason);
}

static client_t *client_of(control_t *ctl, int fd)
{
    return fd >= 0 && fd < ctl->by_fd_cap ? ctl->by_fd[fd] : NULL;
}

/* Queue a line for fd's client and send what the socket takes; a client whose replies pile
 * up past CTL_OUTPUT_MAX is closed, never waited for. */
void control_send_line(control_t *ctl, int fd, const char *line)
{
    client_t *cl = client_of(ctl, fd);
    if (!cl || cl->doomed)
        return;
    int rc = ctl_queue_line(&cl->wr, line);
    if (rc == -ENOBUFS)
        doom(ctl, cl, CTL_OUTPUT_FULL);
    else if (rc != 0 || ctl_flush(cl->fd, &cl->wr) < 0)
        doom(ctl, cl, -1);
}

/* "ERR <refusal> <text>" to fd. */
void control_send_err(control_t *ctl, int fd, enum wire_refusal r, const char *fmt, ...)
{
    char text[CTL_LINE_MAX - 32], line[CTL_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    wire_err_format(r, text, line, sizeof(line));
    control_send_line(ctl, fd, line);
}

static void send_failed(control_t *ctl, int fd, const job_t *j)
{
    char line[CTL_LINE_MAX];
    wire_failed_format(j->fail_reason, line, sizeof(line));
    control_send_line(ctl, fd, line);
}

void control_broadcast(control_t *ctl, job_t *j, const char *line)
{
    for (uint32_t r = 0; r < j->world; r++)
        if (j->member_fd[r] >= 0)
            control_send_line(ctl, j->member_fd[r], line);
}

static void fail_job(control_t *ctl, job_t *j, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail_job(control_t *ctl, job_t *j, const char *fmt, ...)
{
    if (atomic_load(&j->state) == JOB_FAILED)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(j->fail_reason, sizeof(j->fail_reason), fmt, ap);
    va_end(ap);
    atomic_store_explicit(&j->state, JOB_FAILED, memory_order_release);
    upstream_end(ctl->sw, j, 0); /* a leaf: the upstream job fails for the other leaves too */
    LOG_W("job '%s' (id %u) failed: %s", j->name, j->id, j->fail_reason);
    for (uint32_t r = 0; r < j->world; r++)
        if (j->member_fd[r] >= 0)
            send_failed(ctl, j->member_fd[r], j);
}

void control_fail_job(control_t *ctl, job_t *j, const char *fmt, ...)
{
    char reason[sizeof(j->fail_reason)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof(reason), fmt, ap);
    va_end(ap);
    fail_job(ctl, j, "%s", reason);
}

void control_refuse_joining(control_t *ctl, job_t *j, enum wire_refusal r, const char *text)
{
    char line[CTL_LINE_MAX];
    wire_err_format(r, text, line, sizeof(line));
    control_broadcast(ctl, j, line);
    LOG_W("job '%s' refused: %s", j->name, text);
    fail_job(ctl, j, "%s", r == WIRE_REFUSED_TIMEOUT ? "join timed out" : text);
    for (int i = ctl->nclients - 1; i >= 0; i--)
        if (ctl->clients[i]->job == j)
            doom(ctl, ctl->clients[i], -1); /* the last close retires the job */
}

/* The end of a retirement, after the grace period: keep its counters, return its slots,
 * free it. */
static void free_retired(control_t *ctl, job_t *j, uint64_t record)
{
    struct inagg_switch *sw = ctl->sw;
    if (j->owner) {
        j->owner->slots -= j->nslots;
        peers_release(j->owner, server_now_ms(), AUTH_WINDOW_MS);
    }
    pthread_mutex_lock(&sw->stats_lock);
    atomic_fetch_sub(&sw->slots_used, j->nslots);
    stats_retire_final(sw, j, record);
    job_free(j);
    pthread_mutex_unlock(&sw->stats_lock);
}

/* Free the retiring jobs whose grace period has passed (all of them, waiting, if `wait`). */
static void reap_retired(control_t *ctl, int wait)
{
    for (uint32_t k = 0; k < ctl->nretiring;) {
        retiring_t *r = &ctl->retiring[k];
        if (!server_passed(ctl->sw, r->epoch) && !wait) {
            k++;
            continue;
        }
        if (wait)
            server_quiesce(ctl->sw);
        free_retired(ctl, r->j, r->record);
        *r = ctl->retiring[--ctl->nretiring];
    }
}

/* Unpublish j (under the stats lock, so a stats printer never sees it afterwards); it is
 * freed by reap_retired once no dataplane thread can hold it. The control thread does not
 * wait for the dataplane here. */
static void retire_job(control_t *ctl, job_t *j)
{
    struct inagg_switch *sw = ctl->sw;
    upstream_end(sw, j, atomic_load(&j->state) != JOB_FAILED);
    pthread_mutex_lock(&sw->stats_lock);
    atomic_store_explicit(&sw->jobs[j->id], NULL, memory_order_release);
    uint64_t record = stats_retire(sw, j);
    pthread_mutex_unlock(&sw->stats_lock);
    if (ctl->nretiring == SWITCH_MAX_JOBS) { /* cannot happen in practice: wait instead */
        server_quiesce(sw);
        free_retired(ctl, j, record);
        return;
    }
    retiring_t *r = &ctl->retiring[ctl->nretiring++];
    r->j = j;
    r->record = record;
    server_epochs(sw, r->epoch);
}

static int job_has_members(const job_t *j)
{
    for (uint32_t r = 0; r < j->world; r++)
        if (j->member_fd[r] >= 0)
            return 1;
    return 0;
}

job_t *control_find_job(struct inagg_switch *sw, const char *name)
{
    for (uint32_t i = 0; i < SWITCH_MAX_JOBS; i++) {
        job_t *j = atomic_load_explicit(&sw->jobs[i], memory_order_relaxed);
        if (j && strcmp(j->name, name) == 0)
            return j;
    }
    return NULL;
}

static void handle_barrier(control_t *ctl, client_t *cl)
{
    job_t *j = cl->job;
    if (!j) {
        control_send_err(ctl, cl->fd, WIRE_REFUSED_INVALID, "BARRIER before JOIN");
        return;
    }
    if (atomic_load(&j->state) == JOB_FAILED) {
        send_failed(ctl, cl->fd, j);
        return;
    }
    if (j->in_barrier[cl->rank])
        return;
    j->in_barrier[cl->rank] = 1;
    if (++j->barrier_count < j->world)
        return;
    memset(j->in_barrier, 0, sizeof(j->in_barrier));
    j->barrier_count = 0;
    j->barrier_epoch++;
    control_broadcast(ctl, j, wire_verb_name(WIRE_VERB_BARRIER_DONE));
}

static void handle_stats(control_t *ctl, client_t *cl, const char *line)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) {
        control_send_err(ctl, cl->fd, WIRE_REFUSED_SYSTEM, "out of memory");
        return;
    }
    switch_write_stats(ctl->sw, f, strstr(line, "json") != NULL);
    fclose(f);
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
        control_send_line(ctl, cl->fd, l);
    control_send_line(ctl, cl->fd, wire_verb_name(WIRE_VERB_END));
    free(text);
}

/* FABRIC: the fabric carrying the dataplane answers (switch_config_t.extra_ctl). */
static void handle_fabric(control_t *ctl, client_t *cl, const char *line)
{
    const switch_config_t *c = &ctl->sw->cfg;
    if (!c->extra_ctl) {
        control_send_err(ctl, cl->fd, WIRE_REFUSED_UNSUPPORTED,
                         "FABRIC: this switch runs without an L2 fabric (inagg switch --l2)");
        return;
    }
    char reply[CTL_LINE_MAX];
    c->extra_ctl(c->extra_ctx, line, cl->peer->addr, reply, sizeof(reply));
    control_send_line(ctl, cl->fd, reply);
}

static void drop_client(control_t *ctl, int idx)
{
    client_t *cl = ctl->clients[idx];
    job_t *j = cl->job;
    if (j && j->member_fd[cl->rank] == cl->fd) {
        j->member_fd[cl->rank] = -1;
        if (!j->left[cl->rank]) {
            if (atomic_load(&j->state) == JOB_JOINING) {
                j->joined--; /* a rank that gave up joining may come back */
            } else {
                fail_job(ctl, j, "rank %u disconnected (its control connection closed: "
                         "the process exited or crashed)", cl->rank);
            }
        }
        if (!job_has_members(j))
            retire_job(ctl, j);
    }
    ctl_flush(cl->fd, &cl->wr); /* a last refusal usually fits in the socket's buffer */
    ctl->by_fd[cl->fd] = NULL;
    close(cl->fd);
    ctl_writer_free(&cl->wr);
    cl->peer->conns--;
    peers_release(cl->peer, server_now_ms(), AUTH_WINDOW_MS);
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
 * the thread from the others. Returns -1 if the client must be dropped. */
static int serve_client(control_t *ctl, client_t *cl)
{
    long got = ctl_fill(cl->fd, &cl->rd);
    if (got == -EMSGSIZE)
        control_count(ctl->sw, CTL_LINE_TOO_LONG);
    int gone = got == 0 || (got < 0 && got != -EAGAIN);
    uint64_t now = server_now_ms();
    if (got > 0)
        cl->last_in_ms = now;
    char line[CTL_LINE_MAX];
    for (int served = 0; served < CTL_LINES_PER_PASS && !cl->doomed && !throttled(cl) &&
                         ctl_take_line(&cl->rd, line, sizeof(line));
         served++) {
        switch (wire_verb_of(line)) {
        case WIRE_VERB_JOIN:
            if (admit_join(ctl, cl, line) != 0)
                return -1;
            break;
        case WIRE_VERB_BARRIER:
            handle_barrier(ctl, cl);
            break;
        case WIRE_VERB_LEAVE:
            if (cl->job)
                cl->job->left[cl->rank] = 1;
            control_send_line(ctl, cl->fd, wire_verb_name(WIRE_VERB_BYE));
            break;
        case WIRE_VERB_STATS:
            handle_stats(ctl, cl, line);
            break;
        case WIRE_VERB_HELLO:
            admit_hello(ctl, cl, line);
            break;
        case WIRE_VERB_FABRIC:
            handle_fabric(ctl, cl, line);
            break;
        default:
            control_send_err(ctl, cl->fd, WIRE_REFUSED_INVALID, "unknown request '%.40s'", line);
            break;
        }
    }
    if (cl->rd.len == 0)
        cl->partial_since_ms = 0;
    else if (cl->partial_since_ms == 0)
        cl->partial_since_ms = now;
    return gone ? -1 : 0;
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
            doom(ctl, cl, CTL_REQUEST_TIMEOUT);
        else if (!cl->job && now - cl->last_in_ms > ctl->idle_ms)
            doom(ctl, cl, CTL_IDLE_CLOSED);
    }
}

static void check_jobs(control_t *ctl)
{
    struct inagg_switch *sw = ctl->sw;
    uint64_t now = server_now_ms();
    for (uint32_t id = 0; id < SWITCH_MAX_JOBS; id++) {
        job_t *j = atomic_load_explicit(&sw->jobs[id], memory_order_relaxed);
        if (!j)
            continue;
        int state = atomic_load(&j->state);
        if (j->upj) { /* a leaf: the upstream thread has its own deadline */
            upstream_poll(ctl, j);
            state = atomic_load(&j->state);
        } else if (state == JOB_JOINING && now - j->created_ms > j->timeout_ms) {
            char missing[256] = "";
            size_t off = 0;
            for (uint32_t r = 0; r < j->world && off < sizeof(missing) - 12; r++)
                if (j->member_fd[r] < 0)
                    off += (size_t)snprintf(missing + off, sizeof(missing) - off, "%s%u",
                                            off ? "," : "", r);
            char text[CTL_LINE_MAX - 32];
            snprintf(text, sizeof(text), "only %u of %u ranks joined job '%s' within %u ms; "
                     "missing ranks: %s", j->joined, j->world, j->name, j->timeout_ms, missing);
            control_refuse_joining(ctl, j, WIRE_REFUSED_TIMEOUT, text);
            continue;
        }
        if (state != JOB_ACTIVE)
            continue;
        uint64_t newest = 0, oldest = UINT64_MAX;
        uint32_t oldest_rank = 0;
        for (uint32_t r = 0; r < j->world; r++) {
            uint64_t seen = j->activated_ms;
            for (uint32_t t = 0; t < j->nthreads; t++) {
                uint64_t s = STAT_GET(j->threads[t].last_seen_ms[r]);
                if (s > seen)
                    seen = s;
            }
            if (seen > newest)
                newest = seen;
            if (seen < oldest) {
                oldest = seen;
                oldest_rank = r;
            }
        }
        if (now - oldest > j->timeout_ms && now - newest < j->timeout_ms / 2 + 1)
            fail_job(ctl, j,
                     "rank %u sent nothing for %llu ms while other ranks were waiting on it "
                     "(worker timeout %u ms)%s",
                     oldest_rank, (unsigned long long)(now - oldest), j->timeout_ms,
                     j->left[oldest_rank] ? "; it had left the job" : "");
    }
}

/* Accept what is waiting: a connection past the table's size or its address's limit is
 * refused with a reason and closed. */
static void accept_clients(control_t *ctl)
{
    struct inagg_switch *sw = ctl->sw;
    for (int k = 0; k < CTL_ACCEPT_BURST; k++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        int fd = accept4(sw->listen_fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
                       errno == ENOMEM)) {
            /* Out of descriptors: the connection stays queued and the listener readable, so
             * stop polling it for a tick rather than spin. */
            control_count(sw, CTL_CONN_LIMIT);
            ctl->accept_paused_until = server_now_ms() + CTL_TICK_MS;
        }
        if (fd < 0)
            return;
        peer_t *p = NULL;
        client_t *cl = NULL;
        const char *why = NULL;
        if (ctl->nclients >= CTL_MAX_CLIENTS || fd >= ctl->by_fd_cap ||
            !(p = peers_get(&ctl->peers, &ss))) {
            control_count(sw, CTL_CONN_LIMIT);
            why = "ERR system too many control connections\n";
        } else if (p->conns >= ctl->max_conns_per_addr) {
            control_count(sw, CTL_CONN_PER_ADDR);
            why = "ERR refused too many control connections from this address\n";
        } else if (!(cl = calloc(1, sizeof(*cl)))) {
            why = "ERR system out of memory\n";
        }
        if (why) {
            ssize_t n = send(fd, why, strlen(why), MSG_DONTWAIT | MSG_NOSIGNAL);
            (void)n;
            close(fd);
            peers_release(p, server_now_ms(), AUTH_WINDOW_MS);
            continue;
        }
        *cl = (client_t){.fd = fd, .peer = p, .last_in_ms = server_now_ms(),
                         .wr = {.max = CTL_OUTPUT_MAX}};
        p->conns++;
        ctl->by_fd[fd] = cl;
        ctl->clients[ctl->nclients++] = cl;
        atomic_fetch_add(&sw->ctl_connections, 1);
    }
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
        peers_init(&ctl->peers, CTL_MAX_CLIENTS + SWITCH_MAX_JOBS) != 0) {
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
                doom(ctl, cl, -1);
            if (throttled(cl) && (re & (POLLRDHUP | POLLHUP | POLLERR)))
                doom(ctl, cl, -1); /* gone without reading its replies */
            else if (((re & (POLLIN | POLLRDHUP | POLLHUP | POLLERR)) || has_request(cl)) &&
                     !cl->doomed && serve_client(ctl, cl) != 0)
                drop_client(ctl, i);
        }
        uint64_t now = server_now_ms();
        if (now - last_check >= CTL_TICK_MS) {
            check_clients(ctl, now);
            check_jobs(ctl);
            last_check = now;
        }
        reap(ctl);
        reap_retired(ctl, 0);
    }
    while (ctl->nclients > 0)
        drop_client(ctl, ctl->nclients - 1);
    reap_retired(ctl, 1);
    peers_free(&ctl->peers);
    free(ctl->by_fd);
    free(ctl->retiring);
    free(pfds);
    free(ctl);
    return NULL;
}
