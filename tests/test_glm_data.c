/*
 * test_glm_data.c - the GLM dataset: the LIBSVM reader on hand-written input (every accepted
 * form and every malformed case with its file:line message), a9a, linear-time parsing,
 * nnz-balanced column partitions and slices that reproduce the full dot products, row slices,
 * 8/4-bit quantization, and the seeded synthetic generator (shapes, determinism, bad specs).
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "apps/glm/dataset.h"
#include "apps/glm/synth.h"
#include "harness.h"
#include "lib/base/util.h"

static glm_dataset_t parse_ok(const char *text, enum glm_label_kind kind)
{
    glm_dataset_t d;
    char err[256] = "";
    int rc = glm_parse_libsvm(text, strlen(text), "t", kind, &d, err, sizeof(err));
    CHECK_MSG(rc == 0, "parse failed: %s", err);
    return d;
}

/* Parsing text fails, naming "t:<line>:" and containing word. */
static void expect_error(const char *text, enum glm_label_kind kind, size_t line, const char *word)
{
    glm_dataset_t d;
    char err[256] = "";
    int rc = glm_parse_libsvm(text, strlen(text), "t", kind, &d, err, sizeof(err));
    CHECK_MSG(rc == -EINVAL, "'%s' was accepted (%d)", text, rc);
    char where[32];
    snprintf(where, sizeof(where), "t:%zu:", line);
    CHECK_MSG(strncmp(err, where, strlen(where)) == 0, "'%s': message '%s' lacks '%s'", text, err,
              where);
    CHECK_MSG(strstr(err, word) != NULL, "'%s': message '%s' lacks '%s'", text, err, word);
    CHECK(d.rows == 0 && d.row_ptr == NULL && d.col == NULL);
}

static glm_dataset_t synth_ok(const char *spec, uint64_t seed, enum glm_label_kind kind)
{
    glm_dataset_t d;
    char err[256] = "";
    int rc = glm_synthetic(spec, seed, kind, &d, err, sizeof(err));
    CHECK_MSG(rc == 0, "glm_synthetic(%s): %s", spec, err);
    return d;
}

static glm_dataset_t load_a9a(void)
{
    const char *path = harness_dataset("a9a");
    if (!path)
        SKIP("a9a not found in ../shared/datasets (the real-data checks need it)");
    glm_dataset_t d;
    char err[256] = "";
    CHECK_MSG(glm_load_libsvm(path, GLM_LABELS_BINARY, &d, err, sizeof(err)) == 0, "a9a: %s", err);
    return d;
}

/* Structural invariants every dataset must satisfy, checked on every stride-th row. */
static void check_rows(const glm_dataset_t *d, size_t stride)
{
    CHECK(d->row_ptr[0] == 0);
    CHECK(d->row_ptr[d->rows] == d->nnz);
    for (size_t r = 0; r < d->rows; r += stride) {
        CHECK(d->row_ptr[r] <= d->row_ptr[r + 1]);
        for (size_t k = d->row_ptr[r]; k < d->row_ptr[r + 1]; k++) {
            CHECK_MSG(d->col[k] < d->cols, "row %zu col %u >= cols %zu", r, d->col[k], d->cols);
            CHECK_MSG(k == d->row_ptr[r] || d->col[k] > d->col[k - 1], "row %zu not increasing", r);
            CHECK(isfinite(d->val[k]));
        }
    }
}

static void check_valid(const glm_dataset_t *d) { check_rows(d, 1); }

/* ---- parser ------------------------------------------------------------------------------ */

TEST(glm_parse_basic, 10)
{
    const char *text = "# a comment line\n"
                       "+1 1:0.5 3:-2 10:1e2\n"
                       "\n"
                       "0 2:1   # trailing comment\n"
                       "1\t4:3 \r\n"
                       "-1\n"
                       "   \n"
                       "1 5:0.25";
    glm_dataset_t d = parse_ok(text, GLM_LABELS_BINARY);
    CHECK_EQ_INT(d.rows, 5);
    CHECK_EQ_INT(d.cols, 10);
    CHECK_EQ_INT(d.nnz, 6);
    CHECK_EQ_INT(d.precision_bits, 0);
    CHECK(d.qval == NULL && d.col_scale == NULL);
    const size_t row_ptr[] = {0, 3, 4, 5, 5, 6};
    const uint32_t col[] = {0, 2, 9, 1, 3, 4};
    const float val[] = {0.5f, -2.0f, 100.0f, 1.0f, 3.0f, 0.25f};
    const float label[] = {1, -1, 1, -1, 1};
    for (size_t i = 0; i < 6; i++)
        CHECK_EQ_INT(d.row_ptr[i], row_ptr[i]);
    for (size_t k = 0; k < 6; k++) {
        CHECK_EQ_INT(d.col[k], col[k]);
        CHECK_MSG(d.val[k] == val[k], "val[%zu] = %g, want %g", k, d.val[k], val[k]);
    }
    for (size_t r = 0; r < 5; r++)
        CHECK_MSG(d.label[r] == label[r], "label[%zu] = %g", r, d.label[r]);
    check_valid(&d);
    glm_dataset_set_cols(&d, 7); /* never shrinks */
    CHECK_EQ_INT(d.cols, 10);
    glm_dataset_set_cols(&d, 123);
    CHECK_EQ_INT(d.cols, 123);
    glm_dataset_free(&d);
    CHECK(d.rows == 0 && d.row_ptr == NULL && d.val == NULL);
    glm_dataset_free(&d); /* safe on a zeroed struct */

    /* REAL labels keep their values. */
    d = parse_ok("2.5 1:1\n-0.125 2:1\n0 3:1\n", GLM_LABELS_REAL);
    CHECK(d.label[0] == 2.5f && d.label[1] == -0.125f && d.label[2] == 0.0f);
    glm_dataset_free(&d);
}

