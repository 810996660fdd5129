/*
 * bench_allreduce_switches.c - the switches of an `inagg bench allreduce` run: on loopback the
 * embedded switch, or K shards each pinned to a CPU on request, or a spine with its leaf
 * switches; on a testbed `inagg switch` in the switch namespace (K of them for shards) and a
 * leaf switch in each leaf namespace of a two-level testbed. Also the CPU a switch process
 * used, for the shards' per-switch load.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "apps/bench/bench_allreduce_ctx.h"
#include "apps/bench/harness.h"
#include "apps/launch/launch.h"
#include "switchd/switchd.h"

/* ---- the switch ------------------------------------------------------------------------------ */

/* `inagg switch` in testbed namespace `ns` listening on `listen`, with extra arguments
 * `extra` (NULL-terminated, or NULL); ready once it wrote its port to the readiness pipe.
 * Its pid and "HOST:PORT" into addr, or -EIO after a message. */
static pid_t ns_switch_start(ctx_t *c, const char *ns, const char *listen, char *const *extra,
                             char *addr, size_t len)
{
    if (c->sw_err_fd < 0)
        c->sw_err_fd = memfd_create("inagg-switch-stderr", MFD_CLOEXEC);
    char err[1536];
    pid_t pid = launch_ns_switch(&c->run->tb, ns, c->self, listen, c->so.switch_threads, extra,
                                 c->sw_err_fd, SWITCH_READY_MS, addr, len, err, sizeof(err));
    if (pid < 0) {
        fprintf(stderr, AR_CMD ": %s\n", err);
        return -EIO;
    }
    return pid;
}

/* The switches of a testbed run: `inagg switch` in the switch namespace on the bridge's
 * address (with --shards, K of them on ports 7000, 7100, ...); with --leaves, that one is the
 * spine and each leaf namespace runs a leaf switch pointing at it. 0, or -EIO after a
 * message. */
int ar_testbed_switches(ctx_t *c)
{
    const ar_opts_t *o = &c->so;
    const launch_testbed_t *tb = &c->run->tb;
    if (tb->fabric_port) {
        /* --fabric inagg: the fabric's own switch aggregates, in the switch namespace */
        snprintf(c->sw_addr, sizeof(c->sw_addr), "%s:%u", tb->switch_addr, tb->fabric_port);
        c->sw_pid = 0;
        return 0;
    }
    char listen[48];
    snprintf(listen, sizeof(listen), "%s:%d", tb->switch_addr, SWITCH_PORT);
    char *group[] = {"--multicast", (char *)o->switch_multicast, NULL};
    int mcast = o->switch_multicast && strcmp(o->switch_multicast, "off") != 0;
    c->sw_pid =
        ns_switch_start(c, "sw", listen, mcast ? group : NULL, c->sw_addr, sizeof(c->sw_addr));
    if (c->sw_pid < 0) {
        c->sw_pid = 0;
        return -EIO;
    }
    size_t used = strlen(c->sw_addr);
    for (uint32_t k = 1; k < o->shards; k++) {
        char one[48];
        snprintf(listen, sizeof(listen), "%s:%u", tb->switch_addr, SWITCH_PORT + 100 * k);
        pid_t p = ns_switch_start(c, "sw", listen, NULL, one, sizeof(one));
        if (p < 0)
            return -EIO;
        c->more_pids[c->nmore++] = p;
        used += (size_t)snprintf(c->sw_addr + used, sizeof(c->sw_addr) - used, ",%s", one);
    }
    for (uint32_t l = 0; l < o->leaves; l++) {
        char ns[16], index[16], leaves[16];
        snprintf(ns, sizeof(ns), "l%u", l + 1);
        snprintf(listen, sizeof(listen), "%s.%u:%d", tb->net3, LAUNCH_TESTBED_LEAF_OCTET0 + l + 1,
                 SWITCH_PORT);
        snprintf(index, sizeof(index), "%u", l);
        snprintf(leaves, sizeof(leaves), "%u", o->leaves);
        char *extra[] = {"--upstream", c->sw_addr, "--leaf-index", index, "--leaves", leaves, NULL};
        pid_t p = ns_switch_start(c, ns, listen, extra, c->leaf_addr[l], sizeof(c->leaf_addr[l]));
        if (p < 0)
            return -EIO;
        c->more_pids[c->nmore++] = p;
    }
    return 0;
}

/* One embedded switch on loopback, as cfg says (listen forced to 127.0.0.1:0); its pid and
 * HOST:PORT, or -EIO after a message. */
