/*
 * report_line.c - the one-line text form of the trainers' reports (see train.h): a flat JSON
 * object written with json/json.h's writer (numbers with 17 significant digits, so doubles
 * read back exactly) and read back with its lookups.
 */
#include "glm/train.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "json/json.h"

static const char *const line_names[] = {"", "setup", "epoch", "progress", "done", "error"};

void glm_line_init(glm_line_t *l, glm_line_type_t type, int rank)
{
    memset(l, 0, sizeof(*l));
    l->type = type;
    l->rank = rank;
}

int glm_line_format(const glm_line_t *l, char *buf, size_t len)
{
    if (!buf || len == 0 || l->type <= GLM_LINE_NONE || l->type > GLM_LINE_ERROR)
        return -EINVAL;
    json_writer_t w;
    json_init(&w);
    json_begin_object(&w, NULL);
    json_string(&w, "type", line_names[l->type]);
    json_int(&w, "rank", l->rank);
    switch (l->type) {
    case GLM_LINE_SETUP:
        json_number_exact(&w, "rows", (double)l->setup.rows);
        json_number_exact(&w, "cols", (double)l->setup.cols);
        json_number_exact(&w, "nnz", (double)l->setup.nnz);
        json_number_exact(&w, "test_rows", (double)l->setup.test_rows);
        json_number_exact(&w, "lr", l->setup.lr);
        json_number_exact(&w, "l2", l->setup.l2);
        json_number_exact(&w, "slice_cols", (double)l->setup.slice_cols);
        json_number_exact(&w, "slice_rows", (double)l->setup.slice_rows);
        break;
    case GLM_LINE_EPOCH: {
        const glm_epoch_record_t *e = &l->epoch;
        json_number_exact(&w, "epoch", e->epoch);
        json_number_exact(&w, "objective", e->objective);
        json_number_exact(&w, "mean_loss", e->mean_loss);
        json_number_exact(&w, "accuracy", e->accuracy);
        json_number_exact(&w, "test_accuracy", e->test_accuracy);
        json_number_exact(&w, "weight_norm", e->weight_norm);
        json_number_exact(&w, "lr", e->lr);
        json_number_exact(&w, "seconds", e->seconds);
        json_number_exact(&w, "comm_seconds", e->comm_seconds);
        json_number_exact(&w, "comm_share", e->comm_share);
        json_number_exact(&w, "eval_seconds", e->eval_seconds);
        json_number_exact(&w, "payload_bytes_per_sample", e->payload_bytes_per_sample);
        json_number_exact(&w, "wire_bytes_per_sample", e->wire_bytes_per_sample);
        break;
    }
    case GLM_LINE_PROGRESS:
        json_number_exact(&w, "epoch", l->progress_epoch);
        json_number_exact(&w, "fraction", l->progress_fraction);
        break;
    case GLM_LINE_ERROR:
        json_string(&w, "message", l->message);
        break;
    default:
        break;
    }
    json_end_object(&w);
    const char *text = json_text(&w);
    size_t n = text ? strlen(text) : 0;
    int rc = !text ? -ENOMEM : n < len ? (int)n : -ENOSPC;
    if (rc >= 0)
        memcpy(buf, text, n + 1);
    json_free(&w);
    return rc;
}

static double num_or_nan(const char *text, const char *key)
{
    double v;
    return json_find_number(text, key, &v) == 0 ? v : NAN;
}

static uint64_t count_or_zero(const char *text, const char *key)
{
    double v = num_or_nan(text, key);
    return v >= 0 && v < 18446744073709551615.0 ? (uint64_t)v : 0;
}

glm_line_type_t glm_line_parse(const char *text, glm_line_t *l)
{
    glm_line_type_t type = GLM_LINE_NONE;
    const char *p = text;
    while (*p == ' ' || *p == '\t')
        p++;
    if (strncmp(p, "{\"type\":\"", 9) == 0) {
        for (int i = GLM_LINE_SETUP; i <= GLM_LINE_ERROR; i++) {
            size_t n = strlen(line_names[i]);
            if (strncmp(p + 9, line_names[i], n) == 0 && p[9 + n] == '"') {
                type = (glm_line_type_t)i;
                break;
            }
        }
    }
    if (type == GLM_LINE_NONE) {
        l->type = GLM_LINE_NONE;
        return GLM_LINE_NONE;
    }
    memset(l, 0, sizeof(*l));
    l->type = type;
    double rank = num_or_nan(p, "rank");
    l->rank = isfinite(rank) ? (int)rank : -1;
    switch (type) {
    case GLM_LINE_SETUP:
        l->setup.rows = count_or_zero(p, "rows");
        l->setup.cols = count_or_zero(p, "cols");
        l->setup.nnz = count_or_zero(p, "nnz");
        l->setup.test_rows = count_or_zero(p, "test_rows");
        l->setup.lr = num_or_nan(p, "lr");
        l->setup.l2 = num_or_nan(p, "l2");
        l->setup.slice_cols = count_or_zero(p, "slice_cols");
        l->setup.slice_rows = count_or_zero(p, "slice_rows");
        break;
    case GLM_LINE_EPOCH: {
        glm_epoch_record_t *e = &l->epoch;
        double ep = num_or_nan(p, "epoch");
        e->epoch = isfinite(ep) && ep >= 0 ? (uint32_t)ep : 0;
        e->objective = num_or_nan(p, "objective");
        e->mean_loss = num_or_nan(p, "mean_loss");
        e->accuracy = num_or_nan(p, "accuracy");
        e->test_accuracy = num_or_nan(p, "test_accuracy");
        e->weight_norm = num_or_nan(p, "weight_norm");
        e->lr = num_or_nan(p, "lr");
        e->seconds = num_or_nan(p, "seconds");
        e->comm_seconds = num_or_nan(p, "comm_seconds");
        e->comm_share = num_or_nan(p, "comm_share");
        e->eval_seconds = num_or_nan(p, "eval_seconds");
        e->payload_bytes_per_sample = num_or_nan(p, "payload_bytes_per_sample");
        e->wire_bytes_per_sample = num_or_nan(p, "wire_bytes_per_sample");
        break;
    }
    case GLM_LINE_PROGRESS: {
        double ep = num_or_nan(p, "epoch");
        l->progress_epoch = isfinite(ep) && ep >= 0 ? (uint32_t)ep : 0;
        l->progress_fraction = num_or_nan(p, "fraction");
        break;
    }
    case GLM_LINE_ERROR:
        if (json_find_string(p, "message", l->message, sizeof(l->message)) != 0)
            snprintf(l->message, sizeof(l->message), "(no message)");
        break;
    default:
        break;
    }
    return type;
}
