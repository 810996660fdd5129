/*
 * control.c - the switch's control plane: one thread serving TCP connections with the text
 * protocol of control/ctl.h.
 *
 * It admits jobs (JOIN: the first rank registers the job, the others must match; all of
 * them get JOINED once the last one arrives, which makes join a barrier), runs barriers,
 * answers STATS, and watches jobs: a member whose connection closes without LEAVE fails its
 * job at once; a rank that sends nothing for the job's timeout while other ranks keep
 * sending fails it too; a job whose ranks do not all join in time is refused. Failing a job
 * tells every member why, on its connection; other jobs carry on.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.h"
#include "control/ctl.h"
#include "switch/server.h"

#define CTL_MAX_CLIENTS 1024
#define CTL_TICK_MS 50
#define CTL_WRITE_MS 1000
#define SWITCH_MAX_POOL_BYTES (1ull << 30) /* per job */

typedef struct client {
    int fd;
    ctl_reader_t rd;
    job_t *job; /* NULL until JOIN succeeded */
    uint32_t rank;
} client_t;

typedef struct control {
    struct inagg_switch *sw;
    client_t *clients[CTL_MAX_CLIENTS];
    int nclients;
} control_t;

static void send_line(int fd, const char *line)
{
    if (fd >= 0 && ctl_write_line(fd, line, CTL_WRITE_MS) != 0)
        LOG_D("control: could not write to fd %d", fd);
}

