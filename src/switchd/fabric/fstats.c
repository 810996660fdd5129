/*
 * fstats.c - the fabric's counters and latency histograms, written as text lines or as the
 * "fabric" member of the switch's JSON stats, or as Prometheus families (/metrics). Every
 * counter is named once, in the tables below; docs/FABRIC.md explains them. The values are
 * pulled from each stage (its X_stats) into a snapshot, and written from that: nothing here
 * reads a stage's context.
 */
#include <inttypes.h>
#include <stdio.h>

#include "lib/base/util.h"
#include "lib/json/json.h"
#include "lib/json/promtext.h"
#include "lib/wire/fabricmsg.h"
#include "switchd/fabric/fabric_int.h"

/* The fabric's frame counters as the user sees them (the "frames" line), each taken from the
 * stage that counts it (snapshot_take). */
enum fabric_stat {
    FG_FORWARDED,
    FG_FLOODED,
    FG_UNKNOWN_FLOODED,
    FG_FILTERED,
    FG_TO_CPU,
    FG_FROM_CPU,
    FG_AGG_IN,
    FG_AGG_OUT,
    FG_AGG_QUEUE_FULL,
    FG_AGG_TOO_BIG,
    FG_AGG_GSO,
    FG_AGG_FRAGMENT,
    FG_AGG_BAD_PORT,
    FG_MALFORMED,
    FG_RUNT,
    FG_BAD_SOURCE,
    FG_RING_TRUNCATED,
    FG_AGG_PORT_OFF,
    FG_AGG_ADD_OFF,
    FG_SETTINGS_CHANGED,
    FG_COUNT
};

/* The pipeline's per-stage and per-thread counters as the user sees them. */
enum fabric_stage_stat {
    ST_RX_FRAMES,
    ST_RX_DELAYED,
    ST_CL_FRAMES,
    ST_CL_TO_TX,
    ST_CL_TO_AGG,
    ST_CL_QUEUE_FULL,
    ST_TX_FRAMES,
    ST_TX_RESULTS,
    ST_TX_QUEUE_MAX,
    ST_THREAD0_PASSES,
    ST_THREAD0_SLEEPS,
    ST_THREAD1_PASSES,
    ST_THREAD1_SLEEPS,
    ST_COUNT
};

/* Everything the writers print, pulled from the stages at one time. */
typedef struct snapshot {
    classify_stats_t cl;
    aggstage_stats_t agg;
    uint64_t g[FG_COUNT];
    uint64_t st[ST_COUNT];
    uint64_t lat_n[LAT_COUNT], lat_p50[LAT_COUNT], lat_p99[LAT_COUNT];
    fport_stats_t port[FABRIC_MAX_PORTS];
} snapshot_t;

/* The frames line's counters: classify's, then the aggregation and transmit stages' hand-offs,
 * then the ports'. */
static void snapshot_frames(snapshot_t *s, const txstage_stats_t *tx, uint32_t nports)
{
    static const struct {
        int fg, cl;
    } from_classify[] = {
        {FG_FORWARDED, CL_FORWARDED},
        {FG_FLOODED, CL_FLOODED},
        {FG_UNKNOWN_FLOODED, CL_UNKNOWN_FLOODED},
        {FG_FILTERED, CL_FILTERED},
        {FG_TO_CPU, CL_TO_CPU},
        {FG_FROM_CPU, CL_FROM_CPU},
        {FG_AGG_FRAGMENT, CL_AGG_FRAGMENT},
        {FG_MALFORMED, CL_MALFORMED},
        {FG_RUNT, CL_RUNT},
        {FG_BAD_SOURCE, CL_BAD_SOURCE},
        {FG_AGG_PORT_OFF, CL_AGG_PORT_OFF},
        {FG_AGG_ADD_OFF, CL_AGG_ADD_OFF},
        {FG_SETTINGS_CHANGED, CL_SETTINGS_CHANGED},
    };
    for (size_t i = 0; i < sizeof(from_classify) / sizeof(from_classify[0]); i++)
        s->g[from_classify[i].fg] = s->cl.c[from_classify[i].cl];
    s->g[FG_AGG_IN] = s->agg.c[AG_IN];
    s->g[FG_AGG_QUEUE_FULL] = s->agg.c[AG_QUEUE_FULL];
    s->g[FG_AGG_TOO_BIG] = s->agg.c[AG_TOO_BIG];
    s->g[FG_AGG_GSO] = s->agg.c[AG_GSO];
    s->g[FG_AGG_OUT] = tx->c[TX_RESULTS];
    s->g[FG_AGG_BAD_PORT] = tx->c[TX_BAD_PORT];
    s->g[FG_RING_TRUNCATED] = 0;
    for (uint32_t p = 0; p < nports; p++)
        s->g[FG_RING_TRUNCATED] += s->port[p].ring_truncated;
}

