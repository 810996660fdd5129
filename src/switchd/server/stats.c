/*
 * stats.c - the table of the switch's counters (see stats.h), and everything that shows them:
 * the text and JSON stats (STATS, SIGUSR1, the final counters) and a retiring job's record
 * and log line.
 */
#include "switchd/server/stats.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/log.h"
#include "lib/json/json.h"
#include "switchd/server/server.h"

#define JOBWIDE (STAT_TEXT | STAT_JSON | STAT_RETIRED_TEXT | STAT_RETIRED_JSON)
#define PRE_JOB (STAT_DROP | STAT_SWITCH) /* before a packet has a job */
#define IN_JOB STAT_DROP

/* Names of wire_decode()'s reasons are wire_status_name()'s. */
const stat_info_t stat_table[STAT_COUNT] = {
    [WIRE_SHORT] = {NULL, "datagram shorter than the header", PRE_JOB},
    [WIRE_BAD_MAGIC] = {NULL, "not an inagg packet (magic)", PRE_JOB},
    [WIRE_BAD_VERSION] = {NULL, "another protocol version", PRE_JOB},
    [WIRE_BAD_TYPE] = {NULL, "unknown packet type", PRE_JOB},
    [WIRE_BAD_DTYPE] = {NULL, "unknown element type", PRE_JOB},
    [WIRE_BAD_FLAGS] = {NULL, "unknown flag bits, or the version bit disagrees with the round",
                        PRE_JOB},
    [WIRE_BAD_LENGTH] = {NULL, "datagram length is not header + 4 * count", PRE_JOB},
    [DROP_UNKNOWN_JOB] = {"unknown_job", "no job with that id (never registered, or retired)",
                          PRE_JOB},
    [DROP_BAD_TOKEN] = {"bad_token", "the job exists but the token is another job's", PRE_JOB},
    [DROP_NOT_RESULT_PATH] = {"result_to_switch", "a result or confirmation sent to the switch",
                              PRE_JOB},
    [DROP_JOB_NOT_ACTIVE] = {"job_not_active", "the job is still joining, or failed", IN_JOB},
    [DROP_BAD_RANK] = {"bad_rank", "rank >= world", IN_JOB},
    [DROP_BAD_SLOT] = {"bad_slot", "slot outside the job's pool", IN_JOB},
    [DROP_WRONG_THREAD] = {"wrong_thread", "the slot is served by another dataplane thread",
                           IN_JOB},
    [DROP_BAD_COUNT] = {"bad_count", "more elements than the job's elements per packet", IN_JOB},
    [DROP_DTYPE_NOT_ALLOWED] = {"dtype_not_allowed",
                                "an element type the job's float mode "
                                "(or its optimizer) excludes",
                                IN_JOB},
    [DROP_DUP_OPEN] = {"dup_open_round", "duplicate contribution to an open round", IN_JOB},
    [DROP_STALE] = {"stale_round", "a round older than the slot holds", IN_JOB},
    [DROP_AHEAD] = {"round_ahead", "a round (or phase) that cannot come yet", IN_JOB},
    [DROP_MISMATCH] = {"round_mismatch",
                       "count, dtype, exponent or upload flag differ within "
                       "a round",
                       IN_JOB},
    [DROP_WRONG_PROTOCOL] = {"wrong_protocol", "a packet type the job's protocol does not take",
                             IN_JOB},
    [DROP_DUP_ACK] = {"dup_ack", "a repeated acknowledgement of an unconfirmed round (p4sgd)",
                      IN_JOB},
    [DROP_BAD_CHUNK] = {"bad_chunk", "optimizer job: no such chunk, or not its length", IN_JOB},
    [DROP_BAD_CODE] = {"bad_chunk_code",
                       "compressed job: a chunk in another mode, with wrong "
                       "lengths or bit counts, or that does not decode",
                       IN_JOB},
    [DROP_UP_STALE] = {"upstream_stale",
                       "leaf switch: an upstream result or confirmation for "
                       "a round not waiting for one (a repeat, or late)",
                       IN_JOB},
    [DROP_BAD_MAC] = {"bad_mac",
                      "authenticated job: the MAC is not the rank's (forged, or "
                      "changed on the way)",
                      IN_JOB},
    [DROP_MISSING_MAC] = {"missing_mac", "authenticated job: a packet without a MAC", IN_JOB},
    [DROP_UNEXPECTED_MAC] = {"unexpected_mac",
                             "a MAC on a packet of a job without an "
                             "authenticated dataplane",
                             IN_JOB},
    [STAT_PACKETS_IN] = {"packets_in", "datagrams received", STAT_SWITCH | STAT_JSON},
    [STAT_PACKETS_OUT] = {"packets_out", "datagrams sent", STAT_SWITCH | STAT_JSON},
    [STAT_INJECTED_DROPS] = {"injected_drops", "packets dropped by fault injection, both ways",
                             STAT_SWITCH | STAT_JSON},
    [STAT_INJECTED_DUPS] = {"injected_duplicates",
                            "packets duplicated by fault injection, "
                            "both ways",
                            STAT_SWITCH | STAT_JSON},
    [STAT_INJECTED_REORDERS] = {"injected_reorders",
                                "packets held back by fault injection "
                                "and let out after later ones, both ways",
                                STAT_SWITCH | STAT_JSON},
    [STAT_POLLS_EMPTY] = {"empty_polls",
                          "receives that did not wait and found nothing "
                          "(--poll busy, or adaptive within its spin)",
                          STAT_SWITCH | STAT_JSON},
    [STAT_SPIN_BANS] = {"spin_bans",
                        "spins given up for 100 ms because a yield lost the core to a "
                        "CPU-bound thread for over 500 us (the thread sleeps instead)",
                        STAT_SWITCH | STAT_JSON},
    [STAT_CONTRIBUTIONS] = {"contributions", "contributions accepted into a round", JOBWIDE},
    [STAT_ROUNDS] = {"rounds", "rounds completed", JOBWIDE | STAT_LOG, "rounds"},
    [STAT_RESULTS_SENT] = {"results_sent",
                           "result packets: world per round (one to a multicast group), "
                           "one per resend",
                           STAT_TEXT | STAT_JSON | STAT_RETIRED_JSON},
    [STAT_RESULTS_MULTICAST] = {"results_multicast",
                                "of results_sent, those sent once to the job's multicast group "
                                "for every rank (--multicast)",
                                JOBWIDE},
    [STAT_RESENDS] = {"resends", "results re-sent to one rank for a duplicate", JOBWIDE | STAT_LOG,
                      "result resends"},
    [STAT_ACKS] = {"acks", "acknowledgements accepted (p4sgd)", JOBWIDE | STAT_LOG | STAT_PROTOCOL,
                   "acks"},
    [STAT_CONFIRMS_SENT] = {"confirms_sent",
                            "confirmations sent, on their own or on results "
                            "(p4sgd)",
                            JOBWIDE | STAT_LOG | STAT_PROTOCOL, "confirmations"},
    [STAT_CONFIRMS_PIGGYBACKED] = {"confirms_piggybacked",
                                   "of confirms_sent, those that rode "
                                   "on a result (p4sgd)",
                                   STAT_JSON | STAT_LOG | STAT_PROTOCOL, "on results",
                                   STAT_CONFIRMS_SENT},
    [STAT_CONFIRM_RESENDS] = {"confirm_resends",
                              "confirmations re-sent for a repeated "
                              "acknowledgement (p4sgd)",
                              JOBWIDE | STAT_LOG | STAT_PROTOCOL, "re-sent", STAT_CONFIRMS_SENT},
    [STAT_OPT_STEPS] = {"optimizer_steps", "in-switch optimizer: chunk steps applied",
                        STAT_TEXT | STAT_JSON | STAT_RETIRED_JSON},
    [STAT_OPT_UPLOADS] = {"parameter_uploads",
                          "in-switch optimizer: chunks of parameters "
                          "uploaded",
                          STAT_JSON},
    [STAT_BYTES_IN] = {"bytes_in", "bytes of packets that passed the checks", JOBWIDE},
    [STAT_BYTES_OUT] = {"bytes_out", "bytes of packets queued for sending", JOBWIDE},
    [STAT_CODEC_NS] = {"codec_ns",
                       "compressed jobs: nanoseconds the dataplane spent decoding "
                       "contributions and re-encoding sums",
                       STAT_TEXT | STAT_JSON | STAT_RETIRED_JSON},
    [STAT_CODEC_VALUES] = {"codec_values",
                           "compressed jobs: values decoded plus values "
                           "encoded (codec_ns / codec_values: the switch's cost per value)",
                           STAT_TEXT | STAT_JSON | STAT_RETIRED_JSON},
    [STAT_UP_SENT] = {"upstream_contributions",
                      "leaf switch: rounds complete here whose "
                      "partial sum went upstream",
                      STAT_JSON | STAT_RETIRED_JSON},
    [STAT_UP_RESENT] = {"upstream_resends",
                        "leaf switch: partial sums sent upstream again for "
                        "a rank's repeated contribution",
                        STAT_JSON | STAT_RETIRED_JSON},
    [STAT_UP_RESULTS] = {"upstream_results",
                         "leaf switch: upstream results that completed a "
                         "held round",
                         STAT_JSON | STAT_RETIRED_JSON},
    [STAT_UP_ACKS] = {"upstream_acks",
                      "leaf switch: acknowledgements sent upstream, first and "
                      "repeated (p4sgd)",
                      STAT_JSON},
    [STAT_UP_CONFIRMS] = {"upstream_confirms",
                          "leaf switch: upstream confirmations taken "
                          "(p4sgd)",
                          STAT_JSON},
};

