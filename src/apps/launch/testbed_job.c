/*
 * testbed_job.c - see launch.h: what a command needs to run one job across a testbed of
 * namespaces: build it (tools/testbed beside the build, its rsh agent, stale testbeds of dead
 * runs removed, teardown on a signal), the aggregation switch in the switch namespace (the
 * fabric's own with --fabric inagg, else `inagg switch` started there and waited for through
 * its readiness pipe), the mpirun placement of one rank per host, and taking it all down.
 */
#include "apps/launch/launch.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "lib/base/errmsg.h"

#define TBJOB_SWITCH_PORT 7000
#define TBJOB_SWITCH_READY_MS 15000
#define TBJOB_LINGER_MAX_MS 60000

int launch_tbjob_up(launch_tbjob_t *j, unsigned hosts, const char *rate, unsigned mtu, double loss,
                    char *err, size_t errlen)
{
    launch_testbed_t *tb = &j->tb;
    j->sw_pid = 0;
    j->sw_addr[0] = '\0';
    if (launch_testbed_find(tb->tool, sizeof(tb->tool)) != 0) {
        return set_err(err, errlen, -ENOENT,
                       "tools/testbed not found (tried %s; set INAGG_TESTBED_TOOL)",
                       tb->tool[0] ? tb->tool : "../tools/testbed beside the binary");
    }
    if (launch_testbed_sibling(tb, "testbed-rsh", j->rsh, sizeof(j->rsh)) != 0) {
        return set_err(err, errlen, -ENOENT, "tools/testbed-rsh is missing beside %s", tb->tool);
    }
    launch_testbed_reap_stale(tb->tool);
    char name[16];
    snprintf(name, sizeof(name), "b%d", (int)getpid());
    snprintf(tb->name, sizeof(tb->name), "%s", name);
    launch_testbed_guard(tb);
    int rc = launch_testbed_up(tb, hosts, name, rate, mtu, loss, err, errlen);
    if (rc != 0) {
        launch_testbed_unguard();
        return rc;
    }
    size_t used = 0;
    j->hosts_list[0] = '\0';
    for (unsigned k = 1; k <= tb->hosts && used + 20 < sizeof(j->hosts_list); k++)
        used += (size_t)snprintf(j->hosts_list + used, sizeof(j->hosts_list) - used, "%s%s.%u",
                                 k > 1 ? "," : "", tb->net3, k);
    j->mpi_prefix[0] = tb->tool;
    j->mpi_prefix[1] = "exec";
    j->mpi_prefix[2] = tb->name;
    j->mpi_prefix[3] = "h1";
    j->mpi_prefix[4] = "--";
    j->mpi_prefix[5] = NULL;
    memset(&j->mpi, 0, sizeof(j->mpi));
    j->mpi.prefix = (const char *const *)j->mpi_prefix;
    j->mpi.hosts = j->hosts_list;
    j->mpi.if_include = tb->subnet;
    j->mpi.rsh_agent = j->rsh;
    return 0;
}

int launch_tbjob_switch(launch_tbjob_t *j, const char *self, unsigned threads, char *err,
                        size_t errlen)
{
    const launch_testbed_t *tb = &j->tb;
    snprintf(j->self, sizeof(j->self), "%s", self);
    if (tb->fabric_port) { /* --fabric inagg: the fabric aggregates */
        snprintf(j->sw_addr, sizeof(j->sw_addr), "%s:%u", tb->switch_addr, tb->fabric_port);
        j->sw_pid = 0;
        return 0;
    }
    int err_fd = memfd_create("inagg-switch-stderr", MFD_CLOEXEC);
    char listen[48];
    snprintf(listen, sizeof(listen), "%s:%d", tb->switch_addr, TBJOB_SWITCH_PORT);
    char *extra[5];
    int n = 0;
    if (j->switch_poll) {
        extra[n++] = "--poll";
        extra[n++] = (char *)j->switch_poll;
    }
    const char *group = j->switch_multicast ? j->switch_multicast : LAUNCH_TBJOB_MCAST_GROUP;
    if (strcmp(group, "off") != 0) {
        extra[n++] = "--multicast";
        extra[n++] = (char *)group;
    }
    extra[n] = NULL;
    pid_t pid =
        launch_ns_switch(tb, "sw", self, listen, threads ? threads : 1, n ? extra : NULL, err_fd,
                         TBJOB_SWITCH_READY_MS, j->sw_addr, sizeof(j->sw_addr), err, errlen);
    if (err_fd >= 0)
        close(err_fd);
    if (pid < 0)
        return (int)pid;
    j->sw_pid = pid;
    return 0;
}

/* $INAGG_TESTBED_SWITCH_METRICS: PORT (on the switch's own testbed address, the host of
 * `listen`) or HOST:PORT for the switch's --metrics. 1 with it in out; 0 when unset. A bad
 * value is passed on as it is: the switch refuses it, naming it, and does not start. */