static void snapshot_take(const struct fabric *f, snapshot_t *s)
{
    rxstage_stats_t rx;
    txstage_stats_t tx;
    delaystage_stats_t delay;
    rxstage_stats(&f->rx, &rx);
    classify_stats(&f->classify, util_now_ns(), &s->cl);
    aggstage_stats(&f->agg, &s->agg);
    txstage_stats(&f->tx, &tx);
    delaystage_stats(&f->delay, &delay);
    for (uint32_t p = 0; p < f->nports; p++)
        fport_stats(&f->ports[p], &s->port[p]);
    snapshot_frames(s, &tx, f->nports);
    uint64_t *st = s->st;
    st[ST_RX_FRAMES] = rx.c[RX_FRAMES];
    st[ST_RX_DELAYED] = rx.c[RX_DELAYED];
    st[ST_CL_FRAMES] = s->cl.c[CL_FRAMES];
    st[ST_CL_TO_TX] = rx.c[RX_TO_TX];
    st[ST_CL_TO_AGG] = s->agg.c[AG_IN];
    st[ST_CL_QUEUE_FULL] = rx.c[RX_TX_FULL];
    st[ST_TX_FRAMES] = tx.c[TX_FRAMES];
    st[ST_TX_RESULTS] = tx.c[TX_RESULTS];
    st[ST_TX_QUEUE_MAX] = tx.c[TX_QUEUE_MAX];
    st[ST_THREAD0_PASSES] = rx.c[RX_PASSES];
    st[ST_THREAD0_SLEEPS] = rx.c[RX_SLEEPS];
    st[ST_THREAD1_PASSES] = tx.c[TX_PASSES];
    st[ST_THREAD1_SLEEPS] = tx.c[TX_SLEEPS];
    for (int k = 0; k < LAT_DELAY_LATE; k++) {
        s->lat_n[k] = tx.lat_n[k];
        s->lat_p50[k] = tx.lat_p50_ns[k];
        s->lat_p99[k] = tx.lat_p99_ns[k];
    }
    s->lat_n[LAT_DELAY_LATE] = delay.late_n;
    s->lat_p50[LAT_DELAY_LATE] = delay.late_p50_ns;
    s->lat_p99[LAT_DELAY_LATE] = delay.late_p99_ns;
}

static const char *const global_names[FG_COUNT] = {
    [FG_FORWARDED] = "forwarded",
    [FG_FLOODED] = "flooded",
    [FG_UNKNOWN_FLOODED] = "unknown_flooded",
    [FG_FILTERED] = "filtered",
    [FG_TO_CPU] = "to_switch_stack",
    [FG_FROM_CPU] = "from_switch_stack",
    [FG_AGG_IN] = "agg_in",
    [FG_AGG_OUT] = "agg_out",
    [FG_AGG_QUEUE_FULL] = "agg_queue_full",
    [FG_AGG_TOO_BIG] = "agg_too_big",
    [FG_AGG_GSO] = "agg_gso_frames",
    [FG_AGG_FRAGMENT] = "agg_fragment",
    [FG_AGG_BAD_PORT] = "agg_bad_port",
    [FG_MALFORMED] = "malformed",
    [FG_RUNT] = "runt",
    [FG_BAD_SOURCE] = "bad_source_mac",
    [FG_RING_TRUNCATED] = "ring_truncated",
    [FG_AGG_PORT_OFF] = "agg_port_off",
    [FG_AGG_ADD_OFF] = "agg_add_off",
    [FG_SETTINGS_CHANGED] = "settings_changed",
};

