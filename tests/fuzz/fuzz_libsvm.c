/*
 * fuzz_libsvm.c - the LIBSVM reader (glm_parse_libsvm, src/apps/glm/dataset.c). libFuzzer entry
 * point; also builds under AFL++.
 *
 * Input: the file's bytes (at most 64 KiB), given in a heap buffer of exactly that size and
 * without a terminating NUL (ASan sees any read past it). Both label kinds are tried. Checked:
 * a refusal leaves the dataset zeroed with a message; an accepted file gives a well-formed
 * CSR matrix (row offsets from 0 to nnz, non-decreasing; columns strictly increasing within a
 * row and below cols; cols the largest index; finite values and labels, binary labels -1 or
 * +1), binary acceptance implies real acceptance with the same matrix and the labels mapped,
 * and the dataset printed back as LIBSVM text parses to the same bits.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/glm/dataset.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: invariant violated: %s\n", __FILE__, __LINE__, #cond);         \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* What the reader may answer to bytes it refuses: malformed, too large, or no memory. */
static int refusal_code(int rc) { return rc == -EINVAL || rc == -EFBIG || rc == -ENOMEM; }

static int is_zeroed(const glm_dataset_t *d)
{
    static const glm_dataset_t zero;
    return memcmp(d, &zero, sizeof(*d)) == 0;
}

static void check_shape(const glm_dataset_t *d, enum glm_label_kind kind)
{
    CHECK(d->rows >= 1 && d->row_ptr && d->label && d->col && d->val);
    CHECK(d->row_ptr[0] == 0 && d->row_ptr[d->rows] == d->nnz);
    CHECK(d->precision_bits == 0 && d->qval == NULL && d->col_scale == NULL);
    size_t max_col = 0;
    for (size_t r = 0; r < d->rows; r++) {
        CHECK(d->row_ptr[r] <= d->row_ptr[r + 1]);
        CHECK(isfinite(d->label[r]));
        if (kind == GLM_LABELS_BINARY)
            CHECK(d->label[r] == 1.0f || d->label[r] == -1.0f);
        for (size_t k = d->row_ptr[r]; k < d->row_ptr[r + 1]; k++) {
            CHECK(d->col[k] < d->cols);
            CHECK(k == d->row_ptr[r] || d->col[k] > d->col[k - 1]);
            CHECK(isfinite(d->val[k]));
            if ((size_t)d->col[k] + 1 > max_col)
                max_col = (size_t)d->col[k] + 1;
        }
    }
    CHECK(d->cols == max_col);
}

static int same_bits(const float *a, const float *b, size_t n)
{
    return n == 0 || memcmp(a, b, n * sizeof(float)) == 0;
}

static void check_same_matrix(const glm_dataset_t *a, const glm_dataset_t *b)
{
    CHECK(a->rows == b->rows && a->cols == b->cols && a->nnz == b->nnz);
    CHECK(memcmp(a->row_ptr, b->row_ptr, (a->rows + 1) * sizeof(size_t)) == 0);
    CHECK(a->nnz == 0 || memcmp(a->col, b->col, a->nnz * sizeof(uint32_t)) == 0);
    CHECK(same_bits(a->val, b->val, a->nnz));
}

/* Print d as LIBSVM text ("%.9g" gives back every float exactly) and parse it again. */
static void check_round_trip(const glm_dataset_t *d, enum glm_label_kind kind)
{
    size_t cap = d->rows * 20 + d->nnz * 30 + 1, len = 0;
    char *text = malloc(cap);
    CHECK(text != NULL);
    for (size_t r = 0; r < d->rows; r++) {
        len += (size_t)snprintf(text + len, cap - len, "%.9g", (double)d->label[r]);
        for (size_t k = d->row_ptr[r]; k < d->row_ptr[r + 1]; k++)
            len += (size_t)snprintf(text + len, cap - len, " %u:%.9g", d->col[k] + 1,
                                    (double)d->val[k]);
        len += (size_t)snprintf(text + len, cap - len, "\n");
        CHECK(len < cap);
    }
    glm_dataset_t again;
    char err[256];
    CHECK(glm_parse_libsvm(text, len, "round-trip", kind, &again, err, sizeof(err)) == 0);
    check_same_matrix(d, &again);
    CHECK(same_bits(d->label, again.label, d->rows));
    glm_dataset_free(&again);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536)
        return 0;
    char *buf = malloc(size ? size : 1);
    CHECK(buf != NULL);
    memcpy(buf, data, size);
    glm_dataset_t bin, real;
    char err[256];
    err[0] = '\0';
    int rb = glm_parse_libsvm(buf, size, "fuzz", GLM_LABELS_BINARY, &bin, err, sizeof(err));
    if (rb != 0) {
        CHECK(refusal_code(rb) && is_zeroed(&bin) && err[0] != '\0');
    } else {
        check_shape(&bin, GLM_LABELS_BINARY);
        check_round_trip(&bin, GLM_LABELS_BINARY);
    }
    err[0] = '\0';
    int rr = glm_parse_libsvm(buf, size, "fuzz", GLM_LABELS_REAL, &real, err, sizeof(err));
    if (rr != 0) {
        CHECK(refusal_code(rr) && is_zeroed(&real) && err[0] != '\0');
        CHECK(rb != 0); /* binary labels are real labels too */
    } else {
        check_shape(&real, GLM_LABELS_REAL);
        check_round_trip(&real, GLM_LABELS_REAL);
        if (rb == 0) {
            check_same_matrix(&bin, &real);
            for (size_t r = 0; r < real.rows; r++)
                CHECK(bin.label[r] == (real.label[r] == 1.0f ? 1.0f : -1.0f));
        }
    }
    glm_dataset_free(&bin);
    glm_dataset_free(&real);
    free(buf);
    return 0;
}
