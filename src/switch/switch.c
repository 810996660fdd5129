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

#include "json/json.h"
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

static const char *state_name(int s)
{
    return s == JOB_ACTIVE ? "active" : s == JOB_JOINING ? "joining" : "failed";
}

#define JOB_SUM(j, f) job_sum((j), offsetof(job_counters_t, f))

/* The switch-wide counters, summed over the dataplane threads. */
typedef struct thread_totals {
    uint64_t in, out, faults, drops[DROP_REASON_COUNT];
} thread_totals_t;

static void sum_threads(inagg_switch_t *sw, thread_totals_t *tt)
{
    memset(tt, 0, sizeof(*tt));
    for (uint32_t t = 0; t < sw->cfg.threads; t++) {
        tt->in += STAT_GET(sw->threads[t].packets_in);
        tt->out += STAT_GET(sw->threads[t].packets_out);
        tt->faults += STAT_GET(sw->threads[t].fault_drops);
        for (int r = 0; r < DROP_REASON_COUNT; r++)
            tt->drops[r] += STAT_GET(sw->threads[t].drops[r]);
    }
}

static void write_text(inagg_switch_t *sw, FILE *out)
{
    thread_totals_t tt;
    sum_threads(sw, &tt);
    fprintf(out, "switch %s threads=%u slots_used=%u/%u uptime_s=%.1f\n", sw->listen_text,
            sw->cfg.threads, sw->slots_used, sw->cfg.total_slots,
            (double)(server_now_ms() - sw->start_ms) / 1000.0);
    fprintf(out, "packets in=%llu out=%llu injected_drops=%llu\n", (unsigned long long)tt.in,
            (unsigned long long)tt.out, (unsigned long long)tt.faults);
    fprintf(out, "dropped before any job:");
    int any = 0;
    for (int r = 0; r < DROP_REASON_COUNT; r++)
        if (tt.drops[r]) {
            fprintf(out, " %s=%llu", drop_reason_name(r), (unsigned long long)tt.drops[r]);
            any = 1;
        }
    fprintf(out, "%s\n", any ? "" : " none");
    for (uint32_t i = 0; i < SWITCH_MAX_JOBS; i++) {
        job_t *j = atomic_load(&sw->jobs[i]);
        if (!j)
            continue;
        fprintf(out,
                "job %u name=%s state=%s protocol=%s world=%u slots=%u elems=%u float=%s "
                "contributions=%llu rounds=%llu results_sent=%llu resends=%llu acks=%llu "
                "confirms_sent=%llu confirm_resends=%llu optimizer=%s optimizer_steps=%llu "
                "bytes_in=%llu bytes_out=%llu drops:",
                j->id, j->name, state_name(atomic_load(&j->state)),
                j->protocol == INAGG_PROTO_P4SGD ? "p4sgd" : "switchml", j->world, j->nslots,
                j->elems, j->float_mode == INAGG_FLOAT_NATIVE ? "native" : "fixed",
                (unsigned long long)JOB_SUM(j, contributions),
                (unsigned long long)JOB_SUM(j, rounds),
                (unsigned long long)JOB_SUM(j, results_sent),
                (unsigned long long)JOB_SUM(j, resends), (unsigned long long)JOB_SUM(j, acks),
                (unsigned long long)JOB_SUM(j, confirms_sent),
                (unsigned long long)JOB_SUM(j, confirm_resends),
                j->opt ? optim_kind_name(j->opt->cfg.kind) : "none",
                (unsigned long long)JOB_SUM(j, opt_steps),
                (unsigned long long)JOB_SUM(j, bytes_in),
                (unsigned long long)JOB_SUM(j, bytes_out));
        any = 0;
        for (int r = 0; r < DROP_REASON_COUNT; r++) {
            uint64_t d = job_sum_drop(j, r);
            if (d) {
                fprintf(out, " %s=%llu", drop_reason_name(r), (unsigned long long)d);
                any = 1;
            }
        }
        fprintf(out, "%s\n", any ? "" : " none");
    }
    uint64_t first = sw->nretired > SWITCH_RETIRED_KEEP ? sw->nretired - SWITCH_RETIRED_KEEP : 0;
    for (uint64_t k = first; k < sw->nretired; k++) {
        const retired_job_t *r = &sw->retired[k % SWITCH_RETIRED_KEEP];
        fprintf(out,
                "retired job %u name=%s protocol=%s world=%u contributions=%llu rounds=%llu "
                "resends=%llu acks=%llu confirms_sent=%llu confirm_resends=%llu drops=%llu\n",
                r->id, r->name, r->protocol == INAGG_PROTO_P4SGD ? "p4sgd" : "switchml",
                r->world, (unsigned long long)r->contributions, (unsigned long long)r->rounds,
                (unsigned long long)r->resends, (unsigned long long)r->acks,
                (unsigned long long)r->confirms_sent, (unsigned long long)r->confirm_resends,
                (unsigned long long)r->drops);
    }
}

