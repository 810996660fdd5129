/*
 * model_predict.c - `inagg model predict`: the model of src/apps/model for one worker count or a
 * range (up to 1024), rendered as a table, JSON and a PNG (time and speedup against workers,
 * gnuplot). The presets that re-draw the papers' comparisons are model_presets.c.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apps/cli/flags.h"
#include "apps/cli/model_cli.h"
#include "apps/cli/output.h"
#include "apps/cli/plot.h"
#include "apps/launch/launch.h"
#include "lib/json/json.h"

#define SUB "predict"

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: inagg model predict (--workers N | --workers-range A-B) --size BYTES [options]\n"
        "       inagg model predict --preset gcow-resnet50|gcow-vit|switchml [--plot F.png]\n"
        "\n"
        "Predicts one allreduce of --size bytes per worker (or, with --compute-ms, one\n"
        "training iteration) for in-network aggregation (ina), ring, tree, parameter\n"
        "server (ps) and concurrent allreduce (ca), and INA's speedup over each. The\n"
        "costs come from --params (default %s when it exists, else an\n"
        "ideal machine: no CPU cost, 1 us per hop). Equations: docs/MODEL.md.\n"
        "\n"
        "  --workers N          one worker count, 1..%u\n"
        "  --workers-range A-B  powers of two from A to B (and B), 2..%u\n"
        "  --size BYTES         bytes per worker (K/M/G: powers of 1024), e.g. 100M\n"
        "  --link-rate R        each host link, each way: 100mbit, 10gbit, 100g (default\n"
        "                       100gbit)\n"
        "  --slow-link R        one host's slower link (B_min: a ring runs at its\n"
        "                       slowest link, AllReduce-Switch)\n"
        "  --levels L           switch levels 1..%u (default 1); with --fanout F children\n"
        "                       per switch (default the L-th root of the workers)\n"
        "  --switch-threads T   the switch's dataplane threads (default the calibration's)\n"
        "  --packet-elems K     elements per packet (default the calibration's, 2048)\n"
        "  --overhead-bytes H   header bytes per packet on the wire (default 74)\n"
        "  --slots S            packets in flight per worker (default: the pool size from\n"
        "                       the bandwidth-delay product, SwitchML appendix C)\n"
        "  --compress MODE      a calibrated codec (zfp:rate=8, fp16) or none; or give\n"
        "  --ratio X --codec-gbs G   a ratio and a codec rate (GB/s of uncompressed data)\n"
        "  --agg-codec free|worker   the aggregator (switch, server) codes for free (a\n"
        "                       codec at line rate, GCOW's) or at the workers' rate\n"
        "                       (default: free with --codec-gbs, worker's with --compress)\n"
        "  --overlap yes|no     coding pipelined with the wire and, with --compute-ms,\n"
        "                       communication overlapped with the backward pass (default yes)\n"
        "  --compute-ms MS      compute time of an iteration: predict the iteration\n"
        "  --buckets K          gradient buckets (default 1)\n"
        "  --systems LIST       any of ina,ring,tree,ps,ca (default all)\n"
        "  --params FILE|none   calibration (inagg model calibrate); none: the ideal machine\n"
        "  --json FILE|-        one JSON object (- for stdout; the table goes to stderr)\n"
        "  --plot FILE.png      time and speedup against workers (gnuplot; needs a range)\n"
        "  --preset P           gcow-resnet50, gcow-vit (GCOW Table 4.2: 100 Gbit/s, ratio\n"
        "                       50, codec 10 GiB/s, ResNet50 97.5 MB 300 ms 4 buckets,\n"
        "                       ViT-H/14 2.5 GB 800 ms 11 buckets; 2..1024 workers) or\n"
        "                       switchml (goodput per packet size, pool size, 100 MB TAT\n"
        "                       against workers at 10 and 100 Gbit/s); with the papers'\n"
        "                       numbers beside\n"
        "  -h, --help           this text\n"
        "\n"
        "examples:\n"
        "  inagg model predict --workers-range 2-1024 --size 100M --link-rate 100gbit \\\n"
        "      --levels 2 --plot scaling.png\n"
        "  inagg model predict --workers 8 --size 16M --link-rate 100mbit --json -\n"
        "  inagg model predict --preset gcow-vit --plot gcow-vit.png\n",
        MODEL_DEFAULT_PARAMS, MODEL_MAX_WORKERS, MODEL_MAX_WORKERS, MODEL_MAX_LEVELS);
}

/* Worker counts of [lo, hi]: powers of two from lo, and hi. */
static int worker_points(uint32_t lo, uint32_t hi, uint32_t *pts)
{
    int n = 0;
    for (uint64_t w = lo; w < hi && n < MAX_POINTS - 1; w = w < 2 ? 2 : (w & (w - 1)) ? w : w * 2) {
        pts[n++] = (uint32_t)w;
        if (w & (w - 1)) { /* not a power of two: continue at the next one */
            uint64_t q = 1;
            while (q <= w)
                q <<= 1;
            w = q / 2;
        }
    }
    pts[n++] = hi;
    return n;
}

