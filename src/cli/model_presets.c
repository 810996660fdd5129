/*
 * model_presets.c - `inagg model predict --preset`: the papers' comparisons re-drawn from the
 * model with their stated parameters (GCOW Fig. 4.4 / Table 4.2: parameter server, concurrent
 * and ring allreduce with and without compression and overlap; SwitchML's goodput per packet
 * size, pool size and TAT against workers), beside the numbers the papers report.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/model_cli.h"
#include "cli/output.h"
#include "json/json.h"

#define SUB "predict"

/* GCOW Table 4.2 and section 4.4: iteration time of PS, CA and RA, with and without
 * compression and overlap, 2..1024 workers; average speedups beside the thesis's. */
int model_preset_gcow(const pred_opts_t *o, int vit)
{
    const char *model = vit ? "ViT-H/14" : "ResNet50";
    double bytes = vit ? 2.5e9 : 97.5e6;          /* GCOW s1 / s3.1: 97.5 MB, 2.5 GB */
    double compute = vit ? 0.800 : 0.300;          /* Table 4.2 */
    uint32_t buckets = vit ? 11 : 4;               /* Table 4.2 */
    /* the thesis's reported average speedups (s4.4): compression for PS, CA, RA; overlap */
    const double paper_comp[3] = {vit ? 14.8 : 7.5, vit ? 22.0 : 18.0, vit ? 1.2 : 1.0};
    const double paper_overlap = vit ? 1.6 : 1.3;
    const model_sys_t sys[4] = {MODEL_PS, MODEL_CA, MODEL_RING, MODEL_INA};
    const char *sname[4] = {"PS", "CA", "RA", "INA"};
    model_params_t p;
    model_params_default(&p);
    p.link_bps = 100e9;             /* the SmartNIC's 100 Gbit/s (GCOW Fig. 1.1, s4.2) */
    p.hop_s = 1e-6;
    p.msg_s = 5e-6;
    p.compute_s = compute;
    p.buckets = buckets;
    p.code_overlap = 1;             /* the codec is on the NIC, on the wire */
    p.switch_threads = 1;
    uint32_t pts[MAX_POINTS];
    int npts = 0;
    for (uint32_t w = 2; w <= MODEL_MAX_WORKERS; w *= 2)
        pts[npts++] = w;
    /* t[point][system][compressed][overlap] */
    static double t[MAX_POINTS][4][2][2];
    for (int i = 0; i < npts; i++)
        for (int s = 0; s < 4; s++)
            for (int c = 0; c < 2; c++)
                for (int v = 0; v < 2; v++) {
                    model_params_t q = p;
                    if (c) {
                        q.ratio = 50;                          /* Table 4.2 */
                        q.enc_Bps = q.dec_Bps = 10.0 * (1u << 30); /* 10 GiB/s, Table 4.2 */
                    }
                    q.overlap = v;
                    t[i][s][c][v] = model_iteration(sys[s], &q, pts[i], bytes);
                }
    double avg_comp[4][2] = {{0}}, avg_ov[4] = {0};
    for (int s = 0; s < 4; s++) {
        for (int i = 0; i < npts; i++) {
            for (int v = 0; v < 2; v++)
                avg_comp[s][v] += t[i][s][0][v] / t[i][s][1][v] / npts;
            avg_ov[s] += t[i][s][1][0] / t[i][s][1][1] / npts;
        }
    }
    double ov3 = (avg_ov[0] + avg_ov[1] + avg_ov[2]) / 3;
    FILE *out = o->json_path && !strcmp(o->json_path, "-") ? stderr : stdout;
    fprintf(out, "GCOW Fig. 4.4 re-drawn: %s (%.4g MB gradient, compute %.0f ms, %u buckets),\n"
            "100 Gbit/s links, compression ratio 50, codec 10 GiB/s on the NIC (Table 4.2).\n"
            "Iteration time (s):\n", model, bytes / 1e6, compute * 1e3, buckets);
    fprintf(out, "workers   PS  none/ov  comp/ov |  CA  none/ov  comp/ov |  RA  none/ov  comp/ov"
            " | INA none/ov  comp/ov\n");
    for (int i = 0; i < npts; i++) {
        fprintf(out, "%7u", pts[i]);
        for (int s = 0; s < 4; s++)
            fprintf(out, "  %9.4g %8.4g%s", t[i][s][0][1], t[i][s][1][1], s < 3 ? " |" : "");
        fprintf(out, "\n");
    }
    fprintf(out, "\naverage over 2..1024 workers      ours (overlap / no overlap)   thesis\n");
    for (int s = 0; s < 3; s++)
        fprintf(out, "  compression speedup, %-3s        %6.2fx / %6.2fx              %.1fx\n",
                sname[s], avg_comp[s][1], avg_comp[s][0], paper_comp[s]);
    fprintf(out, "  overlap speedup (compressed, mean of PS/CA/RA)  %.2fx             %.1fx\n",
            ov3, paper_overlap);
    fprintf(out, "  (INA: compression %.2fx, overlap %.2fx; not in the thesis)\n",
            avg_comp[3][1], avg_ov[3]);
    if (o->json_path) {
        json_writer_t w;
        json_init(&w);
        json_begin_object(&w, NULL);
        json_string(&w, "preset", vit ? "gcow-vit" : "gcow-resnet50");
        json_number(&w, "gradient_bytes", bytes);
        json_number(&w, "compute_s", compute);
        json_int(&w, "buckets", buckets);
        json_begin_array(&w, "rows");
        for (int i = 0; i < npts; i++) {
            json_begin_object(&w, NULL);
            json_int(&w, "workers", pts[i]);
            for (int s = 0; s < 4; s++) {
                json_begin_object(&w, model_sys_name[sys[s]]);
                json_number(&w, "none_no_overlap_s", t[i][s][0][0]);
                json_number(&w, "none_overlap_s", t[i][s][0][1]);
                json_number(&w, "compressed_no_overlap_s", t[i][s][1][0]);
                json_number(&w, "compressed_overlap_s", t[i][s][1][1]);
                json_end_object(&w);
            }
            json_end_object(&w);
        }
        json_end_array(&w);
        json_begin_object(&w, "average_speedups");
        for (int s = 0; s < 4; s++) {
            json_begin_object(&w, model_sys_name[sys[s]]);
            json_number(&w, "compression_overlap", avg_comp[s][1]);
            json_number(&w, "compression_no_overlap", avg_comp[s][0]);
            json_number(&w, "overlap_compressed", avg_ov[s]);
            if (s < 3)
                json_number(&w, "thesis_compression", paper_comp[s]);
            json_end_object(&w);
        }
        json_number(&w, "overlap_mean_ps_ca_ra", ov3);
        json_number(&w, "thesis_overlap", paper_overlap);
        json_end_object(&w);
        json_end_object(&w);
        if (cli_emit_json(&w, o->json_path, MODEL_CMD " " SUB) != 0)
            return 1;
    }
    if (o->plot_path) {
        const char *names[8] = {"PS", "PS compressed", "CA", "CA compressed", "RA",
                                "RA compressed", "INA", "INA compressed"};
        static double vals[MAX_POINTS * 8];
        for (int i = 0; i < npts; i++)
            for (int s = 0; s < 4; s++)
                for (int c = 0; c < 2; c++)
                    vals[i * 8 + s * 2 + c] = t[i][s][c][1];
        char title[200];
        snprintf(title, sizeof(title), "GCOW Fig. 4.4 from the model: %s, overlap, 100 Gbit/s, "
                 "ratio 50", model);
        /* speedup panel: each series against the uncompressed PS (the first column) */
        if (model_plot_series(o->plot_path, title, "iteration time (s)", names, 8, pts, npts, vals, 0,
                        "uncompressed PS time / time") != 0)
            return 1;
    }
    return 0;
}

