/* harness.c - what every benchmark's run shares (see harness.h). */
#include "apps/bench/harness.h"

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "apps/launch/launch.h"
#include "lib/base/util.h"
#include "switchd/switchd.h"

const char *bench_worker_faults(const char *faults, double loss, uint64_t seed, char *buf,
                                size_t len)
{
    if (faults || !(loss > 0))
        return faults;
    snprintf(buf, len, "drop=%g,seed=%llu", loss, (unsigned long long)seed);
    return buf;
}

inagg_options_t bench_comm_options(inagg_protocol_t protocol, uint32_t slots, uint32_t packet_elems,
                                   uint32_t timeout_ms, const char *faults)
{
    inagg_options_t opts = INAGG_OPTIONS_INIT;
    opts.protocol = protocol;
    opts.slots = slots;
    opts.packet_elems = packet_elems;
    opts.timeout_ms = timeout_ms;
    opts.faults = faults;
    return opts;
}

pid_t bench_switch_begin(const char *cmd, const char *given, uint32_t threads,
                         uint32_t worker_timeout_ms, char *addr, size_t len)
{
    if (given) {
        snprintf(addr, len, "%s", given);
        return 0;
    }
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    cfg.listen = "127.0.0.1:0";
    cfg.threads = threads ? threads : 1;
    cfg.worker_timeout_ms = worker_timeout_ms;
    uint16_t port = 0;
    char err[256];
    pid_t pid = launch_switch(&cfg, &port, err, sizeof(err));
    if (pid < 0) {
        fprintf(stderr, "%s: the embedded switch did not start\n", cmd);
        return -EIO;
    }
    snprintf(addr, len, "127.0.0.1:%u", port);
    return pid;
}

void bench_switch_end(pid_t pid) { launch_switch_stop(pid); }

const char *bench_job_name(const char *prefix, char *buf, size_t len)
{
    snprintf(buf, len, "%s-%d-%llu", prefix, (int)getpid(),
             (unsigned long long)(util_now_ns() % 1000000));
    return buf;
}

int bench_read_full(int fd, void *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, (char *)buf + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -EIO;
        got += (size_t)n;
    }
    return 0;
}