typedef struct pred_row {
    uint32_t n;
    model_time_t t[MODEL_NSYS];
    double iter[MODEL_NSYS];
} pred_row_t;

static double row_time(const pred_row_t *r, int s, int iteration)
{
    return iteration ? r->iter[s] : r->t[s].total_s;
}

static void compute_rows(const pred_opts_t *o, const uint32_t *pts, int npts, pred_row_t *rows)
{
    for (int i = 0; i < npts; i++) {
        rows[i].n = pts[i];
        for (int s = 0; s < MODEL_NSYS; s++) {
            rows[i].t[s] = model_allreduce((model_sys_t)s, &o->p, pts[i], o->bytes);
            rows[i].iter[s] = model_iteration((model_sys_t)s, &o->p, pts[i], o->bytes);
        }
    }
}

static void render_text(FILE *out, const pred_opts_t *o, const pred_row_t *rows, int n)
{
    int it = o->p.compute_s > 0;
    fprintf(out, "%s of %.4g MB per worker, links %.4g Gbit/s%s, %u level%s, %s%s\n",
            it ? "iteration" : "allreduce", o->bytes / 1e6, o->p.link_bps / 1e9,
            o->p.slow_bps > 0 ? " (one slower)" : "", o->p.levels, o->p.levels > 1 ? "s" : "",
            o->p.ratio != 1 ? "compressed" : "uncompressed",
            o->p.ratio != 1 ? (o->p.code_overlap ? " (coding overlapped)"
                                                 : " (coding not "
                                                   "overlapped)")
                            : "");
    if (o->note[0])
        fprintf(out, "%s\n", o->note);
    fprintf(out, "workers");
    for (int s = 0; s < MODEL_NSYS; s++)
        if (o->sys_mask & (1 << s))
            fprintf(out, " %12s", model_sys_name[s]);
    fprintf(out, "   ina bound");
    for (int s = 1; s < MODEL_NSYS; s++)
        if ((o->sys_mask & 1) && (o->sys_mask & (1 << s)))
            fprintf(out, "  vs %-4s", model_sys_name[s]);
    fprintf(out, "\n");
    for (int i = 0; i < n; i++) {
        fprintf(out, "%7u", rows[i].n);
        for (int s = 0; s < MODEL_NSYS; s++)
            if (o->sys_mask & (1 << s))
                fprintf(out, " %10.4g s", row_time(&rows[i], s, it));
        fprintf(out, "   %-9s", rows[i].t[MODEL_INA].bound);
        for (int s = 1; s < MODEL_NSYS; s++)
            if ((o->sys_mask & 1) && (o->sys_mask & (1 << s)))
                fprintf(out, "  %7.3f", row_time(&rows[i], s, it) / row_time(&rows[i], 0, it));
        fprintf(out, "\n");
    }
}

