/*
 * switch.c - starting and stopping the switch (see switch.h): opens the TCP control port and
 * one transport queue per dataplane thread, then runs control.c's thread and dataplane.c's
 * threads until switch_stop(). Its counters are written by stats.c.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/base/errmsg.h"
#include "lib/base/log.h"
#include "lib/base/netaddr.h"
#include "lib/client/ctl.h"
#include "lib/netio/mcast.h"
#include "lib/wire/dpauth.h"
#include "switchd/server/server.h"
#include "switchd/server/upstream.h"

static void close_endpoints(struct inagg_switch *sw)
{
    for (uint32_t t = 0; t < sw->cfg.threads; t++) {
        if (sw->threads[t].tp)
            transport_close(sw->threads[t].tp);
        sw->threads[t].tp = NULL;
    }
    if (sw->listen_fd >= 0)
        close(sw->listen_fd);
    sw->listen_fd = -1;
}

/* The transport endpoint of dataplane thread t, at queue t of the switch whose queue 0 is
 * at `bind`. 0 or -errno with the transport's reason in err. */
static int open_queue(struct inagg_switch *sw, uint32_t t, const char *bind, char *err,
                      size_t errlen)
{
    const switch_config_t *c = &sw->cfg;
    transport_config_t tc = c->transport;
    if (!tc.kind)
        tc.kind = "udp";
    tc.bind = bind;
    tc.queue = t;
    tc.batch = c->batch == 0 ? 1 : c->batch < 256 ? c->batch : 256;
    tc.sleep_ms = 50;
    tc.fault_stream = t;
    /* results go to workers' kernel sockets, which take a GSO send whole or cut it; a
     * leaf's contributions go to a switch that may not (one of an earlier build) */
    tc.peer_takes_gso = c->upstream == NULL;
    tc.udp.mcast_send = c->mcast_group != 0;
    return transport_open(&tc, &sw->threads[t].tp, err, errlen);
}

/* Queue 0 (at the requested port, or one the kernel picks), the TCP control port on the
 * same port, then queues 1.. on the ports after it; retried when a neighbour port is taken
 * and the kernel picked. */
static int bind_all(struct inagg_switch *sw, const transport_addr_t *want, char *err, size_t errlen)
{
    int rc = 0;
    for (int attempt = 0; attempt < 32; attempt++) {
        rc = open_queue(sw, 0, sw->cfg.listen, err, errlen);
        if (rc == -EINVAL)
            return rc; /* a bad fault spec: the transport said why */
        if (rc < 0)
            break;
        transport_addr_t q0;
        char at[64] = "";
        rc = transport_local_addr(sw->threads[0].tp, &q0);
        if (rc == 0) {
            transport_addr_format(&q0, at, sizeof(at));
            rc = ctl_listen(at);
        }
        if (rc >= 0)
            sw->listen_fd = rc;
        for (uint32_t t = 1; rc >= 0 && t < sw->cfg.threads; t++)
            rc = open_queue(sw, t, at, err, errlen);
        if (rc >= 0) {
            sw->port = transport_addr_port(&q0);
            snprintf(sw->listen_text, sizeof(sw->listen_text), "%s", at);
            return 0;
        }
        close_endpoints(sw);
        if (transport_addr_port(want) != 0 || rc != -EADDRINUSE)
            break;
    }
    return set_err(err, errlen, rc, "cannot bind %s (TCP and %u UDP port%s): %s", sw->listen_text,
                   sw->cfg.threads, sw->cfg.threads > 1 ? "s" : "", strerror(-rc));
}

