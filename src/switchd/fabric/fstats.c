/*
 * fstats.c - the fabric's counters and latency histograms, written as text lines or as the
 * "fabric" member of the switch's JSON stats, or as Prometheus families (/metrics). Every
 * counter is named once, in the tables below; docs/FABRIC.md explains them.
 */
#include <inttypes.h>
#include <stdio.h>

#include "lib/base/util.h"
#include "lib/json/json.h"
#include "lib/json/promtext.h"
#include "lib/wire/fabricmsg.h"
#include "switchd/fabric/fabric_int.h"

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

/* The pipeline's stages with their counters (name=index into f->st); the aggregation and
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
     {ST_CL_FRAMES, ST_CL_TO_TX, -2, ST_CL_QUEUE_FULL}},
    {"transmit",
     -1,
     {"frames", "results", "queue_max_bytes"},
     {ST_TX_FRAMES, ST_TX_RESULTS, ST_TX_QUEUE_MAX, -1}},
};

static uint64_t stage_val(const struct fabric *f, int idx)
{
    return idx == -2 ? atomic_load_explicit(&f->g[FG_AGG_IN], memory_order_relaxed)
                     : atomic_load_explicit(&f->st[idx], memory_order_relaxed);
}

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

/* 16 buckets per power of two: at most 1/16 relative error. */
static uint32_t bucket_of(uint64_t ns)
{
    if (ns < 16)
        return (uint32_t)ns;
    uint32_t e = 63u - (uint32_t)__builtin_clzll(ns);
    uint32_t b = (e - 3) * 16u + (uint32_t)((ns >> (e - 4)) & 15u);
    return b < LAT_BUCKETS ? b : LAT_BUCKETS - 1;
}

static uint64_t bucket_low(uint32_t b)
{
    if (b < 16)
        return b;
    uint32_t e = b / 16 + 3, m = b % 16;
    return (1ull << e) + ((uint64_t)m << (e - 4));
}

void lathist_add(lathist_t *h, uint64_t ns) { fstat_add(&h->b[bucket_of(ns)], 1); }

/* Count and quantiles (ns, the lower edge of the bucket holding it) of a histogram. */
static uint64_t lat_summary(const lathist_t *h, uint64_t *p50, uint64_t *p99)
{
    uint64_t n = 0, seen = 0;
    for (uint32_t b = 0; b < LAT_BUCKETS; b++)
        n += atomic_load_explicit(&h->b[b], memory_order_relaxed);
    *p50 = *p99 = 0;
    int have50 = 0;
    for (uint32_t b = 0; b < LAT_BUCKETS && n; b++) {
        seen += atomic_load_explicit(&h->b[b], memory_order_relaxed);
        if (!have50 && seen * 2 >= n) {
            *p50 = bucket_low(b);
            have50 = 1;
        }
        if (seen * 100 >= n * 99) {
            *p99 = bucket_low(b);
            break;
        }
    }
    return n;
}

static uint64_t ring_truncated(const struct fabric *f)
{
    uint64_t t = 0;
    for (uint32_t p = 0; p < f->nports; p++)
        if (!f->ports[p].is_cpu)
            t += f->ports[p].ps.truncated;
    return t;
}

static uint64_t gval(const struct fabric *f, int i)
{
    if (i == FG_RING_TRUNCATED)
        return ring_truncated(f);
    return atomic_load_explicit(&f->g[i], memory_order_relaxed);
}