const char *const ctl_stat_names[CTL_STAT_COUNT] = {
    [CTL_CONN_LIMIT] = "conn_limit",          [CTL_CONN_PER_ADDR] = "conn_per_addr",
    [CTL_IDLE_CLOSED] = "idle_closed",        [CTL_REQUEST_TIMEOUT] = "request_timeout",
    [CTL_CONN_EVICTED] = "conn_evicted",      [CTL_JOINING_EVICTED] = "joining_evicted",
    [CTL_OUTPUT_FULL] = "output_full",        [CTL_LINE_TOO_LONG] = "line_too_long",
    [CTL_JOB_QUOTA] = "job_slot_quota",       [CTL_ADDR_QUOTA] = "addr_slot_quota",
    [CTL_POOL_FULL] = "pool_exhausted",       [CTL_AUTH_FAILED] = "auth_failed",
    [CTL_AUTH_LIMITED] = "auth_rate_limited",
};

const char *stat_name(int id)
{
    if (id < 0 || id >= STAT_COUNT)
        return "unknown";
    if (id < WIRE_STATUS_COUNT)
        return wire_status_name((enum wire_status)id);
    return stat_table[id].name;
}

static int is_drop(int id) { return (stat_table[id].flags & STAT_DROP) != 0; }

/* A job's counters summed over its dataplane threads. */
static void job_totals(const job_t *j, uint64_t v[STAT_COUNT])
{
    for (int s = 0; s < STAT_COUNT; s++)
        v[s] = (stat_table[s].flags & STAT_SWITCH) ? 0 : job_sum(j, s);
}