TEST(glm_parse_errors, 10)
{
    const enum glm_label_kind B = GLM_LABELS_BINARY;
    expect_error("abc 1:1\n", B, 1, "label");
    expect_error("1 1:1\n2 1:1\n", B, 2, "binary");
    expect_error("1 1:1\n-1 0:1\n", B, 2, "index 0");
    expect_error("1 -3:1\n", B, 1, "negative");
    expect_error("1 1.5:1\n", B, 1, "integer");
    expect_error("1 :1\n", B, 1, "index");
    expect_error("1 3:1 3:2\n", B, 1, "increasing");
    expect_error("1 1:1\n1 5:1 2:1\n", B, 2, "increasing");
    expect_error("1 2:x\n", B, 1, "not a number");
    expect_error("1 2:1junk\n", B, 1, "garbage");
    expect_error("1 2:1:3\n", B, 1, "garbage");
    expect_error("hello\n", B, 1, "label");
    expect_error("1 1:1\n\n-1 2:1 3\n", B, 3, "':'");
    expect_error("1 2:nan\n", B, 1, "finite");
    expect_error("1 2:1e40\n", B, 1, "finite");
    expect_error("inf 2:1\n", GLM_LABELS_REAL, 1, "finite");
    expect_error("1 99999999999:1\n", B, 1, "too large");
    expect_error("", B, 1, "empty");
    expect_error("\n\n# only comments\n   \n", B, 4, "empty");
    expect_error("1 1:1\n-1 3:", B, 2, "truncated");
    expect_error("1 1:1\n-1 3", B, 2, "truncated");
    /* A last line that parses completely is fine without its '\n'. */
    glm_dataset_t t = parse_ok("1 1:1\n-1 3:0.", B);
    CHECK_EQ_INT(t.rows, 2);
    glm_dataset_free(&t);

    /* "2" is a fine REAL label. */
    glm_dataset_t d = parse_ok("1 1:1\n2 1:1\n", GLM_LABELS_REAL);
    CHECK(d.label[1] == 2.0f);
    glm_dataset_free(&d);
    /* A NUL byte is not text. */
    glm_dataset_t e;
    char err[256];
    CHECK(glm_parse_libsvm("1 1:1\n1 2\0:1\n", 12, "t", B, &e, err, sizeof(err)) == -EINVAL);
    CHECK_MSG(strstr(err, "t:2:") != NULL, "%s", err);
}

/* Every number is parsed to the float strtof gives (the reader has a fast path for plain
 * decimals, which must agree bit for bit). */
TEST(glm_parse_values_exact, 10)
{
    static const char *const fixed[] = {
        "0",        "-0",         "1.",         ".5",           "+.25",          "16777216",
        "16777217", "0.1",        "3.14159265", "0.0000000001", "0.00000000001", "1e-3",
        "-2.5E+2",  "123456.789", "0x1p-3",     "9.999999999",  "16777215.5"};
    util_rng_t rng;
    util_rng_seed(&rng, 21);
    char text[64];
    for (size_t i = 0; i < 5000; i++) {
        const char *num = text;
        if (i < INAGG_ARRAY_LEN(fixed)) {
            num = fixed[i];
        } else {
            uint64_t x = util_rng_next(&rng);
            unsigned digits = (unsigned)(x % 100000000u);
            int point = (int)((x >> 40) % 12);
            char d[16];
            int n = snprintf(d, sizeof(d), "%u", digits);
            if (point >= n)
                snprintf(text, sizeof(text), "%s0.%0*d%s", (x >> 63) ? "-" : "", point - n, 0, d);
            else
                snprintf(text, sizeof(text), "%s%.*s.%s", (x >> 63) ? "-" : "", n - point, d,
                         d + n - point);
        }
        char line[96];
        snprintf(line, sizeof(line), "1 1:%s\n", num);
        glm_dataset_t d;
        char err[256] = "";
        CHECK_MSG(
            glm_parse_libsvm(line, strlen(line), "t", GLM_LABELS_BINARY, &d, err, sizeof(err)) == 0,
            "'%s': %s", num, err);
        float want = strtof(num, NULL);
        CHECK_MSG(memcmp(&d.val[0], &want, sizeof(float)) == 0, "'%s' -> %.9g, strtof %.9g", num,
                  d.val[0], want);
        glm_dataset_free(&d);
    }
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    CHECK_MSG(f != NULL, "cannot create %s", path);
    CHECK(fwrite(text, 1, strlen(text), f) == strlen(text));
    CHECK(fclose(f) == 0);
}

