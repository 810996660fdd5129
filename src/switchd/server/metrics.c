/*
 * metrics.c - the switch's counters in the Prometheus text exposition format, for
 * `inagg switch --metrics` (cli/metrics_http.c serves it at GET /metrics). Everything comes
 * from the one table of counters (stats.h) and the control plane's refusals, under the same
 * lock as the text and JSON stats:
 *
 *   inagg_switch_<counter>_total                switch-wide (per-job counters summed over the
 *                                               live jobs and every retired one: they never
 *                                               go down while the switch runs)
 *   inagg_switch_drops_total{reason}            every drop reason
 *   inagg_switch_job_<counter>_total{job_name,job_id}   each live job, and its drops
 *   inagg_switch_jobs{state}, _slots, _slots_used, _control_limit{limit}, ...   gauges
 *
 * Names follow the conventions: counters end in _total, bytes and seconds are base units
 * (codec_ns becomes codec_seconds). A job is labelled job_name, not job, which is the label
 * Prometheus gives the scrape target.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/json/promtext.h"
#include "switchd/server/server.h"

/* A counter's metric name where the table's name is not one (a unit, or a clearer word). */
static const struct {
    int id;
    const char *name;
    double scale; /* 0: integral, else the value times scale */
} renamed[] = {
    {STAT_PACKETS_IN, "packets_received", 0}, {STAT_PACKETS_OUT, "packets_sent", 0},
    {STAT_BYTES_IN, "received_bytes", 0},     {STAT_BYTES_OUT, "sent_bytes", 0},
    {STAT_CODEC_NS, "codec_seconds", 1e-9},
};

static const char *metric_base(int s, double *scale)
{
    *scale = 0;
    for (size_t i = 0; i < sizeof(renamed) / sizeof(renamed[0]); i++)
        if (renamed[i].id == s) {
            *scale = renamed[i].scale;
            return renamed[i].name;
        }
    return stat_name(s);
}

static int is_drop(int s) { return (stat_table[s].flags & STAT_DROP) != 0; }
static int per_job(int s) { return !(stat_table[s].flags & STAT_SWITCH); }

static void sample(FILE *out, const char *name, const char *labels, uint64_t v, double scale)
{
    if (scale)
        prom_double(out, name, labels, (double)v * scale);
    else
        prom_u64(out, name, labels, v);
}

/* The live jobs (their counters summed over threads, read once) */
typedef struct live_job {
    job_t *j;
    char labels[160]; /* job_name="..",job_id=".." */
    uint64_t v[STAT_COUNT];
} live_job_t;

static int collect_jobs(inagg_switch_t *sw, live_job_t **out)
{
    int n = 0;
    live_job_t *lj = calloc(SWITCH_MAX_JOBS, sizeof(*lj));
    for (uint32_t i = 0; lj && i < SWITCH_MAX_JOBS; i++) {
        job_t *j = atomic_load(&sw->jobs[i]);
        if (!j)
            continue;
        char id[16];
        snprintf(id, sizeof(id), "%u", j->id);
        lj[n].j = j;
        prom_labels(lj[n].labels, sizeof(lj[n].labels), "job_name", j->name, "job_id", id, NULL);
        for (int s = 0; s < STAT_COUNT; s++)
            lj[n].v[s] = per_job(s) ? job_sum(j, s) : 0;
        n++;
    }
    *out = lj;
    return lj ? n : -1;
}

static void write_gauges(inagg_switch_t *sw, FILE *out, const live_job_t *lj, int n)
{
    prom_family(out, "inagg_switch_uptime_seconds", "gauge", "seconds since the switch started");
    prom_double(out, "inagg_switch_uptime_seconds", NULL,
                (double)(server_now_ms() - sw->start_ms) / 1000.0);
    prom_family(out, "inagg_switch_threads", "gauge", "dataplane threads (queues)");
    prom_u64(out, "inagg_switch_threads", NULL, sw->cfg.threads);
    prom_family(out, "inagg_switch_slots", "gauge", "slot budget shared by all jobs");
    prom_u64(out, "inagg_switch_slots", NULL, sw->cfg.total_slots);
    prom_family(out, "inagg_switch_slots_used", "gauge", "slots held by jobs");
    prom_u64(out, "inagg_switch_slots_used", NULL, atomic_load(&sw->slots_used));
    static const char *const states[] = {"joining", "active", "failed"};
    prom_family(out, "inagg_switch_jobs", "gauge", "jobs on the switch by state");
    for (size_t k = 0; k < sizeof(states) / sizeof(states[0]); k++) {
        uint64_t c = 0;
        for (int i = 0; i < n; i++)
            c += strcmp(life_state_name(atomic_load(&lj[i].j->state)), states[k]) == 0;
        char l[32];
        prom_labels(l, sizeof(l), "state", states[k], NULL);
        prom_u64(out, "inagg_switch_jobs", l, c);
    }
    prom_family(out, "inagg_switch_jobs_rejoined_total", "counter",
                "jobs whose ranks joined them again after a fail-over (JOIN gen= above 0)");
    prom_u64(out, "inagg_switch_jobs_rejoined_total", NULL, atomic_load(&sw->jobs_rejoined));
    prom_family(out, "inagg_switch_jobs_retired_total", "counter",
                "jobs that finished or failed and were removed");
    prom_u64(out, "inagg_switch_jobs_retired_total", NULL, sw->nretired);
    prom_family(out, "inagg_switch_control_connections", "gauge", "open control connections");
    prom_u64(out, "inagg_switch_control_connections", NULL, atomic_load(&sw->ctl_connections));
    prom_family(out, "inagg_switch_control_refusals_total", "counter",
                "control-plane limits hit: connections closed or refused, JOINs refused, by "
                "reason (PROTOCOL.md Admission)");
    for (int k = 0; k < CTL_STAT_COUNT; k++) {
        char l[48];
        prom_labels(l, sizeof(l), "reason", ctl_stat_names[k], NULL);
        prom_u64(out, "inagg_switch_control_refusals_total", l, atomic_load(&sw->ctl_counts[k]));
    }
    switch_limits_t lim;
    switch_get_limits(sw, &lim);
    const uint32_t lv[SWITCH_LIMIT_COUNT] = {lim.request_ms, lim.idle_ms, lim.max_conns_per_addr,
                                             lim.max_job_slots, lim.max_addr_slots};
    prom_family(out, "inagg_switch_control_limit", "gauge",
                "the control-plane limits in force (milliseconds, connections or slots)");
    for (int k = 0; k < SWITCH_LIMIT_COUNT; k++) {
        char l[48];
        prom_labels(l, sizeof(l), "limit", switch_limit_names[k], NULL);
        prom_u64(out, "inagg_switch_control_limit", l, lv[k]);
    }
    prom_family(out, "inagg_switch_job_info", "gauge", "a live job's parameters (value 1)");
    for (int i = 0; i < n; i++) {
        const job_t *j = lj[i].j;
        char l[320];
        snprintf(l, sizeof(l), "%s,", lj[i].labels);
        size_t off = strlen(l);
        prom_labels(l + off, sizeof(l) - off, "state", life_state_name(atomic_load(&j->state)),
                    "protocol", j->proto->name, "optimizer",
                    j->opt ? optim_kind_name(j->opt->cfg.kind) : "none", NULL);
        prom_u64(out, "inagg_switch_job_info", l, 1);
    }
    prom_family(out, "inagg_switch_job_world", "gauge", "a live job's ranks");
    for (int i = 0; i < n; i++)
        prom_u64(out, "inagg_switch_job_world", lj[i].labels, lj[i].j->world);
    prom_family(out, "inagg_switch_job_slots", "gauge", "slots a live job holds");
    for (int i = 0; i < n; i++)
        prom_u64(out, "inagg_switch_job_slots", lj[i].labels, lj[i].j->nslots);
}

