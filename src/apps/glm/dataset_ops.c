/*
 * dataset_ops.c - operations on a loaded dataset: per-column nonzero counts and balanced
 * column partitions (model parallelism), column and row slices (one worker's share), low
 * precision values, and the row kernels the trainers use.
 */
#include "apps/glm/dataset.h"
#include "lib/base/errmsg.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- partitions and slices ------------------------------------------------------------- */

void glm_column_nnz(const glm_dataset_t *d, size_t *counts)
{
    memset(counts, 0, d->cols * sizeof(size_t));
    for (size_t k = 0; k < d->nnz; k++)
        counts[d->col[k]]++;
}

void glm_partition_columns(const glm_dataset_t *d, int parts, size_t *bounds)
{
    if (parts < 1) {
        bounds[0] = 0;
        return;
    }
    size_t cols = d->cols, np = (size_t)parts;
    size_t *hist = cols ? malloc(cols * sizeof(size_t)) : NULL;
    if (!hist) {
        for (size_t p = 0; p <= np; p++)
            bounds[p] = cols * p / np;
        return;
    }
    glm_column_nnz(d, hist);
    size_t remaining = d->nnz, start = 0;
    bounds[0] = 0;
    for (size_t p = 0; p + 1 < np; p++) {
        size_t parts_left = np - p;
        /* Leave at least one column for each later part when there are enough columns. */
        size_t max_end = cols > parts_left - 1 ? cols - (parts_left - 1) : start;
        double target = (double)remaining / (double)parts_left;
        size_t end = start, acc = 0;
        while (end < max_end) {
            double with = (double)(acc + hist[end]);
            /* Take a column while that brings the part no further from its target. */
            if (end > start && with > target && with - target > target - (double)acc)
                break;
            acc += hist[end];
            end++;
        }
        bounds[p + 1] = end;
        remaining -= acc;
        start = end;
    }
    bounds[np] = cols;
    free(hist);
}

/* Allocate out's arrays for rows/nnz and copy the scales: 0, or -ENOMEM (out zeroed). */
static int alloc_like(const glm_dataset_t *src, size_t rows, size_t nnz, glm_dataset_t *out)
{
    memset(out, 0, sizeof(*out));
    out->rows = rows;
    out->cols = src->cols;
    out->nnz = nnz;
    out->precision_bits = src->precision_bits;
    out->row_ptr = malloc((rows + 1) * sizeof(size_t));
    out->label = malloc((rows ? rows : 1) * sizeof(float));
    out->col = malloc((nnz ? nnz : 1) * sizeof(uint32_t));
    out->val = malloc((nnz ? nnz : 1) * sizeof(float));
    int ok = out->row_ptr && out->label && out->col && out->val;
    if (ok && src->qval) {
        out->qval = malloc(nnz ? nnz : 1);
        out->col_scale = malloc((src->cols ? src->cols : 1) * sizeof(float));
        ok = out->qval && out->col_scale;
        if (ok && src->cols)
            memcpy(out->col_scale, src->col_scale, src->cols * sizeof(float));
    }
    if (!ok) {
        glm_dataset_free(out);
        return -ENOMEM;
    }
    return 0;
}

/* First position in [lo, hi) of the sorted col[] whose column is >= c. */
static size_t lower_bound_col(const uint32_t *col, size_t lo, size_t hi, size_t c)
{
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (col[mid] < c)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Row r's nonzeros whose columns lie in [c0, c1): positions [*a, *b) of col and val (the
 * whole row, without a search, when the range is every column). */
static void column_span(const glm_dataset_t *src, size_t r, size_t c0, size_t c1, size_t *a,
                        size_t *b)
{
    *a = src->row_ptr[r];
    *b = src->row_ptr[r + 1];
    if (c0 > 0)
        *a = lower_bound_col(src->col, *a, *b, c0);
    if (c1 < src->cols)
        *b = lower_bound_col(src->col, *a, *b, c1);
}