TEST(glm_load_files, 10)
{
    char dir[] = "/tmp/inagg-glm-test-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char good[128], empty[128], comments[128], bad[128], missing[128];
    snprintf(good, sizeof(good), "%s/good", dir);
    snprintf(empty, sizeof(empty), "%s/empty", dir);
    snprintf(comments, sizeof(comments), "%s/comments", dir);
    snprintf(bad, sizeof(bad), "%s/bad", dir);
    snprintf(missing, sizeof(missing), "%s/missing", dir);
    write_file(good, "1 1:1 4:2\n0 2:0.5\n-1 3:1");
    write_file(empty, "");
    write_file(comments, "# nothing\n\n  # here\n");
    write_file(bad, "1 1:1\n1 2:1\n-1 7:1 6:1\n");

    glm_dataset_t d;
    char err[512] = "";
    int rc_good = glm_load_libsvm(good, GLM_LABELS_BINARY, &d, err, sizeof(err));
    size_t rows = d.rows, cols = d.cols, nnz = d.nnz;
    glm_dataset_free(&d);
    char err_empty[512] = "", err_comments[512] = "", err_bad[512] = "", err_missing[512] = "",
         err_dir[512] = "";
    int rc_empty = glm_load_libsvm(empty, GLM_LABELS_BINARY, &d, err_empty, sizeof(err_empty));
    int rc_comments =
        glm_load_libsvm(comments, GLM_LABELS_BINARY, &d, err_comments, sizeof(err_comments));
    int rc_bad = glm_load_libsvm(bad, GLM_LABELS_BINARY, &d, err_bad, sizeof(err_bad));
    int rc_missing =
        glm_load_libsvm(missing, GLM_LABELS_BINARY, &d, err_missing, sizeof(err_missing));
    int rc_dir = glm_load_libsvm(dir, GLM_LABELS_BINARY, &d, err_dir, sizeof(err_dir));
    unlink(good);
    unlink(empty);
    unlink(comments);
    unlink(bad);
    CHECK(rmdir(dir) == 0);

    CHECK_MSG(rc_good == 0, "%s", err);
    CHECK_EQ_INT(rows, 3);
    CHECK_EQ_INT(cols, 4);
    CHECK_EQ_INT(nnz, 4);
    CHECK(rc_empty == -EINVAL && strstr(err_empty, empty) && strstr(err_empty, "empty"));
    CHECK_MSG(rc_comments == -EINVAL && strstr(err_comments, "empty"), "%s", err_comments);
    char where[160];
    snprintf(where, sizeof(where), "%s:3:", bad);
    CHECK_MSG(rc_bad == -EINVAL && strstr(err_bad, where) && strstr(err_bad, "increasing"), "%s",
              err_bad);
    CHECK_MSG(rc_missing == -ENOENT && strstr(err_missing, missing) &&
                  strstr(err_missing, "cannot"),
              "%s", err_missing);
    CHECK_MSG(rc_dir == -EISDIR && strstr(err_dir, "directory"), "%s", err_dir);
}

TEST(glm_a9a_load, 20)
{
    uint64_t t0 = util_now_ns();
    glm_dataset_t d = load_a9a();
    double secs = (double)(util_now_ns() - t0) / 1e9;
    CHECK_MSG(secs < 2.0, "a9a took %.2f s to load", secs);
    CHECK_EQ_INT(d.rows, 32561);
    CHECK_EQ_INT(d.cols, 123);
    CHECK_MSG(d.nnz > 400000 && d.nnz < 500000, "nnz %zu", d.nnz);
    size_t pos = 0;
    for (size_t r = 0; r < d.rows; r++) {
        CHECK_MSG(d.label[r] == 1.0f || d.label[r] == -1.0f, "label[%zu] = %g", r, d.label[r]);
        pos += d.label[r] > 0;
    }
    CHECK_MSG(pos > 7000 && pos < 9000, "%zu positives", pos); /* about 24% earn > 50K */
    for (size_t k = 0; k < d.nnz; k++)
        CHECK(d.val[k] == 1.0f);
    check_valid(&d);
    glm_dataset_free(&d);
}

static size_t put_uint(char *out, unsigned v)
{
    char tmp[16];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    return n;
}

