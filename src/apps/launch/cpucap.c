/*
 * cpucap.c - cap a process at a share of one CPU with a CPU cgroup of its own (cgroup v2's
 * cpu.max, or v1's cfs quota), so that a benchmark can give a software switch a fixed
 * capacity (`bench allreduce --switch-cpu-share`). The group is named after this process
 * and an index, and removed by cpucap_remove once its process has exited.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apps/launch/launch.h"
#include "lib/base/errmsg.h"

#define CPUCAP_V2 "/sys/fs/cgroup"
#define CPUCAP_V1 "/sys/fs/cgroup/cpu"

static int write_text(const char *dir, const char *file, const char *text)
{
    char path[320];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = write(fd, text, strlen(text));
    int e = n == (ssize_t)strlen(text) ? 0 : n < 0 ? -errno : -EIO;
    close(fd);
    return e;
}

/* Whether the unified hierarchy at CPUCAP_V2 offers the cpu controller to its children. */
static int v2_has_cpu(void)
{
    char buf[256] = "";
    int fd = open(CPUCAP_V2 "/cgroup.subtree_control", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    for (char *p = strstr(buf, "cpu"); p; p = strstr(p + 1, "cpu"))
        if ((p == buf || p[-1] == ' ') && (p[3] == ' ' || p[3] == '\n' || p[3] == '\0'))
            return 1;
    return 0;
}

int launch_cpucap(pid_t pid, unsigned index, unsigned share_pct, char *path, size_t len, char *err,
                  size_t errlen)
{
    if (share_pct < 1 || share_pct > 100) {
        return set_err(err, errlen, -EINVAL, "a CPU share is 1 to 100 percent of one CPU, not %u",
                       share_pct);
    }
    /* a period of 10 ms: short, so that a capped switch stalls at most a few ms at a time,
     * and still a few scheduler ticks long (a 4 ms tick overran shorter periods' quotas by
     * half); the kernel's least quota is 1 ms, so shares below 10% get longer periods */
    unsigned period_us = share_pct >= 10 ? 10000 : (100000 + share_pct - 1) / share_pct;
    unsigned quota_us = period_us * share_pct / 100;
    int v2 = v2_has_cpu();
    if (!v2 && access(CPUCAP_V1 "/cgroup.procs", W_OK) != 0) {
        return set_err(err, errlen, -ENOTSUP,
                       "no CPU cgroup to cap a switch with: neither %s (cgroup v2 with the cpu "
                       "controller) nor %s (v1) is writable (needs root)",
                       CPUCAP_V2, CPUCAP_V1);
    }
    snprintf(path, len, "%s/inagg-cap-%d-%u", v2 ? CPUCAP_V2 : CPUCAP_V1, (int)getpid(), index);
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        int e = errno;
        int rc = set_err(err, errlen, -e, "creating the CPU cgroup %s: %s", path, strerror(e));
        path[0] = '\0';
        return rc;
    }
    char q[64], p[32];
    int e;
    if (v2) {
        snprintf(q, sizeof(q), "%u %u", quota_us, period_us);
        e = write_text(path, "cpu.max", q);
    } else {
        snprintf(p, sizeof(p), "%u", period_us);
        snprintf(q, sizeof(q), "%u", quota_us);
        e = write_text(path, "cpu.cfs_period_us", p);
        if (e == 0)
            e = write_text(path, "cpu.cfs_quota_us", q);
    }
    if (e == 0) {
        snprintf(p, sizeof(p), "%d", (int)pid);
        e = write_text(path, "cgroup.procs", p);
    }
    if (e != 0) {
        set_err(err, errlen, e, "capping process %d in %s: %s", (int)pid, path, strerror(-e));
        launch_cpucap_remove(path);
        return e;
    }
    return 0;
}

void launch_cpucap_remove(char *path)
{
    if (!path || !path[0])
        return;
    /* the group empties once its process has been reaped: bounded retries */
    for (int tries = 0; tries < 50 && rmdir(path) != 0 && errno == EBUSY; tries++)
        usleep(10000);
    path[0] = '\0';
}
