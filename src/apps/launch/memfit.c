/*
 * memfit.c - see launch.h: whether the processes a command is about to start fit in this
 * machine's memory, decided before the first allocation: the memory they need (known from the
 * user's sizes) against what is available, the kernel's MemAvailable (/proc/meminfo) and the
 * room left under the memory limit of this process's cgroup (v2 memory.max of the cgroup and
 * its ancestors, or v1 memory.limit_in_bytes), whichever is smaller. A refusal names both.
 */
#include "apps/launch/launch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/errmsg.h"

/* The first number in file path (or after `key` on the line that starts with it) times mul.
 * 0 when missing or not a number ("max" included). */
static uint64_t read_number(const char *path, const char *key, uint64_t mul)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    char line[256];
    uint64_t v = 0;
    size_t klen = key ? strlen(key) : 0;
    while (fgets(line, sizeof(line), f)) {
        if (key && strncmp(line, key, klen) != 0)
            continue;
        char *end;
        unsigned long long x = strtoull(line + klen, &end, 10);
        if (end != line + klen)
            v = (uint64_t)x * mul;
        break;
    }
    fclose(f);
    return v;
}

/* Take the cgroup directory dir into m when its limit leaves less room than what m holds. */
static void consider(launch_mem_t *m, const char *dir, const char *limit_file,
                     const char *usage_file)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, limit_file);
    uint64_t limit = read_number(path, NULL, 1);
    if (limit == 0 || limit >= (1ull << 62)) /* "max", or v1's "no limit" */
        return;
    snprintf(path, sizeof(path), "%s/%s", dir, usage_file);
    uint64_t usage = read_number(path, NULL, 1);
    uint64_t room = usage < limit ? limit - usage : 0;
    uint64_t have = m->cg_limit ? (m->cg_usage < m->cg_limit ? m->cg_limit - m->cg_usage : 0) : 0;
    if (m->cg_limit == 0 || room < have) {
        m->cg_limit = limit;
        m->cg_usage = usage;
    }
}

/* v2: the cgroup at rel (from /proc/self/cgroup's "0::" line) and each of its ancestors. */
static void read_cgroup_v2(launch_mem_t *m, const char *cgroup_root, const char *rel)
{
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s%s", cgroup_root, rel);
    size_t root_len = strlen(cgroup_root);
    for (;;) {
        consider(m, dir, "memory.max", "memory.current");
        char *slash = strrchr(dir, '/');
        if (!slash || (size_t)(slash - dir) < root_len)
            break;
        *slash = '\0';
    }
}

void launch_mem_read(const char *proc_root, const char *cgroup_root, launch_mem_t *m)
{
    memset(m, 0, sizeof(*m));
    char path[4096];
    snprintf(path, sizeof(path), "%s/meminfo", proc_root);
    m->available = read_number(path, "MemAvailable:", 1024);
    snprintf(path, sizeof(path), "%s/self/cgroup", proc_root);
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    char line[4096];
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        char *rel = strchr(line, ':');
        rel = rel ? strchr(rel + 1, ':') : NULL;
        if (!rel)
            continue;
        *rel++ = '\0';
        const char *ctrl = strchr(line, ':') + 1;
        if (strcmp(line, "0:") == 0) {
            read_cgroup_v2(m, cgroup_root, strcmp(rel, "/") == 0 ? "" : rel);
        } else if (strstr(ctrl, "memory")) {
            char dir[4096];
            snprintf(dir, sizeof(dir), "%s/memory%s", cgroup_root, rel);
            consider(m, dir, "memory.limit_in_bytes", "memory.usage_in_bytes");
        }
    }
    fclose(f);
}

uint64_t launch_mem_free(const launch_mem_t *m)
{
    uint64_t avail = m->available ? m->available : UINT64_MAX;
    if (m->cg_limit) {
        uint64_t room = m->cg_usage < m->cg_limit ? m->cg_limit - m->cg_usage : 0;
        avail = room < avail ? room : avail;
    }
    return avail;
}

const char *launch_mem_text(uint64_t bytes, char *buf, size_t len)
{
    if (bytes >= (1ull << 30))
        snprintf(buf, len, "%.1f GiB", (double)bytes / (double)(1ull << 30));
    else
        snprintf(buf, len, "%.1f MiB", (double)bytes / (double)(1ull << 20));
    return buf;
}

int launch_mem_fits(const launch_mem_t *m, uint64_t need, const char *what, char *err,
                    size_t errlen)
{
    uint64_t avail = launch_mem_free(m);
    if (need <= avail)
        return 0;
    char n[32], a[32], mi[32], cl[32], cu[32], cgroup[160] = "";
    if (m->cg_limit) {
        snprintf(cgroup, sizeof(cgroup), "; this cgroup's limit %s, %s of it in use",
                 launch_mem_text(m->cg_limit, cl, sizeof(cl)),
                 launch_mem_text(m->cg_usage, cu, sizeof(cu)));
    }
    return set_err(err, errlen, -ENOMEM,
                   "%s: %s of memory needed, more than the %s available (MemAvailable %s%s)", what,
                   launch_mem_text(need, n, sizeof(n)), launch_mem_text(avail, a, sizeof(a)),
                   m->available ? launch_mem_text(m->available, mi, sizeof(mi)) : "unknown",
                   cgroup);
}

int launch_mem_check(uint64_t need, const char *what, char *err, size_t errlen)
{
    launch_mem_t m;
    launch_mem_read("/proc", "/sys/fs/cgroup", &m);
    return launch_mem_fits(&m, need, what, err, errlen);
}
