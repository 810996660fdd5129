/*
 * dataset.c - the GLM dataset: LIBSVM reader (one pass, geometric growth, every error named by
 * file:line), row/column slices, nnz-balanced column partitioning, 8/4-bit feature quantization
 * and the row kernels (dot product, axpy) the trainers run.
 */
#include "glm/dataset.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/errmsg.h"

/* ---- errors ---------------------------------------------------------------------------- */


/* ---- LIBSVM parser ----------------------------------------------------------------------- */

/* The widest token shown in a message. */
#define SHOW_MAX 40

struct parser {
    const char *name;
    enum glm_label_kind kind;
    size_t line_no;
    int last_line_unterminated; /* the current line is the file's last and has no '\n' */
    char *err;
    size_t errlen;

    char *line;      /* NUL-terminated copy of the current line */
    size_t line_cap;

    size_t rows, nnz, row_cap, nnz_cap;
    size_t *row_ptr; /* row_cap + 1 entries */
    float *label;
    uint32_t *col;
    float *val;
    size_t max_index;
};

static int parse_error(struct parser *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int parse_error(struct parser *p, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    set_err(p->err, p->errlen, "%s:%zu: %s%s", p->name, p->line_no, what,
            p->last_line_unterminated ? " (truncated last line? the file ends without a newline)"
                                      : "");
    return -1;
}

static int grow(void **ptr, size_t *cap, size_t need, size_t elem, size_t extra)
{
    if (need <= *cap)
        return 0;
    size_t ncap = *cap ? *cap : 1024;
    while (ncap < need) {
        if (ncap > (SIZE_MAX / 2) / elem)
            return -1;
        ncap *= 2;
    }
    void *np = realloc(*ptr, (ncap + extra) * elem);
    if (!np)
        return -1;
    *ptr = np;
    *cap = ncap;
    return 0;
}

static int reserve_rows(struct parser *p, size_t need)
{
    if (need <= p->row_cap)
        return 0;
    size_t cap = p->row_cap;
    if (grow((void **)&p->row_ptr, &cap, need, sizeof(size_t), 1) != 0)
        return -1;
    float *nl = realloc(p->label, cap * sizeof(float));
    if (!nl)
        return -1;
    p->label = nl;
    p->row_cap = cap;
    return 0;
}

static int reserve_nnz(struct parser *p, size_t need)
{
    if (need <= p->nnz_cap)
        return 0;
    size_t cap = p->nnz_cap;
    if (grow((void **)&p->col, &cap, need, sizeof(uint32_t), 0) != 0)
        return -1;
    float *nv = realloc(p->val, cap * sizeof(float));
    if (!nv)
        return -1;
    p->val = nv;
    p->nnz_cap = cap;
    return 0;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

/* Plain decimals ("-12.375") with at most 2^24 as the digits and at most 10 after the point:
 * both the digits and the power of ten are exact floats, so one IEEE float division gives the
 * correctly rounded value, the same as strtof. Returns 0 when the token is not of that form. */
static int parse_simple_decimal(const char *s, const char *end, float *out)
{
    static const float k_pow10[] = {1e0f, 1e1f, 1e2f, 1e3f, 1e4f, 1e5f,
                                    1e6f, 1e7f, 1e8f, 1e9f, 1e10f};
    const char *p = s;
    int negative = 0;
    if (p < end && (*p == '-' || *p == '+'))
        negative = *p++ == '-';
    uint32_t digits = 0;
    int any = 0, frac = -1;
    for (; p < end; p++) {
        if (*p >= '0' && *p <= '9') {
            digits = digits * 10 + (uint32_t)(*p - '0');
            if (digits > (1u << 24))
                return 0;
            any = 1;
            if (frac >= 0 && ++frac > 10)
                return 0;
        } else if (*p == '.' && frac < 0) {
            frac = 0;
        } else {
            return 0;
        }
    }
    if (!any)
        return 0;
    float v = (float)digits / k_pow10[frac > 0 ? frac : 0];
    *out = negative ? -v : v;
    return 1;
}

/* Parse a finite float spanning exactly [s, end). Returns 0, or 1 not a number, 2 trailing
 * garbage, 3 not finite. */
static int parse_float(const char *s, const char *end, float *out)
{
    if (parse_simple_decimal(s, end, out))
        return 0;
    char *stop;
    errno = 0;
    float v = strtof(s, &stop);
    if (stop == s)
        return 1;
    if (stop != end)
        return 2;
    if (!isfinite(v))
        return 3;
    *out = v;
    return 0;
}

static int parse_label(struct parser *p, const char *tok, const char *end)
{
    float v = 0;
    int r = parse_float(tok, end, &v);
    if (r == 1 || r == 2)
        return parse_error(p, "label '%.*s' is not a number", SHOW_MAX, tok);
    if (r == 3)
        return parse_error(p, "label '%.*s' is not a finite number", SHOW_MAX, tok);
    if (p->kind == GLM_LABELS_BINARY) {
        if (v == 1.0f)
            v = 1.0f;
        else if (v == -1.0f || v == 0.0f)
            v = -1.0f;
        else
            return parse_error(p, "label '%.*s' is not binary (expected -1, +1, 0 or 1)",
                               SHOW_MAX, tok);
    }
    p->label[p->rows] = v;
    return 0;
}

/* One "index:value" token [tok, end); prev is the previous index of the row (0 at its start). */
static int parse_feature(struct parser *p, const char *tok, const char *end, uint64_t *prev)
{
    const char *colon = memchr(tok, ':', (size_t)(end - tok));
    if (!colon)
        return parse_error(p, "feature '%.*s' has no ':' (expected index:value)", SHOW_MAX, tok);
    if (colon == tok)
        return parse_error(p, "feature '%.*s' has no index", SHOW_MAX, tok);
    const int index_len = colon - tok < SHOW_MAX ? (int)(colon - tok) : SHOW_MAX;
    if (*tok == '-')
        return parse_error(p, "index %.*s is negative (indices are 1-based)", index_len, tok);
    uint64_t index = 0;
    for (const char *c = tok; c < colon; c++) {
        if (*c < '0' || *c > '9')
            return parse_error(p, "index '%.*s' is not an integer", index_len, tok);
        index = index * 10 + (uint64_t)(*c - '0');
        if (index > UINT32_MAX)
            return parse_error(p, "index '%.*s' is too large (at most %u)", index_len, tok,
                               (unsigned)UINT32_MAX);
    }
    if (index == 0)
        return parse_error(p, "index 0 (indices are 1-based)");
    if (index <= *prev)
        return parse_error(p,
                           "index %llu after index %llu (indices must be strictly increasing)",
                           (unsigned long long)index, (unsigned long long)*prev);
    const char *vs = colon + 1;
    if (vs == end)
        return parse_error(p, "feature '%.*s' has no value", SHOW_MAX, tok);
    float v = 0;
    int r = parse_float(vs, end, &v);
    if (r == 1)
        return parse_error(p, "value '%.*s' is not a number", SHOW_MAX, vs);
    if (r == 2)
        return parse_error(p, "garbage after the value in '%.*s'", SHOW_MAX, tok);
    if (r == 3)
        return parse_error(p, "value '%.*s' is not a finite number", SHOW_MAX, vs);
    if (reserve_nnz(p, p->nnz + 1) != 0)
        return parse_error(p, "out of memory");
    p->col[p->nnz] = (uint32_t)(index - 1);
    p->val[p->nnz] = v;
    p->nnz++;
    if (index > p->max_index)
        p->max_index = (size_t)index;
    *prev = index;
    return 0;
}

/* Parse the NUL-terminated p->line. */
static int parse_line(struct parser *p)
{
    char *s = p->line;
    char *hash = strchr(s, '#');
    if (hash)
        *hash = '\0';
    while (is_space(*s))
        s++;
    if (*s == '\0')
        return 0; /* blank or comment only */
    if (reserve_rows(p, p->rows + 1) != 0)
        return parse_error(p, "out of memory");
    char *end = s;
    while (*end && !is_space(*end))
        end++;
    char saved = *end;
    *end = '\0';
    if (parse_label(p, s, end) != 0)
        return -1;
    s = saved ? end + 1 : end;
    size_t row_start = p->nnz;
    uint64_t prev = 0;
    for (;;) {
        while (is_space(*s))
            s++;
        if (*s == '\0')
            break;
        end = s;
        while (*end && !is_space(*end))
            end++;
        saved = *end;
        *end = '\0';
        if (parse_feature(p, s, end, &prev) != 0)
            return -1;
        s = saved ? end + 1 : end;
    }
    p->row_ptr[p->rows] = row_start;
    p->rows++;
    p->row_ptr[p->rows] = p->nnz;
    return 0;
}

static void parser_release(struct parser *p)
{
    free(p->line);
    free(p->row_ptr);
    free(p->label);
    free(p->col);
    free(p->val);
}

int glm_parse_libsvm(const char *buf, size_t len, const char *name, enum glm_label_kind kind,
                     glm_dataset_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    struct parser p = {
        .name = name ? name : "(buffer)", .kind = kind, .err = err, .errlen = errlen};
    const char *pos = buf, *end = buf + len;
    while (pos < end) {
        p.line_no++;
        const char *nl = memchr(pos, '\n', (size_t)(end - pos));
        const char *line_end = nl ? nl : end;
        p.last_line_unterminated = nl == NULL;
        size_t n = (size_t)(line_end - pos);
        if (n + 1 > p.line_cap) {
            size_t cap = p.line_cap;
            if (grow((void **)&p.line, &cap, n + 1, 1, 0) != 0) {
                parse_error(&p, "out of memory");
                goto fail;
            }
            p.line_cap = cap;
        }
        memcpy(p.line, pos, n);
        p.line[n] = '\0';
        if (memchr(p.line, '\0', n)) {
            parse_error(&p, "NUL byte in the line (not a text file?)");
            goto fail;
        }
        if (parse_line(&p) != 0)
            goto fail;
        pos = nl ? nl + 1 : end;
    }
    if (p.rows == 0) {
        set_err(err, errlen, "%s:%zu: empty file (no samples)", p.name,
                p.line_no ? p.line_no : 1);
        goto fail;
    }
    free(p.line);
    out->rows = p.rows;
    out->cols = p.max_index;
    out->nnz = p.nnz;
    /* Shrink to fit; a failed shrink keeps the larger block. */
    size_t *rp = realloc(p.row_ptr, (p.rows + 1) * sizeof(size_t));
    out->row_ptr = rp ? rp : p.row_ptr;
    float *lb = realloc(p.label, p.rows * sizeof(float));
    out->label = lb ? lb : p.label;
    if (p.nnz > 0) {
        uint32_t *c = realloc(p.col, p.nnz * sizeof(uint32_t));
        out->col = c ? c : p.col;
        float *v = realloc(p.val, p.nnz * sizeof(float));
        out->val = v ? v : p.val;
    } else {
        /* Keep valid (non-NULL) pointers even without a single nonzero. */
        out->col = p.col ? p.col : malloc(sizeof(uint32_t));
        out->val = p.val ? p.val : malloc(sizeof(float));
        if (!out->col || !out->val) {
            set_err(err, errlen, "%s: out of memory", p.name);
            free(out->col);
            free(out->val);
            free(out->row_ptr);
            free(out->label);
            memset(out, 0, sizeof(*out));
            return -1;
        }
    }
    return 0;
fail:
    parser_release(&p);
    memset(out, 0, sizeof(*out));
    return -1;
}

int glm_load_libsvm(const char *path, enum glm_label_kind kind, glm_dataset_t *out, char *err,
                    size_t errlen)
{
    memset(out, 0, sizeof(*out));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        set_err(err, errlen, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (S_ISDIR(st.st_mode)) {
        set_err(err, errlen, "%s: cannot read: is a directory", path);
        close(fd);
        return -1;
    }
    int rc;
    if (S_ISREG(st.st_mode) && st.st_size > 0) {
        size_t len = (size_t)st.st_size;
        void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            set_err(err, errlen, "%s: cannot map: %s", path, strerror(errno));
            close(fd);
            return -1;
        }
        madvise(map, len, MADV_SEQUENTIAL);
        rc = glm_parse_libsvm(map, len, path, kind, out, err, errlen);
        munmap(map, len);
    } else {
        /* Not a regular file (a pipe, a device) or empty: read it all. */
        size_t cap = 0, len = 0;
        char *buf = NULL;
        for (;;) {
            if (grow((void **)&buf, &cap, len + 65536, 1, 0) != 0) {
                set_err(err, errlen, "%s: out of memory", path);
                free(buf);
                close(fd);
                return -1;
            }
            ssize_t n = read(fd, buf + len, cap - len);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0) {
                set_err(err, errlen, "%s: cannot read: %s", path, strerror(errno));
                free(buf);
                close(fd);
                return -1;
            }
            if (n == 0)
                break;
            len += (size_t)n;
        }
        rc = glm_parse_libsvm(buf ? buf : "", len, path, kind, out, err, errlen);
        free(buf);
    }
    close(fd);
    return rc;
}

void glm_dataset_free(glm_dataset_t *d)
{
    if (!d)
        return;
    free(d->row_ptr);
    free(d->col);
    free(d->val);
    free(d->label);
    free(d->qval);
    free(d->col_scale);
    memset(d, 0, sizeof(*d));
}

void glm_dataset_set_cols(glm_dataset_t *d, size_t cols)
{
    if (cols <= d->cols)
        return;
    if (d->col_scale) {
        float *ns = realloc(d->col_scale, cols * sizeof(float));
        if (!ns)
            return;
        for (size_t c = d->cols; c < cols; c++)
            ns[c] = 1.0f;
        d->col_scale = ns;
    }
    d->cols = cols;
}

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

/* Allocate out's arrays for rows/nnz and copy the scales; zeroed on failure. */
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
        return -1;
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

int glm_dataset_column_slice(const glm_dataset_t *src, size_t c0, size_t c1, glm_dataset_t *out,
                             char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (c0 > c1 || c1 > src->cols) {
        set_err(err, errlen, "column slice [%zu, %zu) is not within [0, %zu)", c0, c1, src->cols);
        return -1;
    }
    size_t nnz = 0;
    for (size_t r = 0; r < src->rows; r++) {
        size_t a = lower_bound_col(src->col, src->row_ptr[r], src->row_ptr[r + 1], c0);
        size_t b = lower_bound_col(src->col, a, src->row_ptr[r + 1], c1);
        nnz += b - a;
    }
    if (alloc_like(src, src->rows, nnz, out) != 0) {
        set_err(err, errlen, "column slice [%zu, %zu): out of memory", c0, c1);
        return -1;
    }
    size_t k = 0;
    for (size_t r = 0; r < src->rows; r++) {
        size_t a = lower_bound_col(src->col, src->row_ptr[r], src->row_ptr[r + 1], c0);
        size_t b = lower_bound_col(src->col, a, src->row_ptr[r + 1], c1);
        out->row_ptr[r] = k;
        memcpy(out->col + k, src->col + a, (b - a) * sizeof(uint32_t));
        memcpy(out->val + k, src->val + a, (b - a) * sizeof(float));
        if (src->qval)
            memcpy(out->qval + k, src->qval + a, b - a);
        k += b - a;
    }
    out->row_ptr[src->rows] = k;
    if (src->rows)
        memcpy(out->label, src->label, src->rows * sizeof(float));
    return 0;
}

int glm_dataset_row_slice(const glm_dataset_t *src, size_t r0, size_t r1, glm_dataset_t *out,
                          char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (r0 > r1 || r1 > src->rows) {
        set_err(err, errlen, "row slice [%zu, %zu) is not within [0, %zu)", r0, r1, src->rows);
        return -1;
    }
    size_t base = src->row_ptr[r0], nnz = src->row_ptr[r1] - base;
    if (alloc_like(src, r1 - r0, nnz, out) != 0) {
        set_err(err, errlen, "row slice [%zu, %zu): out of memory", r0, r1);
        return -1;
    }
    for (size_t r = r0; r <= r1; r++)
        out->row_ptr[r - r0] = src->row_ptr[r] - base;
    if (nnz) {
        memcpy(out->col, src->col + base, nnz * sizeof(uint32_t));
        memcpy(out->val, src->val + base, nnz * sizeof(float));
        if (src->qval)
            memcpy(out->qval, src->qval + base, nnz);
    }
    if (r1 > r0)
        memcpy(out->label, src->label + r0, (r1 - r0) * sizeof(float));
    return 0;
}

/* ---- low precision ------------------------------------------------------------------------ */

int glm_dataset_quantize(glm_dataset_t *d, int bits, char *err, size_t errlen)
{
    if (bits != 8 && bits != 4) {
        set_err(err, errlen, "quantize: %d bits is not supported (expected 8 or 4)", bits);
        return -1;
    }
    const int qmax = (1 << (bits - 1)) - 1;
    int8_t *qval = malloc(d->nnz ? d->nnz : 1);
    float *scale = malloc((d->cols ? d->cols : 1) * sizeof(float));
    if (!qval || !scale) {
        free(qval);
        free(scale);
        set_err(err, errlen, "quantize: out of memory");
        return -1;
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
