/*
 * dataset.c - the GLM dataset: LIBSVM reader (one streaming pass, geometric growth, every
 * error named by file:line with the file's bytes escaped; input bytes, line length and the
 * feature count bounded by glm_read_limits_t), row/column slices, nnz-balanced column partitioning, 8/4-bit feature quantization
 * and the row kernels (dot product, axpy) the trainers run.
 */
#include "apps/glm/dataset.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/base/errmsg.h"

/* ---- limits ------------------------------------------------------------------------------ */

/* A limit from the environment: a positive integer, else the default. */
static uint64_t env_limit(const char *name, uint64_t dflt)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return dflt;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno != 0 || *end != '\0' || x == 0 || v[0] == '-')
        return dflt;
    return (uint64_t)x;
}

glm_read_limits_t glm_read_limits_default(void)
{
    glm_read_limits_t l;
    l.max_features = env_limit("INAGG_MAX_FEATURES", 0);
    l.max_line_bytes = env_limit("INAGG_MAX_LINE_BYTES", GLM_DEFAULT_MAX_LINE_BYTES);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t half_ram = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page / 2 : 0;
    l.max_input_bytes = env_limit("INAGG_MAX_INPUT_BYTES", half_ram ? half_ram : UINT64_MAX);
    return l;
}

uint64_t glm_feature_limit(const glm_read_limits_t *l, size_t nnz)
{
    if (l->max_features)
        return l->max_features;
    uint64_t by_data = (uint64_t)nnz * GLM_FEATURES_PER_NONZERO;
    return by_data > GLM_MIN_FEATURE_LIMIT ? by_data : GLM_MIN_FEATURE_LIMIT;
}

/* ---- LIBSVM parser ----------------------------------------------------------------------- */

/* The widest token shown in a message (in input bytes). */
#define SHOW_MAX 40

struct parser {
    const char *name;
    enum glm_label_kind kind;
    glm_read_limits_t limits;
    size_t line_no;
    int last_line_unterminated; /* the current line is the file's last and has no '\n' */
    char *err;
    size_t errlen;

    char *line; /* NUL-terminated copy of the current line */
    size_t line_cap;

    size_t rows, nnz, row_cap, nnz_cap;
    size_t *row_ptr; /* row_cap + 1 entries */
    float *label;
    uint32_t *col;
    float *val;
    size_t max_index;
};

/* Up to SHOW_MAX bytes of [s, s + n) made printable: bytes outside printable ASCII (and the
 * backslash) become \xNN, so a message never carries a file's raw control bytes. */
static const char *show(char *buf, size_t cap, const char *s, size_t n)
{
    size_t o = 0;
    size_t lim = n < SHOW_MAX ? n : SHOW_MAX;
    for (size_t i = 0; i < lim && o + 5 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\')
            buf[o++] = (char)c;
        else
            o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
    }
    if (n > lim && o + 4 < cap) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
    return buf;
}

#define SHOW_CAP (SHOW_MAX * 4 + 8)
#define SHOWN(tok, n) show((char[SHOW_CAP]){0}, SHOW_CAP, (tok), (size_t)(n))