/* Rows of 10 features "index:+-d.dddd" (written by hand: snprintf would dominate the test). */
static char *make_libsvm_text(size_t rows, size_t *len)
{
    char *buf = malloc(rows * 160 + 1);
    CHECK(buf != NULL);
    util_rng_t rng;
    util_rng_seed(&rng, 5);
    size_t n = 0;
    for (size_t r = 0; r < rows; r++) {
        buf[n++] = util_rng_next(&rng) & 1 ? '+' : '-';
        buf[n++] = '1';
        unsigned idx = 0;
        for (int j = 0; j < 10; j++) {
            uint64_t x = util_rng_next(&rng);
            idx += 1 + (unsigned)(x % 50);
            buf[n++] = ' ';
            n += put_uint(buf + n, idx);
            buf[n++] = ':';
            if ((x >> 20) & 1)
                buf[n++] = '-';
            n += put_uint(buf + n, (unsigned)((x >> 21) % 3));
            buf[n++] = '.';
            unsigned frac = (unsigned)((x >> 32) % 10000);
            for (unsigned div = 1000; div; div /= 10)
                buf[n++] = (char)('0' + frac / div % 10);
        }
        buf[n++] = '\n';
    }
    *len = n;
    return buf;
}

/* CPU time of this thread: other processes on a busy machine do not count. */
static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double best_parse_seconds(const char *buf, size_t len, int reps, size_t want_rows)
{
    double best = 1e9;
    for (int i = 0; i < reps; i++) {
        glm_dataset_t d;
        char err[256] = "";
        double t0 = cpu_seconds();
        int rc = glm_parse_libsvm(buf, len, "gen", GLM_LABELS_BINARY, &d, err, sizeof(err));
        double s = cpu_seconds() - t0;
        CHECK_MSG(rc == 0, "%s", err);
        CHECK_EQ_INT(d.rows, want_rows);
        glm_dataset_free(&d);
        if (s < best)
            best = s;
    }
    return best;
}

/* 8x the input must cost about 8x the CPU time: a quadratic parse would take 64x. The line sits
 * far from both (20x), since on a loaded machine the larger input's cache misses and page faults
 * alone have cost it up to 1.7 times its share; best of a few runs. */
TEST(glm_parse_linear_time, 60)
{
    size_t small_len, big_len;
    char *small = make_libsvm_text(12500, &small_len);
    char *big = make_libsvm_text(100000, &big_len);
    double t_small = best_parse_seconds(small, small_len, 7, 12500);
    double t_big = best_parse_seconds(big, big_len, 3, 100000);
    free(small);
    free(big);
    double ratio = t_big / t_small;
    double mb_per_s = (double)big_len / 1e6 / t_big;
    CHECK_MSG(ratio < 20.0, "8x the input took %.2fx the time (%.3f s vs %.3f s)", ratio, t_big,
              t_small);
    CHECK_MSG(mb_per_s > 5.0, "parsing at %.1f MB/s", mb_per_s);
}

/* ---- partitions and slices ----------------------------------------------------------------- */

static void check_bounds(const glm_dataset_t *d, int parts, const size_t *bounds)
{
    CHECK_EQ_INT(bounds[0], 0);
    CHECK_EQ_INT(bounds[parts], d->cols);
    for (int p = 0; p < parts; p++) {
        if (d->cols >= (size_t)parts)
            CHECK_MSG(bounds[p] < bounds[p + 1], "part %d is empty", p);
        else
            CHECK(bounds[p] <= bounds[p + 1]);
    }
}

/* Slices of every part together hold every nonzero, and their dot products add up. */
static void check_slices_reproduce(const glm_dataset_t *d, int parts, const size_t *bounds,
                                   size_t *max_part_nnz)
{
    glm_dataset_t *slice = calloc((size_t)parts, sizeof(*slice));
    float *x = malloc(d->cols * sizeof(float));
    CHECK(slice && x);
    util_rng_t rng;
    util_rng_seed(&rng, 11);
    for (size_t c = 0; c < d->cols; c++)
        x[c] = (float)(util_rng_double(&rng) * 2 - 1);
    size_t total = 0;
    *max_part_nnz = 0;
    for (int p = 0; p < parts; p++) {
        char err[256] = "";
        CHECK_MSG(
            glm_dataset_column_slice(d, bounds[p], bounds[p + 1], &slice[p], err, sizeof(err)) == 0,
            "%s", err);
        CHECK_EQ_INT(slice[p].rows, d->rows);
        check_valid(&slice[p]);
        for (size_t k = 0; k < slice[p].nnz; k++)
            CHECK(slice[p].col[k] >= bounds[p] && slice[p].col[k] < bounds[p + 1]);
        CHECK(memcmp(slice[p].label, d->label, d->rows * sizeof(float)) == 0);
        total += slice[p].nnz;
        if (slice[p].nnz > *max_part_nnz)
            *max_part_nnz = slice[p].nnz;
    }
    CHECK_EQ_INT(total, d->nnz);
    for (size_t r = 0; r < d->rows; r++) {
        double full = glm_row_dot(d, r, x, 0), sum = 0, mag = 0;
        for (int p = 0; p < parts; p++)
            sum += glm_row_dot(&slice[p], r, x + bounds[p], bounds[p]);
        for (size_t k = d->row_ptr[r]; k < d->row_ptr[r + 1]; k++)
            mag += fabs((double)d->val[k] * x[d->col[k]]);
        CHECK_MSG(fabs(sum - full) <= 1e-9 * mag + 1e-300, "row %zu: %.17g vs %.17g", r, sum, full);
    }
    for (int p = 0; p < parts; p++)
        glm_dataset_free(&slice[p]);
    free(slice);
    free(x);
}