void fabric_write_text(void *ctx, FILE *out)
{
    struct fabric *f = ctx;
    uint64_t now = util_now_ns();
    fprintf(out,
            "fabric ip=%s/%d mac=%02x:%02x:%02x:%02x:%02x:%02x ports=%u mac_entries=%u "
            "mac_learned=%" PRIu64 " mac_moved=%" PRIu64 " mac_aged=%" PRIu64
            " mac_table_full=%" PRIu64 "\n",
            f->ip_text, f->prefix, f->mac[0], f->mac[1], f->mac[2], f->mac[3], f->mac[4], f->mac[5],
            f->nports, mactable_count(&f->mt, now), f->mt.learned, f->mt.moved, f->mt.aged,
            f->mt.full);
    char ports[WIRE_FABRIC_PORTS_MAX];
    const char *add;
    fabric_settings_text(f, ports, sizeof(ports), &add);
    fprintf(out, "fabric settings: agg_ports=%s add=%s\n", ports, add);
    fprintf(out, "fabric frames:");
    for (int i = 0; i < FG_COUNT; i++)
        fprintf(out, " %s=%" PRIu64, global_names[i], gval(f, i));
    fprintf(out, " agg_tx_queue_full=%" PRIu64 "\n",
            atomic_load(&f->link.tx_full) + atomic_load(&f->link.tx_too_big));
    for (uint32_t p = 0; p < f->nports; p++) {
        const fport_t *port = &f->ports[p];
        fprintf(out, "fabric port %s%s:", port->name, port->is_cpu ? " (switch stack)" : "");
        for (int i = 0; i < FP_COUNT; i++)
            fprintf(out, " %s=%" PRIu64, port_names[i],
                    atomic_load_explicit(&port->c[i], memory_order_relaxed));
        fprintf(out, " delay_us=%.3f jitter_us=%.3f loss=%.6g\n", (double)port->delay_ns / 1e3,
                (double)port->jitter_ns / 1e3, (double)port->loss_thresh / 4294967296.0);
    }
    for (size_t k = 0; k < sizeof(stages) / sizeof(stages[0]); k++) {
        fprintf(out, "fabric stage %s: thread=%d", stages[k].stage, stage_thread(f, (int)k));
        for (int i = 0; i < 4 && stages[k].idx[i] != -1; i++)
            fprintf(out, " %s=%" PRIu64, stages[k].names[i], stage_val(f, stages[k].idx[i]));
        fputc('\n', out);
    }
    fprintf(out, "fabric aggregation: %s\n",
            atomic_load(&f->agg_pass) ? "inline (thread 0 runs every queue's slot protocols)"
                                      : "threads (the switch's dataplane threads)");
    for (uint32_t t = 0; t < f->threads; t++)
        fprintf(out, "fabric thread %u: busy_passes=%" PRIu64 " sleeps=%" PRIu64 "\n", t,
                atomic_load(&f->st[t ? ST_THREAD1_PASSES : ST_THREAD0_PASSES]),
                atomic_load(&f->st[t ? ST_THREAD1_SLEEPS : ST_THREAD0_SLEEPS]));
    for (int k = 0; k < LAT_COUNT; k++) {
        uint64_t p50, p99, n = lat_summary(&f->lat[k], &p50, &p99);
        fprintf(out, "fabric latency %s: n=%" PRIu64 " p50_us=%.2f p99_us=%.2f\n", lat_names[k], n,
                (double)p50 / 1e3, (double)p99 / 1e3);
    }
    roce_steer_write_text(f, out);
    fabric_xdp_write_text(f, out);
}

