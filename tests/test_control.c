/*
 * test_control.c - the switch's control plane against hostile and careless clients, with the
 * switch in this process: stats read while the control thread admits and retires jobs (a
 * data race ThreadSanitizer sees), a client that never reads its replies, idle and slow
 * connections, too many connections from one address, slot quotas, and job secrets.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/netaddr.h"
#include "base/util.h"
#include "control/ctl.h"
#include "harness.h"
#include "inagg.h"
#include "json/json.h"
#include "switch/switch.h"

/* An in-process switch on a free loopback port. */
static inagg_switch_t *start_switch(switch_config_t *cfg, char *addr, size_t cap)
{
    cfg->listen = "127.0.0.1:0";
    inagg_switch_t *sw;
    char err[256];
    CHECK_MSG(switch_start(cfg, &sw, err, sizeof(err)) == 0, "switch: %s", err);
    snprintf(addr, cap, "127.0.0.1:%u", switch_port(sw));
    return sw;
}

static int connect_to(const char *addr)
{
    int fd = ctl_connect_to(addr, 2000);
    CHECK_MSG(fd >= 0, "connect %s: %s", addr, strerror(-fd));
    return fd;
}

/* Send one line and read one reply line (2 s at most). 0 or -errno. */
static int request(int fd, ctl_reader_t *rd, const char *line, char *reply, size_t cap)
{
    int rc = ctl_write_line(fd, line, 2000);
    return rc ? rc : ctl_read_line(fd, rd, reply, cap, 2000);
}

/* The number after "key": in the switch's JSON stats. */
__attribute__((unused)) static double stat_of(inagg_switch_t *sw, const char *key)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    CHECK(f);
    switch_write_stats(sw, f, 1);
    fclose(f);
    double v = -1;
    int rc = json_find_number(text, key, &v);
    free(text);
    CHECK_MSG(rc == 0, "no \"%s\" in the stats", key);
    return v;
}

/* ---- the race: stats read while the control thread admits and retires jobs ---- */

static atomic_int stats_stop;

static void *stats_reader(void *arg)
{
    inagg_switch_t *sw = arg;
    FILE *null = fopen("/dev/null", "w");
    while (!atomic_load(&stats_stop)) {
        switch_write_stats(sw, null, 0);
        switch_write_stats(sw, null, 1);
    }
    fclose(null);
    return NULL;
}

TEST(switch_stats_race_free_while_jobs_come_and_go, 60)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    char addr[64];
    inagg_switch_t *sw = start_switch(&cfg, addr, sizeof(addr));
    pthread_t reader;
    atomic_store(&stats_stop, 0);
    CHECK(pthread_create(&reader, NULL, stats_reader, sw) == 0);
    char line[CTL_LINE_MAX], reply[CTL_LINE_MAX];
    for (int i = 0; i < 40; i++) {
        int fd = connect_to(addr);
        ctl_reader_t rd = {0};
        snprintf(line, sizeof(line), "JOIN version=%u job=race%d rank=0 world=1 slots=4 elems=16 "
                 "float=fixed protocol=switchml timeout=2000", INAGG_PROTOCOL_VERSION, i);
        CHECK_MSG(request(fd, &rd, line, reply, sizeof(reply)) == 0 &&
                      strncmp(reply, "JOINED", 6) == 0, "%s", reply);
        close(fd); /* the job's only member leaves: it fails and retires */
    }
    atomic_store(&stats_stop, 1);
    pthread_join(reader, NULL);
    switch_stop(sw);
}