static uint64_t drops_total(const uint64_t v[STAT_COUNT])
{
    uint64_t n = 0;
    for (int s = 0; s < STAT_COUNT; s++)
        n += is_drop(s) ? v[s] : 0;
    return n;
}

static const char *state_name(int s) { return life_state_name(s); }

static const char *float_name(uint32_t m) { return m == INAGG_FLOAT_NATIVE ? "native" : "fixed"; }

static const char *optimizer_name(const job_t *j)
{
    return j->opt ? optim_kind_name(j->opt->cfg.kind) : "none";
}

/* " name=N" for every counter shown with `flag`. */
static void text_counters(FILE *out, const uint64_t v[STAT_COUNT], unsigned flag)
{
    for (int s = 0; s < STAT_COUNT; s++)
        if (!is_drop(s) && (stat_table[s].flags & flag))
            fprintf(out, " %s=%" PRIu64, stat_name(s), v[s]);
}

/* The drop reasons that happened, " name=N" each, or " none". */
static void text_drops(FILE *out, const uint64_t v[STAT_COUNT])
{
    int any = 0;
    for (int s = 1; s < STAT_COUNT; s++)
        if (is_drop(s) && v[s]) {
            fprintf(out, " %s=%" PRIu64, stat_name(s), v[s]);
            any = 1;
        }
    fprintf(out, "%s\n", any ? "" : " none");
}