static void sendf(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sendf(int fd, const char *fmt, ...)
{
    char line[CTL_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    send_line(fd, line);
}

static void broadcast(job_t *j, const char *line)
{
    for (uint32_t r = 0; r < j->world; r++)
        if (j->member_fd[r] >= 0)
            send_line(j->member_fd[r], line);
}

static void fail_job(job_t *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail_job(job_t *j, const char *fmt, ...)
{
    if (atomic_load(&j->state) == JOB_FAILED)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(j->fail_reason, sizeof(j->fail_reason), fmt, ap);
    va_end(ap);
    atomic_store_explicit(&j->state, JOB_FAILED, memory_order_release);
    LOG_W("job '%s' (id %u) failed: %s", j->name, j->id, j->fail_reason);
    char line[CTL_LINE_MAX];
    snprintf(line, sizeof(line), "FAILED %s", j->fail_reason);
    broadcast(j, line);
}

static void retire_job(struct inagg_switch *sw, job_t *j)
{
    /* Under the stats lock, so a concurrent stats printer never sees a freed job. */
    pthread_mutex_lock(&sw->stats_lock);
    atomic_store_explicit(&sw->jobs[j->id], NULL, memory_order_release);
    server_quiesce(sw);
    sw->slots_used -= j->nslots;
    stats_retire(sw, j);
    job_free(j);
    pthread_mutex_unlock(&sw->stats_lock);
}

static int job_has_members(const job_t *j)
{
    for (uint32_t r = 0; r < j->world; r++)
        if (j->member_fd[r] >= 0)
            return 1;
    return 0;
}

static job_t *find_job(struct inagg_switch *sw, const char *name)
{
    for (uint32_t i = 0; i < SWITCH_MAX_JOBS; i++) {
        job_t *j = atomic_load_explicit(&sw->jobs[i], memory_order_relaxed);
        if (j && strcmp(j->name, name) == 0)
            return j;
    }
    return NULL;
}

static int free_job_id(struct inagg_switch *sw)
{
    for (uint32_t k = 0; k < SWITCH_MAX_JOBS; k++) {
        uint16_t id = (uint16_t)((sw->next_job_id + k) % SWITCH_MAX_JOBS);
        if (id == 0)
            continue; /* id 0 is never used, so a zeroed packet never matches a job */
        if (!atomic_load_explicit(&sw->jobs[id], memory_order_relaxed)) {
            sw->next_job_id = (uint16_t)(id + 1);
            return id;
        }
    }
    return -1;
}

static const char *float_name(uint32_t m) { return m == INAGG_FLOAT_NATIVE ? "native" : "fixed"; }

static void activate(struct inagg_switch *sw, job_t *j)
{
    j->activated_ms = server_now_ms();
    atomic_store_explicit(&j->state, JOB_ACTIVE, memory_order_release);
    char line[CTL_LINE_MAX];
    snprintf(line, sizeof(line),
             "JOINED id=%u token=%u threads=%u port=%u base=%u slots=%u elems=%u float=%s "
             "protocol=%s",
             j->id, j->token, j->nthreads, sw->port, j->base, j->nslots, j->elems,
             float_name(j->float_mode), j->proto->name);
    broadcast(j, line);
    LOG_I("job '%s' (id %u) active: world %u, %u slots of %u elements, float %s, protocol %s",
          j->name, j->id, j->world, j->nslots, j->elems, float_name(j->float_mode),
          j->proto->name);
}

/* A JOIN's optional in-switch optimizer: optimizer=sgd|adagrad|adam|smorms3 params=P and
 * optionally lr= beta1= beta2= eps= eps_place=inside|outside momentum= wd= init=zero|seeded
 * seed=. No optimizer= key: *desc stays "". 0, or -1 with a reason in why. */
static int parse_optimizer(const char *line, optim_config_t *c, uint64_t *nparams,
                           enum optjob_init *init, uint64_t *seed, char *desc, size_t desc_len,
                           char *why, size_t why_len)
{
    char v[64];
    if (ctl_get(line, "optimizer", v, sizeof(v)) != 0)
        return 0;
    if (optim_parse_kind(v, &c->kind) != 0) {
        snprintf(why, why_len, "unknown optimizer '%s' (sgd, adagrad, adam, smorms3)", v);
        return -1;
    }
    char *end;
    if (ctl_get(line, "params", v, sizeof(v)) != 0 || (*nparams = strtoull(v, &end, 10)) == 0 ||
        *end || *nparams > (1ull << 32)) {
        snprintf(why, why_len, "params= must be 1..%llu", 1ull << 32);
        return -1;
    }
    static const char *const keys[] = {"lr", "beta1", "beta2", "eps", "momentum", "wd"};
    float *fields[] = {&c->lr, &c->beta1, &c->beta2, &c->eps, &c->momentum, &c->weight_decay};
    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
        if (ctl_get(line, keys[k], v, sizeof(v)) != 0)
            continue;
        double d = strtod(v, &end);
        if (end == v || *end) {
            snprintf(why, why_len, "%s=%s is not a number", keys[k], v);
            return -1;
        }
        *fields[k] = (float)d;
    }
    if (ctl_get(line, "eps_place", v, sizeof(v)) == 0 && optim_parse_eps(v, &c->eps_placement)) {
        snprintf(why, why_len, "eps_place must be inside or outside");
        return -1;
    }
    if (ctl_get(line, "init", v, sizeof(v)) == 0) {
        if (strcmp(v, "zero") == 0) {
            *init = OPTJOB_INIT_ZERO;
        } else if (strcmp(v, "seeded") == 0) {
            *init = OPTJOB_INIT_SEEDED;
        } else {
            snprintf(why, why_len, "init must be zero or seeded");
            return -1;
        }
    }
    if (ctl_get(line, "seed", v, sizeof(v)) == 0)
        *seed = strtoull(v, NULL, 10);
    if (optim_check(c, why, why_len) != 0)
        return -1;
    snprintf(desc, desc_len,
             "optimizer=%s params=%llu lr=%.9g beta1=%.9g beta2=%.9g eps=%.9g eps_place=%s "
             "momentum=%.9g wd=%.9g init=%s seed=%llu",
             optim_kind_name(c->kind), (unsigned long long)*nparams, (double)c->lr,
             (double)c->beta1, (double)c->beta2, (double)c->eps, optim_eps_name(c->eps_placement),
             (double)c->momentum, (double)c->weight_decay,
             *init == OPTJOB_INIT_SEEDED ? "seeded" : "zero", (unsigned long long)*seed);
    return 0;
}

/* Handle JOIN; returns 0 if the client stays, -1 if it must be closed after the reply. */
static int handle_join(control_t *ctl, client_t *cl, const char *line)
{
    struct inagg_switch *sw = ctl->sw;
    char name[64], fmode[16] = "fixed", proto[16] = "switchml";
    uint32_t version = 0, rank, world, slots, elems, timeout_ms = sw->cfg.worker_timeout_ms;
    if (cl->job) {
        sendf(cl->fd, "ERR invalid this connection already joined job '%s'", cl->job->name);
        return 0;
    }
    if (ctl_get_u32(line, "version", &version) != 0 || version != INAGG_PROTOCOL_VERSION) {
        sendf(cl->fd, "ERR version switch speaks protocol %d, worker sent %u",
              INAGG_PROTOCOL_VERSION, version);
        return -1;
    }
    if (ctl_get(line, "job", name, sizeof(name)) != 0 || ctl_get_u32(line, "rank", &rank) ||
        ctl_get_u32(line, "world", &world) || ctl_get_u32(line, "slots", &slots) ||
        ctl_get_u32(line, "elems", &elems)) {
        sendf(cl->fd, "ERR invalid JOIN needs job, rank, world, slots and elems");
        return -1;
    }
    ctl_get(line, "float", fmode, sizeof(fmode));
    ctl_get(line, "protocol", proto, sizeof(proto));
    ctl_get_u32(line, "timeout", &timeout_ms);
    if (timeout_ms == 0 || timeout_ms > sw->cfg.worker_timeout_ms)
        timeout_ms = sw->cfg.worker_timeout_ms;
    uint32_t float_mode = strcmp(fmode, "native") == 0 ? INAGG_FLOAT_NATIVE : INAGG_FLOAT_FIXED;
    if (world == 0 || world > INAGG_MAX_WORLD || rank >= world) {
        sendf(cl->fd, "ERR invalid rank %u / world %u (world must be 1..%u, rank < world)", rank,
              world, INAGG_MAX_WORLD);
        return -1;
    }
    if (slots == 0 || elems == 0 || elems > WIRE_MAX_ELEMS) {
        sendf(cl->fd, "ERR invalid slots %u / elems %u (elems must be 1..%u)", slots, elems,
              WIRE_MAX_ELEMS);
        return -1;
    }
    if (strcmp(fmode, "fixed") != 0 && strcmp(fmode, "native") != 0) {
        sendf(cl->fd, "ERR invalid float mode '%s' (fixed or native)", fmode);
        return -1;
    }
    const switch_proto_ops_t *ops = NULL;
    for (uint32_t id = 0; !ops && id < 256; id++)
        if ((ops = proto_find(id)) && strcmp(ops->name, proto) != 0)
            ops = NULL;
    if (!ops) {
        char served[128];
        proto_list(served, sizeof(served));
        sendf(cl->fd, "ERR unsupported protocol '%s' (this switch serves %s)", proto, served);
        return -1;
    }
    if (ops->float_native)
        float_mode = INAGG_FLOAT_NATIVE;
    optim_config_t oc = OPTIM_CONFIG_INIT;
    uint64_t nparams = 0, seed = 0;
    enum optjob_init init = OPTJOB_INIT_ZERO;
    char opt_desc[256] = "", why[160] = "";
    if (parse_optimizer(line, &oc, &nparams, &init, &seed, opt_desc, sizeof(opt_desc), why,
                        sizeof(why)) != 0) {
        sendf(cl->fd, "ERR invalid optimizer: %s", why);
        return -1;
    }
    if (opt_desc[0])
        float_mode = INAGG_FLOAT_NATIVE; /* gradients and parameters travel as float32 */
    uint64_t pool_bytes = job_pool_bytes(ops, world, slots, elems, sw->cfg.threads) +
                          (opt_desc[0] ? optjob_bytes(&oc, nparams, elems) : 0);
    if (pool_bytes > SWITCH_MAX_POOL_BYTES) {
        sendf(cl->fd, "ERR refused job '%s' would need %llu MiB of slot memory (limit %llu MiB): "
              "ask for fewer slots or elements per packet", name,
              (unsigned long long)(pool_bytes >> 20),
              (unsigned long long)(SWITCH_MAX_POOL_BYTES >> 20));
        return -1;
    }
    job_t *j = find_job(sw, name);
    if (j) {
        if (atomic_load(&j->state) != JOB_JOINING) {
            sendf(cl->fd, "ERR refused job '%s' is already %s; use a new job name", name,
                  atomic_load(&j->state) == JOB_ACTIVE ? "running" : "failed and retiring");
            return -1;
        }
        if (j->world != world) {
            sendf(cl->fd, "ERR refused world-size mismatch: job '%s' has world %u, rank %u asked "
                  "for %u", name, j->world, rank, world);
            return -1;
        }
        if (j->nslots != slots || j->elems != elems || j->float_mode != float_mode ||
            j->proto != ops) {
            sendf(cl->fd, "ERR refused parameter mismatch: job '%s' has slots=%u elems=%u "
                  "float=%s protocol=%s, rank %u asked for slots=%u elems=%u float=%s "
                  "protocol=%s", name, j->nslots, j->elems, float_name(j->float_mode),
                  j->proto->name, rank, slots, elems, float_name(float_mode), proto);
            return -1;
        }
        if (strcmp(j->opt_desc, opt_desc) != 0) {
            sendf(cl->fd, "ERR refused parameter mismatch: job '%s' has optimizer '%s', rank %u "
                  "asked for '%s'", name, j->opt_desc[0] ? j->opt_desc : "none", rank,
                  opt_desc[0] ? opt_desc : "none");
            return -1;
        }
        if (j->member_fd[rank] >= 0 || j->left[rank]) {
            sendf(cl->fd, "ERR refused duplicate rank %u in job '%s'", rank, name);
            return -1;
        }
    } else {
        uint32_t free_slots = sw->cfg.total_slots - sw->slots_used;
        if (slots > free_slots) {
            sendf(cl->fd, "ERR refused pool exhausted: job '%s' asks %u slots, %u of %u free",
                  name, slots, free_slots, sw->cfg.total_slots);
            return -1;
        }
        int id = free_job_id(sw);
        if (id < 0) {
            sendf(cl->fd, "ERR refused too many jobs (%u)", SWITCH_MAX_JOBS);
            return -1;
        }
        j = job_create((uint16_t)id, name, ops, world, slots, elems, sw->cfg.threads,
                       (uint32_t)id % sw->cfg.threads);
        if (!j) {
            sendf(cl->fd, "ERR refused out of memory for %u slots of %u elements", slots, elems);
            return -1;
        }
        if (opt_desc[0]) {
            char err[160];
            j->opt = optjob_create(&oc, nparams, elems, init, seed, err, sizeof(err));
            j->opt_scratch = calloc((size_t)sw->cfg.threads * elems, sizeof(float));
            if (!j->opt || !j->opt_scratch) {
                sendf(cl->fd, "ERR refused optimizer: %s", j->opt ? "out of memory" : err);
                job_free(j);
                return -1;
            }
            snprintf(j->opt_desc, sizeof(j->opt_desc), "%s", opt_desc);
        }
        uint32_t token = 0;
        while (token == 0)
            if (getrandom(&token, sizeof(token), 0) != sizeof(token))
                token = (uint32_t)util_now_ns() ^ ((uint32_t)id << 16);
        j->token = token;
        j->float_mode = float_mode;
        j->timeout_ms = timeout_ms;
        j->created_ms = server_now_ms();
        sw->slots_used += slots;
        atomic_store_explicit(&j->state, JOB_JOINING, memory_order_relaxed);
        atomic_store_explicit(&sw->jobs[id], j, memory_order_release);
        LOG_I("job '%s' (id %u) registered by rank %u: world %u", name, id, rank, world);
    }
    j->member_fd[rank] = cl->fd;
    j->joined++;
    cl->job = j;
    cl->rank = rank;
    if (j->joined == j->world)
        activate(sw, j);
    return 0;
}

static void handle_barrier(client_t *cl)
{
    job_t *j = cl->job;
    if (!j) {
        sendf(cl->fd, "ERR invalid BARRIER before JOIN");
        return;
    }
    if (atomic_load(&j->state) == JOB_FAILED) {
        sendf(cl->fd, "FAILED %s", j->fail_reason);
        return;
    }
    if (j->in_barrier[cl->rank])
        return;
    j->in_barrier[cl->rank] = 1;
    if (++j->barrier_count < j->world)
        return;
    memset(j->in_barrier, 0, sizeof(j->in_barrier));
    j->barrier_count = 0;
    j->barrier_epoch++;
    broadcast(j, "BARRIER_DONE");
}

static void handle_stats(control_t *ctl, client_t *cl, const char *line)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) {
        sendf(cl->fd, "ERR system out of memory");
        return;
    }
    switch_write_stats(ctl->sw, f, strstr(line, "json") != NULL);
    fclose(f);
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
        send_line(cl->fd, l);
    send_line(cl->fd, "END");
    free(text);
}

