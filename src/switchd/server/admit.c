/*
 * admit.c - JOIN on the switch (PROTOCOL.md 5.3, 5.8, 5.9): the parameters checked, the job
 * secret proved (HELLO gives a connection a one-time nonce; a JOIN carries the job's
 * verifier when it registers the job, else a proof over that nonce, compared in constant
 * time; failed attempts counted and rate limited per address and job, authlimit.h), the slot quotas per job and
 * per address and the pool, and the job registered and joined; the last rank's JOIN completes
 * it (lifecycle.h: JOIN_COMPLETE).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "lib/base/log.h"
#include "lib/codec/codec.h"
#include "switchd/server/codecjob.h"
#include "switchd/server/control_int.h"

/* The next job id not in use (never 0), or -ENOSPC when every one is. */
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
    return -ENOSPC;
}

/* The published job of that name, or NULL. */
static job_t *find_job(struct inagg_switch *sw, const char *name)
{
    for (uint32_t i = 0; i < SWITCH_MAX_JOBS; i++) {
        job_t *j = atomic_load_explicit(&sw->jobs[i], memory_order_relaxed);
        if (j && strcmp(j->name, name) == 0)
            return j;
    }
    return NULL;
}

/* A JOIN for job j, which is still joining: does it match? 0, or -ECONNREFUSED after
 * refusing it. A rank that asks for another world size fails the job for every rank: they
 * could never all join it. */
static int join_matches(control_t *ctl, const client_t *cl, job_t *j, const wire_join_t *jn,
                        const switch_proto_ops_t *ops, uint32_t float_mode)
{
    if (!life_is_joining(atomic_load(&j->state)))
        return conn_send_err(
            ctl, cl->fd, WIRE_REFUSED, "job '%s' is already %s; use a new job name", jn->job,
            atomic_load(&j->state) == LIFE_ACTIVE ? "running" : "failed and retiring");
    if (j->world != jn->world) {
        char text[CTL_LINE_MAX - 64];
        snprintf(text, sizeof(text),
                 "world-size mismatch: job '%s' has world %u, rank %u asked for %u", jn->job,
                 j->world, jn->rank, jn->world);
        life_apply(ctl, j, LIFE_JOIN_REFUSED,
                   &(life_cause_t){.refusal = WIRE_REFUSED, .text = text});
        return conn_send_err(ctl, cl->fd, WIRE_REFUSED, "%s", text);
    }
    if (j->nslots != jn->slots || j->elems != jn->elems || j->float_mode != float_mode ||
        j->proto != ops) {
        return conn_send_err(ctl, cl->fd, WIRE_REFUSED,
                             "parameter mismatch: job '%s' has slots=%u elems=%u "
                             "float=%s protocol=%s, rank %u asked for slots=%u elems=%u float=%s "
                             "protocol=%s",
                             jn->job, j->nslots, j->elems, wire_float_mode_name(j->float_mode),
                             j->proto->name, jn->rank, jn->slots, jn->elems,
                             wire_float_mode_name(float_mode), ops->name);
    }
    if (!wire_optimizer_equal(&j->opt_cfg, &jn->opt)) {
        char has[256], asked[256];
        wire_optimizer_format(&j->opt_cfg, has, sizeof(has));
        wire_optimizer_format(&jn->opt, asked, sizeof(asked));
        return conn_send_err(ctl, cl->fd, WIRE_REFUSED,
                             "parameter mismatch: job '%s' has optimizer '%s', rank "
                             "%u asked for '%s'",
                             jn->job, has, jn->rank, asked);
    }
    if (j->member_fd[jn->rank] >= 0 || j->left[jn->rank])
        return conn_send_err(ctl, cl->fd, WIRE_REFUSED, "duplicate rank %u in job '%s'", jn->rank,
                             jn->job);
    return 0;
}

/* An address that registered CTL_MAX_JOINING_PER_ADDR jobs still waiting for their ranks
 * registers one more: the oldest of them is removed (its members are refused and told why),
 * so jobs that never become complete cannot hold the switch's job ids; each also expires at
 * its join timeout (control.c check_jobs). */