static void write_counters(inagg_switch_t *sw, FILE *out, const live_job_t *lj, int n)
{
    uint64_t thr[STAT_COUNT] = {0}, total[STAT_COUNT];
    for (uint32_t t = 0; t < sw->cfg.threads; t++)
        for (int s = 0; s < STAT_COUNT; s++)
            thr[s] += STAT_GET(sw->threads[t].c.v[s]);
    for (int s = 0; s < STAT_COUNT; s++) {
        total[s] = per_job(s) ? sw->retired_sum[s] : thr[s];
        for (int i = 0; i < n && per_job(s); i++)
            total[s] += lj[i].v[s];
    }
    char name[96], help[320];
    double scale;
    for (int s = 0; s < STAT_COUNT; s++) { /* switch-wide */
        if (is_drop(s))
            continue;
        snprintf(name, sizeof(name), "inagg_switch_%s_total", metric_base(s, &scale));
        snprintf(help, sizeof(help), "%s%s", stat_table[s].meaning,
                 per_job(s) ? " (all jobs, retired ones included)" : "");
        prom_family(out, name, "counter", help);
        sample(out, name, NULL, total[s], scale);
    }
    prom_family(out, "inagg_switch_drops_total", "counter",
                "packets dropped, by reason (PROTOCOL.md section 6; all jobs, retired ones "
                "included)");
    for (int s = 1; s < STAT_COUNT; s++)
        if (is_drop(s)) {
            char l[64];
            prom_labels(l, sizeof(l), "reason", stat_name(s), NULL);
            prom_u64(out, "inagg_switch_drops_total", l, total[s]);
        }
    for (int s = 0; s < STAT_COUNT; s++) { /* per live job */
        if (is_drop(s) || !per_job(s))
            continue;
        snprintf(name, sizeof(name), "inagg_switch_job_%s_total", metric_base(s, &scale));
        snprintf(help, sizeof(help), "%s, per live job", stat_table[s].meaning);
        prom_family(out, name, "counter", help);
        for (int i = 0; i < n; i++)
            sample(out, name, lj[i].labels, lj[i].v[s], scale);
    }
    prom_family(out, "inagg_switch_job_drops_total", "counter",
                "a live job's packets dropped, by reason");
    for (int i = 0; i < n; i++)
        for (int s = 1; s < STAT_COUNT; s++)
            if (is_drop(s) && per_job(s)) {
                char l[224];
                snprintf(l, sizeof(l), "%s,", lj[i].labels);
                size_t off = strlen(l);
                prom_labels(l + off, sizeof(l) - off, "reason", stat_name(s), NULL);
                prom_u64(out, "inagg_switch_job_drops_total", l, lj[i].v[s]);
            }
}

/* Rendered into memory under the stats lock, written after it (as switch_write_stats). */
void switch_write_metrics(inagg_switch_t *sw, FILE *out)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem)
        return;
    pthread_mutex_lock(&sw->stats_lock);
    live_job_t *lj;
    int n = collect_jobs(sw, &lj);
    if (n >= 0) {
        write_gauges(sw, mem, lj, n);
        write_counters(sw, mem, lj, n);
        if (sw->cfg.extra_metrics)
            sw->cfg.extra_metrics(sw->cfg.extra_ctx, mem);
    }
    free(lj);
    pthread_mutex_unlock(&sw->stats_lock);
    if (fclose(mem) == 0 && text && n >= 0)
        fwrite(text, 1, len, out);
    free(text);
}