static const char *const port_names[FP_COUNT] = {
    [FP_RX] = "rx",
    [FP_RX_BYTES] = "rx_bytes",
    [FP_TX] = "tx",
    [FP_TX_BYTES] = "tx_bytes",
    [FP_TX_DROPS] = "tx_drops",
    [FP_TX_GSO] = "tx_gso",
    [FP_DELAY_DROPS] = "delay_drops",
    [FP_LOSS_DROPS] = "loss_drops",
};

/* A port counter's Prometheus name: inagg_fabric_port_<name>_total. */
static const char *const port_metric_names[FP_COUNT] = {
    [FP_RX] = "received_frames",      [FP_RX_BYTES] = "received_bytes",
    [FP_TX] = "sent_frames",          [FP_TX_BYTES] = "sent_bytes",
    [FP_TX_DROPS] = "transmit_drops", [FP_TX_GSO] = "sent_gso_frames",
    [FP_DELAY_DROPS] = "delay_drops", [FP_LOSS_DROPS] = "loss_drops",
};

/* The pipeline's stages with their counters (name=index into st[]); the aggregation and
 * result-buffer stages are the switch's slot protocols, whose counters the switch prints (run
 * by thread 0 with inline aggregation, else by the switch's dataplane threads). */
static const struct {
    const char *stage;
    int thread; /* -1: the transmit stage's thread (0 or 1) */
    const char *names[4];
    int idx[4];
} stages[] = {
    {"receive", 0, {"frames", "delayed"}, {ST_RX_FRAMES, ST_RX_DELAYED, -1, -1}},
    {"classify",
     0,
     {"frames", "to_transmit", "to_aggregate", "transmit_queue_full"},
     {ST_CL_FRAMES, ST_CL_TO_TX, ST_CL_TO_AGG, ST_CL_QUEUE_FULL}},
    {"transmit",
     -1,
     {"frames", "results", "queue_max_bytes"},
     {ST_TX_FRAMES, ST_TX_RESULTS, ST_TX_QUEUE_MAX, -1}},
};

static int stage_thread(const struct fabric *f, int k)
{
    return stages[k].thread >= 0 ? stages[k].thread : f->threads > 1 ? 1 : 0;
}

static const char *const lat_names[LAT_COUNT] = {
    [LAT_FORWARD] = "forward",
    [LAT_AGG_INT] = "aggregate_int32",
    [LAT_AGG_FLOAT] = "aggregate_float32",
    [LAT_RESEND] = "resend",
    [LAT_DELAY_LATE] = "delay_release_late",
};

