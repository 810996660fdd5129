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

#include "lib/base/log.h"
#include "switchd/server/control_int.h"
#include "switchd/server/upstream.h"

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
int control_send_err(control_t *ctl, int fd, enum wire_refusal r, const char *fmt, ...)
{
    char text[CTL_LINE_MAX - 32], line[CTL_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    wire_err_format(r, text, line, sizeof(line));
    control_send_line(ctl, fd, line);
    return -ECONNREFUSED;
}

/* The job's failure to rank `rank` (on fd): a rank that failed it by its silence is told so
 * in its own words. */
static void send_failed(control_t *ctl, int fd, const job_t *j, uint32_t rank)
{
    char line[CTL_LINE_MAX], own[sizeof(j->silent_reason) + 64];
    const char *reason = j->fail_reason;
    if (rank < j->world && j->silent_ms[rank]) {
        snprintf(own, sizeof(own), "this rank (%u) sent nothing for %llu ms %s", rank,
                 (unsigned long long)j->silent_ms[rank], j->silent_reason);
        reason = own;
    }
    wire_failed_format(reason, line, sizeof(line));
    control_send_line(ctl, fd, line);
}

/* The ranks r < world with set[r] as "0,2,3,5-9" (at most cap - 1 characters; a list that does
 * not fit ends with "..."). How many there are. */
static uint32_t format_ranks(const uint8_t *set, uint32_t world, char *buf, size_t cap)
{
    size_t off = 0;
    uint32_t n = 0;
    buf[0] = 0;
    for (uint32_t r = 0; r < world; r++) {
        if (!set[r])
            continue;
        uint32_t end = r;
        while (end + 1 < world && set[end + 1])
            end++;
        if (end < r + 2)
            end = r; /* two in a row are listed, three or more are a range */
        n += end - r + 1;
        char part[32];
        if (end == r)
            snprintf(part, sizeof(part), "%s%u", off ? "," : "", r);
        else
            snprintf(part, sizeof(part), "%s%u-%u", off ? "," : "", r, end);
        if (off + strlen(part) + 4 > cap) {
            snprintf(buf + off, cap - off, "...");
            off = cap;
        } else if (off < cap) {
            off += (size_t)snprintf(buf + off, cap - off, "%s", part);
        }
        r = end;
    }
    return n;
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
            send_failed(ctl, j->member_fd[r], j, r);
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
        peers_release(j->owner);
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
        send_failed(ctl, cl->fd, j, cl->rank);
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
            } else if (!ctl->draining) { /* draining: SHUTDOWN told the members why */
                fail_job(ctl, j,
                         "rank %u disconnected (its control connection closed: "
                         "the process exited or crashed)",
                         cl->rank);
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
                control_send_line(ctl, cl->fd, wire_verb_name(WIRE_VERB_BYE));
                break;
            case WIRE_VERB_STATS: handle_stats(ctl, cl, line); break;
            case WIRE_VERB_HELLO: admit_hello(ctl, cl, line); break;
            case WIRE_VERB_FABRIC: handle_fabric(ctl, cl, line); break;
            default:
                control_send_err(ctl, cl->fd, WIRE_REFUSED_INVALID, "unknown request '%.40s'",
                                 line);
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
            doom(ctl, cl, CTL_REQUEST_TIMEOUT);
        else if (!cl->job && now - cl->last_in_ms > ctl->idle_ms)
            doom(ctl, cl, CTL_IDLE_CLOSED);
    }
}

/* A barrier some ranks entered timeout_ms ago that the others never reached fails the job,
 * naming the ranks that did not arrive. 1 when it failed the job. */
static int check_barrier(control_t *ctl, job_t *j, uint64_t now)
{
    if (j->barrier_count == 0 || now - j->barrier_since_ms <= j->timeout_ms)
        return 0;
    uint8_t missing[INAGG_MAX_WORLD];
    for (uint32_t r = 0; r < j->world; r++)
        missing[r] = !j->in_barrier[r];
    char list[100], gone[100] = "";
    uint32_t n = format_ranks(missing, j->world, list, sizeof(list));
    for (uint32_t r = 0; r < j->world; r++)
        missing[r] = missing[r] && j->left[r];
    uint32_t nleft = format_ranks(missing, j->world, gone, sizeof(gone));
    fail_job(ctl, j, "barrier: rank%s %s did not arrive within %u ms (%u of %u ranks did)%s%s%s%s",
             n == 1 ? "" : "s", list, j->timeout_ms, j->barrier_count, j->world,
             nleft ? "; rank" : "",
             nleft > 1 ? "s "
             : nleft   ? " "
                       : "",
             gone,
             nleft == 1 ? " had left the job"
             : nleft    ? " had left the job"
                        : "");
    return 1;
}

/* Ranks that sent nothing for timeout_ms while another rank was active (sent within half of
 * it) fail the job; ranks that left with LEAVE are done and wait on nothing, so they are not
 * counted. Every silent rank is named; each is told on its own connection that it was the
 * silent one (a rank that was stopped learns it when it runs again). */
