/* rank_report.c - one rank's report as one JSON line, written and read back (see
 * rank_report.h). */
#include "bench/rank_report.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json/json.h"

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

/* The counters, after the samples. */
static void encode_counters(json_writer_t *w, const bench_rank_report_t *r)
{
    json_int(w, "packets_sent", (int64_t)r->stats.packets_sent);
    json_int(w, "retransmissions", (int64_t)r->stats.retransmissions);
    json_int(w, "duplicates_ignored", (int64_t)r->stats.duplicates_ignored);
    json_int(w, "bytes_sent", (int64_t)r->stats.bytes_sent);
    json_int(w, "bytes_received", (int64_t)r->stats.bytes_received);
    json_int(w, "srtt_us", r->stats.srtt_us);
    json_int(w, "encode_ns", (int64_t)r->codec.encode_ns);
    json_int(w, "decode_ns", (int64_t)r->codec.decode_ns);
    json_int(w, "overlap_ns", (int64_t)r->codec.overlap_ns);
    json_int(w, "chunks_encoded", (int64_t)r->codec.chunks_encoded);
    json_int(w, "chunks_ahead", (int64_t)r->codec.chunks_ahead);
    json_int(w, "rto_code_floor_us", r->codec.rto_code_floor_us);
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
    find_u64(text, "packets_sent", &r->stats.packets_sent);
    find_u64(text, "retransmissions", &r->stats.retransmissions);
    find_u64(text, "duplicates_ignored", &r->stats.duplicates_ignored);
    find_u64(text, "bytes_sent", &r->stats.bytes_sent);
    find_u64(text, "bytes_received", &r->stats.bytes_received);
    find_u64(text, "encode_ns", &r->codec.encode_ns);
    find_u64(text, "decode_ns", &r->codec.decode_ns);
    find_u64(text, "overlap_ns", &r->codec.overlap_ns);
    find_u64(text, "chunks_encoded", &r->codec.chunks_encoded);
    find_u64(text, "chunks_ahead", &r->codec.chunks_ahead);
    uint64_t v = 0;
    find_u64(text, "srtt_us", &v);
    r->stats.srtt_us = (uint32_t)v;
    v = 0;
    find_u64(text, "rto_code_floor_us", &v);
    r->codec.rto_code_floor_us = (uint32_t)v;
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
