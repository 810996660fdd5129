/*
 * dataset.h - the sparse training set of the GLM trainers: a CSR matrix of samples x features
 * with one label per sample, the LIBSVM reader, row/column slicing for data and model
 * parallelism, low-precision (8/4-bit) features, and the row kernels the trainers run.
 *
 * Errors: functions return 0 on success, a negative errno on failure with a message
 * "file:line: what" in err: -EINVAL for malformed input or a bad argument, -EFBIG past a size
 * limit (INAGG_MAX_INPUT_BYTES, INAGG_MAX_FEATURES), -ENOMEM, or the system's code for a file
 * that cannot be opened or read (-ENOENT, -EISDIR, -EIO, ...).
 */
#ifndef INAGG_GLM_DATASET_H
#define INAGG_GLM_DATASET_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct glm_dataset {
    size_t rows; /* samples */
    size_t cols; /* features (largest index seen, or set by caller / generator) */
    size_t nnz;
    size_t *row_ptr; /* rows + 1 offsets into col/val */
    uint32_t *col; /* 0-based feature index, strictly increasing within a row */
    float *val; /* feature values (always present; the dequantized ones when quantized) */
    float *label; /* per sample: -1/+1 for classification, any finite value (regression) */
    int precision_bits; /* 0 = float32 features; 8 or 4 after glm_dataset_quantize */
    int8_t *qval; /* quantized codes (NULL unless quantized), parallel to val */
    float *col_scale; /* per-feature scale (cols entries; NULL unless quantized):
                             val[k] == (float)qval[k] * col_scale[col[k]] exactly */
} glm_dataset_t;

enum glm_label_kind { GLM_LABELS_BINARY, GLM_LABELS_REAL };

/* What the reader accepts, so that memory stays bounded by the data's size whatever the file:
 *   max_features    the largest feature index allowed (the model has one weight per index up
 *                   to the largest); 0 = from the data: max(GLM_MIN_FEATURE_LIMIT,
 *                   GLM_FEATURES_PER_NONZERO x nonzeros). A 29-byte file naming feature
 *                   2000000000 is refused instead of costing gigabytes of model; sparse real
 *                   sets (news20: 1.36M features for 9M nonzeros) pass.
 *   max_line_bytes  the longest line (a longer one is refused with its line number).
 *   max_input_bytes the most bytes read from any file (a device or a pipe that never ends).
 * glm_read_limits_default(): these defaults, each overridable by the environment variables
 * INAGG_MAX_FEATURES, INAGG_MAX_LINE_BYTES, INAGG_MAX_INPUT_BYTES (a positive integer). */
typedef struct glm_read_limits {
    uint64_t max_features;
    uint64_t max_line_bytes;
    uint64_t max_input_bytes;
} glm_read_limits_t;

#define GLM_MIN_FEATURE_LIMIT (1ull << 20)
#define GLM_FEATURES_PER_NONZERO 16ull
#define GLM_DEFAULT_MAX_LINE_BYTES                                                                 \
    (1ull << 20) /* 1 MiB; max_input_bytes defaults to half the RAM */

glm_read_limits_t glm_read_limits_default(void);
/* The largest feature index the limits allow for a set of nnz nonzeros. */
uint64_t glm_feature_limit(const glm_read_limits_t *l, size_t nnz);

/* Read a LIBSVM file ("label index:value index:value ... # comment", indices 1-based and
 * strictly increasing). BINARY: labels must be -1, +1, 0 or 1 (0 maps to -1); REAL: any finite
 * number. Blank lines and comments are skipped; a last line without '\n' is fine if it parses
 * completely. cols = the largest index seen. *out is overwritten (not freed) on success and
 * zeroed on failure. One streaming pass over any file type (regular, pipe, device), arrays
 * grown geometrically; limits NULL = glm_read_limits_default(). */
int glm_load_libsvm_limited(const char *path, enum glm_label_kind kind,
                            const glm_read_limits_t *limits, glm_dataset_t *out, char *err,
                            size_t errlen);
