/*
 * synth.c - the seeded synthetic generator (see synth.h). Reproducibility across machines:
 * every random number comes from integer arithmetic (xoshiro draws, 12-uniform sums), the
 * floating point uses only IEEE basic operations and sqrt, in a fixed order, and floating-point
 * contraction (fused multiply-add) is switched off for this file.
 */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "apps/glm/synth.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/errmsg.h"
#include "lib/base/util.h"

#define SYNTH_MAX_NNZ 1000000000ull
#define SYNTH_NOISE 0.1

/* Independent streams derived from the user's seed. */
#define STREAM_MODEL 0x6d6f64656cull /* "model" */
#define STREAM_ROWS 0x726f7773ull /* "rows" */
#define STREAM_NOISE 0x6e6f697365ull /* "noise" */

/* Approximately N(0,1): a sum of 12 uniform 16-bit integers, centred and scaled by 2^-16
 * (exact in double). Range +-6. */
static inline double normal_draw(util_rng_t *r)
{
    int64_t sum = 0;
    for (int i = 0; i < 3; i++) {
        uint64_t x = util_rng_next(r);
        sum += (int64_t)(x & 0xffff) + (int64_t)((x >> 16) & 0xffff) +
               (int64_t)((x >> 32) & 0xffff) + (int64_t)(x >> 48);
    }
    return (double)(sum - 6 * 65535) / 65536.0;
}

/* Uniform integer in [0, n) (n <= 2^32; the tiny bias of the multiply-shift does not matter). */
static inline uint64_t uniform_below(util_rng_t *r, uint64_t n)
{
    return ((util_rng_next(r) >> 32) * n) >> 32;
}

/* Uniform in (0, 1], exact in double. */
static inline double positive_uniform(util_rng_t *r)
{
    return (double)((util_rng_next(r) >> 40) + 1) / 16777216.0;
}

/* ---- spec parsing --------------------------------------------------------------------- */

struct shape {
    uint64_t samples, features;
    double density; /* 0 = dense */
};

/* Decimal digits at *s into *out; advances *s. -EINVAL when there are none, -ERANGE when the
 * value is huge. */
static int parse_count(const char **s, uint64_t *out)
{
    const char *p = *s;
    uint64_t v = 0;
    if (*p < '0' || *p > '9')
        return -EINVAL;
    while (*p >= '0' && *p <= '9') {
        v = v * 10 + (uint64_t)(*p - '0');
        if (v > 1000000000000ull)
            return -ERANGE;
        p++;
    }
    *s = p;
    *out = v;
    return 0;
}

static int parse_spec(const char *spec, struct shape *sh, char *err, size_t errlen)
{
    static const char expected[] =
        "expected gisette, rcv1, real-sim, dense:SxD or sparse:SxD:DENSITY";
    memset(sh, 0, sizeof(*sh));
    if (strcmp(spec, "gisette") == 0) {
        *sh = (struct shape){6000, 5000, 0.0};
        return 0;
    }
    if (strcmp(spec, "rcv1") == 0) {
        *sh = (struct shape){20242, 47236, 0.0016};
        return 0;
    }
    if (strcmp(spec, "real-sim") == 0) {
        *sh = (struct shape){72309, 20958, 0.00245};
        return 0;
    }
    int dense;
    const char *p;
    if (strncmp(spec, "dense:", 6) == 0) {
        dense = 1;
        p = spec + 6;
    } else if (strncmp(spec, "sparse:", 7) == 0) {
        dense = 0;
        p = spec + 7;
    } else {
        return set_err(err, errlen, -EINVAL, "synthetic spec '%s': unknown name (%s)", spec,
                       expected);
    }
    const char *form = dense ? "dense:SxD" : "sparse:SxD:DENSITY";
    if (parse_count(&p, &sh->samples) != 0 || *p != 'x') {
        return set_err(err, errlen, -EINVAL,
                       "synthetic spec '%s': expected %s with S a sample count", spec, form);
    }
    p++;
    if (parse_count(&p, &sh->features) != 0) {
        return set_err(err, errlen, -EINVAL,
                       "synthetic spec '%s': expected %s with D a feature count", spec, form);
    }
    if (dense) {
        if (*p != '\0') {
            return set_err(err, errlen, -EINVAL,
                           "synthetic spec '%s': unexpected '%s' after dense:SxD", spec, p);
        }
        sh->density = 0.0;
    } else {
        if (*p != ':') {
            return set_err(err, errlen, -EINVAL, "synthetic spec '%s': expected sparse:SxD:DENSITY",
                           spec);
        }
        p++;
        char *end;
        double dens = (*p >= '0' && *p <= '9') || *p == '.' ? strtod(p, &end) : 0.0;
        if (!((*p >= '0' && *p <= '9') || *p == '.') || *end != '\0' || !(dens > 0.0) ||
            !(dens <= 1.0)) {
            return set_err(err, errlen, -EINVAL,
                           "synthetic spec '%s': density '%s' must be a number in (0, 1]", spec, p);
        }
        sh->density = dens;
    }
    if (sh->samples == 0 || sh->features == 0) {
        return set_err(err, errlen, -EINVAL, "synthetic spec '%s': S and D must be at least 1",
                       spec);
    }
    if (sh->features > UINT32_MAX) {
        return set_err(err, errlen, -EINVAL, "synthetic spec '%s': at most %u features", spec,
                       (unsigned)UINT32_MAX);
    }
    return 0;
}