static void make_room_to_join(control_t *ctl, const peer_t *p)
{
    struct inagg_switch *sw = ctl->sw;
    job_t *oldest = NULL;
    uint32_t n = 0;
    for (uint32_t id = 1; id < SWITCH_MAX_JOBS; id++) {
        job_t *j = atomic_load_explicit(&sw->jobs[id], memory_order_relaxed);
        if (!j || j->owner != p || !life_is_joining(atomic_load(&j->state)))
            continue;
        n++;
        if (!oldest || j->created_ms < oldest->created_ms)
            oldest = j;
    }
    if (n < CTL_MAX_JOINING_PER_ADDR || !oldest)
        return;
    char text[CTL_LINE_MAX - 64];
    snprintf(text, sizeof(text),
             "job '%s' removed: its address registered %u jobs that are "
             "still waiting for their ranks, the most one address may hold, and this was the "
             "oldest (%u of %u ranks joined)",
             oldest->name, n, oldest->joined, oldest->world);
    conn_count(sw, CTL_JOINING_EVICTED);
    life_apply(ctl, oldest, LIFE_JOIN_REFUSED,
               &(life_cause_t){.refusal = WIRE_REFUSED, .text = text});
}

/* The first JOIN of a job: create and publish it. The job, or NULL after refusing. */
static job_t *register_job(control_t *ctl, const client_t *cl, const wire_join_t *jn,
                           const switch_proto_ops_t *ops, uint32_t float_mode,
                           const codec_spec_t *codec, int feedback)
{
    struct inagg_switch *sw = ctl->sw;
    if (jn->slots > ctl->max_job_slots) {
        conn_count(sw, CTL_JOB_QUOTA);
        conn_send_err(ctl, cl->fd, WIRE_REFUSED,
                      "slot quota: job '%s' asks %u slots, one job may "
                      "hold at most %u",
                      jn->job, jn->slots, ctl->max_job_slots);
        return NULL;
    }
    if ((uint64_t)cl->peer->slots + jn->slots > ctl->max_addr_slots) {
        char who[64];
        peers_format(cl->peer, who, sizeof(who));
        conn_count(sw, CTL_ADDR_QUOTA);
        conn_send_err(ctl, cl->fd, WIRE_REFUSED_BUSY,
                      "slot quota: jobs registered from %s hold %u slots; "
                      "%u more would pass the per-address quota of %u",
                      who, cl->peer->slots, jn->slots, ctl->max_addr_slots);
        return NULL;
    }
    uint32_t free_slots = sw->cfg.total_slots - atomic_load(&sw->slots_used);
    if (jn->slots > free_slots) {
        conn_count(sw, CTL_POOL_FULL);
        conn_send_err(ctl, cl->fd, WIRE_REFUSED_BUSY,
                      "pool exhausted: job '%s' asks %u slots, %u of %u "
                      "free",
                      jn->job, jn->slots, free_slots, sw->cfg.total_slots);
        return NULL;
    }
    make_room_to_join(ctl, cl->peer);
    int id = free_job_id(sw);
    if (id < 0) {
        conn_send_err(ctl, cl->fd, WIRE_REFUSED_BUSY, "too many jobs (%u)", SWITCH_MAX_JOBS);
        return NULL;
    }
    job_t *j = job_create((uint16_t)id, jn->job, ops, jn->world, jn->slots, jn->elems,
                          sw->cfg.threads, (uint32_t)id % sw->cfg.threads);
    if (!j) {
        conn_send_err(ctl, cl->fd, WIRE_REFUSED, "out of memory for %u slots of %u elements",
                      jn->slots, jn->elems);
        return NULL;
    }
    if (jn->opt.present) {
        char err[160];
        int orc = optjob_create(&jn->opt.step, jn->opt.params, jn->elems,
                                jn->opt.seeded ? OPTJOB_INIT_SEEDED : OPTJOB_INIT_ZERO,
                                jn->opt.seed, &j->opt, err, sizeof(err));
        j->opt_scratch = calloc((size_t)sw->cfg.threads * jn->elems, sizeof(float));
        if (orc < 0 || !j->opt_scratch) {
            conn_send_err(ctl, cl->fd, WIRE_REFUSED, "optimizer: %s",
                          orc < 0 ? err : "out of memory");
            job_free(j);
            return NULL;
        }
        j->opt_cfg = jn->opt;
    }
    j->codec = *codec;
    j->codec_feedback = feedback;
    if (codec->mode != CODEC_NONE &&
        !(j->codec_state =
              codecjob_create(codec, feedback, sw->cfg.threads, jn->slots, jn->elems))) {
        conn_send_err(ctl, cl->fd, WIRE_REFUSED_SYSTEM, "out of memory for compression state");
        job_free(j);
        return NULL;
    }
    if (jn->auth == WIRE_AUTH_VERIFIER) {
        memcpy(j->verifier, jn->mac, sizeof(j->verifier));
        j->has_verifier = 1;
        j->dp_auth = !jn->no_dpauth;
    }
    uint64_t token = 0;
    for (int tries = 0; token == 0 && tries < 8; tries++)
        if (getrandom(&token, sizeof(token), 0) != (ssize_t)sizeof(token))
            token = 0;
    if (token == 0) {
        conn_send_err(ctl, cl->fd, WIRE_REFUSED_SYSTEM, "no random numbers for the job's token");
        job_free(j);
        return NULL;
    }
    j->token = token;
    j->float_mode = float_mode;
    j->timeout_ms = jn->timeout_ms == 0 || jn->timeout_ms > sw->cfg.worker_timeout_ms
                        ? sw->cfg.worker_timeout_ms
                        : jn->timeout_ms;
    j->created_ms = server_now_ms();
    j->gen = jn->gen;
    j->owner = cl->peer;
    cl->peer->slots += jn->slots;
    atomic_fetch_add(&sw->slots_used, jn->slots);
    atomic_store_explicit(&j->state, LIFE_JOINING, memory_order_relaxed);
    atomic_store_explicit(&sw->jobs[id], j, memory_order_release);
    LOG_I("job '%s' (id %u) registered by rank %u: world %u", jn->job, id, jn->rank, jn->world);
    return j;
}

