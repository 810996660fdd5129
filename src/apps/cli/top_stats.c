/* top_stats.c - see top_stats.h. */
#include "apps/cli/top_stats.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/base/util.h"
#include "lib/client/ctl.h"

static uint64_t get_u64(const char *line, const char *key)
{
    uint64_t v = 0;
    ctl_get_u64(line, key, &v);
    return v;
}

/* The sum of the " name=N" after "drops:" (or after "dropped before any job:"). */
static uint64_t sum_after(const char *line, const char *marker)
{
    const char *p = strstr(line, marker);
    uint64_t n = 0;
    while (p && (p = strchr(p, '=')) != NULL) {
        n += strtoull(p + 1, NULL, 10);
        p++;
    }
    return n;
}

static void parse_line(top_snapshot_t *s, const char *line)
{
    char v[64];
    if (strncmp(line, "switch ", 7) == 0) {
        sscanf(line + 7, "%63s", s->listen);
        s->threads = (uint32_t)get_u64(line, "threads");
        if (ctlline_get(line, "slots_used", v, sizeof(v)) == 0)
            sscanf(v, "%u/%u", &s->slots_used, &s->slots_total);
        if (ctlline_get(line, "uptime_s", v, sizeof(v)) == 0)
            s->uptime_s = strtod(v, NULL);
        s->rejoined = get_u64(line, "jobs_rejoined");
    } else if (strncmp(line, "packets ", 8) == 0) {
        s->packets_in = get_u64(line, "in");
        s->packets_out = get_u64(line, "out");
    } else if (strncmp(line, "dropped before any job:", 23) == 0) {
        s->drops_pre_job = sum_after(line, ":");
    } else if (strncmp(line, "control ", 8) == 0) {
        s->connections = (uint32_t)get_u64(line, "connections");
        const char *p = strchr(line + 8, ' '); /* every count after connections= */
        s->refusals = p ? sum_after(p, " ") : 0;
    } else if (strncmp(line, "job ", 4) == 0 && s->njobs < TOP_MAX_JOBS) {
        top_job_t *j = &s->jobs[s->njobs++];
        memset(j, 0, sizeof(*j));
        j->id = (uint32_t)strtoul(line + 4, NULL, 10);
        ctlline_get(line, "name", j->name, sizeof(j->name));
        ctlline_get(line, "state", j->state, sizeof(j->state));
        ctlline_get(line, "protocol", j->protocol, sizeof(j->protocol));
        j->world = (uint32_t)get_u64(line, "world");
        j->gen = (uint32_t)get_u64(line, "gen");
        j->slots = (uint32_t)get_u64(line, "slots");
        j->contributions = get_u64(line, "contributions");
        j->rounds = get_u64(line, "rounds");
        j->bytes_in = get_u64(line, "bytes_in");
        j->bytes_out = get_u64(line, "bytes_out");
        j->drops = sum_after(line, " drops:");
    } else if (strncmp(line, "retired job ", 12) == 0) {
        s->retired++;
    } else if (strncmp(line, "fabric frames:", 14) == 0) {
        s->fabric = 1;
        s->ip_fragments = get_u64(line, "agg_fragment");
    }
}

int top_fetch(const char *host_port, int timeout_ms, top_snapshot_t *s)
{
    memset(s, 0, sizeof(*s));
    int fd = ctl_connect_to(host_port, timeout_ms);
    if (fd < 0)
        return fd;
    ctl_reader_t *rd = calloc(1, sizeof(*rd));
    int rc = rd ? ctl_write_line(fd, "STATS", timeout_ms) : -ENOMEM;
    char line[CTL_LINE_MAX];
    int ended = 0;
    for (int k = 0; rc == 0 && k < 100000; k++) { /* bounded: lines until END */
        rc = ctl_read_line(fd, rd, line, sizeof(line), timeout_ms);
        if (rc != 0)
            break;
        if (strcmp(line, "END") == 0) {
            ended = 1;
            break;
        }
        parse_line(s, line);
    }
    free(rd);
    close(fd);
    if (rc == 0 && !ended)
        rc = -EPROTO;
    s->taken_ns = util_now_ns();
    return rc;
}

double top_rate(uint64_t prev, uint64_t cur, uint64_t prev_ns, uint64_t cur_ns)
{
    if (cur < prev || cur_ns <= prev_ns)
        return 0;
    return (double)(cur - prev) * 1e9 / (double)(cur_ns - prev_ns);
}

const top_job_t *top_find_job(const top_snapshot_t *s, uint32_t id)
{
    for (int i = 0; i < s->njobs; i++)
        if (s->jobs[i].id == id)
            return &s->jobs[i];
    return NULL;
}