/* ---- generation ------------------------------------------------------------------------- */

/* Sort a row's column indices: quicksort (median of three, recursing into the smaller side)
 * with insertion sort for short runs; inline comparisons, unlike qsort's callback. */
static void sort_u32(uint32_t *a, size_t n)
{
    while (n > 24) {
        uint32_t x = a[0], y = a[n / 2], z = a[n - 1];
        uint32_t pivot = x < y ? (y < z ? y : (x < z ? z : x)) : (x < z ? x : (y < z ? z : y));
        size_t i = 0, j = n - 1;
        for (;;) {
            while (a[i] < pivot)
                i++;
            while (a[j] > pivot)
                j--;
            if (i >= j)
                break;
            uint32_t t = a[i];
            a[i] = a[j];
            a[j] = t;
            i++;
            j--;
        }
        /* [0, j] <= pivot <= [j + 1, n) */
        size_t left = j + 1;
        if (left < n - left) {
            sort_u32(a, left);
            a += left;
            n -= left;
        } else {
            sort_u32(a + left, n - left);
            n = left;
        }
    }
    for (size_t i = 1; i < n; i++) {
        uint32_t v = a[i];
        size_t j = i;
        while (j > 0 && a[j - 1] > v) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = v;
    }
}

/* Chooses k distinct sorted columns out of D per row. Floyd's algorithm with membership either
 * in a byte per column (rows that cover >= 1/16 of the columns: then read out in order) or in a
 * small hash set (sparse rows: then sorted). */
struct column_sampler {
    uint64_t features;
    uint8_t *mark; /* features bytes, or NULL */
    uint32_t *hash; /* hash_cap slots, UINT32_MAX = empty */
    size_t hash_cap;
};

static int sampler_init(struct column_sampler *cs, uint64_t features, uint64_t k_max)
{
    memset(cs, 0, sizeof(*cs));
    cs->features = features;
    if (k_max * 16 >= features) {
        cs->mark = calloc((size_t)features, 1);
        if (!cs->mark)
            return -ENOMEM;
    }
    size_t cap = 16;
    while (cap < 2 * k_max)
        cap *= 2;
    cs->hash = malloc(cap * sizeof(uint32_t));
    if (!cs->hash) {
        free(cs->mark);
        return -ENOMEM;
    }
    cs->hash_cap = cap;
    return 0;
}

static void sampler_free(struct column_sampler *cs)
{
    free(cs->mark);
    free(cs->hash);
}

/* Insert c into the hash set; returns 1 if it was already there. */
static int hash_insert(struct column_sampler *cs, uint32_t c)
{
    size_t mask = cs->hash_cap - 1;
    size_t h = (size_t)(((uint64_t)c * 0x9e3779b97f4a7c15ull) >> 32) & mask;
    while (cs->hash[h] != UINT32_MAX) {
        if (cs->hash[h] == c)
            return 1;
        h = (h + 1) & mask;
    }
    cs->hash[h] = c;
    return 0;
}

static void sample_columns(struct column_sampler *cs, util_rng_t *r, uint64_t k, uint32_t *out)
{
    const uint64_t n = cs->features;
    if (cs->mark && k * 16 >= n) {
        for (uint64_t j = n - k; j < n; j++) {
            uint64_t t = uniform_below(r, j + 1);
            if (cs->mark[t])
                t = j;
            cs->mark[t] = 1;
        }
        size_t m = 0;
        for (uint64_t c = 0; c < n; c++) {
            if (cs->mark[c]) {
                out[m++] = (uint32_t)c;
                cs->mark[c] = 0;
            }
        }
        return;
    }
    size_t cap = 16;
    while (cap < 2 * k)
        cap *= 2;
    size_t saved_cap = cs->hash_cap;
    cs->hash_cap = cap; /* a table sized to this row keeps the clearing O(k) */
    memset(cs->hash, 0xff, cap * sizeof(uint32_t));
    size_t m = 0;
    for (uint64_t j = n - k; j < n; j++) {
        uint32_t t = (uint32_t)uniform_below(r, j + 1);
        if (hash_insert(cs, t)) {
            t = (uint32_t)j;
            hash_insert(cs, t);
        }
        out[m++] = t;
    }
    cs->hash_cap = saved_cap;
    sort_u32(out, (size_t)k);
}