/* The "params" object: model_params_t's fields under their own names, each as its type. */
typedef enum { PARAM_NUMBER, PARAM_COUNT, PARAM_FLAG } param_kind_t; /* double, uint32_t, int */
/* A row of param_fields: the field named once, as the key and for its offset. */
#define PARAM(field) #field, offsetof(model_params_t, field)
static const struct {
    const char *key;
    size_t offset;
    param_kind_t kind;
} param_fields[] = {
    {PARAM(link_bps), PARAM_NUMBER},      {PARAM(slow_bps), PARAM_NUMBER},
    {PARAM(hop_s), PARAM_NUMBER},         {PARAM(packet_elems), PARAM_COUNT},
    {PARAM(overhead_bytes), PARAM_COUNT}, {PARAM(slots), PARAM_COUNT},
    {PARAM(switch_pkt_s), PARAM_NUMBER},  {PARAM(switch_threads), PARAM_COUNT},
    {PARAM(worker_elem_s), PARAM_NUMBER}, {PARAM(msg_s), PARAM_NUMBER},
    {PARAM(ring_step_s), PARAM_NUMBER},   {PARAM(stream_eff), PARAM_NUMBER},
    {PARAM(ratio), PARAM_NUMBER},         {PARAM(enc_Bps), PARAM_NUMBER},
    {PARAM(dec_Bps), PARAM_NUMBER},       {PARAM(agg_value_s), PARAM_NUMBER},
    {PARAM(code_overlap), PARAM_FLAG},    {PARAM(overlap), PARAM_FLAG},
    {PARAM(levels), PARAM_COUNT},         {PARAM(fanout), PARAM_COUNT},
    {PARAM(compute_s), PARAM_NUMBER},     {PARAM(buckets), PARAM_COUNT},
};
#undef PARAM

static void json_params(json_writer_t *w, const model_params_t *p)
{
    json_begin_object(w, "params");
    for (size_t i = 0; i < sizeof(param_fields) / sizeof(param_fields[0]); i++) {
        const char *key = param_fields[i].key, *at = (const char *)p + param_fields[i].offset;
        switch (param_fields[i].kind) {
            case PARAM_NUMBER: json_number(w, key, *(const double *)at); break;
            case PARAM_COUNT: json_int(w, key, *(const uint32_t *)at); break;
            case PARAM_FLAG: json_bool(w, key, *(const int *)at); break;
        }
    }
    json_end_object(w);
}

static void json_rows(json_writer_t *w, const pred_opts_t *o, const pred_row_t *rows, int n)
{
    int it = o->p.compute_s > 0;
    json_begin_array(w, "rows");
    for (int i = 0; i < n; i++) {
        json_begin_object(w, NULL);
        json_int(w, "workers", rows[i].n);
        for (int s = 0; s < MODEL_NSYS; s++) {
            if (!(o->sys_mask & (1 << s)))
                continue;
            const model_time_t *t = &rows[i].t[s];
            json_begin_object(w, model_sys_name[s]);
            json_number(w, "time_s", row_time(&rows[i], s, it));
            json_number(w, "allreduce_s", t->total_s);
            json_number(w, "link_s", t->link_s);
            json_number(w, "proc_s", t->proc_s);
            json_number(w, "window_s", t->window_s);
            json_number(w, "code_s", t->code_s);
            json_number(w, "latency_s", t->latency_s);
            json_string(w, "bound", t->bound);
            if (s != MODEL_INA && (o->sys_mask & 1))
                json_number(w, "ina_speedup",
                            row_time(&rows[i], s, it) / row_time(&rows[i], 0, it));
            json_end_object(w);
        }
        json_end_object(w);
    }
    json_end_array(w);
}

/* ---- plots ---------------------------------------------------------------------------------- */

/* A data file of `ncol` series against workers and a two-panel PNG: time (log-log) and the
 * ratio of each series to the reference column ref (speedup = series / ref). */
int model_plot_series(const char *path, const char *title, const char *ylabel,
                      const char *const *names, int ncol, const uint32_t *pts, int npts,
                      const double *vals /* [npts][ncol] */, int ref, const char *speedlabel)
{
    cli_plot_t p;
    int rc = cli_plot_open(&p, MODEL_CMD " " SUB);
    if (rc < 0)
        return rc;
    FILE *f = p.dataf, *g = p.scriptf;
    for (int i = 0; i < npts; i++) {
        fprintf(f, "%u", pts[i]);
        for (int c = 0; c < ncol; c++)
            fprintf(f, " %.6g", vals[i * ncol + c]);
        fprintf(f, "\n");
    }
    fprintf(g,
            "set terminal pngcairo size 1000,820 font ',10'\n"
            "set output \"%s\"\n"
            "set multiplot layout 2,1 title \"%s\"\n"
            "set logscale x 2\nset grid\nset key outside right\n"
            "set xlabel \"workers\"\nset logscale y\nset ylabel \"%s\"\nplot ",
            path, title, ylabel);
    for (int c = 0; c < ncol; c++)
        fprintf(g, "%s\"%s\" using 1:%d with linespoints lw 2 pt 7 ps 0.6 title \"%s\"",
                c ? ", " : "", p.data, c + 2, names[c]);
    fprintf(g, "\nunset logscale y\nset ylabel \"%s\"\nplot ", speedlabel);
    int first = 1;
    for (int c = 0; c < ncol; c++) {
        if (c == ref)
            continue;
        fprintf(g, "%s\"%s\" using 1:($%d/$%d) with linespoints lw 2 pt 7 ps 0.6 title \"%s\"",
                first ? "" : ", ", p.data, c + 2, ref + 2, names[c]);
        first = 0;
    }
    fprintf(g, "\nunset multiplot\n");
    return cli_plot_run(&p, path);
}

