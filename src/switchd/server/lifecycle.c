/*
 * lifecycle.c - a job's life on the switch (lifecycle.h): the legal transitions as one table,
 * life_apply() that checks an event against it and does the transition's side effects, and
 * those effects: activation (JOINED to every member), refusal of a joining job, failure
 * (FAILED to every member), the switch's SHUTDOWN, and retirement with its grace period.
 *
 * Retiring a job: it is unpublished from the job table (under the stats lock, with its
 * counters kept, so a stats printer never misses it), the dataplane threads' epochs are
 * noted, and it is freed once every running dataplane thread has passed its loop head since
 * (a quiescent-state grace period), after which no thread can still hold a pointer to it.
 * The control thread does not wait for that: life_reap checks on every pass.
 */
#include "switchd/server/lifecycle.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "lib/base/log.h"
#include "lib/netio/mcast.h"
#include "switchd/server/control_int.h"
#include "switchd/server/upstream.h"

#define TO(s) ((signed char)((s) + 1)) /* 0 in the table: illegal */

/* next[from][event] = TO(to). A leaf switch's JOIN_COMPLETE goes to LINKING instead. */
static const signed char next[LIFE_STATES][LIFE_EVENTS] = {
    [LIFE_JOINING] = {[LIFE_JOIN_COMPLETE] = TO(LIFE_ACTIVE),
                      [LIFE_JOIN_REFUSED] = TO(LIFE_FAILED),
                      [LIFE_RANK_LOST] = TO(LIFE_JOINING),
                      [LIFE_SHUTDOWN] = TO(LIFE_DRAINING),
                      [LIFE_ALL_LEFT] = TO(LIFE_RETIRED),
                      [LIFE_SUPERSEDED] = TO(LIFE_FAILED)},
    [LIFE_LINKING] = {[LIFE_JOIN_COMPLETE] = TO(LIFE_LINKING),
                      [LIFE_UPSTREAM_JOINED] = TO(LIFE_ACTIVE),
                      [LIFE_JOIN_REFUSED] = TO(LIFE_FAILED),
                      [LIFE_UPSTREAM_LOST] = TO(LIFE_FAILED),
                      [LIFE_RANK_LOST] = TO(LIFE_LINKING),
                      [LIFE_SHUTDOWN] = TO(LIFE_DRAINING),
                      [LIFE_ALL_LEFT] = TO(LIFE_RETIRED),
                      [LIFE_SUPERSEDED] = TO(LIFE_FAILED)},
    [LIFE_ACTIVE] = {[LIFE_UPSTREAM_LOST] = TO(LIFE_FAILED),
                     [LIFE_FAULT] = TO(LIFE_FAILED),
                     [LIFE_RANK_LOST] = TO(LIFE_FAILED),
                     [LIFE_SHUTDOWN] = TO(LIFE_DRAINING),
                     [LIFE_ALL_LEFT] = TO(LIFE_RETIRED),
                     [LIFE_SUPERSEDED] = TO(LIFE_FAILED)},
    [LIFE_DRAINING] = {[LIFE_RANK_LOST] = TO(LIFE_DRAINING),
                       [LIFE_ALL_LEFT] = TO(LIFE_RETIRED),
                       [LIFE_SUPERSEDED] = TO(LIFE_DRAINING)},
    [LIFE_FAILED] = {[LIFE_UPSTREAM_LOST] = TO(LIFE_FAILED),
                     [LIFE_FAULT] = TO(LIFE_FAILED),
                     [LIFE_RANK_LOST] = TO(LIFE_FAILED),
                     [LIFE_SHUTDOWN] = TO(LIFE_FAILED),
                     [LIFE_ALL_LEFT] = TO(LIFE_RETIRED),
                     [LIFE_SUPERSEDED] = TO(LIFE_FAILED)},
};

int life_next(enum life_state from, enum life_event ev)
{
    if ((unsigned)from >= LIFE_STATES || (unsigned)ev >= LIFE_EVENTS)
        return -1;
    return next[from][ev] - 1;
}