/* A `what` ("row", "column") slice [lo, hi) lies within [0, limit): 0, or -EINVAL. */
static int check_slice(const char *what, size_t lo, size_t hi, size_t limit, char *err,
                       size_t errlen)
{
    if (lo > hi || hi > limit)
        return set_err(err, errlen, -EINVAL, "%s slice [%zu, %zu) is not within [0, %zu)", what, lo,
                       hi, limit);
    return 0;
}

/* Copy n entries (column index, value, quantized value) from src's entry `from` to out's
 * entry `to`. */
static void copy_entries(glm_dataset_t *out, size_t to, const glm_dataset_t *src, size_t from,
                         size_t n)
{
    if (n == 0)
        return;
    memcpy(out->col + to, src->col + from, n * sizeof(uint32_t));
    memcpy(out->val + to, src->val + from, n * sizeof(float));
    if (src->qval)
        memcpy(out->qval + to, src->qval + from, n);
}

/* Rows [r0, r1) of src restricted to columns [c0, c1), column indices kept: the one slice
 * that a column slice (every row) and a row slice (every column) both are. */
static int slice(const glm_dataset_t *src, size_t r0, size_t r1, size_t c0, size_t c1,
                 glm_dataset_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    int rc = check_slice("row", r0, r1, src->rows, err, errlen);
    if (rc == 0)
        rc = check_slice("column", c0, c1, src->cols, err, errlen);
    if (rc < 0)
        return rc;
    size_t nnz = 0, a, b;
    for (size_t r = r0; r < r1; r++) {
        column_span(src, r, c0, c1, &a, &b);
        nnz += b - a;
    }
    if (alloc_like(src, r1 - r0, nnz, out) < 0)
        return set_err(err, errlen, -ENOMEM,
                       "slice of rows [%zu, %zu) and columns [%zu, %zu): out of memory", r0, r1, c0,
                       c1);
    size_t k = 0;
    for (size_t r = r0; r < r1; r++) {
        column_span(src, r, c0, c1, &a, &b);
        out->row_ptr[r - r0] = k;
        copy_entries(out, k, src, a, b - a);
        k += b - a;
    }
    out->row_ptr[r1 - r0] = k;
    if (r1 > r0)
        memcpy(out->label, src->label + r0, (r1 - r0) * sizeof(float));
    return 0;
}

int glm_dataset_column_slice(const glm_dataset_t *src, size_t c0, size_t c1, glm_dataset_t *out,
                             char *err, size_t errlen)
{
    return slice(src, 0, src->rows, c0, c1, out, err, errlen);
}

int glm_dataset_row_slice(const glm_dataset_t *src, size_t r0, size_t r1, glm_dataset_t *out,
                          char *err, size_t errlen)
{
    return slice(src, r0, r1, 0, src->cols, out, err, errlen);
}

/* ---- low precision ------------------------------------------------------------------------ */

int glm_dataset_quantize(glm_dataset_t *d, int bits, char *err, size_t errlen)
{
    if (bits != 8 && bits != 4) {
        return set_err(err, errlen, -EINVAL, "quantize: %d bits is not supported (expected 8 or 4)",
                       bits);
    }
    const int qmax = (1 << (bits - 1)) - 1;
    int8_t *qval = malloc(d->nnz ? d->nnz : 1);
    float *scale = malloc((d->cols ? d->cols : 1) * sizeof(float));
    if (!qval || !scale) {
        free(qval);
        free(scale);
        return set_err(err, errlen, -ENOMEM, "quantize: out of memory");
    }
    for (size_t c = 0; c < d->cols; c++)
        scale[c] = 0.0f;
    for (size_t k = 0; k < d->nnz; k++) {
        float a = fabsf(d->val[k]);
        if (a > scale[d->col[k]])
            scale[d->col[k]] = a;
    }
    for (size_t c = 0; c < d->cols; c++)
        scale[c] = scale[c] > 0.0f ? (float)((double)scale[c] / qmax) : 1.0f;
    for (size_t k = 0; k < d->nnz; k++) {
        float s = scale[d->col[k]];
        double q = round((double)d->val[k] / (double)s);
        if (q > qmax)
            q = qmax;
        if (q < -qmax)
            q = -qmax;
        qval[k] = (int8_t)q;
        d->val[k] = (float)qval[k] * s;
    }
    free(d->qval);
    free(d->col_scale);
    d->qval = qval;
    d->col_scale = scale;
    d->precision_bits = bits;
    return 0;
}