int glm_load_libsvm(const char *path, enum glm_label_kind kind, glm_dataset_t *out, char *err,
                    size_t errlen);
/* Same, from memory; buf need not be NUL-terminated; name is used in messages. */
int glm_parse_libsvm_limited(const char *buf, size_t len, const char *name,
                             enum glm_label_kind kind, const glm_read_limits_t *limits,
                             glm_dataset_t *out, char *err, size_t errlen);
int glm_parse_libsvm(const char *buf, size_t len, const char *name, enum glm_label_kind kind,
                     glm_dataset_t *out, char *err, size_t errlen);
/* Free the arrays; safe on a zeroed struct; leaves *d zeroed. */
void glm_dataset_free(glm_dataset_t *d);

/* Make the column count at least `cols` (so a test set with fewer features matches the training
 * set). A quantized set gets scale 1 for the new (all-zero) columns; if that allocation fails
 * the column count is left unchanged. */
void glm_dataset_set_cols(glm_dataset_t *d, size_t cols);

/* Nonzeros per column: counts[c] for c in [0, d->cols). */
void glm_column_nnz(const glm_dataset_t *d, size_t *counts);

/* Model parallelism: split columns [0, cols) into `parts` (>= 1) contiguous ranges with roughly
 * equal numbers of nonzeros (greedy over the column nnz histogram; every part gets >= 1 column
 * when cols >= parts). bounds has parts+1 entries: part p owns [bounds[p], bounds[p+1]).
 * If the histogram cannot be allocated the columns are split evenly by count. */
void glm_partition_columns(const glm_dataset_t *d, int parts, size_t *bounds);
/* The same rows restricted to columns [c0, c1), column indices kept GLOBAL (0-based in the full
 * feature space) so a model slice is indexed x[col - c0]; out->cols stays src->cols. Labels
 * copied; quantization carried (codes and the full col_scale). */
int glm_dataset_column_slice(const glm_dataset_t *src, size_t c0, size_t c1, glm_dataset_t *out,
                             char *err, size_t errlen);
/* Data parallelism: rows [r0, r1) (a copy; cols and quantization carried). */
int glm_dataset_row_slice(const glm_dataset_t *src, size_t r0, size_t r1, glm_dataset_t *out,
                          char *err, size_t errlen);

/* Low precision (P4SGD trains on 4-bit data): per-feature scale = max |value| in that column /
 * (2^(bits-1) - 1); code = round(value / scale) clamped to +-(2^(bits-1) - 1); val[] is
 * overwritten with code * scale (in float) so every kernel that reads val[] sees exactly what the
 * low-precision data represents; qval/col_scale keep the codes. bits must be 8 or 4. Columns
 * that are all zero get scale 1. Quantizing again requantizes the current val[]. */
int glm_dataset_quantize(glm_dataset_t *d, int bits, char *err, size_t errlen);
/* Bytes the feature values take in storage: nnz*4 for float32, nnz*bits/8 rounded up when
 * quantized. */
size_t glm_dataset_value_bytes(const glm_dataset_t *d);

/* d in the LIBSVM text format to f, for a solver that reads files: 1-based feature indices,
 * labels +1/-1 (other labels and every value as C99 hexadecimal floats, e.g. 0x1.8p-3, which
 * strtod reads exactly: the values d holds, dequantized ones included). 0, or -EIO when f
 * failed. */
int glm_dataset_write_libsvm(const glm_dataset_t *d, FILE *f);

/* Row kernels used by the trainers. x is indexed by (col - col_offset); accumulates in double. */
double glm_row_dot(const glm_dataset_t *d, size_t row, const float *x, size_t col_offset);
/* g[col - col_offset] += scale * value for each nonzero of the row. */
void glm_row_axpy(const glm_dataset_t *d, size_t row, double scale, double *g, size_t col_offset);

#endif /* INAGG_GLM_DATASET_H */
