/* testutil.c - see testutil.h. */
#include "testutil.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "json/json.h"
#include "control/ctl.h"
#include "harness.h"
#include "transport/udp.h"

void ts_start(test_switch_t *ts, const switch_config_t *cfg)
{
    switch_config_t c = *cfg;
    c.listen = "127.0.0.1:0";
    ts->pid = switch_spawn(&c, &ts->port);
    CHECK_MSG(ts->pid > 0, "the test switch did not become ready within 10 s");
    snprintf(ts->addr, sizeof(ts->addr), "127.0.0.1:%u", ts->port);
}

void ts_stop(test_switch_t *ts)
{
    if (ts->pid > 0) {
        kill(ts->pid, SIGTERM);
        wait_pid(ts->pid, 10);
    }
    ts->pid = 0;
}

void ts_stats_json(const test_switch_t *ts, char *buf, size_t len)
{
    struct sockaddr_in a;
    CHECK(udp_parse_addr(ts->addr, 0, &a) == 0);
    int fd = ctl_connect(&a, 3000);
    CHECK_MSG(fd >= 0, "cannot connect to the switch's control port");
    ctl_reader_t *rd = calloc(1, sizeof(*rd));
    CHECK(rd && ctl_write_line(fd, "STATS json", 3000) == 0);
    char line[CTL_LINE_MAX];
    buf[0] = '\0';
    while (ctl_read_line(fd, rd, line, sizeof(line), 3000) == 0 && strcmp(line, "END") != 0) {
        size_t have = strlen(buf);
        snprintf(buf + have, len - have, "%s\n", line);
    }
    free(rd);
    close(fd);
}

double ts_number(const char *text, const char *key)
{
    double v = 0;
    CHECK_MSG(json_find_number(text, key, &v) == 0, "no \"%s\" in %.200s", key, text);
    return v;
}

void spawn_workers(uint32_t n, worker_fn fn, void *arg, pid_t *pids)
{
    fflush(NULL);
    for (uint32_t r = 0; r < n; r++) {
        pids[r] = fork();
        CHECK(pids[r] >= 0);
        if (pids[r] == 0)
            _exit(fn(r, arg));
    }
}

int wait_pid(pid_t pid, int timeout_s)
{
    for (int i = 0; i < timeout_s * 100; i++) {
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        if (r < 0)
            return -1;
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

int run_workers(uint32_t n, worker_fn fn, void *arg, int timeout_s)
{
    pid_t pids[64];
    CHECK(n <= 64);
    spawn_workers(n, fn, arg, pids);
    int failed = 0;
    for (uint32_t r = 0; r < n; r++) {
        int rc = wait_pid(pids[r], timeout_s);
        if (rc != 0) {
            fprintf(stderr, "    worker %u exited with %d\n", r, rc);
            failed++;
        }
    }
    return failed;
}

void *shared_alloc(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED);
    memset(p, 0, bytes);
    return p;
}

void nft_loss_start(nft_loss_t *n, const char *tag, uint16_t port, int percent,
                    test_switch_t *ts_to_stop_on_skip)
{
    if (geteuid() != 0 || system("command -v nft >/dev/null 2>&1") != 0) {
        if (ts_to_stop_on_skip)
            ts_stop(ts_to_stop_on_skip);
        SKIP("needs root and nft (nftables) to drop packets on loopback");
    }
    snprintf(n->table, sizeof(n->table), "inagg_%s_%d", tag, (int)getpid());
    char cmd[768];
    snprintf(cmd, sizeof(cmd),
             "nft add table inet %s && "
             "nft add chain inet %s c '{ type filter hook input priority 0; }' && "
             "nft add rule inet %s c udp dport %u numgen random mod 100 '<' %d counter drop && "
             "nft add rule inet %s c udp sport %u numgen random mod 100 '<' %d counter drop",
             n->table, n->table, n->table, port, percent, n->table, port, percent);
    if (system(cmd) != 0) {
        nft_loss_stop(n);
        if (ts_to_stop_on_skip)
            ts_stop(ts_to_stop_on_skip);
        SKIP("nft could not install a rule here (no netfilter permission)");
    }
}

int nft_loss_dropped(const nft_loss_t *n)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "nft list table inet %s | grep -o 'packets [0-9]*' | "
             "awk '{s+=$2} END {exit s > 0 ? 0 : 1}'", n->table);
    return system(cmd) == 0;
}

void nft_loss_stop(nft_loss_t *n)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "nft delete table inet %s 2>/dev/null", n->table);
    (void)!system(cmd);
}

void lossy_fault_specs(double p, uint64_t seed, char *workers, char *sw, size_t len)
{
    snprintf(workers, len, "drop=%g,dup=%g,reorder=%g,seed=%llu", p, p, p,
             (unsigned long long)seed);
    snprintf(sw, len, "drop=%g,dup=%g,reorder=%g,seed=%llu", p / 2, p / 2, p / 2,
             (unsigned long long)seed + 1);
}