int switch_start(const switch_config_t *cfg, inagg_switch_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (cfg->threads == 0 || cfg->threads > SWITCH_MAX_THREADS)
        return set_err(err, errlen, -EINVAL, "threads must be 1..%u", SWITCH_MAX_THREADS);
    if (cfg->total_slots == 0)
        return set_err(err, errlen, -EINVAL, "slots must be at least 1");
    if (dpauth_init() != 0)
        return set_err(err, errlen, -EIO, "libsodium failed to initialise (dataplane MACs)");
    if (cfg->upstream) {
        transport_addr_t up;
        int prc = transport_parse_addr("udp", cfg->upstream, &up);
        if (prc != 0) {
            char why[160];
            netaddr_explain(cfg->upstream, prc, why, sizeof(why));
            return set_err(err, errlen, -EINVAL, "bad upstream address '%s': %s", cfg->upstream,
                           why);
        }
        if (cfg->upstream_world == 0 || cfg->upstream_world > INAGG_MAX_WORLD ||
            cfg->upstream_rank >= cfg->upstream_world)
            return set_err(err, errlen, -EINVAL,
                           "upstream rank %u of %u: need 1..%u leaves and rank < leaves",
                           cfg->upstream_rank, cfg->upstream_world, INAGG_MAX_WORLD);
        if (cfg->transport.opener ||
            (cfg->transport.kind && strcmp(cfg->transport.kind, "udp") != 0))
            return set_err(err, errlen, -EINVAL,
                           "a leaf switch (upstream) runs its dataplane over udp only");
    }
    if (cfg->mcast_group &&
        (cfg->transport.opener || (cfg->transport.kind && strcmp(cfg->transport.kind, "udp") != 0)))
        return set_err(err, errlen, -EINVAL,
                       "multicast results (--multicast) need the udp dataplane");
    transport_addr_t addr;
    int lrc = transport_parse_addr("udp", cfg->listen, &addr);
    if (lrc != 0) {
        char why[160];
        netaddr_explain(cfg->listen, lrc, why, sizeof(why));
        return set_err(err, errlen, -EINVAL, "bad listen address '%s': %s", cfg->listen, why);
    }
    struct inagg_switch *sw = calloc(1, sizeof(*sw));
    if (!sw || posix_memalign((void **)&sw->threads, INAGG_CACHELINE,
                              cfg->threads * sizeof(dp_thread_t)) != 0) {
        free(sw);
        return set_err(err, errlen, -ENOMEM, "out of memory");
    }
    memset(sw->threads, 0, cfg->threads * sizeof(dp_thread_t));
    sw->cfg = *cfg;
    sw->listen_fd = -1;
    sw->next_job_id = 1;
    sw->start_ms = server_now_ms();
    snprintf(sw->listen_text, sizeof(sw->listen_text), "%s", cfg->listen);
    pthread_mutex_init(&sw->stats_lock, NULL);
    pthread_mutex_init(&sw->limits_lock, NULL);
    for (uint32_t t = 0; t < cfg->threads; t++) {
        dp_thread_t *th = &sw->threads[t];
        th->sw = sw;
        th->index = t;
    }
    int rc = bind_all(sw, &addr, err, errlen);
    struct sockaddr_in listen_at;
    if (rc == 0 && cfg->mcast_group && netaddr_parse(cfg->listen, 0, &listen_at) == 0)
        /* refuse now what would lose every result later */
        rc = mcast_check_route(listen_at.sin_addr, mcast_job_group(cfg->mcast_group, 1),
                               cfg->mcast_port, err, errlen);
    if (rc < 0) {
        switch_stop(sw);
        return rc;
    }
    for (uint32_t t = 0; t < cfg->threads && cfg->inline_attach; t++) {
        if (dataplane_setup(&sw->threads[t]) != 0) {
            switch_stop(sw);
            return set_err(err, errlen, -ENOMEM, "out of memory");
        }
        atomic_store(&sw->threads[t].running, 1);
    }
    if (cfg->inline_attach) {
        cfg->inline_attach(cfg->attach_ctx, switch_dataplane_pass, sw);
        sw->attached = 1;
    }
    for (uint32_t t = 0; t < cfg->threads && !cfg->inline_attach; t++) {
        atomic_store(&sw->threads[t].running, 1);
        rc = pthread_create(&sw->threads[t].tid, NULL, dataplane_main, &sw->threads[t]);
        if (rc != 0) {
            atomic_store(&sw->threads[t].running, 0);
            switch_stop(sw);
            return set_err(err, errlen, -rc, "cannot start dataplane thread %u: %s", t,
                           strerror(rc));
        }
    }
    rc = pthread_create(&sw->control_tid, NULL, control_main, sw);
    if (rc != 0) {
        switch_stop(sw);
        return set_err(err, errlen, -rc, "cannot start the control thread: %s", strerror(rc));
    }
    sw->control_running = 1;
    *out = sw;
    return 0;
}

uint16_t switch_port(const inagg_switch_t *sw) { return sw->port; }

void switch_stop(inagg_switch_t *sw) { switch_stop_because(sw, "the switch is stopping"); }

void switch_stop_because(inagg_switch_t *sw, const char *reason)
{
    if (!sw)
        return;
    snprintf(sw->stop_reason, sizeof(sw->stop_reason), "%s", reason ? reason : "");
    atomic_store(&sw->stop, 1); /* the control thread reads stop_reason after this */
    if (sw->control_running)
        pthread_join(sw->control_tid, NULL);
    if (sw->attached) /* no inline pass runs after this */
        sw->cfg.inline_attach(sw->cfg.attach_ctx, NULL, NULL);
    for (uint32_t t = 0; t < sw->cfg.threads; t++) {
        if (sw->threads[t].tid)
            pthread_join(sw->threads[t].tid, NULL);
        else
            dataplane_teardown(&sw->threads[t]);
        atomic_store(&sw->threads[t].running, 0);
    }
    for (uint32_t i = 0; i < SWITCH_MAX_JOBS; i++) {
        job_t *j = atomic_load(&sw->jobs[i]);
        if (j)
            upstream_end(sw, j, 0);
    }
    upstream_wait_all(sw, UPSTREAM_STOP_MS);
    if (atomic_load(&sw->up_threads) > 0) {
        /* cannot happen (each blocks 4 s at most); they still use sw, so it stays */
        LOG_E("switch stop: %u upstream thread(s) did not end; not freeing the switch",
              atomic_load(&sw->up_threads));
        return;
    }
    for (uint32_t i = 0; i < SWITCH_MAX_JOBS; i++) {
        job_t *j = atomic_load(&sw->jobs[i]);
        if (j)
            job_free(j);
    }
    close_endpoints(sw);
    pthread_mutex_destroy(&sw->stats_lock);
    pthread_mutex_destroy(&sw->limits_lock);
    free(sw->threads);
    free(sw);
}