static void drop_client(control_t *ctl, int idx)
{
    client_t *cl = ctl->clients[idx];
    job_t *j = cl->job;
    if (j && j->member_fd[cl->rank] == cl->fd) {
        j->member_fd[cl->rank] = -1;
        if (!j->left[cl->rank]) {
            if (atomic_load(&j->state) == JOB_JOINING) {
                j->joined--; /* a rank that gave up joining may come back */
            } else {
                fail_job(j, "rank %u disconnected (its control connection closed: the "
                         "process exited or crashed)", cl->rank);
            }
        }
        if (!job_has_members(j))
            retire_job(ctl->sw, j);
    }
    close(cl->fd);
    free(cl);
    ctl->clients[idx] = ctl->clients[--ctl->nclients];
}

/* Returns -1 if the client must be dropped. */
static int serve_client(control_t *ctl, client_t *cl)
{
    long got = ctl_fill(cl->fd, &cl->rd);
    if (got == 0 || (got < 0 && got != -EAGAIN))
        return -1;
    char line[CTL_LINE_MAX];
    while (ctl_take_line(&cl->rd, line, sizeof(line))) {
        if (ctl_is(line, "JOIN")) {
            if (handle_join(ctl, cl, line) != 0)
                return -1;
        } else if (ctl_is(line, "BARRIER")) {
            handle_barrier(cl);
        } else if (ctl_is(line, "LEAVE")) {
            if (cl->job)
                cl->job->left[cl->rank] = 1;
            send_line(cl->fd, "BYE");
        } else if (ctl_is(line, "STATS")) {
            handle_stats(ctl, cl, line);
        } else {
            sendf(cl->fd, "ERR invalid unknown request '%.40s'", line);
        }
    }
    return 0;
}

