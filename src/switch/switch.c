/*
 * switch.c - starting, stopping and reporting on the switch (see switch.h): binds the TCP
 * control port and one UDP port per dataplane thread, then runs control.c's thread and
 * dataplane.c's threads until switch_stop().
 */
#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.h"
#include "switch/server.h"
#include "transport/udp.h"

void server_quiesce(struct inagg_switch *sw)
{
    uint64_t seen[SWITCH_MAX_THREADS];
    for (uint32_t t = 0; t < sw->cfg.threads; t++)
        seen[t] = atomic_load(&sw->threads[t].epoch);
    for (uint32_t t = 0; t < sw->cfg.threads; t++)
        while (atomic_load(&sw->threads[t].running) && atomic_load(&sw->threads[t].epoch) == seen[t])
            sched_yield();
}

static int open_listener(const struct sockaddr_in *addr)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (const struct sockaddr *)addr, sizeof(*addr)) != 0 || listen(fd, 256) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

static void close_sockets(struct inagg_switch *sw)
{
    for (uint32_t t = 0; t < sw->cfg.threads; t++) {
        if (sw->threads[t].fd >= 0)
            close(sw->threads[t].fd);
        sw->threads[t].fd = -1;
    }
    if (sw->listen_fd >= 0)
        close(sw->listen_fd);
    sw->listen_fd = -1;
}

/* Bind UDP port P for thread 0, TCP port P, and UDP P+1.. for the other threads. With a
 * requested port of 0 the kernel picks P; retried when a neighbour port is taken. */
static int bind_all(struct inagg_switch *sw, const struct sockaddr_in *want, char *err,
                    size_t errlen)
{
    int rc = 0;
    for (int attempt = 0; attempt < 32; attempt++) {
        struct sockaddr_in a = *want;
        rc = udp_open(&a, sw->cfg.socket_buffer);
        if (rc < 0)
            break;
        sw->threads[0].fd = rc;
        uint16_t port = udp_bound_port(rc);
        a.sin_port = htons(port);
        rc = open_listener(&a);
        if (rc >= 0)
            sw->listen_fd = rc;
        for (uint32_t t = 1; rc >= 0 && t < sw->cfg.threads; t++) {
            a.sin_port = htons((uint16_t)(port + t));
            int fd = udp_open(&a, sw->cfg.socket_buffer);
            if (fd < 0) {
                rc = fd;
                break;
            }
            sw->threads[t].fd = fd;
        }
        if (rc >= 0) {
            sw->port = port;
            return 0;
        }
        close_sockets(sw);
        if (want->sin_port != 0 || rc != -EADDRINUSE)
            break;
    }
    snprintf(err, errlen, "cannot bind %s (TCP and %u UDP port%s): %s", sw->listen_text,
             sw->cfg.threads, sw->cfg.threads > 1 ? "s" : "", strerror(-rc));
    return -1;
}

int switch_start(const switch_config_t *cfg, inagg_switch_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (cfg->threads == 0 || cfg->threads > SWITCH_MAX_THREADS) {
        snprintf(err, errlen, "threads must be 1..%u", SWITCH_MAX_THREADS);
        return -1;
    }
    if (cfg->total_slots == 0) {
        snprintf(err, errlen, "slots must be at least 1");
        return -1;
    }
    struct sockaddr_in addr;
    if (udp_parse_addr(cfg->listen, 0, &addr) != 0) {
        snprintf(err, errlen, "bad listen address '%s' (expected HOST:PORT)", cfg->listen);
        return -1;
    }
    struct inagg_switch *sw = calloc(1, sizeof(*sw));
    if (!sw || posix_memalign((void **)&sw->threads, INAGG_CACHELINE,
                              cfg->threads * sizeof(dp_thread_t)) != 0) {
        free(sw);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    memset(sw->threads, 0, cfg->threads * sizeof(dp_thread_t));
    sw->cfg = *cfg;
    sw->listen_fd = -1;
    sw->next_job_id = 1;
    sw->start_ms = server_now_ms();
    snprintf(sw->listen_text, sizeof(sw->listen_text), "%s", cfg->listen);
    pthread_mutex_init(&sw->stats_lock, NULL);
    for (uint32_t t = 0; t < cfg->threads; t++) {
        dp_thread_t *th = &sw->threads[t];
        th->sw = sw;
        th->index = t;
        th->fd = -1;
        char ferr[128];
        if (faults_parse(&th->faults_in, cfg->faults_in, ferr, sizeof(ferr)) != 0 ||
            faults_parse(&th->faults_out, cfg->faults_out, ferr, sizeof(ferr)) != 0) {
            snprintf(err, errlen, "bad fault spec: %s", ferr);
            switch_stop(sw);
            return -1;
        }
        /* Different threads draw different decisions from the same seed. */
        util_rng_seed(&th->faults_in.rng, th->faults_in.seed * 2654435761u + t);
        util_rng_seed(&th->faults_out.rng, th->faults_out.seed * 2246822519u + t + 99);
    }
    if (bind_all(sw, &addr, err, errlen) != 0) {
        switch_stop(sw);
        return -1;
    }
    char ip[32];
    inet_ntop(AF_INET, &addr.sin_addr, ip, sizeof(ip));
    snprintf(sw->listen_text, sizeof(sw->listen_text), "%s:%u", ip, sw->port);
    for (uint32_t t = 0; t < cfg->threads; t++) {
        atomic_store(&sw->threads[t].running, 1);
        if (pthread_create(&sw->threads[t].tid, NULL, dataplane_main, &sw->threads[t]) != 0) {
            atomic_store(&sw->threads[t].running, 0);
            snprintf(err, errlen, "cannot start dataplane thread %u", t);
            switch_stop(sw);
            return -1;
        }
    }
    if (pthread_create(&sw->control_tid, NULL, control_main, sw) != 0) {
        snprintf(err, errlen, "cannot start the control thread");
        switch_stop(sw);
        return -1;
    }
    sw->control_running = 1;
    *out = sw;
    return 0;
}

uint16_t switch_port(const inagg_switch_t *sw) { return sw->port; }

void switch_stop(inagg_switch_t *sw)
{
    if (!sw)
        return;
    atomic_store(&sw->stop, 1);
    if (sw->control_running)
        pthread_join(sw->control_tid, NULL);
    for (uint32_t t = 0; t < sw->cfg.threads; t++) {
        if (sw->threads[t].tid)
            pthread_join(sw->threads[t].tid, NULL);
        atomic_store(&sw->threads[t].running, 0);
    }
    for (uint32_t i = 0; i < SWITCH_MAX_JOBS; i++) {
        job_t *j = atomic_load(&sw->jobs[i]);
        if (j)
            job_free(j);
    }
    close_sockets(sw);
    for (uint32_t t = 0; t < sw->cfg.threads; t++) {
        faults_free(&sw->threads[t].faults_in);
        faults_free(&sw->threads[t].faults_out);
    }
    pthread_mutex_destroy(&sw->stats_lock);
    free(sw->threads);
    free(sw);
}