static void json_counters(json_writer_t *w, const uint64_t v[STAT_COUNT], unsigned flag)
{
    for (int s = 0; s < STAT_COUNT; s++)
        if (!is_drop(s) && (stat_table[s].flags & flag))
            json_int(w, stat_name(s), (int64_t)v[s]);
}

/* "drops" (or key): every reason, zero or not. */
static void json_drops_as(json_writer_t *w, const char *key, const uint64_t v[STAT_COUNT])
{
    json_begin_object(w, key);
    for (int s = 1; s < STAT_COUNT; s++)
        if (is_drop(s))
            json_int(w, stat_name(s), (int64_t)v[s]);
    json_end_object(w);
}

static void json_drops(json_writer_t *w, const uint64_t v[STAT_COUNT])
{
    json_drops_as(w, "drops", v);
}

/* The switch-wide counters, summed over the dataplane threads. */
static void switch_totals(inagg_switch_t *sw, uint64_t v[STAT_COUNT])
{
    memset(v, 0, STAT_COUNT * sizeof(v[0]));
    for (uint32_t t = 0; t < sw->cfg.threads; t++)
        for (int s = 0; s < STAT_COUNT; s++)
            v[s] += STAT_GET(sw->threads[t].c.v[s]);
}

static const retired_job_t *retired_at(const inagg_switch_t *sw, uint64_t k)
{
    return &sw->retired[k % SWITCH_RETIRED_KEEP];
}

static uint64_t retired_first(const inagg_switch_t *sw)
{
    return sw->nretired > SWITCH_RETIRED_KEEP ? sw->nretired - SWITCH_RETIRED_KEEP : 0;
}