const char *life_event_name(enum life_event ev)
{
    static const char *const names[LIFE_EVENTS] = {
        "JOIN_COMPLETE", "UPSTREAM_JOINED", "JOIN_REFUSED", "UPSTREAM_LOST", "FAULT",
        "RANK_LOST",     "SHUTDOWN",        "ALL_LEFT",     "SUPERSEDED"};
    return (unsigned)ev < LIFE_EVENTS ? names[ev] : "unknown";
}

static void set_state(job_t *j, enum life_state s)
{
    atomic_store_explicit(&j->state, (int)s, memory_order_release);
}

/* Multicast of results for job j (PROTOCOL.md 9.6): on a switch with a group, for a job
 * (p4sgd or switchml) whose members are all workers (no leaf switch) that said mcast=1. Sets
 * j->mcast_on and j->mcast_to, and jd's mcast=. */
static void choose_mcast(const struct inagg_switch *sw, job_t *j, wire_joined_t *jd)
{
    if (!sw->cfg.mcast_group || j->up.on || job_contributors(j) != j->world)
        return;
    for (uint32_t r = 0; r < j->world; r++)
        if (!j->mcast_asked[r])
            return;
    uint32_t group = mcast_job_group(sw->cfg.mcast_group, j->id);
    char text[32];
    mcast_group_format(group, sw->cfg.mcast_port, text, sizeof(text));
    if (transport_parse_addr("udp", text, &j->mcast_to) != 0)
        return; /* cannot happen: a dotted quad and a port */
    j->mcast_on = 1;
    LOG_I("job '%s' (id %u): a result every rank shares goes once, to multicast group %s", j->name,
          j->id, text);
    jd->mcast_addr = group;
    jd->mcast_port = sw->cfg.mcast_port;
}

/* ACTIVE: the dataplane serves the job, and every member gets the same JOINED line. */
static void activate(control_t *ctl, job_t *j)
{
    struct inagg_switch *sw = ctl->sw;
    j->activated_ms = server_now_ms();
    wire_joined_t jd = {.id = j->id,
                        .token = j->token,
                        .threads = j->nthreads,
                        .port = sw->port,
                        .base = j->base,
                        .slots = j->nslots,
                        .elems = j->elems,
                        .float_mode = j->float_mode,
                        .protocol = j->proto->id,
                        .dpauth = (uint32_t)j->dp_auth,
                        /* every receive path cuts a GSO send: the kernel's UDP socket, the
                         * AF_PACKET transport and the L2 fabric */
                        .gso = 1};
    choose_mcast(sw, j, &jd);
    char gen[64] = "";
    if (j->gen > 0) { /* counted before any member hears JOINED */
        atomic_fetch_add(&sw->jobs_rejoined, 1);
        snprintf(gen, sizeof(gen), ", generation %u (rejoined after a fail-over)", j->gen);
    }
    set_state(j, LIFE_ACTIVE);
    /* Whose data a result sums, when not just the members': a leaf's results are the
     * spine's, a spine's sum its leaves' hosts. */
    uint32_t sum = job_contributors(j);
    jd.contributors = j->up.on ? j->up.contributors : sum != j->world ? sum : 0;
    char line[CTL_LINE_MAX];
    if (wire_joined_format(&jd, line, sizeof(line)) == 0)
        conn_broadcast(ctl, j, line);
    LOG_I("job '%s' (id %u) active: world %u, %u slots of %u elements, float %s, protocol %s%s",
          j->name, j->id, j->world, j->nslots, j->elems, wire_float_mode_name(j->float_mode),
          j->proto->name, gen);
}

void life_tell_failed(control_t *ctl, int fd, const job_t *j, uint32_t rank)
{
    char line[CTL_LINE_MAX], own[sizeof(j->silent_reason) + 64];
    const char *reason = j->fail_reason;
    if (rank < j->world && j->silent_ms[rank]) {
        snprintf(own, sizeof(own), "this rank (%u) sent nothing for %llu ms %s", rank,
                 (unsigned long long)j->silent_ms[rank], j->silent_reason);
        reason = own;
    }
    wire_failed_format(reason, line, sizeof(line));
    conn_send_line(ctl, fd, line);
}