size_t glm_dataset_value_bytes(const glm_dataset_t *d)
{
    if (d->precision_bits == 0)
        return d->nnz * sizeof(float);
    return (d->nnz * (size_t)d->precision_bits + 7) / 8;
}

/* ---- row kernels ------------------------------------------------------------------------- */

double glm_row_dot(const glm_dataset_t *d, size_t row, const float *x, size_t col_offset)
{
    const size_t begin = d->row_ptr[row], end = d->row_ptr[row + 1];
    const uint32_t *restrict col = d->col;
    const float *restrict val = d->val;
    double sum = 0.0;
    for (size_t k = begin; k < end; k++)
        sum += (double)val[k] * (double)x[col[k] - col_offset];
    return sum;
}

void glm_row_axpy(const glm_dataset_t *d, size_t row, double scale, double *g, size_t col_offset)
{
    const size_t begin = d->row_ptr[row], end = d->row_ptr[row + 1];
    const uint32_t *restrict col = d->col;
    const float *restrict val = d->val;
    for (size_t k = begin; k < end; k++)
        g[col[k] - col_offset] += scale * (double)val[k];
}

/* v in decimal at p; the end. */
static char *put_u32(char *p, uint32_t v)
{
    char digits[10];
    int n = 0;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = digits[--n];
    return p;
}

/* x exactly, as a C99 hexadecimal float ("0x1.8p-3", which strtod reads) at p; the end. A
 * normal float by hand (printf's %.9g took most of the time of writing a large set), the rest
 * by printf. */
static char *put_float(char *p, float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof(b));
    uint32_t e = (b >> 23) & 0xffu, m = (b & 0x7fffffu) << 1; /* 24 bits: 6 hex digits */
    if (x == 0)
        return memcpy(p, "0", 1), p + 1;
    if (e == 0 || e == 0xffu)
        return p + sprintf(p, "%a", (double)x);
    if (b >> 31)
        *p++ = '-';
    memcpy(p, "0x1", 3);
    p += 3;
    if (m) {
        *p++ = '.';
        for (int shift = 20; m; shift -= 4) {
            *p++ = "0123456789abcdef"[(m >> shift) & 0xfu];
            m &= (1u << shift) - 1;
        }
    }
    int exp = (int)e - 127;
    *p++ = 'p';
    *p++ = exp < 0 ? '-' : '+';
    return put_u32(p, (uint32_t)(exp < 0 ? -exp : exp));
}

int glm_dataset_write_libsvm(const glm_dataset_t *d, FILE *f)
{
    char line[4096];
    for (size_t r = 0; r < d->rows; r++) {
        char *p = line;
        float y = d->label[r];
        p = y == 1.0f ? memcpy(p, "+1", 2), p + 2 : y == -1.0f ? memcpy(p, "-1", 2),
        p + 2 : put_float(p, y);
        for (size_t k = d->row_ptr[r]; k < d->row_ptr[r + 1]; k++) {
            if (p - line > (ptrdiff_t)sizeof(line) - 48) { /* room for one more entry */
                fwrite(line, 1, (size_t)(p - line), f);
                p = line;
            }
            *p++ = ' ';
            p = put_u32(p, d->col[k] + 1);
            *p++ = ':';
            p = put_float(p, d->val[k]);
        }
        *p++ = '\n';
        fwrite(line, 1, (size_t)(p - line), f);
    }
    return ferror(f) ? -EIO : 0;
}