static void check_jobs(control_t *ctl)
{
    struct inagg_switch *sw = ctl->sw;
    uint64_t now = server_now_ms();
    for (uint32_t id = 0; id < SWITCH_MAX_JOBS; id++) {
        job_t *j = atomic_load_explicit(&sw->jobs[id], memory_order_relaxed);
        if (!j)
            continue;
        int state = atomic_load(&j->state);
        if (state == JOB_JOINING && now - j->created_ms > j->timeout_ms) {
            char missing[256] = "";
            size_t off = 0;
            for (uint32_t r = 0; r < j->world && off < sizeof(missing) - 12; r++)
                if (j->member_fd[r] < 0)
                    off += (size_t)snprintf(missing + off, sizeof(missing) - off, "%s%u",
                                            off ? "," : "", r);
            char line[CTL_LINE_MAX];
            snprintf(line, sizeof(line),
                     "ERR timeout only %u of %u ranks joined job '%s' within %u ms; missing "
                     "ranks: %s", j->joined, j->world, j->name, j->timeout_ms, missing);
            broadcast(j, line);
            LOG_W("%s", line + 4);
            fail_job(j, "join timed out");
            for (int i = ctl->nclients - 1; i >= 0; i--)
                if (ctl->clients[i]->job == j)
                    drop_client(ctl, i); /* the last drop retires the job */
            continue;
        }
        if (state != JOB_ACTIVE)
            continue;
        uint64_t newest = 0, oldest = UINT64_MAX;
        uint32_t oldest_rank = 0;
        for (uint32_t r = 0; r < j->world; r++) {
            uint64_t seen = j->activated_ms;
            for (uint32_t t = 0; t < j->nthreads; t++) {
                uint64_t s = STAT_GET(j->threads[t].last_seen_ms[r]);
                if (s > seen)
                    seen = s;
            }
            if (seen > newest)
                newest = seen;
            if (seen < oldest) {
                oldest = seen;
                oldest_rank = r;
            }
        }
        if (now - oldest > j->timeout_ms && now - newest < j->timeout_ms / 2 + 1)
            fail_job(j, "rank %u sent nothing for %llu ms while other ranks were waiting on it "
                     "(worker timeout %u ms)%s", oldest_rank,
                     (unsigned long long)(now - oldest), j->timeout_ms,
                     j->left[oldest_rank] ? "; it had left the job" : "");
    }
}