static int plot_rows(const pred_opts_t *o, const pred_row_t *rows, int n)
{
    const char *names[MODEL_NSYS];
    double vals[MAX_POINTS * MODEL_NSYS];
    uint32_t pts[MAX_POINTS];
    int ncol = 0, it = o->p.compute_s > 0;
    for (int s = 0; s < MODEL_NSYS; s++)
        if (o->sys_mask & (1 << s))
            names[ncol++] = model_sys_name[s];
    for (int i = 0; i < n; i++) {
        pts[i] = rows[i].n;
        int c = 0;
        for (int s = 0; s < MODEL_NSYS; s++)
            if (o->sys_mask & (1 << s))
                vals[i * ncol + c++] = row_time(&rows[i], s, it);
    }
    char title[256];
    snprintf(title, sizeof(title), "%s of %.4g MB per worker, %.4g Gbit/s links, %u level(s)%s",
             it ? "iteration" : "allreduce", o->bytes / 1e6, o->p.link_bps / 1e9, o->p.levels,
             o->p.ratio != 1 ? ", compressed" : "");
    return model_plot_series(o->plot_path, title, it ? "iteration time (s)" : "allreduce time (s)",
                             names, ncol, pts, n, vals, 0, "time / INA time (INA's speedup)");
}

/* ---- parsing -------------------------------------------------------------------------------- */

static int parse_systems(const char *text, int *mask)
{
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", text);
    *mask = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int found = 0;
        for (int s = 0; s < MODEL_NSYS; s++)
            if (!strcmp(t, model_sys_name[s])) {
                *mask |= 1 << s;
                found = 1;
            }
        if (!found)
            return -EINVAL;
    }
    return *mask ? 0 : -EINVAL;
}

/* The flags that become model parameters once the calibration is known. */
typedef struct pred_flags {
    double link, slow, ratio, codec_gbs, compute_ms;
    uint64_t levels, fanout, threads, packet, overhead, slots, buckets;
    const char *agg;
    int overlap, have_link;
} pred_flags_t;

/* A flag of the workload and the network (workers, size, links, levels, the switch). 0
 * taken, 2 refused (said), -1 not one of these. */