static int parse_error(struct parser *p, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int parse_error(struct parser *p, int code, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    return set_err(
        p->err, p->errlen, code, "%s:%zu: %s%s", p->name, p->line_no, what,
        p->last_line_unterminated ? " (truncated last line? the file ends without a newline)" : "");
}

static int grow(void **ptr, size_t *cap, size_t need, size_t elem, size_t extra)
{
    if (need <= *cap)
        return 0;
    size_t ncap = *cap ? *cap : 1024;
    while (ncap < need) {
        if (ncap > (SIZE_MAX / 2) / elem)
            return -ENOMEM;
        ncap *= 2;
    }
    void *np = realloc(*ptr, (ncap + extra) * elem);
    if (!np)
        return -ENOMEM;
    *ptr = np;
    *cap = ncap;
    return 0;
}

/* Grow the array *a (of a_elem-byte elements, `extra` spare ones past the end) and its float
 * companion *b to hold need elements each; *cap is their shared capacity. 0, or -ENOMEM. */
static int grow_with_floats(void **a, size_t a_elem, size_t extra, float **b, size_t *cap,
                            size_t need)
{
    if (need <= *cap)
        return 0;
    size_t ncap = *cap;
    if (grow(a, &ncap, need, a_elem, extra) != 0)
        return -ENOMEM;
    float *nb = realloc(*b, ncap * sizeof(float));
    if (!nb)
        return -ENOMEM;
    *b = nb;
    *cap = ncap;
    return 0;
}

/* Room for need rows (row_ptr has one more) and their labels. */
static int reserve_rows(struct parser *p, size_t need)
{
    return grow_with_floats((void **)&p->row_ptr, sizeof(size_t), 1, &p->label, &p->row_cap, need);
}

/* Room for need nonzeros: their columns and values. */
static int reserve_nnz(struct parser *p, size_t need)
{
    return grow_with_floats((void **)&p->col, sizeof(uint32_t), 0, &p->val, &p->nnz_cap, need);
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
    size_t n = (size_t)(end - tok);
    if (r == 1 || r == 2)
        return parse_error(p, -EINVAL, "label '%s' is not a number", SHOWN(tok, n));
    if (r == 3)
        return parse_error(p, -EINVAL, "label '%s' is not a finite number", SHOWN(tok, n));
    if (p->kind == GLM_LABELS_BINARY) {
        if (v == 1.0f)
            v = 1.0f;
        else if (v == -1.0f || v == 0.0f)
            v = -1.0f;
        else
            return parse_error(p, -EINVAL, "label '%s' is not binary (expected -1, +1, 0 or 1)",
                               SHOWN(tok, n));
    }
    p->label[p->rows] = v;
    return 0;
}

/* One "index:value" token [tok, end); prev is the previous index of the row (0 at its start). */
static int parse_feature(struct parser *p, const char *tok, const char *end, uint64_t *prev)
{
    const size_t n = (size_t)(end - tok);
    const char *colon = memchr(tok, ':', n);
    if (!colon)
        return parse_error(p, -EINVAL, "feature '%s' has no ':' (expected index:value)",
                           SHOWN(tok, n));
    if (colon == tok)
        return parse_error(p, -EINVAL, "feature '%s' has no index", SHOWN(tok, n));
    const size_t index_len = (size_t)(colon - tok);
    if (*tok == '-')
        return parse_error(p, -EINVAL, "index %s is negative (indices are 1-based)",
                           SHOWN(tok, index_len));
    uint64_t index = 0;
    for (const char *c = tok; c < colon; c++) {
        if (*c < '0' || *c > '9')
            return parse_error(p, -EINVAL, "index '%s' is not an integer", SHOWN(tok, index_len));
        index = index * 10 + (uint64_t)(*c - '0');
        if (index > UINT32_MAX)
            return parse_error(p, -EINVAL, "index '%s' is too large (at most %u)",
                               SHOWN(tok, index_len), (unsigned)UINT32_MAX);
    }
    if (index == 0)
        return parse_error(p, -EINVAL, "index 0 (indices are 1-based)");
    if (index <= *prev)
        return parse_error(p, -EINVAL,
                           "index %llu after index %llu (indices must be strictly increasing)",
                           (unsigned long long)index, (unsigned long long)*prev);
    const char *vs = colon + 1;
    if (vs == end)
        return parse_error(p, -EINVAL, "feature '%s' has no value", SHOWN(tok, n));
    float v = 0;
    int r = parse_float(vs, end, &v);
    if (r == 1)
        return parse_error(p, -EINVAL, "value '%s' is not a number", SHOWN(vs, end - vs));
    if (r == 2)
        return parse_error(p, -EINVAL, "garbage after the value in '%s'", SHOWN(tok, n));
    if (r == 3)
        return parse_error(p, -EINVAL, "value '%s' is not a finite number", SHOWN(vs, end - vs));
    if (reserve_nnz(p, p->nnz + 1) != 0)
        return parse_error(p, -ENOMEM, "out of memory");
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
        return parse_error(p, -ENOMEM, "out of memory");
    char *end = s;
    while (*end && !is_space(*end))
        end++;
    char saved = *end;
    *end = '\0';
    int rc = parse_label(p, s, end);
    if (rc < 0)
        return rc;
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
        rc = parse_feature(p, s, end, &prev);
        if (rc < 0)
            return rc;
        s = saved ? end + 1 : end;
    }
    p->row_ptr[p->rows] = row_start;
    p->rows++;
    p->row_ptr[p->rows] = p->nnz;
    return 0;
}

/* The error for a line longer than the limit (p->line_no is that line). */
static int line_too_long(struct parser *p)
{
    return parse_error(p, -EINVAL,
                       "line longer than %llu bytes (malformed or not LIBSVM text? set "
                       "INAGG_MAX_LINE_BYTES to allow longer lines)",
                       (unsigned long long)p->limits.max_line_bytes);
}

