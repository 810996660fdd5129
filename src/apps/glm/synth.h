/*
 * synth.h - seeded synthetic datasets standing in for the P4SGD paper's (gisette, rcv1,
 * real-sim): the same shapes and sparsity, labels from a hidden linear model plus noise.
 */
#ifndef INAGG_GLM_SYNTH_H
#define INAGG_GLM_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#include "apps/glm/dataset.h"

/* spec:
 *   "gisette"              6000 x 5000 dense
 *   "rcv1"                 20242 x 47236 sparse, density 0.0016
 *   "real-sim"             72309 x 20958 sparse, density 0.00245
 *   "dense:SxD"            S samples x D features, all nonzero
 *   "sparse:SxD:DENSITY"   density in (0, 1]
 * Dense features are N(0,1)/sqrt(D). A sparse row has k = max(1, round(density*D)) +- k/10
 * (seeded jitter) distinct sorted uniform columns with positive values, scaled to unit L2 norm.
 * Labels: hidden w* ~ N(0,1) per feature, z = a.w* / rms(a.w* over the data) + N(0, 0.1^2);
 * BINARY: label = z > 0 ? +1 : -1; REAL: label = z. The normal draws are built from integer
 * arithmetic only (a sum of 12 uniforms), so the bytes are the same on every machine and run
 * for a (spec, seed, kind). Linear in nnz (times log of the row length for sparse rows).
 * Rejects unknown names, zero S or D, more than 1e9 nonzeros and density outside (0, 1]. */
int glm_synthetic(const char *spec, uint64_t seed, enum glm_label_kind kind, glm_dataset_t *out,
                  char *err, size_t errlen);

/* The memory glm_synthetic allocates for spec, bytes, before it allocates any: for refusing
 * a spec the machine cannot hold. 0, or -EINVAL as glm_synthetic refuses spec. */
int glm_synthetic_bytes(const char *spec, uint64_t *bytes, char *err, size_t errlen);

/* Shuffle-free split: the last round(test_fraction * rows) rows (at least 1, leaving at least 1)
 * become `test`, the others `train`. 0 < test_fraction < 1 and rows >= 2, else an error. */
int glm_split_tail(const glm_dataset_t *src, double test_fraction, glm_dataset_t *train,
                   glm_dataset_t *test, char *err, size_t errlen);

#endif /* INAGG_GLM_SYNTH_H */