static void write_text(inagg_switch_t *sw, FILE *out)
{
    uint64_t v[STAT_COUNT];
    switch_totals(sw, v);
    fprintf(out, "switch %s threads=%u slots_used=%u/%u uptime_s=%.1f jobs_rejoined=%" PRIu64 "\n",
            sw->listen_text, sw->cfg.threads, atomic_load(&sw->slots_used), sw->cfg.total_slots,
            (double)(server_now_ms() - sw->start_ms) / 1000.0, atomic_load(&sw->jobs_rejoined));
    fprintf(out,
            "packets in=%" PRIu64 " out=%" PRIu64 " injected_drops=%" PRIu64
            " injected_duplicates=%" PRIu64 " injected_reorders=%" PRIu64 "\n",
            v[STAT_PACKETS_IN], v[STAT_PACKETS_OUT], v[STAT_INJECTED_DROPS], v[STAT_INJECTED_DUPS],
            v[STAT_INJECTED_REORDERS]);
    fprintf(out, "poll mode=%s spin_us=%u empty_polls=%" PRIu64 " spin_bans=%" PRIu64 "\n",
            switch_poll_name(sw->cfg.poll),
            sw->cfg.poll == SWITCH_POLL_ADAPTIVE ? switch_poll_spin_us(sw->cfg.poll_spin_us) : 0u,
            v[STAT_POLLS_EMPTY], v[STAT_SPIN_BANS]);
    fprintf(out, "dropped before any job:");
    text_drops(out, v);
    fprintf(out, "control connections=%u", atomic_load(&sw->ctl_connections));
    for (int k = 0; k < CTL_STAT_COUNT; k++)
        fprintf(out, " %s=%" PRIu64, ctl_stat_names[k], atomic_load(&sw->ctl_counts[k]));
    fprintf(out, "\n");
    for (uint32_t i = 0; i < SWITCH_MAX_JOBS; i++) {
        job_t *j = atomic_load(&sw->jobs[i]);
        if (!j)
            continue;
        job_totals(j, v);
        fprintf(out,
                "job %u name=%s state=%s protocol=%s world=%u slots=%u elems=%u float=%s "
                "optimizer=%s gen=%u",
                j->id, j->name, state_name(atomic_load(&j->state)), j->proto->name, j->world,
                j->nslots, j->elems, float_name(j->float_mode), optimizer_name(j), j->gen);
        text_counters(out, v, STAT_TEXT);
        fprintf(out, " drops:");
        text_drops(out, v);
    }
    for (uint64_t k = retired_first(sw); k < sw->nretired; k++) {
        const retired_job_t *r = retired_at(sw, k);
        fprintf(out, "retired job %u name=%s protocol=%s world=%u", r->id, r->name, r->proto->name,
                r->world);
        text_counters(out, r->v, STAT_RETIRED_TEXT);
        fprintf(out, " drops=%" PRIu64 "\n", drops_total(r->v));
    }
}

static void write_json(inagg_switch_t *sw, FILE *out)
{
    json_writer_t w;
    json_init(&w);
    json_begin_object(&w, NULL);
    json_string(&w, "listen", sw->listen_text);
    json_int(&w, "threads", sw->cfg.threads);
    json_int(&w, "slots_total", sw->cfg.total_slots);
    json_int(&w, "slots_used", atomic_load(&sw->slots_used));
    json_int(&w, "jobs_rejoined", (int64_t)atomic_load(&sw->jobs_rejoined));
    uint64_t v[STAT_COUNT];
    switch_totals(sw, v);
    json_counters(&w, v, STAT_SWITCH);
    json_drops(&w, v);
    json_newline(&w); /* the control plane's counters on a line of their own */
    json_begin_object(&w, "control");
    json_int(&w, "connections", atomic_load(&sw->ctl_connections));
    for (int k = 0; k < CTL_STAT_COUNT; k++)
        json_int(&w, ctl_stat_names[k], (int64_t)atomic_load(&sw->ctl_counts[k]));
    json_end_object(&w);
    json_begin_array(&w, "jobs");
    for (uint32_t i = 0; i < SWITCH_MAX_JOBS; i++) {
        job_t *j = atomic_load(&sw->jobs[i]);
        if (!j)
            continue;
        job_totals(j, v);
        json_newline(&w); /* one line per job, and its drops on the next */
        json_begin_object(&w, NULL);
        json_int(&w, "id", j->id);
        json_string(&w, "name", j->name);
        json_string(&w, "state", state_name(atomic_load(&j->state)));
        json_string(&w, "protocol", j->proto->name);
        json_int(&w, "world", j->world);
        json_int(&w, "slots", j->nslots);
        json_int(&w, "elems", j->elems);
        json_string(&w, "optimizer", optimizer_name(j));
        json_int(&w, "generation", j->gen);
        json_counters(&w, v, STAT_JSON);
        json_newline(&w);
        json_drops(&w, v);
        json_end_object(&w);
    }
    json_end_array(&w);
    json_begin_array(&w, "retired_jobs"); /* the last jobs to finish, oldest first */
    for (uint64_t k = retired_first(sw); k < sw->nretired; k++) {
        const retired_job_t *r = retired_at(sw, k);
        json_newline(&w);
        json_begin_object(&w, NULL);
        json_int(&w, "id", r->id);
        json_string(&w, "name", r->name);
        json_string(&w, "protocol", r->proto->name);
        json_int(&w, "world", r->world);
        json_counters(&w, r->v, STAT_RETIRED_JSON);
        json_int(&w, "drops", (int64_t)drops_total(r->v));
        json_newline(&w);
        json_drops_as(&w, "drops_by_reason", r->v); /* what each check caught */
        json_end_object(&w);
    }
    json_end_array(&w);
    if (sw->cfg.extra_json)
        sw->cfg.extra_json(sw->cfg.extra_ctx, &w);
    json_end_object(&w);
    const char *t = json_text(&w);
    fprintf(out, "%s\n", t ? t : "{}");
    json_free(&w);
}