/* A dense row: every column, normal values scaled by 1/sqrt(D). */
static void dense_row(util_rng_t *row_rng, uint64_t D, double sqrt_d, uint32_t *col, float *val)
{
    util_rng_t rng = *row_rng; /* a copy the compiler can keep in registers */
    for (uint64_t j = 0; j < D; j++) {
        col[j] = (uint32_t)j;
        val[j] = (float)(normal_draw(&rng) / sqrt_d);
    }
    *row_rng = rng;
}

/* A sparse row of k0 +- jitter distinct columns, positive values of unit norm. Returns k. */
static uint64_t sparse_row(struct column_sampler *cs, util_rng_t *row_rng, uint64_t k0,
                           uint64_t jitter, uint64_t D, uint32_t *col, float *val)
{
    uint64_t k = k0 - jitter + uniform_below(row_rng, 2 * jitter + 1);
    if (k < 1)
        k = 1;
    if (k > D)
        k = D;
    sample_columns(cs, row_rng, k, col);
    double raw_sq = 0.0;
    for (uint64_t j = 0; j < k; j++) {
        double u = positive_uniform(row_rng);
        val[j] = (float)u;
        raw_sq += u * u;
    }
    const double norm = sqrt(raw_sq);
    for (uint64_t j = 0; j < k; j++)
        val[j] = (float)((double)val[j] / norm);
    return k;
}

/* A spec's rows: the shape, the mean row length k0, its jitter and the longest row. 0, or
 * -EINVAL with the reason (a bad spec, more than SYNTH_MAX_NNZ nonzeros). */
struct rows {
    struct shape sh;
    uint64_t k0, jitter, k_max;
};

static int spec_rows(const char *spec, struct rows *r, char *err, size_t errlen)
{
    if (!spec) {
        return set_err(err, errlen, -EINVAL, "synthetic spec is missing");
    }
    int rc = parse_spec(spec, &r->sh, err, errlen);
    if (rc < 0)
        return rc;
    const uint64_t S = r->sh.samples, D = r->sh.features;
    r->k0 = D;
    r->jitter = 0;
    if (r->sh.density != 0.0) {
        double kd = round(r->sh.density * (double)D);
        r->k0 = kd < 1.0 ? 1 : (uint64_t)kd;
        if (r->k0 > D)
            r->k0 = D;
        r->jitter = r->k0 / 10;
        if (r->jitter > D - r->k0) /* keep the mean row length k0 */
            r->jitter = D - r->k0;
    }
    r->k_max = r->k0 + r->jitter < D ? r->k0 + r->jitter : D;
    if (r->k_max > SYNTH_MAX_NNZ || S > SYNTH_MAX_NNZ / r->k_max) {
        return set_err(err, errlen, -EINVAL,
                       "synthetic spec '%s': %llu x %llu nonzeros is more than the limit of %llu",
                       spec, (unsigned long long)S, (unsigned long long)r->k_max,
                       (unsigned long long)SYNTH_MAX_NNZ);
    }
    return 0;
}

int glm_synthetic_bytes(const char *spec, uint64_t *bytes, char *err, size_t errlen)
{
    struct rows r;
    int rc = spec_rows(spec, &r, err, errlen);
    if (rc < 0)
        return rc;
    const uint64_t S = r.sh.samples, D = r.sh.features, cap = S * r.k_max;
    /* glm_synthetic's arrays: row_ptr, label, col, val, w_star, margin (and the sampler's
     * marks, a byte per feature, and its hash of at most 4 k_max entries) */
    *bytes = (S + 1) * sizeof(size_t) + S * sizeof(float) +
             cap * (sizeof(uint32_t) + sizeof(float)) + D * sizeof(double) + S * sizeof(double) +
             (r.sh.density != 0.0 ? D + 16 * r.k_max : 0);
    return 0;
}