static int parse_workload_flag(pred_opts_t *o, pred_flags_t *f, int ch)
{
    uint64_t v;
    const char *cmd = MODEL_CMD " " SUB;
    switch (ch) {
        case 'w':
            if (cli_parse_u64(cmd, "--workers", optarg, 1, MODEL_MAX_WORKERS, &v) != 0)
                return 2;
            o->w_lo = o->w_hi = (uint32_t)v;
            o->have_workers = 1;
            break;
        case 'W': {
            unsigned a, b;
            char tail;
            if (sscanf(optarg, "%u-%u%c", &a, &b, &tail) != 2 || a < 2 || b <= a ||
                b > MODEL_MAX_WORKERS)
                return model_bad(SUB, "--workers-range is A-B with 2 <= A < B <= %u, got '%s'",
                                 MODEL_MAX_WORKERS, optarg);
            o->w_lo = a;
            o->w_hi = b;
            o->have_workers = 2;
            break;
        }
        case 's':
            if (model_parse_bytes(optarg, &o->bytes) != 0)
                return model_bad(SUB,
                                 "--size is bytes per worker with K/M/G (4 .. 1e12), got "
                                 "'%s'",
                                 optarg);
            o->have_size = 1;
            break;
        case 'r':
            if (model_parse_rate(optarg, &f->link) != 0)
                return model_bad(SUB,
                                 "--link-rate is a rate like 100mbit, 10gbit or 25g, got "
                                 "'%s'",
                                 optarg);
            f->have_link = 1;
            break;
        case 'S':
            if (model_parse_rate(optarg, &f->slow) != 0)
                return model_bad(SUB, "--slow-link is a rate like 50mbit, got '%s'", optarg);
            break;
        case 'L':
            if (cli_parse_u64(cmd, "--levels", optarg, 1, MODEL_MAX_LEVELS, &f->levels) != 0)
                return 2;
            break;
        case 'f':
            if (cli_parse_u64(cmd, "--fanout", optarg, 2, MODEL_MAX_WORKERS, &f->fanout) != 0)
                return 2;
            break;
        case 't':
            if (cli_parse_u64(cmd, "--switch-threads", optarg, 1, 64, &f->threads) != 0)
                return 2;
            break;
        case 'k':
            if (cli_parse_u64(cmd, "--packet-elems", optarg, 1, 1 << 20, &f->packet) != 0)
                return 2;
            break;
        case 'H':
            if (cli_parse_u64(cmd, "--overhead-bytes", optarg, 0, 65536, &f->overhead) != 0)
                return 2;
            break;
        case 'n':
            if (cli_parse_u64(cmd, "--slots", optarg, 1, 1 << 20, &f->slots) != 0)
                return 2;
            break;
        default: return -1;
    }
    return 0;
}

/* A flag of compression, overlap, compute, the systems compared, the calibration, outputs,
 * presets. 0 taken, 2 refused (said), -1 not one of these. */
static int parse_cost_flag(pred_opts_t *o, pred_flags_t *f, int ch)
{
    const char *cmd = MODEL_CMD " " SUB;
    switch (ch) {
        case 'c': o->compress = optarg; break;
        case 'R':
            f->ratio = strtod(optarg, NULL);
            if (!(f->ratio >= 0.01 && f->ratio <= 1e4))
                return model_bad(SUB, "--ratio is a compression ratio in 0.01..10000, got '%s'",
                                 optarg);
            break;
        case 'g':
            f->codec_gbs = strtod(optarg, NULL);
            if (!(f->codec_gbs > 0 && f->codec_gbs < 1e6))
                return model_bad(SUB, "--codec-gbs is a positive rate in GB/s, got '%s'", optarg);
            break;
        case 'a':
            if (strcmp(optarg, "free") && strcmp(optarg, "worker"))
                return model_bad(SUB, "--agg-codec is free or worker, got '%s'", optarg);
            f->agg = optarg;
            break;
        case 'o':
            if (!strcmp(optarg, "yes") || !strcmp(optarg, "on"))
                f->overlap = 1;
            else if (!strcmp(optarg, "no") || !strcmp(optarg, "off"))
                f->overlap = 0;
            else
                return model_bad(SUB, "--overlap is yes or no, got '%s'", optarg);
            break;
        case 'C':
            f->compute_ms = strtod(optarg, NULL);
            if (!(f->compute_ms > 0 && f->compute_ms < 1e7))
                return model_bad(SUB, "--compute-ms is a positive time in ms, got '%s'", optarg);
            break;
        case 'b':
            if (cli_parse_u64(cmd, "--buckets", optarg, 1, 1024, &f->buckets) != 0)
                return 2;
            break;
        case 'y':
            if (parse_systems(optarg, &o->sys_mask) != 0)
                return model_bad(SUB, "--systems is a list of ina,ring,tree,ps,ca, got '%s'",
                                 optarg);
            break;
        case 'p': o->params_path = optarg; break;
        case 'j': o->json_path = optarg; break;
        case 'P': o->plot_path = optarg; break;
        case 'x': o->preset = optarg; break;
        default: return -1;
    }
    return 0;
}