/* A failed authentication: counted for the address and job (that pair is refused for a while
 * past AUTH_FAIL_LIMIT, authlimit.h) and switch-wide; the reason never contains the secret or
 * the proof. */
static int auth_failed(control_t *ctl, const client_t *cl, const wire_join_t *jn, const char *why)
{
    peer_t *p = cl->peer;
    authlimit_fail(&ctl->auth, p->addr, jn->job, server_now_ms());
    conn_count(ctl->sw, CTL_AUTH_FAILED);
    char who[64];
    peers_format(p, who, sizeof(who));
    LOG_W("control: JOIN of job '%s' rank %u from %s: authentication failed (%s)", jn->job,
          jn->rank, who, why);
    return conn_send_err(ctl, cl->fd, WIRE_REFUSED,
                         "authentication failed for job '%s' rank %u: %s", jn->job, jn->rank, why);
}

/* Does the JOIN prove the job's secret (PROTOCOL.md "Authentication")? j is the job of that
 * name, NULL if it is new. 0, or -ECONNREFUSED after refusing. */
static int authenticate(control_t *ctl, client_t *cl, const job_t *j, const wire_join_t *jn)
{
    int had_nonce = cl->has_nonce;
    cl->has_nonce = 0; /* a challenge answers one JOIN */
    uint64_t locked = authlimit_locked_ms(&ctl->auth, cl->peer->addr, jn->job, server_now_ms());
    if (locked) {
        conn_count(ctl->sw, CTL_AUTH_LIMITED);
        return conn_send_err(ctl, cl->fd, WIRE_REFUSED_BUSY,
                             "too many failed authentications from this address for job '%s'; "
                             "try again in %llu ms",
                             jn->job, (unsigned long long)locked);
    }
    if (!j) {
        if (jn->auth == WIRE_AUTH_PROOF)
            return conn_send_err(ctl, cl->fd, WIRE_REFUSED,
                                 "job '%s' is not registered (any more); join "
                                 "again",
                                 jn->job);
        if (jn->auth == WIRE_AUTH_NONE && ctl->sw->cfg.require_secret)
            return auth_failed(ctl, cl, jn,
                               "this switch admits only jobs with a secret "
                               "(INAGG_JOB_SECRET)");
        return 0;
    }
    if (!j->has_verifier)
        return jn->auth == WIRE_AUTH_NONE
                   ? 0
                   : auth_failed(ctl, cl, jn, "the job was registered without a secret");
    if (jn->auth == WIRE_AUTH_NONE)
        return auth_failed(ctl, cl, jn, "the job has a secret and this rank gave none");
    uint8_t want[SHA256_BYTES];
    if (jn->auth == WIRE_AUTH_PROOF) {
        if (!had_nonce)
            return auth_failed(ctl, cl, jn, "proof= without a CHALLENGE on this connection");
        wire_auth_proof(j->verifier, cl->nonce, jn->job, jn->rank, want);
    } else {
        memcpy(want, j->verifier, sizeof(want));
    }
    if (!mem_equal_ct(want, jn->mac, sizeof(want)))
        return auth_failed(ctl, cl, jn, "wrong job secret");
    return 0;
}

/* HELLO job=NAME: a fresh nonce for this connection's next JOIN, and whether the job exists
 * (its first rank registers it with its verifier, the others prove the secret). */