int glm_synthetic(const char *spec, uint64_t seed, enum glm_label_kind kind, glm_dataset_t *out,
                  char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    struct rows r;
    int rc = spec_rows(spec, &r, err, errlen);
    if (rc < 0)
        return rc;
    const struct shape sh = r.sh;
    const int dense = sh.density == 0.0;
    const uint64_t S = sh.samples, D = sh.features;
    const uint64_t k0 = r.k0, jitter = r.jitter, k_max = r.k_max;
    const size_t cap = (size_t)(S * k_max);

    out->rows = (size_t)S;
    out->cols = (size_t)D;
    out->row_ptr = malloc(((size_t)S + 1) * sizeof(size_t));
    out->label = malloc((size_t)S * sizeof(float));
    out->col = malloc(cap * sizeof(uint32_t));
    out->val = malloc(cap * sizeof(float));
    double *w_star = malloc((size_t)D * sizeof(double));
    double *margin = malloc((size_t)S * sizeof(double));
    struct column_sampler cs = {0};
    int sampler_ok = dense ? 1 : sampler_init(&cs, D, k_max) == 0;
    if (!out->row_ptr || !out->label || !out->col || !out->val || !w_star || !margin ||
        !sampler_ok) {
        free(w_star);
        free(margin);
        if (!dense && sampler_ok)
            sampler_free(&cs);
        glm_dataset_free(out);
        return set_err(err, errlen, -ENOMEM, "synthetic spec '%s': out of memory", spec);
    }

    util_rng_t model_rng, row_rng, noise_rng;
    util_rng_seed(&model_rng, seed ^ STREAM_MODEL);
    util_rng_seed(&row_rng, seed ^ STREAM_ROWS);
    util_rng_seed(&noise_rng, seed ^ STREAM_NOISE);
    for (uint64_t j = 0; j < D; j++)
        w_star[j] = normal_draw(&model_rng);

    const double sqrt_d = sqrt((double)D);
    size_t nnz = 0;
    double sum_sq_margin = 0.0;
    for (uint64_t i = 0; i < S; i++) {
        out->row_ptr[i] = nnz;
        uint32_t *col = out->col + nnz;
        float *val = out->val + nnz;
        uint64_t k;
        if (dense) {
            k = D;
            dense_row(&row_rng, D, sqrt_d, col, val);
        } else {
            k = sparse_row(&cs, &row_rng, k0, jitter, D, col, val);
        }
        double m = 0.0;
        for (uint64_t j = 0; j < k; j++)
            m += (double)val[j] * w_star[col[j]];
        margin[i] = m;
        sum_sq_margin += m * m;
        nnz += (size_t)k;
    }
    out->row_ptr[S] = nnz;
    out->nnz = nnz;

    double rms = sqrt(sum_sq_margin / (double)S);
    if (!(rms > 0.0))
        rms = 1.0;
    for (uint64_t i = 0; i < S; i++) {
        double z = margin[i] / rms + SYNTH_NOISE * normal_draw(&noise_rng);
        out->label[i] = kind == GLM_LABELS_REAL ? (float)z : (z > 0.0 ? 1.0f : -1.0f);
    }

    if (nnz < cap) {
        uint32_t *c = realloc(out->col, (nnz ? nnz : 1) * sizeof(uint32_t));
        if (c)
            out->col = c;
        float *v = realloc(out->val, (nnz ? nnz : 1) * sizeof(float));
        if (v)
            out->val = v;
    }
    free(w_star);
    free(margin);
    if (!dense)
        sampler_free(&cs);
    return 0;
}

int glm_split_tail(const glm_dataset_t *src, double test_fraction, glm_dataset_t *train,
                   glm_dataset_t *test, char *err, size_t errlen)
{
    memset(train, 0, sizeof(*train));
    memset(test, 0, sizeof(*test));
    if (!(test_fraction > 0.0 && test_fraction < 1.0)) {
        return set_err(err, errlen, -EINVAL, "test fraction %g is not in (0, 1)", test_fraction);
    }
    if (src->rows < 2) {
        return set_err(err, errlen, -EINVAL, "cannot split %zu rows into train and test",
                       src->rows);
    }
    size_t n_test = (size_t)nearbyint(test_fraction * (double)src->rows);
    if (n_test < 1)
        n_test = 1;
    if (n_test > src->rows - 1)
        n_test = src->rows - 1;
    size_t cut = src->rows - n_test;
    int rc = glm_dataset_row_slice(src, 0, cut, train, err, errlen);
    if (rc < 0)
        return rc;
    rc = glm_dataset_row_slice(src, cut, src->rows, test, err, errlen);
    if (rc < 0)
        glm_dataset_free(train);
    return rc;
}