/* FAILED: the dataplane drops the job's packets, a leaf's upstream job fails for the other
 * leaves too, and every member is told why. Nothing when it failed already. */
static void fail(control_t *ctl, job_t *j, const char *reason)
{
    if (atomic_load(&j->state) == LIFE_FAILED)
        return;
    snprintf(j->fail_reason, sizeof(j->fail_reason), "%s", reason);
    set_state(j, LIFE_FAILED);
    upstream_end(ctl->sw, j, 0);
    LOG_W("job '%s' (id %u) failed: %s", j->name, j->id, j->fail_reason);
    for (uint32_t r = 0; r < j->world; r++)
        if (j->member_fd[r] >= 0)
            life_tell_failed(ctl, j->member_fd[r], j, r);
}

/* A joining job refused: ERR <r> <text> to every member that waits for JOINED, the job
 * failed, its connections closed (the last close retires it). */
static void refuse(control_t *ctl, job_t *j, enum wire_refusal r, const char *text)
{
    char line[CTL_LINE_MAX];
    wire_err_format(r, text, line, sizeof(line));
    conn_broadcast(ctl, j, line);
    LOG_W("job '%s' refused: %s", j->name, text);
    fail(ctl, j, r == WIRE_REFUSED_TIMEOUT ? "join timed out" : text);
    conn_close_job(ctl, j);
}

/* Every local rank joined: a root switch activates the job, a leaf starts joining the
 * upstream switch's job (LINKING; watch.c applies what becomes of it). */
static void join_complete(control_t *ctl, job_t *j)
{
    struct inagg_switch *sw = ctl->sw;
    if (!sw->cfg.upstream) {
        activate(ctl, j);
        return;
    }
    int rc = upstream_begin(sw, j, job_contributors(j));
    if (rc < 0) {
        refuse(ctl, j, WIRE_REFUSED_SYSTEM,
               rc == -ENOMEM ? "out of memory for the upstream"
                             : "cannot start the upstream thread");
        return;
    }
    set_state(j, LIFE_LINKING);
}

/* A leaf's upstream job was joined: its dataplane membership set, then activated. */
static void upstream_joined(control_t *ctl, job_t *j)
{
    if (upstream_attach(ctl->sw, j) != 0) { /* the address was checked at the start */
        upstream_end(ctl->sw, j, 0);
        refuse(ctl, j, WIRE_REFUSED, "bad upstream address");
        return;
    }
    activate(ctl, j);
}

/* A member closed without LEAVE: a joining job frees its seat (it may come back), an active
 * one fails; a draining or failed one told its members already. */
static void rank_lost(control_t *ctl, job_t *j, int from, uint32_t rank)
{
    if (life_is_joining(from)) {
        j->joined--;
    } else if (from == LIFE_ACTIVE) {
        char reason[160];
        snprintf(reason, sizeof(reason),
                 "rank %u disconnected (its control connection closed: "
                 "the process exited or crashed)",
                 rank);
        fail(ctl, j, reason);
    }
}

/* The switch stops: SHUTDOWN <reason> to every member (a failed job stays failed). */
static void shut_down(control_t *ctl, job_t *j, int from, const char *reason)
{
    char line[CTL_LINE_MAX];
    wire_shutdown_format(reason, line, sizeof(line));
    if (from != LIFE_FAILED)
        set_state(j, LIFE_DRAINING);
    conn_broadcast(ctl, j, line);
}

/* The dataplane threads' epochs now (seen[threads]). */
static void note_epochs(struct inagg_switch *sw, uint64_t *seen)
{
    for (uint32_t t = 0; t < sw->cfg.threads; t++)
        seen[t] = atomic_load(&sw->threads[t].epoch);
}

/* Has every running dataplane thread passed its loop head since `seen`? */
static int epochs_passed(struct inagg_switch *sw, const uint64_t *seen)
{
    for (uint32_t t = 0; t < sw->cfg.threads; t++)
        if (atomic_load(&sw->threads[t].running) && atomic_load(&sw->threads[t].epoch) == seen[t])
            return 0;
    return 1;
}

