/*
 * model_presets.c - `inagg model predict --preset`: renders the papers' comparisons that
 * src/apps/model/presets.c re-draws from the model (GCOW Fig. 4.4 / Table 4.2: parameter server,
 * concurrent and ring allreduce with and without compression and overlap; SwitchML's goodput
 * per packet size, pool size and TAT against workers) as text, JSON and plots, beside the
 * numbers the papers report.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "apps/cli/model_cli.h"
#include "apps/cli/output.h"
#include "apps/model/presets.h"
#include "lib/json/json.h"

#define SUB "predict"

static const char *const gcow_sname[4] = {"PS", "CA", "RA", "INA"};

static void gcow_text(FILE *out, const model_gcow_t *g)
{
    fprintf(out,
            "GCOW Fig. 4.4 re-drawn: %s (%.4g MB gradient, compute %.0f ms, %u buckets),\n"
            "100 Gbit/s links, compression ratio 50, codec 10 GiB/s on the NIC (Table 4.2).\n"
            "Iteration time (s):\n",
            g->model, g->bytes / 1e6, g->compute_s * 1e3, g->buckets);
    fprintf(out, "workers   PS  none/ov  comp/ov |  CA  none/ov  comp/ov |  RA  none/ov  comp/ov"
                 " | INA none/ov  comp/ov\n");
    for (int i = 0; i < g->npts; i++) {
        fprintf(out, "%7u", g->pts[i]);
        for (int s = 0; s < 4; s++)
            fprintf(out, "  %9.4g %8.4g%s", g->t[i][s][0][1], g->t[i][s][1][1], s < 3 ? " |" : "");
        fprintf(out, "\n");
    }
    fprintf(out, "\naverage over 2..1024 workers      ours (overlap / no overlap)   thesis\n");
    for (int s = 0; s < 3; s++)
        fprintf(out, "  compression speedup, %-3s        %6.2fx / %6.2fx              %.1fx\n",
                gcow_sname[s], g->avg_comp[s][1], g->avg_comp[s][0], g->paper_comp[s]);
    fprintf(out, "  overlap speedup (compressed, mean of PS/CA/RA)  %.2fx             %.1fx\n",
            g->ov3, g->paper_overlap);
    fprintf(out, "  (INA: compression %.2fx, overlap %.2fx; not in the thesis)\n",
            g->avg_comp[3][1], g->avg_ov[3]);
}

static int gcow_json(const pred_opts_t *o, const model_gcow_t *g)
{
    json_writer_t w;
    json_init(&w);
    json_begin_object(&w, NULL);
    json_string(&w, "preset", g->preset);
    json_number(&w, "gradient_bytes", g->bytes);
    json_number(&w, "compute_s", g->compute_s);
    json_int(&w, "buckets", g->buckets);
    json_begin_array(&w, "rows");
    for (int i = 0; i < g->npts; i++) {
        json_begin_object(&w, NULL);
        json_int(&w, "workers", g->pts[i]);
        for (int s = 0; s < 4; s++) {
            json_begin_object(&w, model_sys_name[g->sys[s]]);
            json_number(&w, "none_no_overlap_s", g->t[i][s][0][0]);
            json_number(&w, "none_overlap_s", g->t[i][s][0][1]);
            json_number(&w, "compressed_no_overlap_s", g->t[i][s][1][0]);
            json_number(&w, "compressed_overlap_s", g->t[i][s][1][1]);
            json_end_object(&w);
        }
        json_end_object(&w);
    }
    json_end_array(&w);
    json_begin_object(&w, "average_speedups");
    for (int s = 0; s < 4; s++) {
        json_begin_object(&w, model_sys_name[g->sys[s]]);
        json_number(&w, "compression_overlap", g->avg_comp[s][1]);
        json_number(&w, "compression_no_overlap", g->avg_comp[s][0]);
        json_number(&w, "overlap_compressed", g->avg_ov[s]);
        if (s < 3)
            json_number(&w, "thesis_compression", g->paper_comp[s]);
        json_end_object(&w);
    }
    json_number(&w, "overlap_mean_ps_ca_ra", g->ov3);
    json_number(&w, "thesis_overlap", g->paper_overlap);
    json_end_object(&w);
    json_end_object(&w);
    return cli_emit_json(&w, o->json_path, MODEL_CMD " " SUB);
}

static int gcow_plot(const pred_opts_t *o, const model_gcow_t *g)
{
    const char *names[8] = {"PS", "PS compressed", "CA",  "CA compressed",
                            "RA", "RA compressed", "INA", "INA compressed"};
    static double vals[MODEL_PRESET_MAX_POINTS * 8];
    for (int i = 0; i < g->npts; i++)
        for (int s = 0; s < 4; s++)
            for (int c = 0; c < 2; c++)
                vals[i * 8 + s * 2 + c] = g->t[i][s][c][1];
    char title[200];
    snprintf(title, sizeof(title),
             "GCOW Fig. 4.4 from the model: %s, overlap, 100 Gbit/s, "
             "ratio 50",
             g->model);
    /* speedup panel: each series against the uncompressed PS (the first column) */
    return model_plot_series(o->plot_path, title, "iteration time (s)", names, 8, g->pts, g->npts,
                             vals, 0, "uncompressed PS time / time");
}