/* --preset: the papers' comparisons, which set workers, size and link rate themselves. */
static int run_preset(pred_opts_t *o, const pred_flags_t *f)
{
    if (o->have_workers || o->have_size || f->have_link)
        return model_bad(SUB, "--preset sets workers, size and link rate itself");
    if (!strcmp(o->preset, "gcow-resnet50"))
        return model_preset_gcow(o, 0);
    if (!strcmp(o->preset, "gcow-vit"))
        return model_preset_gcow(o, 1);
    if (!strcmp(o->preset, "switchml"))
        return model_preset_switchml(o);
    return model_bad(SUB, "--preset is gcow-resnet50, gcow-vit or switchml, got '%s'", o->preset);
}

/* What a prediction needs and what goes together. 0, or 2 after a message. */
static int check_prediction(const pred_opts_t *o, const pred_flags_t *f)
{
    if (!o->have_workers)
        return model_bad(SUB, "give --workers N or --workers-range A-B");
    if (!o->have_size)
        return model_bad(SUB, "give --size BYTES (bytes per worker, e.g. 16M)");
    if (o->plot_path && o->have_workers != 2)
        return model_bad(SUB, "--plot draws against workers: give --workers-range A-B");
    if (o->compress && (f->ratio > 0 || f->codec_gbs > 0))
        return model_bad(SUB, "give --compress MODE or --ratio/--codec-gbs, not both");
    if (f->slow > 0 && f->slow >= f->link)
        return model_bad(SUB, "--slow-link must be below --link-rate");

    return 0;
}

/* The model's parameters: the calibration (--params, else the default file when it exists,
 * else ideal costs) and the flags over it. *pp: the calibration file used, or NULL. 0, or the
 * exit status after a message. */
static int set_params(pred_opts_t *o, const pred_flags_t *f, const char **pp_out)
{
    const char *cmd = MODEL_CMD " " SUB;
    /* the calibration: --params, else the default file when it exists, else ideal costs */
    model_calib_t cal;
    char err[512];
    const char *pp = o->params_path;
    *pp_out = NULL;
    if (!pp && access(MODEL_DEFAULT_PARAMS, R_OK) == 0)
        pp = MODEL_DEFAULT_PARAMS;
    if (pp && !strcmp(pp, "none"))
        pp = NULL;
    if (pp) {
        if (model_calib_read(pp, &cal, err, sizeof(err)) != 0) {
            fprintf(stderr, "%s: %s\n", cmd, err);
            return 1;
        }
        if (model_calib_params(&cal, f->link, o->compress, &o->p, err, sizeof(err)) != 0)
            return model_bad(SUB, "%s", err);
        snprintf(o->note, sizeof(o->note),
                 "costs from %s (switch %.2f us/packet x %u threads, "
                 "worker %.2f ns/element, hop %.1f us)",
                 pp, o->p.switch_pkt_s * 1e6, o->p.switch_threads, o->p.worker_elem_s * 1e9,
                 o->p.hop_s * 1e6);
    } else {
        if (o->compress && strcmp(o->compress, "none") != 0)
            return model_bad(SUB, "--compress MODE needs a calibration (inagg model calibrate); "
                                  "or give --ratio and --codec-gbs");
        o->p.link_bps = f->link;
        snprintf(o->note, sizeof(o->note),
                 "no calibration: an ideal machine (no CPU cost, 1 us "
                 "per hop, 5 us per message)");
        o->p.msg_s = 5e-6;
    }
    if (f->ratio > 0) {
        o->p.ratio = f->ratio;
        o->p.enc_Bps = o->p.dec_Bps = f->codec_gbs * 1e9;
        o->p.agg_value_s = 0;
    }
    if (f->agg && !strcmp(f->agg, "free"))
        o->p.agg_value_s = 0;
    else if (f->agg && !strcmp(f->agg, "worker") && o->p.dec_Bps > 0)
        o->p.agg_value_s = 2.0 / o->p.dec_Bps + 2.0 / o->p.enc_Bps;
    o->p.slow_bps = f->slow;
    o->p.levels = (uint32_t)f->levels;
    o->p.fanout = (uint32_t)f->fanout;
    if (f->threads)
        o->p.switch_threads = (uint32_t)f->threads;
    if (f->packet)
        o->p.packet_elems = (uint32_t)f->packet;
    if (f->overhead)
        o->p.overhead_bytes = (uint32_t)f->overhead;
    o->p.slots = (uint32_t)f->slots;
    o->p.code_overlap = f->overlap;
    o->p.overlap = f->overlap;
    o->p.compute_s = f->compute_ms / 1e3;
    o->p.buckets = (uint32_t)f->buckets;
    if (model_params_check(&o->p, err, sizeof(err)) != 0)
        return model_bad(SUB, "%s", err);
    *pp_out = pp;
    return 0;
}

