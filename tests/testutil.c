/* testutil.c - see testutil.h. */
#include "testutil.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apps/glm/reference.h"
#include "apps/launch/launch.h"
#include "harness.h"
#include "inagg.h"
#include "lib/base/errmsg.h"
#include "lib/base/netaddr.h"
#include "lib/client/ctl.h"
#include "lib/json/json.h"

void ts_start(test_switch_t *ts, const switch_config_t *cfg)
{
    switch_config_t c = *cfg;
    c.listen = "127.0.0.1:0";
    char err[256];
    ts->pid = launch_switch(&c, &ts->port, err, sizeof(err));
    CHECK_MSG(ts->pid > 0, "the test switch did not start: %s", err);
    snprintf(ts->addr, sizeof(ts->addr), "127.0.0.1:%u", ts->port);
}

void ts_stop(test_switch_t *ts)
{
    int status = 0;
    int rc = launch_stop(ts->pid, SIGTERM, 10000, &status);
    ts->pid = 0;
    /* A switch that crashed, hung, leaked (ASan) or failed to stop fails the test. */
    char why[64];
    CHECK_MSG(rc == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "the test switch did not stop cleanly: %s",
              rc != 0 ? "still running after 10 s" : launch_status_text(status, why, sizeof(why)));
}

void ts_stats_json(const test_switch_t *ts, char *buf, size_t len)
{
    struct sockaddr_in a;
    CHECK(netaddr_parse(ts->addr, 0, &a) == 0);
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

switch_config_t ts_mcast_config(uint8_t b)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    cfg.mcast_group = 0xef000000u | (uint32_t)b << 16;
    cfg.mcast_port = (uint16_t)(30000 + getpid() % 20000);
    return cfg;
}

/* launch_ranks' callback around a worker_fn. */
struct worker_call {
    worker_fn fn;
    void *arg;
};

static int call_worker(uint32_t rank, int fd, void *arg)
{
    (void)fd;
    const struct worker_call *w = arg;
    int rc = w->fn(rank, w->arg);
    /* workers end with _exit: check for leaks here (ASan build), as exit() would */
    if (launch_child_leak_check() && rc == 0)
        rc = 23;
    return rc;
}

void spawn_workers(uint32_t n, worker_fn fn, void *arg, pid_t *pids)
{
    struct worker_call w = {fn, arg};
    launch_ranks_t g;
    char err[256];
    CHECK_MSG(launch_ranks_start(&g, n, call_worker, &w, 0, err, sizeof(err)) == 0, "%s", err);
    for (uint32_t r = 0; r < n; r++)
        pids[r] = g.pid[r];
}

int wait_pid(pid_t pid, int timeout_s)
{
    int status = 0;
    int rc = launch_wait(pid, timeout_s * 1000, &status);
    return rc < 0 ? rc : launch_exit_code(status);
}

int run_workers(uint32_t n, worker_fn fn, void *arg, int timeout_s)
{
    struct worker_call w = {fn, arg};
    launch_ranks_t g;
    char err[256];
    CHECK_MSG(launch_ranks_start(&g, n, call_worker, &w, 0, err, sizeof(err)) == 0, "%s", err);
    launch_ranks_wait(&g, timeout_s * 1000);
    int failed = 0;
    for (uint32_t r = 0; r < n; r++) {
        int rc = launch_exit_code(g.status[r]);
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
    snprintf(cmd, sizeof(cmd),
             "nft list table inet %s | grep -o 'packets [0-9]*' | "
             "awk '{s+=$2} END {exit s > 0 ? 0 : 1}'",
             n->table);
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

/* ---- liblinear ---------------------------------------------------------------------------- */

int liblinear_available(void) { return launch_liblinear_available(); }

int liblinear_reference(const char *data_path, double C, double eps, int timeout_s,
                        double **weights, size_t *n_weights, double *objective, char *err,
                        size_t errlen)
{
    *weights = NULL;
    *n_weights = 0;
    *objective = NAN;
    glm_dataset_t data;
    int rc = glm_load_libsvm(data_path, GLM_LABELS_BINARY, &data, err, errlen);
    if (rc < 0)
        return rc;
    rc = launch_liblinear(data_path, 0, C, eps, (timeout_s > 0 ? timeout_s : 1) * 1000, weights,
                          n_weights, err, errlen);
    if (rc == 0) {
        double l2 = 1.0 / (C * (double)data.rows);
        *objective = glm_objective_of_weights(GLM_OBJ_LOGISTIC, &data, *weights, *n_weights, l2);
    }
    glm_dataset_free(&data);
    return rc;
}

void *hog_job_main(void *arg)
{
    const char *addr = arg;
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.slots = 4;
    o.packet_elems = 16;
    inagg_comm_t *c = NULL;
    char d[256];
    if (inagg_comm_create(&c, addr, "hog", 0, 1, &o, d, sizeof(d)) == INAGG_OK) {
        usleep(1000000);
        inagg_comm_destroy(c);
    }
    return NULL;
}

char *ts_switch_stats_text(inagg_switch_t *sw, int json)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    CHECK(f);
    switch_write_stats(sw, f, json);
    fclose(f);
    return text;
}

double ts_switch_stat(inagg_switch_t *sw, const char *key)
{
    char *text = ts_switch_stats_text(sw, 1);
    double v = -1;
    int rc = json_find_number(text, key, &v);
    free(text);
    CHECK_MSG(rc == 0, "no \"%s\" in the stats", key);
    return v;
}