static int ns_switch_metrics(const char *listen, char *out, size_t len)
{
    const char *v = getenv("INAGG_TESTBED_SWITCH_METRICS");
    if (!v || !v[0])
        return 0;
    if (strspn(v, "0123456789") == strlen(v)) {
        const char *colon = strrchr(listen, ':');
        int host_len = colon ? (int)(colon - listen) : (int)strlen(listen);
        snprintf(out, len, "%.*s:%s", host_len, listen, v);
    } else {
        snprintf(out, len, "%s", v);
    }
    return 1;
}

void launch_testbed_switch_stats(const launch_testbed_t *tb, const char *self, const char *sw_addr,
                                 const char *cmd)
{
    if (!getenv("INAGG_BENCH_SWITCH_STATS") || !sw_addr[0])
        return;
    char addr[64];
    snprintf(addr, sizeof(addr), "%s", sw_addr);
    addr[strcspn(addr, ",")] = 0; /* the first switch of several */
    char *stats[] = {(char *)self, "switch", "--stats", addr, NULL}, *argv[16], err[160];
    if (launch_testbed_argv(tb, "sw", stats, argv, 16) == 0)
        return;
    fprintf(stderr, "%s: the switch's counters at the end of the run:\n", cmd);
    launch_spec_t sp = {
        .argv = argv, .in = LAUNCH_DEVNULL, .out = STDERR_FILENO, .err = LAUNCH_INHERIT};
    if (launch_run(&sp, 10000, err, sizeof(err)) != 0)
        fprintf(stderr, "%s: the switch's counters: %s\n", cmd, err);
}

void launch_testbed_linger(void)
{
    const char *v = getenv("INAGG_TESTBED_SWITCH_LINGER_MS");
    if (!v || !v[0])
        return;
    char *end;
    errno = 0;
    long ms = strtol(v, &end, 10);
    if (errno || *end || ms < 0 || ms > TBJOB_LINGER_MAX_MS) {
        fprintf(stderr,
                "inagg: INAGG_TESTBED_SWITCH_LINGER_MS='%s' is not 0..%d (ms); "
                "not lingering\n",
                v, TBJOB_LINGER_MAX_MS);
        return;
    }
    fprintf(stderr,
            "inagg: keeping the testbed switch up %ld ms more "
            "(INAGG_TESTBED_SWITCH_LINGER_MS)\n",
            ms);
    struct timespec left = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&left, NULL); /* a signal cuts it short: the teardown follows */
}

pid_t launch_ns_switch(const launch_testbed_t *tb, const char *ns, const char *self,
                       const char *listen, unsigned threads, char *const *extra, int err_fd,
                       int timeout_ms, char *addr, size_t len, char *err, size_t errlen)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        int e = errno;
        return set_err(err, errlen, -e, "pipe: %s", strerror(e));
    }
    char nthreads[16], fd[16];
    snprintf(nthreads, sizeof(nthreads), "%u", threads);
    snprintf(fd, sizeof(fd), "%d", p[1]);
    char *cmd[24] = {(char *)self, "switch", "--listen",   (char *)listen,
                     "--threads",  nthreads, "--ready-fd", fd};
    int n_cmd = 8;
    char metrics[64];
    if (strcmp(ns, "sw") == 0 && ns_switch_metrics(listen, metrics, sizeof(metrics))) {
        cmd[n_cmd++] = "--metrics";
        cmd[n_cmd++] = metrics;
    }
    for (int k = 0; extra && extra[k] && n_cmd < 23; k++)
        cmd[n_cmd++] = extra[k];
    cmd[n_cmd] = NULL;
    char *argv[40];
    launch_testbed_argv(tb, ns, cmd, argv, 40);
    launch_spec_t spec = {
        argv, NULL, LAUNCH_DEVNULL, LAUNCH_DEVNULL, err_fd >= 0 ? err_fd : LAUNCH_INHERIT, 1, p[1]};
    pid_t pid = launch_spawn(&spec, err, errlen);
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        return pid;
    }
    int port = launch_read_ready(p[0], timeout_ms);
    close(p[0]);
    if (port <= 0) {
        char why[1024] = "";
        if (err_fd >= 0) {
            ssize_t m = pread(err_fd, why, sizeof(why) - 1, 0);
            why[m > 0 ? m : 0] = '\0';
        }
        int rc = set_err(err, errlen, -ECHILD, "inagg switch did not start in namespace %s: ", ns);
        launch_append_tail(err, errlen,
                           why[0]      ? why
                           : port == 0 ? "it ended"
                                       : "no port reported in time");
        launch_stop(pid, SIGKILL, 5000, NULL);
        return rc;
    }
    char host[48];
    snprintf(host, sizeof(host), "%s", listen);
    char *colon = strrchr(host, ':');
    if (colon)
        *colon = '\0';
    snprintf(addr, len, "%s:%d", host, port);
    return pid;
}

void launch_tbjob_down(launch_tbjob_t *j)
{
    if (j->sw_pid > 0)
        launch_testbed_linger();
    if (j->sw_pid > 0)
        launch_stop(j->sw_pid, SIGTERM, 10000, NULL);
    j->sw_pid = 0;
    launch_testbed_down(&j->tb);
    launch_testbed_unguard();
}
