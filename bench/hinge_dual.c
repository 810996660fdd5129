/*
 * hinge_dual.c - a certified reference optimum for the L2-regularised hinge loss, used by
 * bench/default_lr.py: liblinear's dual solver (-s 3) stops at its iteration cap on badly
 * scaled data and cannot be given a larger budget from its command line. This runs the same
 * dual coordinate descent (Hsieh et al., ICML 2008: L1-loss SVM, C = 1, no bias, a random
 * order per pass) until the duality gap is below a relative tolerance, so the optimum is
 * bracketed: dual <= optimum <= primal. Objectives are printed in the trainer's form, mean
 * hinge loss + 1/(2S) ||w||^2 (= liblinear's 1/2 ||w||^2 + sum hinge, divided by S).
 *
 * Usage: hinge_dual FILE [REL_GAP (1e-6)] [MAX_PASSES (20000)]
 * Prints: primal P dual D passes N gap G. Exit 0 when the gap was reached, 1 when the pass
 * limit stopped it first, 2 on a bad file or usage.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    size_t rows, cols, nnz, cap_rows, cap_nnz;
    size_t *ptr;
    int *col;
    double *val, *y;
} data_t;

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap * 2 : 1024;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, n * elem);
    if (!q)
        return -1;
    *p = q;
    *cap = n;
    return 0;
}

static int load(const char *path, data_t *d)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    memset(d, 0, sizeof(*d));
    static char line[1 << 20];
    size_t cap_ptr = 0, cap_y = 0, cap_col = 0, cap_val = 0;
    if (grow((void **)&d->ptr, &cap_ptr, 1, sizeof(size_t)) != 0)
        return -1;
    d->ptr[0] = 0;
    while (fgets(line, sizeof(line), f)) {
        char *s = line, *e;
        double y = strtod(s, &e);
        if (e == s)
            continue;
        s = e;
        if (grow((void **)&d->y, &cap_y, d->rows + 1, sizeof(double)) != 0 ||
            grow((void **)&d->ptr, &cap_ptr, d->rows + 2, sizeof(size_t)) != 0)
            return -1;
        d->y[d->rows] = y > 0 ? 1.0 : -1.0;
        for (;;) {
            long idx = strtol(s, &e, 10);
            if (e == s || *e != ':')
                break;
            double v = strtod(e + 1, &s);
            if (idx < 1 || idx > 100000000)
                return -1;
            if (grow((void **)&d->col, &cap_col, d->nnz + 1, sizeof(int)) != 0 ||
                grow((void **)&d->val, &cap_val, d->nnz + 1, sizeof(double)) != 0)
                return -1;
            d->col[d->nnz] = (int)idx - 1;
            d->val[d->nnz++] = v;
            if ((size_t)idx > d->cols)
                d->cols = (size_t)idx;
        }
        d->ptr[++d->rows] = d->nnz;
    }
    fclose(f);
    return d->rows ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: hinge_dual FILE [REL_GAP] [MAX_PASSES]\n");
        return 2;
    }
    double tol = argc > 2 ? atof(argv[2]) : 1e-6;
    long max_passes = argc > 3 ? atol(argv[3]) : 20000;
    data_t d;
    if (load(argv[1], &d) != 0) {
        fprintf(stderr, "hinge_dual: cannot read %s\n", argv[1]);
        return 2;
    }
    const double C = 1.0;
    double *w = calloc(d.cols, sizeof(double)), *a = calloc(d.rows, sizeof(double));
    double *q = calloc(d.rows, sizeof(double));
    size_t *perm = malloc(d.rows * sizeof(size_t));
    if (!w || !a || !q || !perm)
        return 2;
    for (size_t i = 0; i < d.rows; i++) {
        perm[i] = i;
        for (size_t k = d.ptr[i]; k < d.ptr[i + 1]; k++)
            q[i] += d.val[k] * d.val[k];
    }
    unsigned long long rng = 88172645463325252ull;
    double P = INFINITY, D = -INFINITY;
    long pass;
    for (pass = 1; pass <= max_passes; pass++) {
        for (size_t i = d.rows; i > 1; i--) {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            size_t j = (size_t)(rng % i), t = perm[i - 1];
            perm[i - 1] = perm[j];
            perm[j] = t;
        }
        for (size_t p = 0; p < d.rows; p++) {
            size_t i = perm[p];
            if (q[i] <= 0)
                continue;
            double g = 0;
            for (size_t k = d.ptr[i]; k < d.ptr[i + 1]; k++)
                g += d.val[k] * w[d.col[k]];
            g = d.y[i] * g - 1;
            double na = a[i] - g / q[i];
            na = na < 0 ? 0 : (na > C ? C : na);
            double delta = (na - a[i]) * d.y[i];
            if (delta != 0)
                for (size_t k = d.ptr[i]; k < d.ptr[i + 1]; k++)
                    w[d.col[k]] += delta * d.val[k];
            a[i] = na;
        }
        if (pass % 10 != 0 && pass != max_passes)
            continue;
        double ww = 0, hinge = 0, sa = 0;
        for (size_t c = 0; c < d.cols; c++)
            ww += w[c] * w[c];
        for (size_t i = 0; i < d.rows; i++) {
            double z = 0;
            for (size_t k = d.ptr[i]; k < d.ptr[i + 1]; k++)
                z += d.val[k] * w[d.col[k]];
            double m = 1 - d.y[i] * z;
            hinge += m > 0 ? m : 0;
            sa += a[i];
        }
        double S = (double)d.rows;
        P = (0.5 * ww + C * hinge) / S;
        D = (sa - 0.5 * ww) / S;
        if (P - D <= tol * fabs(D))
            break;
    }
    printf("primal %.10f dual %.10f passes %ld gap %.3g\n", P, D, pass > max_passes ? max_passes : pass,
           (P - D) / fabs(D));
    return P - D <= tol * fabs(D) ? 0 : 1;
}