/* GCOW Table 4.2 and section 4.4: iteration time of PS, CA and RA, with and without
 * compression and overlap, 2..1024 workers; average speedups beside the thesis's. */
int model_preset_gcow(const pred_opts_t *o, int vit)
{
    static model_gcow_t g;
    model_preset_gcow_compute(vit, &g);
    gcow_text(o->json_path && !strcmp(o->json_path, "-") ? stderr : stdout, &g);
    if (o->json_path && gcow_json(o, &g) != 0)
        return 1;
    if (o->plot_path && gcow_plot(o, &g) != 0)
        return 1;
    return 0;
}

static void switchml_text(FILE *out, const model_switchml_t *s)
{
    fprintf(out, "SwitchML s5: goodput per packet size (%.0f B of headers per packet)\n",
            s->overhead);
    for (int i = 0; i < 3; i++)
        fprintf(out, "  %3u elements (%4u B): model %.1f%%, paper %.0f%%\n", s->ks[i], s->ks[i] * 4,
                s->gp[i] * 100, s->paper_gp[i] * 100);
    fprintf(out, "SwitchML appendix C: pool size s = 2^ceil(log2(ceil(rate x RTT / 1100 B)))\n");
    for (int i = 0; i < 2; i++)
        fprintf(out,
                "  %3.0f Gbit/s: paper %u slots <=> RTT in (%.1f, %.1f] us; at 50 us the "
                "rule gives %u\n",
                s->rates[i] / 1e9, s->paper_pool[i], s->rtt_lo[i] * 1e6, s->rtt_hi[i] * 1e6,
                s->pool_at_50us[i]);
    fprintf(out, "SwitchML Fig. 3 re-drawn: 100 MB TAT (ms) and aggregated tensor elements per "
                 "second (ATE/s, 1e9)\n");
    fprintf(out, "workers  INA 10G  ring 10G  INA 100G  ring 100G   ATE/s INA 10G  100G\n");
    for (int i = 0; i < s->npts; i++) {
        const double *v = s->tat[i];
        fprintf(out, "%7u %8.1f %9.1f %9.2f %10.2f   %12.3f %6.3f\n", s->pts[i], v[0] * 1e3,
                v[1] * 1e3, v[2] * 1e3, v[3] * 1e3, s->bytes / 4 / v[0] / 1e9,
                s->bytes / 4 / v[2] / 1e9);
    }
    fprintf(out, "  paper: INA within 2%% of the maximum goodput with 256-element packets, its "
                 "ATE/s the same at 4, 8 and 16 workers\n");
}

static int switchml_json(const pred_opts_t *o, const model_switchml_t *s)
{
    json_writer_t w;
    json_init(&w);
    json_begin_object(&w, NULL);
    json_string(&w, "preset", "switchml");
    json_begin_array(&w, "goodput");
    for (int i = 0; i < 3; i++) {
        json_begin_object(&w, NULL);
        json_int(&w, "packet_elems", s->ks[i]);
        json_number(&w, "model", s->gp[i]);
        json_number(&w, "paper", s->paper_gp[i]);
        json_end_object(&w);
    }
    json_end_array(&w);
    json_begin_array(&w, "pool");
    for (int i = 0; i < 2; i++) {
        json_begin_object(&w, NULL);
        json_number(&w, "rate_bps", s->rates[i]);
        json_int(&w, "paper_slots", s->paper_pool[i]);
        json_number(&w, "rtt_lo_s", s->rtt_lo[i]);
        json_number(&w, "rtt_hi_s", s->rtt_hi[i]);
        json_end_object(&w);
    }
    json_end_array(&w);
    json_begin_array(&w, "tat");
    for (int i = 0; i < s->npts; i++) {
        json_begin_object(&w, NULL);
        json_int(&w, "workers", s->pts[i]);
        json_number(&w, "ina_10g_s", s->tat[i][0]);
        json_number(&w, "ring_10g_s", s->tat[i][1]);
        json_number(&w, "ina_100g_s", s->tat[i][2]);
        json_number(&w, "ring_100g_s", s->tat[i][3]);
        json_end_object(&w);
    }
    json_end_array(&w);
    json_end_object(&w);
    return cli_emit_json(&w, o->json_path, MODEL_CMD " " SUB);
}

/* SwitchML: goodput per packet size (s5: 32, 64, 256 elements give 63%, 77%, 93%), the pool
 * size from the BDP (appendix C: 128 at 10 Gbit/s, 512 at 100 with 1100-byte packets) and TAT
 * of a 100 MB tensor against workers (Fig. 3: INA's rate does not depend on the workers). */
int model_preset_switchml(const pred_opts_t *o)
{
    static model_switchml_t s;
    model_preset_switchml_compute(&s);
    switchml_text(o->json_path && !strcmp(o->json_path, "-") ? stderr : stdout, &s);
    if (o->json_path && switchml_json(o, &s) != 0)
        return 1;
    const char *names[4] = {"INA 10G", "ring 10G", "INA 100G", "ring 100G"};
    if (o->plot_path &&
        model_plot_series(o->plot_path,
                          "SwitchML Fig. 3 from the model: 100 MB, 256-element packets", "TAT (s)",
                          names, 4, s.pts, s.npts, &s.tat[0][0], 2, "time / INA 100G time") != 0)
        return 1;
    return 0;
}
