/*
 * watch.c - the jobs' deadlines, checked by the control thread every tick and applied to a job
 * as lifecycle events (lifecycle.h): a job whose ranks do not all join within its timeout is
 * refused, naming the missing ranks; a barrier that some ranks entered and the others never
 * reached fails it, as does a rank silent for the timeout while the others wait on it; and a
 * leaf switch's upstream link that joined or failed activates or fails the job.
 */
#include <stdio.h>
#include <string.h>

#include "switchd/server/control_int.h"
#include "switchd/server/upstream.h"

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
    char reason[2 * sizeof(j->fail_reason)]; /* the job keeps what fits */
    snprintf(reason, sizeof(reason),
             "barrier: rank%s %s did not arrive within %u ms (%u of %u ranks did)%s%s%s%s",
             n == 1 ? "" : "s", list, j->timeout_ms, j->barrier_count, j->world,
             nleft ? "; rank" : "",
             nleft > 1 ? "s "
             : nleft   ? " "
                       : "",
             gone,
             nleft == 1 ? " had left the job"
             : nleft    ? " had left the job"
                        : "");
    life_apply(ctl, j, LIFE_FAULT, &(life_cause_t){.text = reason});
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
    char reason[2 * sizeof(j->fail_reason)]; /* the job keeps what fits */
    snprintf(reason, sizeof(reason),
             "rank%s %s sent nothing for %s%llu ms while rank%s %s %s waiting on %s "
             "(worker timeout %u ms)",
             nsilent == 1 ? "" : "s", sl, nsilent == 1 ? "" : "up to ", (unsigned long long)longest,
             several ? "s" : "", wl, several ? "were" : "was", nsilent == 1 ? "it" : "them",
             j->timeout_ms);
    life_apply(ctl, j, LIFE_FAULT, &(life_cause_t){.text = reason});
}

/* A joining job past its timeout (from registration) is refused, naming the ranks missing. */
static void check_join(control_t *ctl, job_t *j, uint64_t now)
{
    if (now - j->created_ms <= j->timeout_ms)
        return;
    char missing[256] = "";
    size_t off = 0;
    for (uint32_t r = 0; r < j->world && off < sizeof(missing) - 12; r++)
        if (j->member_fd[r] < 0)
            off +=
                (size_t)snprintf(missing + off, sizeof(missing) - off, "%s%u", off ? "," : "", r);
    char text[CTL_LINE_MAX - 32];
    snprintf(text, sizeof(text),
             "only %u of %u ranks joined job '%s' within %u ms; "
             "missing ranks: %s",
             j->joined, j->world, j->name, j->timeout_ms, missing);
    life_apply(ctl, j, LIFE_JOIN_REFUSED,
               &(life_cause_t){.refusal = WIRE_REFUSED_TIMEOUT, .text = text});
}

/* A leaf's job with its upstream thread: what became of the upstream job. */
static void check_upstream(control_t *ctl, job_t *j)
{
    char reason[CTL_LINE_MAX - 32];
    enum upstream_state st = upstream_state(j, reason, sizeof(reason));
    if (st == UPSTREAM_FAILED)
        life_apply(ctl, j, LIFE_UPSTREAM_LOST, &(life_cause_t){.text = reason});
    else if (st == UPSTREAM_READY && atomic_load(&j->state) == LIFE_LINKING)
        life_apply(ctl, j, LIFE_UPSTREAM_JOINED, NULL);
}

void watch_jobs(control_t *ctl)
{
    struct inagg_switch *sw = ctl->sw;
    uint64_t now = server_now_ms();
    for (uint32_t id = 0; id < SWITCH_MAX_JOBS; id++) {
        job_t *j = atomic_load_explicit(&sw->jobs[id], memory_order_relaxed);
        if (!j)
            continue;
        if (j->upj) { /* a leaf: the upstream thread has its own deadline */
            check_upstream(ctl, j);
        } else if (atomic_load(&j->state) == LIFE_JOINING) {
            check_join(ctl, j, now);
            continue;
        }
        if (atomic_load(&j->state) != LIFE_ACTIVE)
            continue;
        if (check_barrier(ctl, j, now) == 0)
            check_silence(ctl, j, now);
    }
}