static int nul_byte(struct parser *p)
{
    return parse_error(p, -EINVAL, "NUL byte in the line (not a text file?)");
}

/* One whole line [s, s + n) without its '\n' (the next line number); last_unterminated: the
 * input ends here without a '\n'. */
static int feed_line(struct parser *p, const char *s, size_t n, int last_unterminated)
{
    p->line_no++;
    p->last_line_unterminated = last_unterminated;
    if (n > p->limits.max_line_bytes)
        return line_too_long(p);
    if (memchr(s, '\0', n))
        return nul_byte(p);
    if (n + 1 > p->line_cap) {
        size_t cap = p->line_cap;
        if (grow((void **)&p->line, &cap, n + 1, 1, 0) != 0)
            return parse_error(p, -ENOMEM, "out of memory");
        p->line_cap = cap;
    }
    memcpy(p->line, s, n);
    p->line[n] = '\0';
    return parse_line(p);
}

static void parser_release(struct parser *p)
{
    free(p->line);
    free(p->row_ptr);
    free(p->label);
    free(p->col);
    free(p->val);
}

/* After the last line: the checks on the whole file and the arrays moved into *out. */
static int parser_finish(struct parser *p, glm_dataset_t *out)
{
    char *err = p->err;
    size_t errlen = p->errlen;
    if (p->rows == 0) {
        parser_release(p);
        return set_err(err, errlen, -EINVAL, "%s:%zu: empty file (no samples)", p->name,
                       p->line_no ? p->line_no : 1);
    }
    uint64_t limit = glm_feature_limit(&p->limits, p->nnz);
    if ((uint64_t)p->max_index > limit) {
        parser_release(p);
        return set_err(err, errlen, -EFBIG,
                       "%s: feature index %zu is past the limit of %llu features for %zu "
                       "nonzeros (the model has one weight per index up to the largest; "
                       "renumber the features densely, or set INAGG_MAX_FEATURES to allow more)",
                       p->name, p->max_index, (unsigned long long)limit, p->nnz);
    }
    free(p->line);
    p->line = NULL;
    out->rows = p->rows;
    out->cols = p->max_index;
    out->nnz = p->nnz;
    /* Shrink to fit; a failed shrink keeps the larger block. */
    size_t *rp = realloc(p->row_ptr, (p->rows + 1) * sizeof(size_t));
    out->row_ptr = rp ? rp : p->row_ptr;
    float *lb = realloc(p->label, p->rows * sizeof(float));
    out->label = lb ? lb : p->label;
    if (p->nnz > 0) {
        uint32_t *c = realloc(p->col, p->nnz * sizeof(uint32_t));
        out->col = c ? c : p->col;
        float *v = realloc(p->val, p->nnz * sizeof(float));
        out->val = v ? v : p->val;
    } else {
        /* Keep valid (non-NULL) pointers even without a single nonzero. */
        out->col = p->col ? p->col : malloc(sizeof(uint32_t));
        out->val = p->val ? p->val : malloc(sizeof(float));
        if (!out->col || !out->val) {
            free(out->col);
            free(out->val);
            free(out->row_ptr);
            free(out->label);
            memset(out, 0, sizeof(*out));
            return set_err(err, errlen, -ENOMEM, "%s: out of memory", p->name);
        }
    }
    return 0;
}

int glm_parse_libsvm_limited(const char *buf, size_t len, const char *name,
                             enum glm_label_kind kind, const glm_read_limits_t *limits,
                             glm_dataset_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    struct parser p = {
        .name = name ? name : "(buffer)", .kind = kind, .err = err, .errlen = errlen};
    p.limits = limits ? *limits : glm_read_limits_default();
    if ((uint64_t)len > p.limits.max_input_bytes) {
        return set_err(err, errlen, -EFBIG,
                       "%s: %zu bytes is more than the limit of %llu (INAGG_MAX_INPUT_BYTES)",
                       p.name, len, (unsigned long long)p.limits.max_input_bytes);
    }
    const char *pos = buf, *end = buf + len;
    while (pos < end) {
        const char *nl = memchr(pos, '\n', (size_t)(end - pos));
        const char *line_end = nl ? nl : end;
        int rc = feed_line(&p, pos, (size_t)(line_end - pos), nl == NULL);
        if (rc < 0) {
            parser_release(&p);
            memset(out, 0, sizeof(*out));
            return rc;
        }
        pos = nl ? nl + 1 : end;
    }
    return parser_finish(&p, out);
}