TEST(glm_partition_balanced, 20)
{
    glm_dataset_t d = synth_ok("sparse:4000x1000:0.02", 3, GLM_LABELS_BINARY);
    size_t bounds[5];
    glm_partition_columns(&d, 4, bounds);
    check_bounds(&d, 4, bounds);
    size_t max_nnz;
    check_slices_reproduce(&d, 4, bounds, &max_nnz);
    double ideal = (double)d.nnz / 4;
    CHECK_MSG((double)max_nnz <= 1.5 * ideal, "largest part %zu nnz, ideal %.0f", max_nnz, ideal);
    CHECK_MSG((double)max_nnz <= 1.05 * ideal, "largest part %zu nnz, ideal %.0f", max_nnz, ideal);

    /* More parts than columns: valid, possibly empty parts. */
    glm_dataset_t tiny = parse_ok("1 1:1 3:1\n-1 2:1\n", GLM_LABELS_BINARY);
    size_t tb[6];
    glm_partition_columns(&tiny, 5, tb);
    check_bounds(&tiny, 5, tb);
    check_slices_reproduce(&tiny, 5, tb, &max_nnz);
    glm_partition_columns(&tiny, 1, tb);
    CHECK(tb[0] == 0 && tb[1] == 3);

    /* One heavy column: it gets a part of its own, the rest share the others. */
    glm_dataset_t skew =
        parse_ok("1 1:1 2:1\n1 1:1 3:1\n1 1:1 4:1\n1 1:1 5:1\n1 1:1\n1 1:1\n", GLM_LABELS_BINARY);
    glm_partition_columns(&skew, 2, tb);
    CHECK_EQ_INT(tb[1], 1);
    char err[128];
    glm_dataset_t bad;
    CHECK(glm_dataset_column_slice(&skew, 3, 2, &bad, err, sizeof(err)) == -EINVAL);
    CHECK(glm_dataset_column_slice(&skew, 0, 6, &bad, err, sizeof(err)) == -EINVAL);
    glm_dataset_free(&skew);
    glm_dataset_free(&tiny);
    glm_dataset_free(&d);
}

TEST(glm_partition_a9a, 20)
{
    glm_dataset_t d = load_a9a();
    for (int parts = 1; parts <= 8; parts *= 2) {
        size_t bounds[9];
        glm_partition_columns(&d, parts, bounds);
        check_bounds(&d, parts, bounds);
        size_t max_nnz;
        check_slices_reproduce(&d, parts, bounds, &max_nnz);
    }
    glm_dataset_free(&d);
}

TEST(glm_row_slice, 10)
{
    glm_dataset_t d = synth_ok("sparse:300x200:0.05", 9, GLM_LABELS_BINARY);
    char err[256] = "";
    CHECK_MSG(glm_dataset_quantize(&d, 8, err, sizeof(err)) == 0, "%s", err);
    glm_dataset_t s;
    CHECK_MSG(glm_dataset_row_slice(&d, 40, 170, &s, err, sizeof(err)) == 0, "%s", err);
    CHECK_EQ_INT(s.rows, 130);
    CHECK_EQ_INT(s.cols, d.cols);
    CHECK_EQ_INT(s.nnz, d.row_ptr[170] - d.row_ptr[40]);
    CHECK_EQ_INT(s.precision_bits, 8);
    check_valid(&s);
    for (size_t r = 0; r < s.rows; r++) {
        size_t a = d.row_ptr[40 + r], n = d.row_ptr[41 + r] - a;
        CHECK_EQ_INT(s.row_ptr[r + 1] - s.row_ptr[r], n);
        CHECK(memcmp(s.col + s.row_ptr[r], d.col + a, n * sizeof(uint32_t)) == 0);
        CHECK(memcmp(s.val + s.row_ptr[r], d.val + a, n * sizeof(float)) == 0);
        CHECK(memcmp(s.qval + s.row_ptr[r], d.qval + a, n) == 0);
        CHECK(s.label[r] == d.label[40 + r]);
    }
    CHECK(memcmp(s.col_scale, d.col_scale, d.cols * sizeof(float)) == 0);
    glm_dataset_free(&s);

    CHECK(glm_dataset_row_slice(&d, 7, 7, &s, err, sizeof(err)) == 0);
    CHECK(s.rows == 0 && s.nnz == 0 && s.row_ptr[0] == 0);
    glm_dataset_free(&s);
    CHECK(glm_dataset_row_slice(&d, 5, 4, &s, err, sizeof(err)) == -EINVAL);
    CHECK(glm_dataset_row_slice(&d, 0, 301, &s, err, sizeof(err)) == -EINVAL);
    CHECK_MSG(strstr(err, "301") != NULL, "%s", err);

    /* The tail split is two row slices. */
    glm_dataset_t train, test;
    CHECK_MSG(glm_split_tail(&d, 0.25, &train, &test, err, sizeof(err)) == 0, "%s", err);
    CHECK_EQ_INT(train.rows, 225);
    CHECK_EQ_INT(test.rows, 75);
    CHECK_EQ_INT(train.nnz + test.nnz, d.nnz);
    CHECK(test.label[74] == d.label[299]);
    glm_dataset_free(&train);
    glm_dataset_free(&test);
    CHECK(glm_split_tail(&d, 1.0, &train, &test, err, sizeof(err)) == -EINVAL);
    glm_dataset_free(&d);
}