static void write_json(inagg_switch_t *sw, FILE *out)
{
    json_writer_t w;
    json_init(&w);
    json_begin_object(&w, NULL);
    json_string(&w, "listen", sw->listen_text);
    json_int(&w, "threads", sw->cfg.threads);
    json_int(&w, "slots_total", sw->cfg.total_slots);
    json_int(&w, "slots_used", sw->slots_used);
    thread_totals_t tt;
    sum_threads(sw, &tt);
    json_int(&w, "packets_in", (int64_t)tt.in);
    json_int(&w, "packets_out", (int64_t)tt.out);
    json_int(&w, "injected_drops", (int64_t)tt.faults);
    json_begin_object(&w, "drops");
    for (int r = 1; r < DROP_REASON_COUNT; r++)
        json_int(&w, drop_reason_name(r), (int64_t)tt.drops[r]);
    json_end_object(&w);
    json_begin_array(&w, "jobs");
    for (uint32_t i = 0; i < SWITCH_MAX_JOBS; i++) {
        job_t *j = atomic_load(&sw->jobs[i]);
        if (!j)
            continue;
        json_newline(&w); /* one line per job, and its drops on the next */
        json_begin_object(&w, NULL);
        json_int(&w, "id", j->id);
        json_string(&w, "name", j->name);
        json_string(&w, "state", state_name(atomic_load(&j->state)));
        json_int(&w, "world", j->world);
        json_int(&w, "slots", j->nslots);
        json_int(&w, "elems", j->elems);
        json_int(&w, "contributions", (int64_t)JOB_SUM(j, contributions));
        json_int(&w, "rounds", (int64_t)JOB_SUM(j, rounds));
        json_int(&w, "results_sent", (int64_t)JOB_SUM(j, results_sent));
        json_int(&w, "resends", (int64_t)JOB_SUM(j, resends));
        json_string(&w, "protocol", j->protocol == INAGG_PROTO_P4SGD ? "p4sgd" : "switchml");
        json_int(&w, "acks", (int64_t)JOB_SUM(j, acks));
        json_int(&w, "confirms_sent", (int64_t)JOB_SUM(j, confirms_sent));
        json_int(&w, "confirm_resends", (int64_t)JOB_SUM(j, confirm_resends));
        json_int(&w, "confirms_piggybacked", (int64_t)JOB_SUM(j, confirms_piggybacked));
        json_int(&w, "optimizer_steps", (int64_t)JOB_SUM(j, opt_steps));
        json_int(&w, "parameter_uploads", (int64_t)JOB_SUM(j, opt_uploads));
        json_string(&w, "optimizer", j->opt ? optim_kind_name(j->opt->cfg.kind) : "none");
        json_int(&w, "bytes_in", (int64_t)JOB_SUM(j, bytes_in));
        json_int(&w, "bytes_out", (int64_t)JOB_SUM(j, bytes_out));
        json_newline(&w);
        json_begin_object(&w, "drops");
        for (int r = 1; r < DROP_REASON_COUNT; r++)
            json_int(&w, drop_reason_name(r), (int64_t)job_sum_drop(j, r));
        json_end_object(&w);
        json_end_object(&w);
    }
    json_end_array(&w);
    json_begin_array(&w, "retired_jobs"); /* the last jobs to finish, oldest first */
    uint64_t first = sw->nretired > SWITCH_RETIRED_KEEP ? sw->nretired - SWITCH_RETIRED_KEEP : 0;
    for (uint64_t k = first; k < sw->nretired; k++) {
        const retired_job_t *r = &sw->retired[k % SWITCH_RETIRED_KEEP];
        json_newline(&w);
        json_begin_object(&w, NULL);
        json_int(&w, "id", r->id);
        json_string(&w, "name", r->name);
        json_string(&w, "protocol", r->protocol == INAGG_PROTO_P4SGD ? "p4sgd" : "switchml");
        json_int(&w, "world", r->world);
        json_int(&w, "contributions", (int64_t)r->contributions);
        json_int(&w, "rounds", (int64_t)r->rounds);
        json_int(&w, "results_sent", (int64_t)r->results_sent);
        json_int(&w, "resends", (int64_t)r->resends);
        json_int(&w, "acks", (int64_t)r->acks);
        json_int(&w, "confirms_sent", (int64_t)r->confirms_sent);
        json_int(&w, "confirm_resends", (int64_t)r->confirm_resends);
        json_int(&w, "optimizer_steps", (int64_t)r->optimizer_steps);
        json_int(&w, "drops", (int64_t)r->drops);
        json_end_object(&w);
    }
    json_end_array(&w);
    json_end_object(&w);
    const char *t = json_text(&w);
    fprintf(out, "%s\n", t ? t : "{}");
    json_free(&w);
}

void switch_write_stats(inagg_switch_t *sw, FILE *out, int json)
{
    pthread_mutex_lock(&sw->stats_lock);
    if (json)
        write_json(sw, out);
    else
        write_text(sw, out);
    pthread_mutex_unlock(&sw->stats_lock);
}