void admit_hello(control_t *ctl, client_t *cl, const char *line)
{
    char name[WIRE_JOB_NAME_MAX] = "", hex[2 * WIRE_NONCE_BYTES + 1], out[CTL_LINE_MAX];
    ctlline_get(line, "job", name, sizeof(name));
    if (getrandom(cl->nonce, sizeof(cl->nonce), 0) != (ssize_t)sizeof(cl->nonce)) {
        conn_send_err(ctl, cl->fd, WIRE_REFUSED_SYSTEM, "no random numbers for a challenge");
        return;
    }
    cl->has_nonce = 1;
    hex_encode(cl->nonce, sizeof(cl->nonce), hex);
    snprintf(out, sizeof(out), "%s nonce=%s job=%s", wire_verb_name(WIRE_VERB_CHALLENGE), hex,
             name[0] && find_job(ctl->sw, name) ? "exists" : "new");
    conn_send_line(ctl, cl->fd, out);
}

/* A JOIN of job *j under another generation (after authenticate: only the job's ranks can
 * do this). An older one is refused as stale. A newer one means the job's ranks failed over
 * to this switch again (it was frozen, or restarted faster than they noticed): the old
 * generation is superseded (failed, its connections closed, so it retires) and the JOIN is
 * refused as busy, which its client retries; the retry registers the new generation once
 * the old job retired. -ECONNREFUSED after refusing. */
static int generation_differs(control_t *ctl, client_t *cl, job_t **j, const wire_join_t *jn)
{
    job_t *old = *j;
    if (jn->gen < old->gen)
        return conn_send_err(ctl, cl->fd, WIRE_REFUSED,
                             "stale generation: job '%s' runs generation %u, rank %u joined "
                             "generation %u",
                             jn->job, old->gen, jn->rank, jn->gen);
    char text[160];
    snprintf(text, sizeof(text), "superseded: its ranks joined generation %u", jn->gen);
    life_apply(ctl, old, LIFE_SUPERSEDED, &(life_cause_t){.text = text});
    return conn_send_err(ctl, cl->fd, WIRE_REFUSED_BUSY,
                         "job '%s' generation %u is retiring; generation %u joins once it has",
                         jn->job, old->gen, jn->gen);
}