/* ---- low precision ------------------------------------------------------------------------ */

static void check_quantized(glm_dataset_t *d, int bits)
{
    const int qmax = (1 << (bits - 1)) - 1;
    float *orig = malloc((d->nnz ? d->nnz : 1) * sizeof(float));
    CHECK(orig != NULL);
    memcpy(orig, d->val, d->nnz * sizeof(float));
    char err[256] = "";
    CHECK_MSG(glm_dataset_quantize(d, bits, err, sizeof(err)) == 0, "%s", err);
    CHECK_EQ_INT(d->precision_bits, bits);
    CHECK(d->qval != NULL && d->col_scale != NULL);
    CHECK_EQ_INT(glm_dataset_value_bytes(d), (d->nnz * (size_t)bits + 7) / 8);
    int *hit_max = calloc(d->cols, sizeof(int));
    CHECK(hit_max != NULL);
    for (size_t k = 0; k < d->nnz; k++) {
        int q = d->qval[k];
        float s = d->col_scale[d->col[k]];
        CHECK_MSG(q >= -qmax && q <= qmax, "code %d out of range at %d bits", q, bits);
        CHECK(d->val[k] == (float)q * s);
        double e = fabs((double)d->val[k] - (double)orig[k]);
        CHECK_MSG(e <= 0.5 * s * (1 + 1e-6) + 1e-6 * fabs(orig[k]),
                  "[%zu] %g -> %g, error %g > scale/2 = %g", k, orig[k], d->val[k], e, 0.5 * s);
        if (q == qmax || q == -qmax)
            hit_max[d->col[k]] = 1;
    }
    /* The largest magnitude of each nonzero column maps to the extreme code. */
    for (size_t k = 0; k < d->nnz; k++)
        CHECK_MSG(hit_max[d->col[k]], "column %u never uses code +-%d", d->col[k], qmax);
    free(hit_max);
    free(orig);
}

TEST(glm_quantize, 10)
{
    glm_dataset_t d = synth_ok("dense:300x40", 4, GLM_LABELS_BINARY);
    glm_dataset_set_cols(&d, 43); /* three all-zero columns */
    CHECK_EQ_INT(glm_dataset_value_bytes(&d), d.nnz * 4);
    glm_dataset_t d4;
    char err[256] = "";
    CHECK(glm_dataset_row_slice(&d, 0, d.rows, &d4, err, sizeof(err)) == 0);
    check_quantized(&d, 8);
    CHECK_EQ_INT(glm_dataset_value_bytes(&d), d.nnz);
    for (size_t c = 40; c < 43; c++)
        CHECK(d.col_scale[c] == 1.0f);
    glm_dataset_set_cols(&d, 50); /* new columns get scale 1 too */
    CHECK(d.col_scale[49] == 1.0f);
    check_quantized(&d4, 4);
    CHECK_EQ_INT(glm_dataset_value_bytes(&d4), (d4.nnz + 1) / 2);

    glm_dataset_t s = synth_ok("sparse:500x300:0.03", 4, GLM_LABELS_BINARY);
    check_quantized(&s, 4);
    glm_dataset_free(&s);

    CHECK(glm_dataset_quantize(&d, 3, err, sizeof(err)) == -EINVAL);
    CHECK_MSG(strstr(err, "3") && strstr(err, "8 or 4"), "%s", err);
    CHECK_EQ_INT(d.precision_bits, 8);
    glm_dataset_free(&d);
    glm_dataset_free(&d4);
}

TEST(glm_quantize_a9a, 20)
{
    glm_dataset_t d = load_a9a();
    for (int bits = 4; bits <= 8; bits += 4) {
        char err[256] = "";
        CHECK_MSG(glm_dataset_quantize(&d, bits, err, sizeof(err)) == 0, "%s", err);
        for (size_t k = 0; k < d.nnz; k++)
            CHECK_MSG(d.val[k] == 1.0f, "%d bits: a9a value %zu became %.9g", bits, k, d.val[k]);
        CHECK_EQ_INT(glm_dataset_value_bytes(&d), (d.nnz * (size_t)bits + 7) / 8);
    }
    glm_dataset_free(&d);
}

/* ---- synthetic ------------------------------------------------------------------------------ */