void fabric_write_json(void *ctx, struct json_writer *w)
{
    struct fabric *f = ctx;
    uint64_t now = util_now_ns();
    char mac[24];
    snprintf(mac, sizeof(mac), "%02x:%02x:%02x:%02x:%02x:%02x", f->mac[0], f->mac[1], f->mac[2],
             f->mac[3], f->mac[4], f->mac[5]);
    /* lines stay shorter than a control line (CTL_LINE_MAX): a newline between groups */
    json_newline(w);
    json_begin_object(w, "fabric");
    json_string(w, "ip", f->ip_text);
    json_int(w, "prefix", f->prefix);
    json_string(w, "mac", mac);
    json_int(w, "mac_entries", mactable_count(&f->mt, now));
    json_int(w, "mac_learned", (int64_t)f->mt.learned);
    json_int(w, "mac_moved", (int64_t)f->mt.moved);
    json_int(w, "mac_aged", (int64_t)f->mt.aged);
    json_int(w, "mac_table_full", (int64_t)f->mt.full);
    char ports[WIRE_FABRIC_PORTS_MAX];
    const char *add;
    fabric_settings_text(f, ports, sizeof(ports), &add);
    json_newline(w);
    json_string(w, "agg_ports", ports);
    json_string(w, "add", add);
    json_newline(w);
    for (int i = 0; i < FG_COUNT; i++)
        json_int(w, global_names[i], (int64_t)gval(f, i));
    json_int(w, "agg_tx_queue_full",
             (int64_t)(atomic_load(&f->link.tx_full) + atomic_load(&f->link.tx_too_big)));
    json_begin_array(w, "ports");
    for (uint32_t p = 0; p < f->nports; p++) {
        const fport_t *port = &f->ports[p];
        json_newline(w);
        json_begin_object(w, NULL);
        json_string(w, "name", port->name);
        json_bool(w, "switch_stack", port->is_cpu);
        for (int i = 0; i < FP_COUNT; i++)
            json_int(w, port_names[i],
                     (int64_t)atomic_load_explicit(&port->c[i], memory_order_relaxed));
        json_number(w, "delay_us", (double)port->delay_ns / 1e3);
        json_number(w, "jitter_us", (double)port->jitter_ns / 1e3);
        json_number(w, "loss", (double)port->loss_thresh / 4294967296.0);
        json_end_object(w);
    }
    json_end_array(w);
    json_newline(w);
    json_int(w, "threads", f->threads);
    json_string(w, "aggregation", atomic_load(&f->agg_pass) ? "inline" : "threads");
    json_begin_object(w, "stages");
    for (size_t k = 0; k < sizeof(stages) / sizeof(stages[0]); k++) {
        json_begin_object(w, stages[k].stage);
        json_int(w, "thread", stage_thread(f, (int)k));
        for (int i = 0; i < 4 && stages[k].idx[i] != -1; i++)
            json_int(w, stages[k].names[i], (int64_t)stage_val(f, stages[k].idx[i]));
        json_end_object(w);
    }
    json_end_object(w);
    json_begin_array(w, "thread_loops");
    for (uint32_t t = 0; t < f->threads; t++) {
        json_begin_object(w, NULL);
        json_int(w, "busy_passes",
                 (int64_t)atomic_load(&f->st[t ? ST_THREAD1_PASSES : ST_THREAD0_PASSES]));
        json_int(w, "sleeps",
                 (int64_t)atomic_load(&f->st[t ? ST_THREAD1_SLEEPS : ST_THREAD0_SLEEPS]));
        json_end_object(w);
    }
    json_end_array(w);
    json_begin_object(w, "latency");
    for (int k = 0; k < LAT_COUNT; k++) {
        uint64_t p50, p99, n = lat_summary(&f->lat[k], &p50, &p99);
        json_newline(w);
        json_begin_object(w, lat_names[k]);
        json_int(w, "n", (int64_t)n);
        json_number(w, "p50_us", (double)p50 / 1e3);
        json_number(w, "p99_us", (double)p99 / 1e3);
        json_end_object(w);
    }
    json_end_object(w);
    roce_steer_write_json(f, w);
    fabric_xdp_write_json(f, w);
    json_end_object(w);
}

void fabric_write_metrics(void *ctx, FILE *out)
{
    struct fabric *f = ctx;
    prom_family(out, "inagg_fabric_frames_total", "counter",
                "L2 fabric frames by what happened to them (docs/FABRIC.md, the frames line)");
    for (int i = 0; i < FG_COUNT; i++) {
        char l[64];
        prom_labels(l, sizeof(l), "event", global_names[i], NULL);
        prom_u64(out, "inagg_fabric_frames_total", l, gval(f, i));
    }
    prom_family(out, "inagg_fabric_mac_entries", "gauge", "MAC table entries");
    prom_u64(out, "inagg_fabric_mac_entries", NULL, mactable_count(&f->mt, util_now_ns()));
    for (int i = 0; i < FP_COUNT; i++) {
        char name[80], help[96];
        snprintf(name, sizeof(name), "inagg_fabric_port_%s_total", port_metric_names[i]);
        snprintf(help, sizeof(help), "per fabric port: %s", port_names[i]);
        prom_family(out, name, "counter", help);
        for (uint32_t p = 0; p < f->nports; p++) {
            char l[96];
            prom_labels(l, sizeof(l), "port", f->ports[p].name, NULL);
            prom_u64(out, name, l, atomic_load_explicit(&f->ports[p].c[i], memory_order_relaxed));
        }
    }
    fabric_xdp_write_metrics(f, out);
}