/* Handle JOIN; returns 0 if the client stays, -1 if it must be closed after the reply. */
int admit_join(control_t *ctl, client_t *cl, const char *line)
{
    struct inagg_switch *sw = ctl->sw;
    if (cl->job) {
        conn_send_err(ctl, cl->fd, WIRE_REFUSED_INVALID, "this connection already joined job '%s'",
                      cl->job->name);
        return 0;
    }
    wire_join_t jn;
    enum wire_refusal refusal;
    char why[CTL_LINE_MAX - 32];
    if (wire_join_parse(line, &jn, &refusal, why, sizeof(why)) != 0)
        return conn_send_err(ctl, cl->fd, refusal, "%s", why);
    const switch_proto_ops_t *ops = proto_find(jn.protocol);
    if (!ops) {
        char served[128];
        proto_list(served, sizeof(served));
        return conn_send_err(ctl, cl->fd, WIRE_REFUSED_UNSUPPORTED,
                             "protocol '%s' (this switch serves %s)",
                             wire_protocol_name(jn.protocol), served);
    }
    /* Native float32 when the protocol adds it so, or the optimizer's gradients and
     * parameters travel as float32. */
    uint32_t float_mode = ops->float_native || jn.opt.present ? INAGG_FLOAT_NATIVE : jn.float_mode;
    uint64_t pool_bytes =
        job_pool_bytes(ops, jn.world, jn.slots, jn.elems, sw->cfg.threads) +
        (jn.opt.present ? optjob_bytes(&jn.opt.step, jn.opt.params, jn.elems) : 0);
    if (pool_bytes > SWITCH_MAX_POOL_BYTES)
        return conn_send_err(ctl, cl->fd, WIRE_REFUSED,
                             "job '%s' would need %llu MiB of slot memory (limit %llu "
                             "MiB): ask for fewer slots or elements per packet",
                             jn.job, (unsigned long long)(pool_bytes >> 20),
                             (unsigned long long)(SWITCH_MAX_POOL_BYTES >> 20));
    codec_spec_t codec = {CODEC_NONE, 0};
    if (jn.compress[0]) {
        char cwhy[200];
        if (codec_parse(jn.compress, &codec, cwhy, sizeof(cwhy)) != 0)
            return conn_send_err(ctl, cl->fd, WIRE_REFUSED_INVALID, "%s", cwhy);
        if (codec.mode != CODEC_NONE && (ops->id != INAGG_PROTO_SWITCHML || jn.opt.present))
            return conn_send_err(ctl, cl->fd, WIRE_REFUSED_UNSUPPORTED,
                                 "compress=%s: only switchml jobs without an optimizer compress",
                                 jn.compress);
        if (codec.mode != CODEC_NONE &&
            WIRE_HEADER_SIZE + codec_max_bytes(&codec, jn.elems) > WIRE_MAX_DATAGRAM) {
            return conn_send_err(ctl, cl->fd, WIRE_REFUSED_INVALID,
                                 "compress=%s: %u values per packet may not fit a datagram",
                                 jn.compress, jn.elems);
        }
        if (codec.mode != CODEC_NONE)
            float_mode = INAGG_FLOAT_NATIVE;
    }
    if (sw->cfg.upstream && (codec.mode != CODEC_NONE || jn.opt.present))
        return conn_send_err(ctl, cl->fd, WIRE_REFUSED_UNSUPPORTED,
                             "this is a leaf switch (--upstream): it aggregates plain int32 and "
                             "float32 jobs, without compression or an in-switch optimizer");
    int feedback = codec_is_lossy(&codec) && !jn.no_feedback;
    job_t *j = find_job(sw, jn.job);
    /* The dataplane keys come from this connection's CHALLENGE nonce (wire/dpauth.h). */
    uint8_t nonce[WIRE_NONCE_BYTES];
    int had_nonce = cl->has_nonce;
    memcpy(nonce, cl->nonce, sizeof(nonce));
    int rc = authenticate(ctl, cl, j, &jn);
    if (rc < 0)
        return rc;
    if (j && jn.gen != j->gen && generation_differs(ctl, cl, &j, &jn) != 0)
        return -ECONNREFUSED; /* refused with the reason */
    /* A job registered with its verifier but without a CHALLENGE (no HELLO first) has no
     * nonce to derive keys from: its dataplane goes without MACs, as with dpauth=0. */
    if (!j && jn.auth == WIRE_AUTH_VERIFIER && !had_nonce)
        jn.no_dpauth = 1;
    int dp_auth = j ? j->dp_auth : jn.auth == WIRE_AUTH_VERIFIER && !jn.no_dpauth;
    if (dp_auth && (jn.elems > WIRE_MAX_ELEMS_AUTH ||
                    (codec.mode != CODEC_NONE &&
                     WIRE_HEADER_MAX + codec_max_bytes(&codec, jn.elems) > WIRE_MAX_DATAGRAM))) {
        return conn_send_err(ctl, cl->fd, WIRE_REFUSED_INVALID,
                             "elems %u: with the dataplane MAC "
                             "(%u bytes) the packets may not fit a datagram",
                             jn.elems, WIRE_MAC_BYTES);
    }
    if (j && (j->codec.mode != codec.mode || j->codec.param != codec.param ||
              j->codec_feedback != feedback)) {
        char have[CODEC_SPEC_MAX];
        codec_format(&j->codec, have, sizeof(have));
        return conn_send_err(ctl, cl->fd, WIRE_REFUSED,
                             "parameter mismatch: job '%s' compresses with %s%s, rank %u asked "
                             "for %s%s",
                             jn.job, have, j->codec_feedback ? "" : " (no feedback)", jn.rank,
                             jn.compress[0] ? jn.compress : "none",
                             feedback ? "" : " (no feedback)");
    }
    if (j ? join_matches(ctl, cl, j, &jn, ops, float_mode) != 0
          : !(j = register_job(ctl, cl, &jn, ops, float_mode, &codec, feedback)))
        return -ECONNREFUSED; /* refused with the reason */
    if (j->dp_auth) {
        dpauth_derive(j->verifier, nonce, j->name, jn.rank, &j->keys[jn.rank]);
        dpauth_bind_job(&j->keys[jn.rank], j->token); /* the same down key for every rank */
    }
    explicit_bzero(nonce, sizeof(nonce));
    j->member_fd[jn.rank] = cl->fd;
    j->contrib[jn.rank] = jn.contributors ? jn.contributors : 1;
    j->mcast_asked[jn.rank] = (uint8_t)jn.mcast;
    j->joined++;
    cl->job = j;
    cl->rank = jn.rank;
    if (j->joined == j->world)
        life_apply(ctl, j, LIFE_JOIN_COMPLETE, NULL);
    return 0;
}
