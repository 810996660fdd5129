/*
 * switchd_run.c - the daemon as a program (switchd_run, see switchd.h): with --l2 the fabric
 * first and the switch's dataplane on its aggregation port, then the switch, the /metrics
 * endpoint and the ready descriptor; then it serves until SIGINT or SIGTERM (SIGUSR1 prints
 * the counters, SIGHUP calls the caller's reload) and stops in the reverse order. Every thread
 * it starts inherits a mask that leaves these signals to its sigwait. `inagg switch`
 * (src/apps/cli/cmd_switch.c) parses the flags and calls it.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/base/log.h"
#include "switchd/switchd.h"

/* --l2: start the fabric on the switch's IP and UDP port (fc: complete but for the queues),
 * and point the switch's dataplane at it. 0, or a negative errno with the reason in err. */
static int start_fabric(fabric_config_t *fc, switch_config_t *cfg, int inline_agg, fabric_t **out,
                        char *listen_buf, size_t cap, char *err, size_t errlen)
{
    fc->queues = cfg->threads;
    int rc = fabric_start(fc, out, err, errlen);
    if (rc != 0)
        return rc;
    snprintf(listen_buf, cap, "%s:%u", fabric_ip_text(*out), fc->agg_port);
    cfg->listen = listen_buf;
    cfg->transport.kind = "roce"; /* the aggregation port: UDP and RoCE frames */
    cfg->transport.opener = fabric_port_opener(*out);
    cfg->extra_text = fabric_write_text;
    cfg->extra_json = fabric_write_json;
    cfg->extra_metrics = fabric_write_metrics;
    cfg->extra_ctl = fabric_control;
    cfg->extra_ctx = *out;
    if (inline_agg) {
        cfg->inline_attach = fabric_attach_aggregation;
        cfg->attach_ctx = *out;
    }
    return 0;
}

/* Until SIGINT or SIGTERM: SIGUSR1 prints the stats, SIGHUP calls o->reload. The signal. */
static int serve_until_signal(inagg_switch_t *sw, const struct switchd_options *o, sigset_t *set)
{
    int sig = 0;
    for (;;) {
        if (sigwait(set, &sig) != 0)
            continue;
        if (sig == SIGHUP) {
            if (o->reload)
                o->reload(sw, o->reload_ctx);
            continue;
        }
        switch_write_stats(sw, stdout, 0);
        fflush(stdout);
        if (sig != SIGUSR1) {
            LOG_I("stopping on signal %d", sig);
            break;
        }
    }
    return sig;
}

static void serve_metrics(void *sw, FILE *out) { switch_write_metrics(sw, out); }

/* The bound port and a newline to o->ready_fd, which is closed. */
static void tell_ready(const struct switchd_options *o, inagg_switch_t *sw)
{
    char buf[16];
    int n = snprintf(buf, sizeof(buf), "%u\n", switch_port(sw));
    if (write(o->ready_fd, buf, (size_t)n) != n)
        LOG_W("could not write to --ready-fd %d", o->ready_fd);
    close(o->ready_fd);
}

int switchd_run(const struct switchd_options *o, char *err, size_t errlen)
{
    /* Threads inherit this mask, so the signals reach only sigwait() below. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    switch_config_t cfg = o->cfg;
    fabric_config_t fc = o->fabric;
    fabric_t *fab = NULL;
    char listen_buf[64];
    int rc = 0;
    if (fc.ports)
        rc = start_fabric(&fc, &cfg, o->fabric_inline, &fab, listen_buf, sizeof(listen_buf), err,
                          errlen);
    if (rc != 0)
        return rc;
    inagg_switch_t *sw;
    rc = switch_start(&cfg, &sw, err, errlen);
    if (rc != 0) {
        fabric_stop(fab);
        return rc;
    }
    LOG_I("switch listening on port %u (TCP control, UDP %u..%u), %u thread%s, %u slots",
          switch_port(sw), switch_port(sw), switch_port(sw) + cfg.threads - 1, cfg.threads,
          cfg.threads > 1 ? "s" : "", cfg.total_slots);
    httpm_t *metrics = NULL;
    if (o->metrics_addr) {
        rc = httpm_start(o->metrics_addr, serve_metrics, sw, &metrics, err, errlen);
        if (rc != 0) {
            switch_stop(sw);
            fabric_stop(fab);
            return rc;
        }
        LOG_I("metrics at http://%.*s:%u/metrics", (int)strcspn(o->metrics_addr, ":"),
              o->metrics_addr, httpm_port(metrics));
    }
    if (o->ready_fd >= 0)
        tell_ready(o, sw);
    int sig = serve_until_signal(sw, o, &set);
    httpm_stop(metrics);
    switch_stop_because(sw, sig == SIGTERM ? "stopped by SIGTERM" : "stopped by SIGINT");
    fabric_stop(fab);
    return 0;
}