void fabric_write_text(void *ctx, FILE *out)
{
    struct fabric *f = ctx;
    snapshot_t s;
    snapshot_take(f, &s);
    fprintf(out,
            "fabric ip=%s/%d mac=%02x:%02x:%02x:%02x:%02x:%02x ports=%u mac_entries=%u "
            "mac_learned=%" PRIu64 " mac_moved=%" PRIu64 " mac_aged=%" PRIu64
            " mac_table_full=%" PRIu64 "\n",
            f->ip_text, f->prefix, f->mac[0], f->mac[1], f->mac[2], f->mac[3], f->mac[4], f->mac[5],
            f->nports, s.cl.mac_entries, s.cl.mac_learned, s.cl.mac_moved, s.cl.mac_aged,
            s.cl.mac_table_full);
    char ports[WIRE_FABRIC_PORTS_MAX];
    const char *add;
    fabric_settings_text(f, ports, sizeof(ports), &add);
    fprintf(out, "fabric settings: agg_ports=%s add=%s\n", ports, add);
    fprintf(out, "fabric frames:");
    for (int i = 0; i < FG_COUNT; i++)
        fprintf(out, " %s=%" PRIu64, global_names[i], s.g[i]);
    fprintf(out, " agg_tx_queue_full=%" PRIu64 "\n", s.agg.endpoint_tx_full);
    for (uint32_t p = 0; p < f->nports; p++) {
        const fport_t *port = &f->ports[p];
        fprintf(out, "fabric port %s%s:", port->name, port->is_cpu ? " (switch stack)" : "");
        for (int i = 0; i < FP_COUNT; i++)
            fprintf(out, " %s=%" PRIu64, port_names[i], s.port[p].c[i]);
        fprintf(out, " delay_us=%.3f jitter_us=%.3f loss=%.6g\n", (double)port->delay_ns / 1e3,
                (double)port->jitter_ns / 1e3, (double)port->loss_thresh / 4294967296.0);
    }
    for (size_t k = 0; k < sizeof(stages) / sizeof(stages[0]); k++) {
        fprintf(out, "fabric stage %s: thread=%d", stages[k].stage, stage_thread(f, (int)k));
        for (int i = 0; i < 4 && stages[k].idx[i] != -1; i++)
            fprintf(out, " %s=%" PRIu64, stages[k].names[i], s.st[stages[k].idx[i]]);
        fputc('\n', out);
    }
    fprintf(out, "fabric aggregation: %s\n",
            s.agg.is_inline ? "inline (thread 0 runs every queue's slot protocols)"
                            : "threads (the switch's dataplane threads)");
    for (uint32_t t = 0; t < f->threads; t++)
        fprintf(out, "fabric thread %u: busy_passes=%" PRIu64 " sleeps=%" PRIu64 "\n", t,
                s.st[t ? ST_THREAD1_PASSES : ST_THREAD0_PASSES],
                s.st[t ? ST_THREAD1_SLEEPS : ST_THREAD0_SLEEPS]);
    for (int k = 0; k < LAT_COUNT; k++)
        fprintf(out, "fabric latency %s: n=%" PRIu64 " p50_us=%.2f p99_us=%.2f\n", lat_names[k],
                s.lat_n[k], (double)s.lat_p50[k] / 1e3, (double)s.lat_p99[k] / 1e3);
    roce_steer_write_text(&s.cl.roce, &f->link.roce, out);
    fabric_xdp_write_text(f, out);
}

