/*
 * bench_allreduce_ranks.c - what `inagg bench allreduce` makes of its ranks' reports: the
 * slowest rank per iteration (median, min, max), verification (with the error of the rank
 * where a failure started), checksums, counters, CPU, and the wall-clock window in which every
 * rank ran its timed iterations.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "apps/bench/bench_allreduce.h"
#include "apps/bench/samples.h"

void ar_result_init(ar_sys_result_t *r)
{
    memset(r, 0, sizeof(*r));
    r->tat_median_s = r->tat_min_s = r->tat_max_s = NAN;
    r->cpu_switch = r->cpu_workers = r->cpu_workers_max = NAN;
    r->cpu_machine = r->cpu_softirq = NAN;
}

/* The rank a failure verdict of the switch names ("rank 3 sent nothing ...", "ranks 1,4 sent
 * nothing ...", "rank 2 disconnected ..."): the first one, or -1 when none is named (a rank
 * number, not an error code). */
static long named_rank(const char *error)
{
    static const char *const verdicts[] = {"failed on the switch: rank ",
                                           "failed on the switch: ranks "};
    for (size_t v = 0; v < sizeof(verdicts) / sizeof(verdicts[0]); v++) {
        const char *p = strstr(error, verdicts[v]);
        if (p) {
            char *end;
            long r = strtol(p + strlen(verdicts[v]), &end, 10);
            if (end != p + strlen(verdicts[v]))
                return r;
        }
    }
    return -1;
}

/* Whether a rank's error is its own, not the switch passing on another rank's failure. */
static int own_failure(const ar_rank_report_t *x)
{
    return !strstr(x->error, "failed on the switch: rank") || strstr(x->error, "this rank (");
}

/* Of the ranks that failed, the one where the failure started: the rank the switch's verdict
 * names when that rank reported a failure of its own (a stalled rank learns it was the silent
 * one), else the earliest failure of its own, else the earliest failure. -1: none failed. */
static int root_cause_rank(const ar_rank_report_t *reps, uint32_t n, uint32_t iters)
{
    int best = -1, best_own = -1;
    for (uint32_t k = 0; k < n; k++) {
        const ar_rank_report_t *x = &reps[k];
        if (x->verified && x->rc == 0 && x->iters == iters)
            continue;
        long named = x->error[0] ? named_rank(x->error) : -1;
        if (named >= 0 && (uint32_t)named < n && reps[named].error[0] && own_failure(&reps[named]))
            return (int)named;
        double t = x->t_fail > 0 ? x->t_fail : INFINITY;
        if (best < 0 || t < (reps[best].t_fail > 0 ? reps[best].t_fail : INFINITY))
            best = (int)k;
        if (x->error[0] && own_failure(x) &&
            (best_own < 0 || t < (reps[best_own].t_fail > 0 ? reps[best_own].t_fail : INFINITY)))
            best_own = (int)k;
    }
    return best_own >= 0 ? best_own : best;
}

void ar_summarize_ranks(const ar_rank_report_t *reps, uint32_t n, uint32_t iters,
                        ar_sys_result_t *r)
{
    r->verified = 1;
    r->completed = n > 0;
    r->checksums_agree = 1;
    double cpu_sum = 0, cpu_max = 0;
    uint32_t cpu_n = 0;
    for (uint32_t k = 0; k < n; k++) {
        const ar_rank_report_t *x = &reps[k];
        if (x->rc != 0 || x->iters != iters)
            r->completed = 0;
        if (!x->verified || x->rc != 0 || x->iters != iters) {
            r->verified = 0;
            if (!r->error[0] && (int)k == root_cause_rank(reps, n, iters))
                snprintf(r->error, sizeof(r->error), "%s",
                         x->error[0]         ? x->error
                         : x->iters != iters ? "a rank reported too "
                                               "few iterations"
                                             : "a rank's result did not verify");
        }
        if (x->checksum != reps[0].checksum)
            r->checksums_agree = 0;
        if (x->max_err > r->worst)
            r->worst = x->max_err;
        r->packets += x->stats.packets_sent;
        r->retransmissions += x->stats.retransmissions;
        r->duplicates += x->stats.duplicates_ignored;
        if (x->failover.failovers > r->failovers)
            r->failovers = x->failover.failovers;
        r->chunks_handed_on += x->failover.chunks_delivered;
        r->chunks_reduced_again += x->failover.chunks_reduced;
        r->stale_dropped += x->failover.stale_dropped;
        if (x->failover.stall_ms_max > r->stall_ms_max)
            r->stall_ms_max = x->failover.stall_ms_max;
        r->encode_ns += x->codec.encode_ns;
        r->decode_ns += x->codec.decode_ns;
        r->overlap_ns += x->codec.overlap_ns;
        r->chunks_encoded += x->codec.chunks_encoded;
        r->chunks_ahead += x->codec.chunks_ahead;
        if (x->codec.rto_code_floor_us > r->code_floor_us)
            r->code_floor_us = x->codec.rto_code_floor_us;
        double span = x->t_end - x->t_start;
        if (span > 0 && isfinite(x->cpu_s)) {
            double pct = x->cpu_s / span * 100.0;
            cpu_sum += pct;
            cpu_max = pct > cpu_max ? pct : cpu_max;
            cpu_n++;
        }
    }
    snprintf(r->checksum, sizeof(r->checksum), "%016llx",
             (unsigned long long)(n ? reps[0].checksum : 0));
    if (cpu_n) {
        r->cpu_workers = cpu_sum / cpu_n;
        r->cpu_workers_max = cpu_max;
    }
    if (!r->verified)
        return;
    double *tat = malloc(iters * sizeof(double));
    if (!tat || iters == 0) {
        free(tat);
        r->verified = 0;
        return;
    }
    for (uint32_t i = 0; i < iters; i++) {
        tat[i] = 0;
        for (uint32_t k = 0; k < n; k++)
            tat[i] = reps[k].times_s[i] > tat[i] ? reps[k].times_s[i] : tat[i];
    }
    r->iters = iters;
    r->tat_median_s = bench_median(tat, iters); /* sorts */
    r->tat_min_s = tat[0];
    r->tat_max_s = tat[iters - 1];
    free(tat);
}

/* The ranks' common timed window [min t_start, max t_end]. */
void ar_ranks_window(const ar_rank_report_t *reps, uint32_t n, double *t0, double *t1)
{
    *t0 = INFINITY;
    *t1 = -INFINITY;
    for (uint32_t k = 0; k < n; k++) {
        *t0 = reps[k].t_start < *t0 ? reps[k].t_start : *t0;
        *t1 = reps[k].t_end > *t1 ? reps[k].t_end : *t1;
    }
}