/* The rows over the workers, as text, JSON and a plot. 0 or 1. */
static int predict_and_render(pred_opts_t *o, const char *pp)
{
    const char *cmd = MODEL_CMD " " SUB;
    uint32_t pts[MAX_POINTS];
    int npts = o->have_workers == 2 ? worker_points(o->w_lo, o->w_hi, pts) : (pts[0] = o->w_lo, 1);
    static pred_row_t rows[MAX_POINTS];
    compute_rows(o, pts, npts, rows);
    FILE *out = o->json_path && !strcmp(o->json_path, "-") ? stderr : stdout;
    render_text(out, o, rows, npts);
    if (o->json_path) {
        json_writer_t w;
        json_init(&w);
        json_begin_object(&w, NULL);
        json_number(&w, "bytes", o->bytes);
        json_string(&w, "calibration", pp ? pp : "none");
        json_params(&w, &o->p);
        json_rows(&w, o, rows, npts);
        json_end_object(&w);
        if (cli_emit_json(&w, o->json_path, cmd) != 0)
            return 1;
    }
    if (o->plot_path && plot_rows(o, rows, npts) != 0)
        return 1;
    return 0;
}

/* What predict's flags parse into. */
typedef struct pred_parse_ctx {
    pred_opts_t *o;
    pred_flags_t *f;
} pred_parse_ctx_t;

/* One of predict's flags (model_flags_t.flag). */
static int parse_flag(void *ctx, int ch)
{
    pred_parse_ctx_t *pc = ctx;
    int rc = parse_workload_flag(pc->o, pc->f, ch);
    return rc < 0 ? parse_cost_flag(pc->o, pc->f, ch) : rc;
}

int model_predict_main(int argc, char **argv)
{
    pred_opts_t o = {0};
    model_params_default(&o.p);
    o.sys_mask = (1 << MODEL_NSYS) - 1;
    pred_flags_t f = {.link = 100e9, .levels = 1, .buckets = 1, .overlap = 1};
    static const struct option longopts[] = {{"workers", required_argument, 0, 'w'},
                                             {"workers-range", required_argument, 0, 'W'},
                                             {"size", required_argument, 0, 's'},
                                             {"link-rate", required_argument, 0, 'r'},
                                             {"slow-link", required_argument, 0, 'S'},
                                             {"levels", required_argument, 0, 'L'},
                                             {"fanout", required_argument, 0, 'f'},
                                             {"switch-threads", required_argument, 0, 't'},
                                             {"packet-elems", required_argument, 0, 'k'},
                                             {"overhead-bytes", required_argument, 0, 'H'},
                                             {"slots", required_argument, 0, 'n'},
                                             {"compress", required_argument, 0, 'c'},
                                             {"ratio", required_argument, 0, 'R'},
                                             {"codec-gbs", required_argument, 0, 'g'},
                                             {"agg-codec", required_argument, 0, 'a'},
                                             {"overlap", required_argument, 0, 'o'},
                                             {"compute-ms", required_argument, 0, 'C'},
                                             {"buckets", required_argument, 0, 'b'},
                                             {"systems", required_argument, 0, 'y'},
                                             {"params", required_argument, 0, 'p'},
                                             {"json", required_argument, 0, 'j'},
                                             {"plot", required_argument, 0, 'P'},
                                             {"preset", required_argument, 0, 'x'},
                                             {"help", no_argument, 0, 'h'},
                                             {0, 0, 0, 0}};
    static const model_flags_t spec = {SUB, ":h", longopts, usage, parse_flag};
    pred_parse_ctx_t pc = {&o, &f};
    int prc = model_parse_flags(&spec, argc, argv, &pc);
    if (prc)
        return prc == 1 ? 0 : prc;
    if (o.preset)
        return run_preset(&o, &f);
    int rc = check_prediction(&o, &f);
    const char *pp = NULL;
    if (rc == 0)
        rc = set_params(&o, &f, &pp);
    return rc != 0 ? rc : predict_and_render(&o, pp);
}