void fabric_write_json(void *ctx, struct json_writer *w)
{
    struct fabric *f = ctx;
    snapshot_t s;
    snapshot_take(f, &s);
    char mac[24];
    snprintf(mac, sizeof(mac), "%02x:%02x:%02x:%02x:%02x:%02x", f->mac[0], f->mac[1], f->mac[2],
             f->mac[3], f->mac[4], f->mac[5]);
    /* lines stay shorter than a control line (CTL_LINE_MAX): a newline between groups */
    json_newline(w);
    json_begin_object(w, "fabric");
    json_string(w, "ip", f->ip_text);
    json_int(w, "prefix", f->prefix);
    json_string(w, "mac", mac);
    json_int(w, "mac_entries", s.cl.mac_entries);
    json_int(w, "mac_learned", (int64_t)s.cl.mac_learned);
    json_int(w, "mac_moved", (int64_t)s.cl.mac_moved);
    json_int(w, "mac_aged", (int64_t)s.cl.mac_aged);
    json_int(w, "mac_table_full", (int64_t)s.cl.mac_table_full);
    char ports[WIRE_FABRIC_PORTS_MAX];
    const char *add;
    fabric_settings_text(f, ports, sizeof(ports), &add);
    json_newline(w);
    json_string(w, "agg_ports", ports);
    json_string(w, "add", add);
    json_newline(w);
    for (int i = 0; i < FG_COUNT; i++)
        json_int(w, global_names[i], (int64_t)s.g[i]);
    json_int(w, "agg_tx_queue_full", (int64_t)s.agg.endpoint_tx_full);
    json_begin_array(w, "ports");
    for (uint32_t p = 0; p < f->nports; p++) {
        const fport_t *port = &f->ports[p];
        json_newline(w);
        json_begin_object(w, NULL);
        json_string(w, "name", port->name);
        json_bool(w, "switch_stack", port->is_cpu);
        for (int i = 0; i < FP_COUNT; i++)
            json_int(w, port_names[i], (int64_t)s.port[p].c[i]);
        json_number(w, "delay_us", (double)port->delay_ns / 1e3);
        json_number(w, "jitter_us", (double)port->jitter_ns / 1e3);
        json_number(w, "loss", (double)port->loss_thresh / 4294967296.0);
        json_end_object(w);
    }
    json_end_array(w);
    json_newline(w);
    json_int(w, "threads", f->threads);
    json_string(w, "aggregation", s.agg.is_inline ? "inline" : "threads");
    json_begin_object(w, "stages");
    for (size_t k = 0; k < sizeof(stages) / sizeof(stages[0]); k++) {
        json_begin_object(w, stages[k].stage);
        json_int(w, "thread", stage_thread(f, (int)k));
        for (int i = 0; i < 4 && stages[k].idx[i] != -1; i++)
            json_int(w, stages[k].names[i], (int64_t)s.st[stages[k].idx[i]]);
        json_end_object(w);
    }
    json_end_object(w);
    json_begin_array(w, "thread_loops");
    for (uint32_t t = 0; t < f->threads; t++) {
        json_begin_object(w, NULL);
        json_int(w, "busy_passes", (int64_t)s.st[t ? ST_THREAD1_PASSES : ST_THREAD0_PASSES]);
        json_int(w, "sleeps", (int64_t)s.st[t ? ST_THREAD1_SLEEPS : ST_THREAD0_SLEEPS]);
        json_end_object(w);
    }
    json_end_array(w);
    json_begin_object(w, "latency");
    for (int k = 0; k < LAT_COUNT; k++) {
        json_newline(w);
        json_begin_object(w, lat_names[k]);
        json_int(w, "n", (int64_t)s.lat_n[k]);
        json_number(w, "p50_us", (double)s.lat_p50[k] / 1e3);
        json_number(w, "p99_us", (double)s.lat_p99[k] / 1e3);
        json_end_object(w);
    }
    json_end_object(w);
    roce_steer_write_json(&s.cl.roce, &f->link.roce, w);
    fabric_xdp_write_json(f, w);
    json_end_object(w);
}

void fabric_write_metrics(void *ctx, FILE *out)
{
    struct fabric *f = ctx;
    snapshot_t s;
    snapshot_take(f, &s);
    prom_family(out, "inagg_fabric_frames_total", "counter",
                "L2 fabric frames by what happened to them (docs/FABRIC.md, the frames line)");
    for (int i = 0; i < FG_COUNT; i++) {
        char l[64];
        prom_labels(l, sizeof(l), "event", global_names[i], NULL);
        prom_u64(out, "inagg_fabric_frames_total", l, s.g[i]);
    }
    prom_family(out, "inagg_fabric_mac_entries", "gauge", "MAC table entries");
    prom_u64(out, "inagg_fabric_mac_entries", NULL, s.cl.mac_entries);
    for (int i = 0; i < FP_COUNT; i++) {
        char name[80], help[96];
        snprintf(name, sizeof(name), "inagg_fabric_port_%s_total", port_metric_names[i]);
        snprintf(help, sizeof(help), "per fabric port: %s", port_names[i]);
        prom_family(out, name, "counter", help);
        for (uint32_t p = 0; p < f->nports; p++) {
            char l[96];
            prom_labels(l, sizeof(l), "port", f->ports[p].name, NULL);
            prom_u64(out, name, l, s.port[p].c[i]);
        }
    }
    fabric_xdp_write_metrics(f, out);
}