/* SwitchML: goodput per packet size (s5: 32, 64, 256 elements give 63%, 77%, 93%), the pool
 * size from the BDP (appendix C: 128 at 10 Gbit/s, 512 at 100 with 1100-byte packets) and TAT
 * of a 100 MB tensor against workers (Fig. 3: INA's rate does not depend on the workers). */
int model_preset_switchml(const pred_opts_t *o)
{
    FILE *out = o->json_path && !strcmp(o->json_path, "-") ? stderr : stdout;
    const double overhead = 76; /* framing the three goodputs of s5 imply (about 76 B each) */
    const uint32_t ks[3] = {32, 64, 256};
    const double paper_gp[3] = {0.63, 0.77, 0.93};
    double gp[3];
    fprintf(out, "SwitchML s5: goodput per packet size (%.0f B of headers per packet)\n",
            overhead);
    for (int i = 0; i < 3; i++) {
        gp[i] = model_wire_efficiency(ks[i] * 4.0, overhead);
        fprintf(out, "  %3u elements (%4u B): model %.1f%%, paper %.0f%%\n", ks[i], ks[i] * 4,
                gp[i] * 100, paper_gp[i] * 100);
    }
    /* appendix C: pool = next power of two of ceil(BDP / b), b = 1100 B */
    const double rates[2] = {10e9, 100e9};
    const uint32_t paper_pool[2] = {128, 512};
    double rtt_lo[2], rtt_hi[2];
    fprintf(out, "SwitchML appendix C: pool size s = 2^ceil(log2(ceil(rate x RTT / 1100 B)))\n");
    for (int i = 0; i < 2; i++) {
        /* the RTTs for which the rule gives the paper's choice: (s/2, s] packets per RTT */
        rtt_lo[i] = paper_pool[i] / 2 * 1100.0 * 8 / rates[i];
        rtt_hi[i] = paper_pool[i] * 1100.0 * 8 / rates[i];
        fprintf(out, "  %3.0f Gbit/s: paper %u slots <=> RTT in (%.1f, %.1f] us; at 50 us the "
                "rule gives %u\n", rates[i] / 1e9, paper_pool[i], rtt_lo[i] * 1e6,
                rtt_hi[i] * 1e6, model_pool_size(rates[i], 50e-6, 1100, 1));
    }
    /* Fig. 3: 100 MB, 256-element packets, workers 2..1024; INA, ring, dedicated PS (one
     * server per worker: each link carries |U| each way, as INA), colocated PS (half). */
    uint32_t pts[MAX_POINTS];
    int npts = 0;
    for (uint32_t w = 2; w <= MODEL_MAX_WORKERS; w *= 2)
        pts[npts++] = w;
    static double vals[MAX_POINTS * 4];
    const char *names[4] = {"INA 10G", "ring 10G", "INA 100G", "ring 100G"};
    const double bytes = 100e6;
    fprintf(out, "SwitchML Fig. 3 re-drawn: 100 MB TAT (ms) and aggregated tensor elements per "
            "second (ATE/s, 1e9)\n");
    fprintf(out, "workers  INA 10G  ring 10G  INA 100G  ring 100G   ATE/s INA 10G  100G\n");
    for (int i = 0; i < npts; i++) {
        for (int r = 0; r < 2; r++) {
            model_params_t p;
            model_params_default(&p);
            p.link_bps = rates[r];
            p.packet_elems = 256;
            p.overhead_bytes = (uint32_t)overhead;
            p.hop_s = 1e-6;
            p.msg_s = 10e-6;
            p.slots = paper_pool[r];
            vals[i * 4 + r * 2] = model_allreduce(MODEL_INA, &p, pts[i], bytes).total_s;
            vals[i * 4 + r * 2 + 1] = model_allreduce(MODEL_RING, &p, pts[i], bytes).total_s;
        }
        fprintf(out, "%7u %8.1f %9.1f %9.2f %10.2f   %12.3f %6.3f\n", pts[i],
                vals[i * 4] * 1e3, vals[i * 4 + 1] * 1e3, vals[i * 4 + 2] * 1e3,
                vals[i * 4 + 3] * 1e3, bytes / 4 / vals[i * 4] / 1e9,
                bytes / 4 / vals[i * 4 + 2] / 1e9);
    }
    fprintf(out, "  paper: INA within 2%% of the maximum goodput with 256-element packets, its "
            "ATE/s the same at 4, 8 and 16 workers\n");
    if (o->json_path) {
        json_writer_t w;
        json_init(&w);
        json_begin_object(&w, NULL);
        json_string(&w, "preset", "switchml");
        json_begin_array(&w, "goodput");
        for (int i = 0; i < 3; i++) {
            json_begin_object(&w, NULL);
            json_int(&w, "packet_elems", ks[i]);
            json_number(&w, "model", gp[i]);
            json_number(&w, "paper", paper_gp[i]);
            json_end_object(&w);
        }
        json_end_array(&w);
        json_begin_array(&w, "pool");
        for (int i = 0; i < 2; i++) {
            json_begin_object(&w, NULL);
            json_number(&w, "rate_bps", rates[i]);
            json_int(&w, "paper_slots", paper_pool[i]);
            json_number(&w, "rtt_lo_s", rtt_lo[i]);
            json_number(&w, "rtt_hi_s", rtt_hi[i]);
            json_end_object(&w);
        }
        json_end_array(&w);
        json_begin_array(&w, "tat");
        for (int i = 0; i < npts; i++) {
            json_begin_object(&w, NULL);
            json_int(&w, "workers", pts[i]);
            json_number(&w, "ina_10g_s", vals[i * 4]);
            json_number(&w, "ring_10g_s", vals[i * 4 + 1]);
            json_number(&w, "ina_100g_s", vals[i * 4 + 2]);
            json_number(&w, "ring_100g_s", vals[i * 4 + 3]);
            json_end_object(&w);
        }
        json_end_array(&w);
        json_end_object(&w);
        if (cli_emit_json(&w, o->json_path, MODEL_CMD " " SUB) != 0)
            return 1;
    }
    if (o->plot_path &&
        model_plot_series(o->plot_path, "SwitchML Fig. 3 from the model: 100 MB, 256-element packets",
                    "TAT (s)", names, 4, pts, npts, vals, 2, "time / INA 100G time") != 0)
        return 1;
    return 0;
}

