/* rank_report.c - one rank's report as one JSON line, written and read back (see
 * rank_report.h). */
#include "apps/bench/rank_report.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/json/json.h"

bench_rank_report_t *bench_rank_reports_new(uint32_t n, uint32_t cap)
{
    size_t head = (size_t)n * sizeof(bench_rank_report_t);
    bench_rank_report_t *r = calloc(1, head + (size_t)n * cap * sizeof(double));
    double *times = r ? (double *)(void *)((char *)r + head) : NULL;
    for (uint32_t k = 0; r && k < n; k++) {
        r[k].times_s = times + (size_t)k * cap;
        r[k].cap = cap;
    }
    return r;
}

void bench_rank_report_reset(bench_rank_report_t *r)
{
    double *times = r->times_s;
    uint32_t cap = r->cap;
    memset(r, 0, sizeof(*r));
    r->times_s = times;
    r->cap = cap;
}

/* The counters a report carries: one table that the encoder and the decoder both walk, so
 * the two cannot drift. Each is a uint64_t or uint32_t field of the report's stats (the
 * library's inagg_stats_t) or codec (inagg_codec_stats_t), keyed by its own name. */
#define COUNTER(group, field)                                                                      \
    {                                                                                              \
        .key = #field, .offset = offsetof(bench_rank_report_t, group.field),                       \
        .size = sizeof(((bench_rank_report_t *)0)->group.field)                                    \
    }
static const struct {
    const char *key;
    size_t offset, size;
} counters[] = {
    COUNTER(stats, packets_sent),       COUNTER(stats, retransmissions),
    COUNTER(stats, duplicates_ignored), COUNTER(stats, bytes_sent),
    COUNTER(stats, bytes_received),     COUNTER(stats, srtt_us),
    COUNTER(codec, encode_ns),          COUNTER(codec, decode_ns),
    COUNTER(codec, overlap_ns),         COUNTER(codec, chunks_encoded),
    COUNTER(codec, chunks_ahead),       COUNTER(codec, rto_code_floor_us),
    COUNTER(failover, failovers),       COUNTER(failover, chunks_delivered),
    COUNTER(failover, chunks_reduced),  COUNTER(failover, stall_ms_max),
    COUNTER(failover, stale_dropped),   COUNTER(failover, generation),
};

static uint64_t counter_get(const bench_rank_report_t *r, size_t i)
{
    const char *at = (const char *)r + counters[i].offset;
    if (counters[i].size == 4) {
        uint32_t v;
        memcpy(&v, at, 4);
        return v;
    }
    uint64_t v;
    memcpy(&v, at, 8);
    return v;
}

static void counter_set(bench_rank_report_t *r, size_t i, uint64_t v)
{
    char *at = (char *)r + counters[i].offset;
    if (counters[i].size == 4) {
        uint32_t v32 = (uint32_t)v;
        memcpy(at, &v32, 4);
    } else {
        memcpy(at, &v, 8);
    }
}

/* The counters, after the samples. */
static void encode_counters(json_writer_t *w, const bench_rank_report_t *r)
{
    for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++)
        json_int(w, counters[i].key, (int64_t)counter_get(r, i));
    if (strcmp(r->transport.transport, "roce") == 0) { /* the rank's RoCE endpoints */
        json_begin_object(w, "roce");
        for (uint32_t i = 0; i < r->transport.ncounters; i++)
            if (r->transport_names[i])
                json_int(w, r->transport_names[i], (int64_t)r->transport.counters[i]);
        json_end_object(w);
    }
}