/* Wait for a grace period: every running dataplane thread passed its loop head. */
static void quiesce(struct inagg_switch *sw)
{
    uint64_t seen[SWITCH_MAX_THREADS];
    note_epochs(sw, seen);
    while (!epochs_passed(sw, seen))
        sched_yield();
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

void life_reap(control_t *ctl, int wait)
{
    for (uint32_t k = 0; k < ctl->nretiring;) {
        retiring_t *r = &ctl->retiring[k];
        if (!epochs_passed(ctl->sw, r->epoch) && !wait) {
            k++;
            continue;
        }
        if (wait)
            quiesce(ctl->sw);
        free_retired(ctl, r->j, r->record);
        *r = ctl->retiring[--ctl->nretiring];
    }
}

/* RETIRED: unpublished (under the stats lock, so a stats printer never sees it afterwards);
 * life_reap frees it once no dataplane thread can hold it. */
static void retire(control_t *ctl, job_t *j, int from)
{
    struct inagg_switch *sw = ctl->sw;
    upstream_end(sw, j, from != LIFE_FAILED); /* a leaf leaves its upstream job cleanly */
    pthread_mutex_lock(&sw->stats_lock);
    set_state(j, LIFE_RETIRED);
    atomic_store_explicit(&sw->jobs[j->id], NULL, memory_order_release);
    uint64_t record = stats_retire(sw, j);
    pthread_mutex_unlock(&sw->stats_lock);
    if (ctl->nretiring == SWITCH_MAX_JOBS) { /* cannot happen in practice: wait instead */
        quiesce(sw);
        free_retired(ctl, j, record);
        return;
    }
    retiring_t *r = &ctl->retiring[ctl->nretiring++];
    r->j = j;
    r->record = record;
    note_epochs(sw, r->epoch);
}

/* SUPERSEDED: an older generation of a job its ranks joined again. A joining one is refused;
 * an active or failed one fails (its members, if any still listen, are told why) and its
 * connections close, so it retires and the new generation can register. */
static void supersede(control_t *ctl, job_t *j, int from, const char *text)
{
    if (from == LIFE_DRAINING)
        return;
    if (life_is_joining(from)) {
        refuse(ctl, j, WIRE_REFUSED, text);
        return;
    }
    fail(ctl, j, text);
    conn_close_job(ctl, j);
}

int life_apply(control_t *ctl, job_t *j, enum life_event ev, const life_cause_t *cause)
{
    static const life_cause_t none = {.text = ""};
    if (!cause)
        cause = &none;
    const char *text = cause->text ? cause->text : "";
    int from = atomic_load(&j->state);
    if (life_next((enum life_state)from, ev) < 0) {
        ctl->illegal_transitions++;
        LOG_W("job '%s' (id %u), %s: event %s ignored, not one its state takes (%llu so far)",
              j->name, j->id, from == LIFE_LINKING ? "linking" : life_state_name(from),
              life_event_name(ev), (unsigned long long)ctl->illegal_transitions);
        return -EPERM;
    }
    switch (ev) {
        case LIFE_JOIN_COMPLETE:
            if (from == LIFE_JOINING) /* LINKING: its upstream link runs already */
                join_complete(ctl, j);
            break;
        case LIFE_UPSTREAM_JOINED: upstream_joined(ctl, j); break;
        case LIFE_JOIN_REFUSED: refuse(ctl, j, cause->refusal, text); break;
        case LIFE_UPSTREAM_LOST:
            if (from == LIFE_LINKING)
                refuse(ctl, j, WIRE_REFUSED, text);
            else
                fail(ctl, j, text);
            break;
        case LIFE_FAULT: fail(ctl, j, text); break;
        case LIFE_RANK_LOST: rank_lost(ctl, j, from, cause->rank); break;
        case LIFE_SHUTDOWN: shut_down(ctl, j, from, text); break;
        case LIFE_ALL_LEFT: retire(ctl, j, from); break;
        case LIFE_SUPERSEDED: supersede(ctl, j, from, text); break;
        case LIFE_EVENTS: break;
    }
    return 0;
}
