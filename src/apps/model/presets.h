/*
 * presets.h - the papers' comparisons re-drawn from the model: each paper's stated parameters
 * and reported numbers as tables, and the model's numbers for the same setups. `inagg model
 * predict --preset` renders them (cli/model_presets.c). Pure arithmetic, no I/O.
 */
#ifndef INAGG_MODEL_PRESETS_H
#define INAGG_MODEL_PRESETS_H

#include <stdint.h>

#include "apps/model/model.h"

/* Worker counts of a preset's sweep: 2, 4, ..., MODEL_MAX_WORKERS. */
#define MODEL_PRESET_MAX_POINTS 16

/* GCOW Fig. 4.4 / Table 4.2: parameter server, concurrent and ring allreduce (and INA), with
 * and without compression and overlap, 2..1024 workers. */
typedef struct model_gcow {
    /* the thesis's setup (Table 4.2, s1, s3.1) */
    const char *model; /* "ResNet50" or "ViT-H/14" */
    const char *preset; /* "gcow-resnet50" or "gcow-vit" */
    double bytes, compute_s;
    uint32_t buckets;
    double paper_comp[3]; /* reported average compression speedups of PS, CA, RA (s4.4) */
    double paper_overlap; /* reported average overlap speedup (s4.4) */
    model_sys_t sys[4]; /* PS, CA, RA, INA */
    /* the model's numbers */
    uint32_t pts[MODEL_PRESET_MAX_POINTS];
    int npts;
    double t[MODEL_PRESET_MAX_POINTS][4][2][2]; /* [point][system][compressed][overlap], s */
    double avg_comp[4][2]; /* [system][overlap]: mean compression speedup over the points */
    double avg_ov[4]; /* [system]: mean overlap speedup of the compressed job */
    double ov3; /* mean overlap speedup of PS, CA and RA */
} model_gcow_t;

/* The GCOW preset for ResNet50 (vit = 0) or ViT-H/14 (vit = 1) into g. */
void model_preset_gcow_compute(int vit, model_gcow_t *g);

/* SwitchML: goodput per packet size (s5), pool size from the BDP (appendix C) and the TAT of
 * a 100 MB tensor against workers (Fig. 3). */
typedef struct model_switchml {
    /* the paper's setup and reported numbers */
    double overhead; /* header bytes per packet the three goodputs of s5 imply */
    uint32_t ks[3]; /* packet sizes, elements */
    double paper_gp[3]; /* reported goodputs */
    double rates[2]; /* 10 and 100 Gbit/s */
    uint32_t paper_pool[2]; /* reported pool sizes at those rates */
    double bytes; /* Fig. 3's tensor */
    /* the model's numbers */
    double gp[3];
    double rtt_lo[2], rtt_hi[2]; /* the RTTs for which the rule gives the paper's pool */
    uint32_t pool_at_50us[2];
    uint32_t pts[MODEL_PRESET_MAX_POINTS];
    int npts;
    double tat[MODEL_PRESET_MAX_POINTS][4]; /* INA 10G, ring 10G, INA 100G, ring 100G; s */
} model_switchml_t;

/* The SwitchML preset into s. */
void model_preset_switchml_compute(model_switchml_t *s);

#endif /* INAGG_MODEL_PRESETS_H */