char *bench_rank_report_encode(const bench_rank_report_t *r, const bench_rank_meta_t *m)
{
    json_writer_t w;
    json_init(&w);
    json_begin_object(&w, NULL);
    json_string(&w, "name", m->name);
    json_int(&w, "rank", r->rank);
    json_int(&w, "world", m->world);
    json_int(&w, "elems", (int64_t)m->elems);
    json_string(&w, "dtype", m->dtype);
    json_int(&w, "packet_elems", m->packet_elems);
    json_int(&w, "window", m->window);
    json_bool(&w, "verified", r->rc == INAGG_OK && r->verified);
    json_int(&w, "wrong", (int64_t)r->wrong);
    json_number(&w, "max_err", r->max_err);
    char sum[24];
    snprintf(sum, sizeof(sum), "%016llx", (unsigned long long)r->checksum);
    json_string(&w, "checksum", sum);
    json_number_exact(&w, "t_start", r->t_start);
    json_number_exact(&w, "t_end", r->t_end);
    json_number_exact(&w, "t_fail", r->t_fail);
    json_number(&w, "cpu_s", r->cpu_s);
    json_begin_array(&w, "times_s");
    for (uint32_t i = 0; i < r->iters; i++)
        json_number_exact(&w, NULL, r->times_s[i]);
    json_end_array(&w);
    encode_counters(&w, r);
    json_int(&w, "rc", r->rc);
    json_string(&w, "error", r->error);
    json_end_object(&w);
    const char *text = json_text(&w);
    size_t len = text ? strlen(text) : 0;
    char *line = text ? malloc(len + 2) : NULL;
    if (line) {
        memcpy(line, text, len);
        memcpy(line + len, "\n", 2);
    }
    json_free(&w);
    return line;
}

int bench_rank_report_write(int fd, const bench_rank_report_t *r, const bench_rank_meta_t *m)
{
    char *line = bench_rank_report_encode(r, m);
    if (!line)
        return -ENOMEM;
    size_t left = strlen(line);
    const char *p = line;
    int rc = 0;
    while (left > 0) {
        ssize_t n = write(fd, p, left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = n < 0 ? -errno : -EIO;
            break;
        }
        p += n;
        left -= (size_t)n;
    }
    free(line);
    return rc;
}

/* "key":[n, n, ...] from text into v[max]: the count (-E2BIG past max), or -EINVAL when the
 * key is absent or not a list of numbers. */
static int find_number_array(const char *text, const char *key, double *v, uint32_t max)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\"", key);
    const char *p = strstr(text, pat);
    if (!p)
        return -EINVAL;
    p += strlen(pat);
    while (*p == ' ' || *p == ':')
        p++;
    if (*p != '[')
        return -EINVAL;
    p++;
    uint32_t n = 0;
    for (;;) {
        while (*p == ' ' || *p == ',')
            p++;
        if (*p == ']')
            return (int)n;
        char *end;
        double x = strtod(p, &end);
        if (end == p)
            return -EINVAL;
        if (n == max)
            return -E2BIG;
        v[n++] = x;
        p = end;
    }
}

/* A number under key into *out as uint64_t, if present. */
static void find_u64(const char *text, const char *key, uint64_t *out)
{
    double v;
    if (json_find_number(text, key, &v) == 0 && v >= 0)
        *out = (uint64_t)v;
}

static void decode_counters(const char *text, bench_rank_report_t *r)
{
    for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++) {
        uint64_t v = 0;
        find_u64(text, counters[i].key, &v);
        counter_set(r, i, v);
    }
}

int bench_rank_report_decode(const char *text, bench_rank_report_t *r)
{
    bench_rank_report_reset(r);
    text = strchr(text, '{');
    double v;
    int verified = 0;
    if (!text || json_find_number(text, "rank", &v) != 0 ||
        json_find_bool(text, "verified", &verified) != 0)
        return -EINVAL;
    r->rank = (int32_t)v;
    r->verified = verified;
    int n = find_number_array(text, "times_s", r->times_s, r->cap);
    if (n < 0)
        return n;
    r->iters = (uint32_t)n;
    if (json_find_number(text, "t_start", &r->t_start) != 0 ||
        json_find_number(text, "t_end", &r->t_end) != 0)
        return -EINVAL;
    if (json_find_number(text, "t_fail", &r->t_fail) != 0)
        r->t_fail = 0;
    if (json_find_number(text, "cpu_s", &r->cpu_s) != 0)
        r->cpu_s = NAN;
    if (json_find_number(text, "max_err", &r->max_err) != 0)
        r->max_err = 0;
    find_u64(text, "wrong", &r->wrong);
    char sum[32];
    if (json_find_string(text, "checksum", sum, sizeof(sum)) == 0)
        r->checksum = strtoull(sum, NULL, 16);
    decode_counters(text, r);
    if (json_find_number(text, "rc", &v) == 0)
        r->rc = (int32_t)v;
    json_find_string(text, "error", r->error, sizeof(r->error));
    return 0;
}