static void check_silence(control_t *ctl, job_t *j, uint64_t now)
{
    uint64_t newest = 0, seen[INAGG_MAX_WORLD];
    for (uint32_t r = 0; r < j->world; r++) {
        seen[r] = j->activated_ms;
        for (uint32_t t = 0; t < j->nthreads; t++) {
            uint64_t s = STAT_GET(j->threads[t].last_seen_ms[r]);
            if (s > seen[r])
                seen[r] = s;
        }
        if (!j->left[r] && seen[r] > newest)
            newest = seen[r];
    }
    if (newest == 0 || now - newest >= j->timeout_ms / 2 + 1)
        return; /* nobody active: nobody is waiting */
    uint8_t silent[INAGG_MAX_WORLD] = {0}, waiting[INAGG_MAX_WORLD] = {0};
    uint64_t longest = 0;
    uint32_t nsilent = 0;
    for (uint32_t r = 0; r < j->world; r++) {
        if (j->left[r])
            continue;
        if (now - seen[r] > j->timeout_ms) {
            silent[r] = 1;
            nsilent++;
            if (now - seen[r] > longest)
                longest = now - seen[r];
        } else {
            waiting[r] = 1;
        }
    }
    if (nsilent == 0)
        return;
    char sl[100], wl[80];
    format_ranks(silent, j->world, sl, sizeof(sl));
    int several = format_ranks(waiting, j->world, wl, sizeof(wl)) > 1;
    for (uint32_t r = 0; r < j->world; r++)
        j->silent_ms[r] = silent[r] ? now - seen[r] : 0;
    snprintf(j->silent_reason, sizeof(j->silent_reason),
             "(longer than the worker timeout, %u ms) while rank%s %s %s waiting on it: the job "
             "failed and this rank is no longer part of it",
             j->timeout_ms, several ? "s" : "", wl, several ? "were" : "was");
    fail_job(ctl, j,
             "rank%s %s sent nothing for %s%llu ms while rank%s %s %s waiting on %s "
             "(worker timeout %u ms)",
             nsilent == 1 ? "" : "s", sl, nsilent == 1 ? "" : "up to ", (unsigned long long)longest,
             several ? "s" : "", wl, several ? "were" : "was", nsilent == 1 ? "it" : "them",
             j->timeout_ms);
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
            snprintf(text, sizeof(text),
                     "only %u of %u ranks joined job '%s' within %u ms; "
                     "missing ranks: %s",
                     j->joined, j->world, j->name, j->timeout_ms, missing);
            control_refuse_joining(ctl, j, WIRE_REFUSED_TIMEOUT, text);
            continue;
        }
        if (state != JOB_ACTIVE)
            continue;
        if (check_barrier(ctl, j, now) == 0)
            check_silence(ctl, j, now);
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
    control_count(ctl->sw, CTL_CONN_EVICTED);
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
            control_count(sw, CTL_CONN_LIMIT);
            ctl->accept_paused_until = server_now_ms() + CTL_TICK_MS;
        }
        if (fd < 0)
            return;
        peer_t *p = NULL;
        client_t *cl = NULL;
        const char *why = NULL;
        if ((ctl->nclients >= CTL_MAX_CLIENTS && !evict_idle(ctl, NULL)) || fd >= ctl->by_fd_cap ||
            !(p = peers_get(&ctl->peers, &ss))) {
            control_count(sw, CTL_CONN_LIMIT);
            why = "ERR busy too many control connections\n";
        } else if (p->conns >= ctl->max_conns_per_addr &&
                   (!evict_idle(ctl, p) || !(p = peers_get(&ctl->peers, &ss)))) {
            control_count(sw, CTL_CONN_PER_ADDR);
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
    ctl->draining = 1;
    uint32_t members = 0;
    for (int i = 0; i < ctl->nclients; i++) {
        client_t *cl = ctl->clients[i];
        if (cl->job && !cl->doomed) {
            control_send_line(ctl, cl->fd, line);
            members++;
        }
    }
    if (members == 0)
        return;
    LOG_I("draining: told %u member connection%s that the switch is shutting down (%s)", members,
          members == 1 ? "" : "s", ctl_rest(line));
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
                doom(ctl, waiting[i], -1); /* gone: nothing to tell it */
            else if (p[i].revents && ctl_flush(waiting[i]->fd, &waiting[i]->wr) < 0)
                doom(ctl, waiting[i], -1);
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
    drain(ctl);
    while (ctl->nclients > 0)
        drop_client(ctl, ctl->nclients - 1);
    reap_retired(ctl, 1);
    peers_free(&ctl->peers);
    authlimit_free(&ctl->auth);
    free(ctl->by_fd);
    free(ctl->retiring);
    free(pfds);
    free(ctl);
    return NULL;
}