static void check_synthetic(const char *spec, size_t rows, size_t cols, double density)
{
    glm_dataset_t d = synth_ok(spec, 1, GLM_LABELS_BINARY);
    CHECK_EQ_INT(d.rows, rows);
    CHECK_EQ_INT(d.cols, cols);
    const size_t stride = d.nnz > 1000000 ? 7 : 1; /* big ones on a sample, for the ASan build */
    check_rows(&d, stride);
    double want = density * (double)rows * (double)cols;
    if (density == 1.0)
        CHECK_EQ_INT(d.nnz, rows * cols);
    else
        CHECK_MSG(fabs((double)d.nnz - want) <= 0.03 * want + 1, "%s: nnz %zu, expected ~%.0f",
                  spec, d.nnz, want);
    size_t pos = 0;
    for (size_t r = 0; r < d.rows; r++) {
        CHECK(d.label[r] == 1.0f || d.label[r] == -1.0f);
        pos += d.label[r] > 0;
        CHECK_MSG(d.row_ptr[r + 1] > d.row_ptr[r], "%s: row %zu is empty", spec, r);
    }
    double frac = (double)pos / (double)d.rows;
    CHECK_MSG(frac > 0.2 && frac < 0.8, "%s: %.1f%% positive", spec, 100 * frac);
    if (strncmp(spec, "dense", 5) != 0 && strcmp(spec, "gisette") != 0) {
        for (size_t r = 0; r < d.rows; r += 97) { /* sparse rows have unit norm */
            double sq = 0;
            for (size_t k = d.row_ptr[r]; k < d.row_ptr[r + 1]; k++) {
                CHECK(d.val[k] > 0);
                sq += (double)d.val[k] * d.val[k];
            }
            CHECK_MSG(fabs(sq - 1) < 1e-5, "%s: row %zu has squared norm %g", spec, r, sq);
        }
    } else {
        double sq = 0;
        size_t sampled = 0;
        for (size_t r = 0; r < d.rows; r += stride, sampled++)
            for (size_t k = d.row_ptr[r]; k < d.row_ptr[r + 1]; k++)
                sq += (double)d.val[k] * d.val[k];
        double per_row = sq / (double)sampled; /* N(0,1)/sqrt(D): about 1 per row */
        CHECK_MSG(per_row > 0.9 && per_row < 1.1, "%s: mean squared row norm %g", spec, per_row);
    }
    glm_dataset_free(&d);
}

TEST(glm_synth_shapes, 60)
{
    check_synthetic("gisette", 6000, 5000, 1.0);
    check_synthetic("rcv1", 20242, 47236, 0.0016);
    check_synthetic("real-sim", 72309, 20958, 0.00245);
    check_synthetic("dense:50x20", 50, 20, 1.0);
    check_synthetic("sparse:2000x300:0.05", 2000, 300, 0.05);
    check_synthetic("sparse:200x10:1", 200, 10, 1.0);
    check_synthetic("sparse:3000x2000:0.0001", 3000, 2000, 0.0005); /* k = max(1, 0.2) = 1 */

    /* REAL labels are the margins whose signs the BINARY labels are. */
    glm_dataset_t b = synth_ok("sparse:1000x500:0.02", 8, GLM_LABELS_BINARY);
    glm_dataset_t r = synth_ok("sparse:1000x500:0.02", 8, GLM_LABELS_REAL);
    size_t differ = 0;
    for (size_t i = 0; i < b.rows; i++) {
        CHECK(isfinite(r.label[i]));
        CHECK(b.label[i] == (r.label[i] > 0 ? 1.0f : -1.0f));
        differ += r.label[i] != b.label[i];
    }
    CHECK(differ > b.rows / 2);
    glm_dataset_free(&b);
    glm_dataset_free(&r);
}

static int same_data(const glm_dataset_t *a, const glm_dataset_t *b)
{
    return a->rows == b->rows && a->cols == b->cols && a->nnz == b->nnz &&
           memcmp(a->row_ptr, b->row_ptr, (a->rows + 1) * sizeof(size_t)) == 0 &&
           memcmp(a->col, b->col, a->nnz * sizeof(uint32_t)) == 0 &&
           memcmp(a->val, b->val, a->nnz * sizeof(float)) == 0 &&
           memcmp(a->label, b->label, a->rows * sizeof(float)) == 0;
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t data_hash(const glm_dataset_t *d)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t r = 0; r <= d->rows; r++) {
        uint64_t v = d->row_ptr[r];
        h = fnv1a(h, &v, sizeof(v));
    }
    h = fnv1a(h, d->col, d->nnz * sizeof(uint32_t));
    h = fnv1a(h, d->val, d->nnz * sizeof(float));
    return fnv1a(h, d->label, d->rows * sizeof(float));
}