void *control_main(void *arg)
{
    control_t *ctl = calloc(1, sizeof(*ctl));
    struct inagg_switch *sw = arg;
    if (!ctl) {
        LOG_E("control thread: out of memory");
        return NULL;
    }
    ctl->sw = sw;
    struct pollfd *pfds = calloc(CTL_MAX_CLIENTS + 1, sizeof(*pfds));
    if (!pfds) {
        free(ctl);
        LOG_E("control thread: out of memory");
        return NULL;
    }
    uint64_t last_check = 0;
    while (!atomic_load(&sw->stop)) {
        pfds[0] = (struct pollfd){.fd = sw->listen_fd, .events = POLLIN};
        for (int i = 0; i < ctl->nclients; i++)
            pfds[i + 1] = (struct pollfd){.fd = ctl->clients[i]->fd, .events = POLLIN};
        int n = ctl->nclients;
        int pr = poll(pfds, (nfds_t)n + 1, CTL_TICK_MS);
        if (pr < 0 && errno != EINTR)
            LOG_W("control: poll: %s", strerror(errno));
        if (pr > 0 && (pfds[0].revents & POLLIN)) {
            int fd = accept4(sw->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd >= 0) {
                client_t *cl = calloc(1, sizeof(*cl));
                if (!cl || ctl->nclients >= CTL_MAX_CLIENTS) {
                    send_line(fd, "ERR refused too many control connections");
                    close(fd);
                    free(cl);
                } else {
                    cl->fd = fd;
                    ctl->clients[ctl->nclients++] = cl;
                }
            }
        }
        /* Serve in reverse so dropping (swap with last) does not skip a client. */
        for (int i = n - 1; i >= 0; i--) {
            if (pr > 0 && pfds[i + 1].revents && serve_client(ctl, ctl->clients[i]) != 0)
                drop_client(ctl, i);
        }
        uint64_t now = server_now_ms();
        if (now - last_check >= CTL_TICK_MS) {
            check_jobs(ctl);
            last_check = now;
        }
    }
    while (ctl->nclients > 0)
        drop_client(ctl, ctl->nclients - 1);
    free(pfds);
    free(ctl);
    return NULL;
}