/* Rendered into memory under the lock and written after it, so a slow `out` (a full pipe)
 * never holds the lock that the control thread takes to retire a job. */
void switch_write_stats(inagg_switch_t *sw, FILE *out, int json)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    pthread_mutex_lock(&sw->stats_lock);
    if (mem && json) {
        write_json(sw, mem);
    } else if (mem) {
        write_text(sw, mem);
        if (sw->cfg.extra_text)
            sw->cfg.extra_text(sw->cfg.extra_ctx, mem);
    }
    pthread_mutex_unlock(&sw->stats_lock);
    if (mem && fclose(mem) == 0 && text)
        fwrite(text, 1, len, out);
    else
        fprintf(out, "stats: out of memory\n");
    fflush(out);
    free(text);
}

/* Does a retiring job of protocol p report counter s in its log line? */
static int logged(const switch_proto_ops_t *p, int s)
{
    unsigned f = stat_table[s].flags;
    return (f & STAT_LOG) && (!(f & STAT_PROTOCOL) || (p->stats & (1ull << s)));
}

/* "N rounds, N result resends, ..., N drops": the counters flagged STAT_LOG, each followed by
 * those logged under it, in parentheses. */
static void log_summary(const switch_proto_ops_t *p, const uint64_t v[STAT_COUNT], char *buf,
                        size_t cap)
{
    size_t off = 0;
#define PUT(...) (off += off < cap ? (size_t)snprintf(buf + off, cap - off, __VA_ARGS__) : 0)
    for (int s = 0; s < STAT_COUNT; s++) {
        if (!logged(p, s) || stat_table[s].log_under)
            continue;
        PUT("%" PRIu64 " %s", v[s], stat_table[s].log);
        int sub = 0;
        for (int u = 0; u < STAT_COUNT; u++)
            if (logged(p, u) && stat_table[u].log_under == s)
                PUT("%s%" PRIu64 " %s", sub++ ? ", " : " (", v[u], stat_table[u].log);
        PUT("%s, ", sub ? ")" : "");
    }
    PUT("%" PRIu64 " drops", drops_total(v));
#undef PUT
}

uint64_t stats_retire(inagg_switch_t *sw, const job_t *j)
{
    uint64_t k = sw->nretired++;
    retired_job_t *r = &sw->retired[k % SWITCH_RETIRED_KEEP];
    *r = (retired_job_t){.id = j->id, .proto = j->proto, .world = j->world};
    snprintf(r->name, sizeof(r->name), "%s", j->name);
    job_totals(j, r->v);
    for (int s = 0; s < STAT_COUNT; s++)
        sw->retired_sum[s] += r->v[s];
    return k;
}

void stats_retire_final(inagg_switch_t *sw, const job_t *j, uint64_t k)
{
    uint64_t v[STAT_COUNT];
    job_totals(j, v);
    if (k >= retired_first(sw)) { /* what came in since stats_retire joins the sum */
        uint64_t *kept = sw->retired[k % SWITCH_RETIRED_KEEP].v;
        for (int s = 0; s < STAT_COUNT; s++)
            sw->retired_sum[s] += v[s] - kept[s];
        memcpy(kept, v, sizeof(v));
    }
    char summary[512];
    log_summary(j->proto, v, summary, sizeof(summary));
    LOG_I("job '%s' (id %u) retired: %s", j->name, j->id, summary);
}