static pid_t local_switch(const ar_opts_t *o, switch_config_t *cfg, char *addr, size_t len)
{
    cfg->listen = "127.0.0.1:0";
    cfg->threads = o->switch_threads ? o->switch_threads : 1;
    cfg->worker_timeout_ms = o->timeout_ms;
    uint16_t port = 0;
    char err[256];
    pid_t pid = launch_switch(cfg, &port, err, sizeof(err));
    if (pid < 0) {
        fprintf(stderr, AR_CMD ": an embedded switch did not start: %s\n", err);
        return -EIO;
    }
    snprintf(addr, len, "127.0.0.1:%u", port);
    return pid;
}

/* CPU seconds (user + system) process pid has used, or NAN. */
double ar_process_cpu_s(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NAN;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return NAN;
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    unsigned long long ut = 0, st = 0;
    if (!p ||
        sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return NAN;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* --pin-switches: switch process k on CPU k (mod the CPUs this process may use). */
static void pin(pid_t pid, int k)
{
    cpu_set_t mine, one;
    if (sched_getaffinity(0, sizeof(mine), &mine) != 0 || CPU_COUNT(&mine) == 0)
        return;
    int want = k % CPU_COUNT(&mine), seen = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &mine) || seen++ != want)
            continue;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        if (sched_setaffinity(pid, sizeof(one), &one) != 0)
            fprintf(stderr, AR_CMD ": cannot pin switch %d to CPU %d: %s\n", k, cpu,
                    strerror(errno));
        return;
    }
}

/* --switch-cpu-share: cap switch process pid at that share of a CPU. 0, or -EIO after a
 * message. */
static int cap(ctx_t *c, const ar_opts_t *o, pid_t pid)
{
    if (!o->switch_cpu_share || pid <= 0)
        return 0;
    if (c->ncap >= (int)(sizeof(c->cap_path) / sizeof(c->cap_path[0])))
        return 0;
    char err[256];
    char *path = c->cap_path[c->ncap];
    if (launch_cpucap(pid, (unsigned)c->ncap, o->switch_cpu_share, path, sizeof(c->cap_path[0]),
                      err, sizeof(err)) != 0) {
        fprintf(stderr, AR_CMD ": --switch-cpu-share: %s\n", err);
        return -EIO;
    }
    c->ncap++;
    return 0;
}

void ar_uncap_switches(ctx_t *c)
{
    for (int k = 0; k < c->ncap; k++)
        launch_cpucap_remove(c->cap_path[k]);
    c->ncap = 0;
}

/* Loopback: the spine and the leaves (--leaves), or K shards (--shards), or the one
 * embedded switch (or the --switch given). 0, or -EIO after a message. */
int ar_local_switches(ctx_t *c, const ar_opts_t *o)
{
    if (o->leaves) {
        switch_config_t sc = SWITCH_CONFIG_INIT;
        c->sw_pid = local_switch(o, &sc, c->sw_addr, sizeof(c->sw_addr));
        if (c->sw_pid < 0 || cap(c, o, c->sw_pid) != 0)
            return -EIO;
        for (uint32_t l = 0; l < o->leaves; l++) {
            switch_config_t lc = SWITCH_CONFIG_INIT;
            lc.upstream = c->sw_addr;
            lc.upstream_rank = l;
            lc.upstream_world = o->leaves;
            pid_t p = local_switch(o, &lc, c->leaf_addr[l], sizeof(c->leaf_addr[l]));
            if (p < 0)
                return -EIO;
            c->more_pids[c->nmore++] = p;
            if (cap(c, o, p) != 0)
                return -EIO;
        }
        return 0;
    }
    if (o->shards > 1) {
        size_t used = 0;
        for (uint32_t k = 0; k < o->shards; k++) {
            switch_config_t cfg = SWITCH_CONFIG_INIT;
            char one[48];
            pid_t p = local_switch(o, &cfg, one, sizeof(one));
            if (p < 0)
                return -EIO;
            if (k == 0)
                c->sw_pid = p;
            else
                c->more_pids[c->nmore++] = p;
            if (o->pin_switches)
                pin(p, (int)k);
            if (cap(c, o, p) != 0)
                return -EIO;
            used += (size_t)snprintf(c->sw_addr + used, sizeof(c->sw_addr) - used, "%s%s",
                                     k ? "," : "", one);
        }
        return 0;
    }
    pid_t pid = bench_switch_begin(AR_CMD, o->switch_addr, o->switch_threads, o->timeout_ms,
                                   c->sw_addr, sizeof(c->sw_addr));
    c->sw_pid = pid > 0 ? pid : 0;
    if (pid > 0 && o->pin_switches)
        pin(pid, 0);
    if (pid > 0 && cap(c, o, pid) != 0)
        return -EIO;
    return pid < 0 ? -EIO : 0;
}