int glm_parse_libsvm(const char *buf, size_t len, const char *name, enum glm_label_kind kind,
                     glm_dataset_t *out, char *err, size_t errlen)
{
    return glm_parse_libsvm_limited(buf, len, name, kind, NULL, out, err, errlen);
}

/* Read size of one read(2). */
#define READ_CHUNK (256u * 1024u)

/* Stream fd through the parser: lines are handed over as they complete, so memory is the
 * parsed arrays plus one chunk and one line; the line, NUL and total-size limits are checked
 * as bytes arrive, so no input (a device, a pipe that never ends, a file truncated while read)
 * makes this grow without bound or fault. */
static int parse_fd(struct parser *p, int fd, const char *path)
{
    char *chunk = malloc(READ_CHUNK);
    char *pend = NULL; /* the start of a line that spans chunks */
    size_t pend_len = 0, pend_cap = 0;
    uint64_t total = 0;
    int rc = 0;
    if (!chunk)
        return set_err(p->err, p->errlen, -ENOMEM, "%s: out of memory", path);
    for (;;) {
        ssize_t n = read(fd, chunk, READ_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = set_err(p->err, p->errlen, -errno, "%s: cannot read after %zu lines: %s", path,
                         p->line_no, strerror(errno));
            goto out;
        }
        if (n == 0)
            break;
        total += (uint64_t)n;
        if (total > p->limits.max_input_bytes) {
            rc = set_err(p->err, p->errlen, -EFBIG,
                         "%s: more than %llu bytes (stopped at line %zu; set "
                         "INAGG_MAX_INPUT_BYTES to read more)",
                         path, (unsigned long long)p->limits.max_input_bytes, p->line_no + 1);
            goto out;
        }
        const char *pos = chunk, *end = chunk + n;
        while (pos < end) {
            const char *nl = memchr(pos, '\n', (size_t)(end - pos));
            const char *seg_end = nl ? nl : end;
            size_t seg = (size_t)(seg_end - pos);
            if (!nl || pend_len) {
                /* Carry the partial line, checking it as it grows. */
                if (memchr(pos, '\0', seg)) {
                    p->line_no++;
                    rc = nul_byte(p);
                    goto out;
                }
                if (pend_len + seg > p->limits.max_line_bytes) {
                    p->line_no++;
                    rc = line_too_long(p);
                    goto out;
                }
                if (grow((void **)&pend, &pend_cap, pend_len + seg, 1, 0) != 0) {
                    rc = set_err(p->err, p->errlen, -ENOMEM, "%s: out of memory", path);
                    goto out;
                }
                memcpy(pend + pend_len, pos, seg);
                pend_len += seg;
                if (nl) {
                    rc = feed_line(p, pend, pend_len, 0);
                    if (rc < 0)
                        goto out;
                    pend_len = 0;
                }
            } else if ((rc = feed_line(p, pos, seg, 0)) < 0) {
                goto out;
            }
            pos = nl ? nl + 1 : end;
        }
    }
    if (pend_len)
        rc = feed_line(p, pend, pend_len, 1);
out:
    free(chunk);
    free(pend);
    return rc;
}

int glm_load_libsvm_limited(const char *path, enum glm_label_kind kind,
                            const glm_read_limits_t *limits, glm_dataset_t *out, char *err,
                            size_t errlen)
{
    memset(out, 0, sizeof(*out));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return set_err(err, errlen, -errno, "%s: cannot open: %s", path, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return set_err(err, errlen, -e, "%s: cannot stat: %s", path, strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return set_err(err, errlen, -EISDIR, "%s: cannot read: is a directory", path);
    }
    if (S_ISREG(st.st_mode))
        posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    struct parser p = {.name = path, .kind = kind, .err = err, .errlen = errlen};
    p.limits = limits ? *limits : glm_read_limits_default();
    int rc = parse_fd(&p, fd, path);
    close(fd);
    if (rc < 0) {
        parser_release(&p);
        memset(out, 0, sizeof(*out));
        return rc;
    }
    return parser_finish(&p, out);
}

int glm_load_libsvm(const char *path, enum glm_label_kind kind, glm_dataset_t *out, char *err,
                    size_t errlen)
{
    return glm_load_libsvm_limited(path, kind, NULL, out, err, errlen);
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
