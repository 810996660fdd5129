/*
 * report_line.c - the one-line text form of the trainers' reports (see train.h): a flat JSON
 * object written with json/json.h's writer (numbers with 17 significant digits, so doubles
 * read back exactly) and read back with its lookups.
 */
#include "apps/glm/train.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "lib/json/json.h"

static const char *const line_names[] = {"", "setup", "epoch", "progress", "done", "error"};

/* {key, offset} of a double field of the epoch record (a field of another type does not
 * compile). */
#define REAL_FIELD(f)                                                                              \
    {                                                                                              \
#f, offsetof(glm_epoch_record_t, f) +                                                      \
                0 * sizeof(_Generic(((glm_epoch_record_t *)0)->f, double : 1))                     \
    }

/* The epoch record's real-valued fields in line order: one table for writing and reading. */
static const struct {
    const char *key;
    size_t off; /* of a double in glm_epoch_record_t */
} epoch_reals[] = {
    REAL_FIELD(objective),
    REAL_FIELD(mean_loss),
    REAL_FIELD(accuracy),
    REAL_FIELD(test_accuracy),
    REAL_FIELD(weight_norm),
    REAL_FIELD(lr),
    REAL_FIELD(seconds),
    REAL_FIELD(comm_seconds),
    REAL_FIELD(comm_share),
    REAL_FIELD(eval_seconds),
    REAL_FIELD(payload_bytes_per_sample),
    REAL_FIELD(wire_bytes_per_sample),
};

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
            for (size_t i = 0; i < sizeof(epoch_reals) / sizeof(epoch_reals[0]); i++)
                json_number_exact(&w, epoch_reals[i].key,
                                  *(const double *)((const char *)e + epoch_reals[i].off));
            break;
        }
        case GLM_LINE_PROGRESS:
            json_number_exact(&w, "epoch", l->progress_epoch);
            json_number_exact(&w, "fraction", l->progress_fraction);
            break;
        case GLM_LINE_ERROR: json_string(&w, "message", l->message); break;
        default: break;
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
            for (size_t i = 0; i < sizeof(epoch_reals) / sizeof(epoch_reals[0]); i++)
                *(double *)((char *)e + epoch_reals[i].off) = num_or_nan(p, epoch_reals[i].key);
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
        default: break;
    }
    return type;
}