TEST(glm_synth_deterministic, 20)
{
    const char *specs[] = {"sparse:3000x2000:0.01", "dense:200x50", "sparse:100x40:0.5"};
    for (size_t i = 0; i < INAGG_ARRAY_LEN(specs); i++) {
        glm_dataset_t a = synth_ok(specs[i], 1, GLM_LABELS_BINARY);
        glm_dataset_t b = synth_ok(specs[i], 1, GLM_LABELS_BINARY);
        glm_dataset_t c = synth_ok(specs[i], 2, GLM_LABELS_BINARY);
        CHECK_MSG(same_data(&a, &b), "%s: seed 1 twice differs", specs[i]);
        CHECK_MSG(!same_data(&a, &c), "%s: seeds 1 and 2 agree", specs[i]);
        glm_dataset_free(&a);
        glm_dataset_free(&b);
        glm_dataset_free(&c);
    }
    /* The same bytes on every machine and build: fixed checksums. */
    glm_dataset_t s = synth_ok("sparse:200x100:0.05", 42, GLM_LABELS_BINARY);
    glm_dataset_t d = synth_ok("dense:30x7", 42, GLM_LABELS_REAL);
    uint64_t hs = data_hash(&s), hd = data_hash(&d);
    glm_dataset_free(&s);
    glm_dataset_free(&d);
    CHECK_MSG(hs == 0x56c8492852ed3d01ull && hd == 0xd5e4d1d2dd02968cull,
              "checksums sparse %#llx dense %#llx", (unsigned long long)hs, (unsigned long long)hd);
}

TEST(glm_synth_bad_specs, 10)
{
    const char *bad[] = {"",
                         "foo",
                         "Gisette",
                         "dense:0x5",
                         "dense:5x0",
                         "dense:5",
                         "dense:5x",
                         "dense:x5",
                         "dense:-5x5",
                         "dense:5x5junk",
                         "dense:100000x100000",
                         "sparse:10x10",
                         "sparse:10x10:0",
                         "sparse:10x10:1.5",
                         "sparse:10x10:-0.5",
                         "sparse:10x10:abc",
                         "sparse:10x10:nan",
                         "sparse:10x10:0.5x"};
    for (size_t i = 0; i < INAGG_ARRAY_LEN(bad); i++) {
        glm_dataset_t d;
        char err[256] = "";
        int rc = glm_synthetic(bad[i], 1, GLM_LABELS_BINARY, &d, err, sizeof(err));
        CHECK_MSG(rc == -EINVAL, "spec '%s' was accepted (%d)", bad[i], rc);
        char quoted[64];
        snprintf(quoted, sizeof(quoted), "'%s'", bad[i]);
        CHECK_MSG(strstr(err, quoted) != NULL, "'%s': message '%s' does not name it", bad[i], err);
        CHECK(d.rows == 0 && d.val == NULL);
    }
    char err[256] = "";
    glm_dataset_t d;
    CHECK(glm_synthetic("sparse:10x10:2", 1, GLM_LABELS_BINARY, &d, err, sizeof(err)) == -EINVAL);
    CHECK_MSG(strstr(err, "(0, 1]") != NULL, "%s", err);
    CHECK(glm_synthetic("dense:100000x100000", 1, GLM_LABELS_BINARY, &d, err, sizeof(err)) ==
          -EINVAL);
    CHECK_MSG(strstr(err, "limit") != NULL, "%s", err);
}

/* The LIBSVM writer (what liblinear reads for `inagg train`'s reference) gives back every value
 * bit for bit through the reader: hexadecimal floats, negative, tiny (subnormal), huge, ones
 * and the float nearest 0.1; real labels too. */
TEST(glm_libsvm_write_round_trips_exactly, 10)
{
    static const char text[] = "+1 1:1 2:-0.1 3:1e-40 5:3.4e38 9:0.333333343\n"
                               "-1 2:123456.789 4:-7.5e-8\n"
                               "0.25 1:-1 7:2\n";
    char err[256];
    glm_dataset_t a, b;
    CHECK_MSG(
        glm_parse_libsvm(text, sizeof(text) - 1, "t", GLM_LABELS_REAL, &a, err, sizeof(err)) == 0,
        "%s", err);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(f && glm_dataset_write_libsvm(&a, f) == 0);
    fclose(f);
    CHECK_MSG(strstr(buf, "+1 1:0x1p+0 2:-0x1.99999ap-4 3:"), "%s", buf);
    CHECK_MSG(glm_parse_libsvm(buf, len, "w", GLM_LABELS_REAL, &b, err, sizeof(err)) == 0, "%s",
              err);
    CHECK_EQ_INT(b.rows, a.rows);
    CHECK_EQ_INT(b.nnz, a.nnz);
    CHECK(memcmp(a.label, b.label, a.rows * sizeof(float)) == 0);
    CHECK(memcmp(a.row_ptr, b.row_ptr, (a.rows + 1) * sizeof(size_t)) == 0);
    CHECK(memcmp(a.col, b.col, a.nnz * sizeof(uint32_t)) == 0);
    for (size_t k = 0; k < a.nnz; k++)
        CHECK_MSG(memcmp(&a.val[k], &b.val[k], sizeof(float)) == 0, "value %zu: %a became %a", k,
                  (double)a.val[k], (double)b.val[k]);
    free(buf);
    glm_dataset_free(&a);
    glm_dataset_free(&b);
}
