/*
 * ctlmsg.c - encode and decode the control messages (see ctlmsg.h for the lines). The key
 * lookups come from wire/ctlline.h; everything about which keys a message has, their ranges
 * and their spellings is here.
 */
#include "lib/wire/ctlmsg.h"

#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inagg.h"
#include "lib/base/errmsg.h"
#include "lib/base/netaddr.h"
#include "lib/base/sha256.h"
#include "lib/base/textlist.h"
#include "lib/wire/ctlline.h"
#include "lib/wire/wire.h"

static const char *const verb_names[WIRE_VERB_COUNT] = {
    [WIRE_VERB_UNKNOWN] = "?",
    [WIRE_VERB_JOIN] = "JOIN",
    [WIRE_VERB_JOINED] = "JOINED",
    [WIRE_VERB_ERR] = "ERR",
    [WIRE_VERB_FAILED] = "FAILED",
    [WIRE_VERB_BARRIER] = "BARRIER",
    [WIRE_VERB_BARRIER_DONE] = "BARRIER_DONE",
    [WIRE_VERB_LEAVE] = "LEAVE",
    [WIRE_VERB_BYE] = "BYE",
    [WIRE_VERB_STATS] = "STATS",
    [WIRE_VERB_END] = "END",
    [WIRE_VERB_HELLO] = "HELLO",
    [WIRE_VERB_CHALLENGE] = "CHALLENGE",
    [WIRE_VERB_FABRIC] = "FABRIC",
    [WIRE_VERB_FABRIC_STATE] = "FABRIC_STATE",
    [WIRE_VERB_SHUTDOWN] = "SHUTDOWN",
    [WIRE_VERB_PING] = "PING",
    [WIRE_VERB_PONG] = "PONG",
};

enum wire_verb wire_verb_of(const char *line)
{
    for (int v = 1; v < WIRE_VERB_COUNT; v++)
        if (ctlline_is(line, verb_names[v]))
            return (enum wire_verb)v;
    return WIRE_VERB_UNKNOWN;
}

const char *wire_verb_name(enum wire_verb v)
{
    return (unsigned)v < WIRE_VERB_COUNT ? verb_names[v] : "?";
}

static const char *const refusal_names[WIRE_REFUSAL_COUNT] = {
    [WIRE_REFUSED] = "refused",
    [WIRE_REFUSED_VERSION] = "version",
    [WIRE_REFUSED_TIMEOUT] = "timeout",
    [WIRE_REFUSED_INVALID] = "invalid",
    [WIRE_REFUSED_UNSUPPORTED] = "unsupported",
    [WIRE_REFUSED_SYSTEM] = "system",
    [WIRE_REFUSED_BUSY] = "busy",
};

const char *wire_refusal_name(enum wire_refusal r)
{
    return (unsigned)r < WIRE_REFUSAL_COUNT ? refusal_names[r] : "refused";
}

void wire_err_format(enum wire_refusal r, const char *text, char *line, size_t cap)
{
    snprintf(line, cap, "ERR %s %s", wire_refusal_name(r), text ? text : "");
}

enum wire_refusal wire_err_parse(const char *line, const char **text)
{
    const char *rest = ctlline_rest(line);
    for (int r = 0; r < WIRE_REFUSAL_COUNT; r++) {
        size_t n = strlen(refusal_names[r]);
        if (strncmp(rest, refusal_names[r], n) == 0 && (rest[n] == ' ' || rest[n] == '\0')) {
            if (text)
                *text = rest[n] ? rest + n + 1 : rest + n;
            return (enum wire_refusal)r;
        }
    }
    if (text)
        *text = rest;
    return WIRE_REFUSED;
}

const char *wire_float_mode_name(uint32_t m)
{
    return m == INAGG_FLOAT_NATIVE ? "native" : "fixed";
}
/* The slot protocols' spellings on the control lines: a new protocol is one line here. */
static const struct {
    const char *name;
    uint32_t id; /* inagg_protocol_t */
} protocols[] = {
    {"switchml", INAGG_PROTO_SWITCHML},
    {"p4sgd", INAGG_PROTO_P4SGD},
};
#define NPROTOCOLS (sizeof(protocols) / sizeof(protocols[0]))

const char *wire_protocol_name(uint32_t p)
{
    for (size_t i = 0; i < NPROTOCOLS; i++)
        if (protocols[i].id == p)
            return protocols[i].name;
    return "unknown";
}

int wire_protocol_parse(const char *name, uint32_t *protocol)
{
    for (size_t i = 0; i < NPROTOCOLS; i++)
        if (strcmp(protocols[i].name, name) == 0) {
            *protocol = protocols[i].id;
            return 0;
        }
    return -EINVAL;
}

/* "switchml and p4sgd": the protocols this build serves, for messages. */
static void protocol_list(char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < NPROTOCOLS; i++)
        len = textlist_add(buf, cap, len, i, NPROTOCOLS, protocols[i].name);
}

void wire_failed_format(const char *reason, char *line, size_t cap)
{
    snprintf(line, cap, "FAILED %s", reason ? reason : "");
}

void wire_shutdown_format(const char *reason, char *line, size_t cap)
{
    snprintf(line, cap, "SHUTDOWN %s", reason && *reason ? reason : "the switch is stopping");
}

const char *wire_shutdown_parse(const char *line)
{
    return wire_verb_of(line) == WIRE_VERB_SHUTDOWN ? ctlline_rest(line) : NULL;
}

/* ---- the optimizer ---- */

int wire_optimizer_equal(const wire_optimizer_t *a, const wire_optimizer_t *b)
{
    if (!a->present || !b->present)
        return a->present == b->present;
    const optim_config_t *x = &a->step, *y = &b->step;
    return x->kind == y->kind && x->lr == y->lr && x->beta1 == y->beta1 && x->beta2 == y->beta2 &&
           x->eps == y->eps && x->eps_placement == y->eps_placement && x->momentum == y->momentum &&
           x->weight_decay == y->weight_decay && a->params == b->params && a->seeded == b->seeded &&
           a->seed == b->seed;
}

void wire_optimizer_format(const wire_optimizer_t *o, char *buf, size_t cap)
{
    if (!o->present) {
        snprintf(buf, cap, "none");
        return;
    }
    const optim_config_t *c = &o->step;
    snprintf(buf, cap,
             "optimizer=%s params=%" PRIu64 " lr=%.9g beta1=%.9g beta2=%.9g eps=%.9g "
             "eps_place=%s momentum=%.9g wd=%.9g init=%s seed=%" PRIu64,
             optim_kind_name(c->kind), o->params, (double)c->lr, (double)c->beta1, (double)c->beta2,
             (double)c->eps, optim_eps_name(c->eps_placement), (double)c->momentum,
             (double)c->weight_decay, o->seeded ? "seeded" : "zero", o->seed);
}

/* The optimizer keys of a JOIN line; no optimizer= key: none. 0, or -1 with a reason. */
static int parse_optimizer(const char *line, wire_optimizer_t *o, char *why, size_t cap)
{
    char v[64];
    memset(o, 0, sizeof(*o));
    if (ctlline_get(line, "optimizer", v, sizeof(v)) != 0)
        return 0;
    optim_config_t c = OPTIM_CONFIG_INIT;
    if (optim_parse_kind(v, &c.kind) != 0) {
        return set_err(why, cap, -EPROTO, "unknown optimizer '%s' (sgd, adagrad, adam, smorms3)",
                       v);
    }
    if (ctl_get_u64(line, "params", &o->params) != 0 || o->params == 0 ||
        o->params > (1ull << 32)) {
        return set_err(why, cap, -EPROTO, "params= must be 1..%llu", 1ull << 32);
    }
    static const char *const keys[] = {"lr", "beta1", "beta2", "eps", "momentum", "wd"};
    float *fields[] = {&c.lr, &c.beta1, &c.beta2, &c.eps, &c.momentum, &c.weight_decay};
    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
        if (ctlline_get(line, keys[k], v, sizeof(v)) != 0)
            continue;
        char *end;
        double d = strtod(v, &end);
        if (end == v || *end) {
            return set_err(why, cap, -EPROTO, "%s=%s is not a number", keys[k], v);
        }
        *fields[k] = (float)d;
    }
    if (ctlline_get(line, "eps_place", v, sizeof(v)) == 0 && optim_parse_eps(v, &c.eps_placement)) {
        return set_err(why, cap, -EPROTO, "eps_place must be inside or outside");
    }
    if (ctlline_get(line, "init", v, sizeof(v)) == 0) {
        if (strcmp(v, "zero") != 0 && strcmp(v, "seeded") != 0) {
            return set_err(why, cap, -EPROTO, "init must be zero or seeded");
        }
        o->seeded = strcmp(v, "seeded") == 0;
    }
    int seed_rc = ctl_get_u64(line, "seed", &o->seed);
    if (seed_rc != 0 && seed_rc != -ENOENT) {
        return set_err(why, cap, -EPROTO, "seed= must be an unsigned integer");
    }
    int crc = optim_check(&c, why, cap);
    if (crc < 0)
        return crc;
    o->step = c;
    o->present = 1;
    return 0;
}

/* ---- JOIN ---- */

int wire_join_format(const wire_join_t *j, char *line, size_t cap)
{
    int n = snprintf(line, cap,
                     "JOIN version=%u job=%s rank=%u world=%u slots=%u elems=%u float=%s "
                     "protocol=%s timeout=%u",
                     j->version, j->job, j->rank, j->world, j->slots, j->elems,
                     wire_float_mode_name(j->float_mode), wire_protocol_name(j->protocol),
                     j->timeout_ms);
    if (n < 0 || (size_t)n >= cap)
        return -ENOSPC;
    if (j->opt.present) {
        char opt[CTL_LINE_MAX];
        wire_optimizer_format(&j->opt, opt, sizeof(opt));
        size_t m = strlen(opt);
        if ((size_t)n + 1 + m >= cap)
            return -ENOSPC;
        line[n] = ' ';
        memcpy(line + n + 1, opt, m + 1);
        n += (int)(1 + m);
    }
    if (j->compress[0]) {
        int k = snprintf(line + n, cap - (size_t)n, " compress=%s%s", j->compress,
                         j->no_feedback ? " feedback=0" : "");
        if (k < 0 || (size_t)k >= cap - (size_t)n)
            return -ENOSPC;
        n += k;
    }
    if (j->contributors > 1) {
        int k = snprintf(line + n, cap - (size_t)n, " contributors=%u", j->contributors);
        if (k < 0 || (size_t)k >= cap - (size_t)n)
            return -ENOSPC;
        n += k;
    }
    if (j->mcast) {
        int k = snprintf(line + n, cap - (size_t)n, " mcast=1");
        if (k < 0 || (size_t)k >= cap - (size_t)n)
            return -ENOSPC;
        n += k;
    }
    if (j->gen) {
        int k = snprintf(line + n, cap - (size_t)n, " gen=%u", j->gen);
        if (k < 0 || (size_t)k >= cap - (size_t)n)
            return -ENOSPC;
        n += k;
    }
    if (j->auth != WIRE_AUTH_NONE) {
        char hex[2 * SHA256_BYTES + 1];
        hex_encode(j->mac, SHA256_BYTES, hex);
        int k = snprintf(line + n, cap - (size_t)n, " %s=%s%s",
                         j->auth == WIRE_AUTH_VERIFIER ? "verifier" : "proof", hex,
                         j->no_dpauth ? " dpauth=0" : "");
        if (k < 0 || (size_t)k >= cap - (size_t)n)
            return -ENOSPC;
    }
    return 0;
}

static int job_name_ok(const char *name)
{
    size_t n = strlen(name);
    return n > 0 && n < WIRE_JOB_NAME_MAX && !strpbrk(name, " \t\r\n=");
}

int wire_join_parse(const char *line, wire_join_t *j, enum wire_refusal *refusal, char *why,
                    size_t cap)
{
    memset(j, 0, sizeof(*j));
    *refusal = WIRE_REFUSED_INVALID;
    if (ctl_get_u32(line, "version", &j->version) != 0 || j->version != INAGG_PROTOCOL_VERSION) {
        *refusal = WIRE_REFUSED_VERSION;
        return set_err(why, cap, -EPROTONOSUPPORT, "switch speaks protocol %d, worker sent %u",
                       INAGG_PROTOCOL_VERSION, j->version);
    }
    if (ctlline_get(line, "job", j->job, sizeof(j->job)) != 0 ||
        ctl_get_u32(line, "rank", &j->rank) || ctl_get_u32(line, "world", &j->world) ||
        ctl_get_u32(line, "slots", &j->slots) || ctl_get_u32(line, "elems", &j->elems)) {
        return set_err(why, cap, -EPROTO, "JOIN needs job, rank, world, slots and elems");
    }
    if (!job_name_ok(j->job)) {
        return set_err(why, cap, -EPROTO, "job name must be 1..%d characters without spaces or '='",
                       WIRE_JOB_NAME_MAX - 1);
    }
    char fmode[16] = "fixed", proto[16] = "switchml";
    if (ctlline_get(line, "float", fmode, sizeof(fmode)) == -ENOSPC ||
        ctlline_get(line, "protocol", proto, sizeof(proto)) == -ENOSPC) {
        return set_err(why, cap, -EPROTO, "float= or protocol= too long");
    }
    int trc = ctl_get_u32(line, "timeout", &j->timeout_ms);
    if (trc != 0 && trc != -ENOENT) {
        return set_err(why, cap, -EPROTO, "timeout= must be a number of milliseconds");
    }
    int crc = ctl_get_u32(line, "contributors", &j->contributors);
    if ((crc != 0 && crc != -ENOENT) || j->contributors > WIRE_MAX_CONTRIBUTORS) {
        return set_err(why, cap, -EPROTO, "contributors= must be 1..%u", WIRE_MAX_CONTRIBUTORS);
    }
    if (j->world == 0 || j->world > INAGG_MAX_WORLD || j->rank >= j->world) {
        return set_err(why, cap, -EPROTO, "rank %u / world %u (world must be 1..%u, rank < world)",
                       j->rank, j->world, INAGG_MAX_WORLD);
    }
    if (j->slots == 0 || j->elems == 0 || j->elems > WIRE_MAX_ELEMS) {
        return set_err(why, cap, -EPROTO, "slots %u / elems %u (elems must be 1..%u)", j->slots,
                       j->elems, WIRE_MAX_ELEMS);
    }
    if (strcmp(fmode, "fixed") == 0) {
        j->float_mode = INAGG_FLOAT_FIXED;
    } else if (strcmp(fmode, "native") == 0) {
        j->float_mode = INAGG_FLOAT_NATIVE;
    } else {
        return set_err(why, cap, -EPROTO, "float mode '%s' (fixed or native)", fmode);
    }
    if (wire_protocol_parse(proto, &j->protocol) != 0) {
        *refusal = WIRE_REFUSED_UNSUPPORTED;
        char list[128];
        protocol_list(list, sizeof(list));
        return set_err(why, cap, -EPROTONOSUPPORT, "protocol '%s' (this switch serves %s)", proto,
                       list);
    }
    if (ctlline_get(line, "compress", j->compress, sizeof(j->compress)) == -ENOSPC) {
        return set_err(why, cap, -EPROTO, "compress= too long");
    }
    uint32_t feedback = 1;
    int frc = ctl_get_u32(line, "feedback", &feedback);
    if ((frc != 0 && frc != -ENOENT) || feedback > 1) {
        return set_err(why, cap, -EPROTO, "feedback= must be 0 or 1");
    }
    j->no_feedback = feedback == 0;
    char owhy[160];
    if (parse_optimizer(line, &j->opt, owhy, sizeof(owhy)) != 0) {
        /* optim_check's reasons already start with "optimizer: " */
        return set_err(why, cap, -EPROTO, "%s%s",
                       strncmp(owhy, "optimizer: ", 11) == 0 ? "" : "optimizer: ", owhy);
    }
    char hex[2 * SHA256_BYTES + 2];
    static const char *const auth_keys[] = {NULL, "verifier", "proof"};
    for (int a = WIRE_AUTH_VERIFIER; a <= WIRE_AUTH_PROOF; a++) {
        int rc = ctlline_get(line, auth_keys[a], hex, sizeof(hex));
        if (rc == -ENOENT)
            continue;
        if (j->auth != WIRE_AUTH_NONE) {
            return set_err(why, cap, -EPROTO, "JOIN carries both verifier= and proof=");
        }
        if (rc != 0 || hex_decode(hex, j->mac, SHA256_BYTES) < 0) {
            return set_err(why, cap, -EPROTO, "%s= must be %d hex digits", auth_keys[a],
                           2 * SHA256_BYTES);
        }
        j->auth = a;
    }
    uint32_t dpauth = 1;
    int drc = ctl_get_u32(line, "dpauth", &dpauth);
    if ((drc != 0 && drc != -ENOENT) || dpauth > 1) {
        return set_err(why, cap, -EPROTO, "dpauth= must be 0 or 1");
    }
    j->no_dpauth = dpauth == 0;
    int mrc = ctl_get_u32(line, "mcast", &j->mcast);
    if ((mrc != 0 && mrc != -ENOENT) || j->mcast > 1) {
        return set_err(why, cap, -EPROTO, "mcast= must be 0 or 1");
    }
    int grc = ctl_get_u32(line, "gen", &j->gen);
    if (grc != 0 && grc != -ENOENT)
        return set_err(why, cap, -EPROTO, "gen= must be a number (the job's generation)");
    return 0;
}

/* ---- JOINED ---- */

int wire_joined_format(const wire_joined_t *j, char *line, size_t cap)
{
    int n = snprintf(line, cap,
                     "JOINED id=%u token=%" PRIu64 " threads=%u port=%u base=%u slots=%u "
                     "elems=%u float=%s protocol=%s",
                     j->id, j->token, j->threads, j->port, j->base, j->slots, j->elems,
                     wire_float_mode_name(j->float_mode), wire_protocol_name(j->protocol));
    if (n >= 0 && (size_t)n < cap && j->contributors)
        n += snprintf(line + n, cap - (size_t)n, " contributors=%u", j->contributors);
    if (n >= 0 && (size_t)n < cap && j->dpauth)
        n += snprintf(line + n, cap - (size_t)n, " dpauth=1");
    if (n >= 0 && (size_t)n < cap && j->gso)
        n += snprintf(line + n, cap - (size_t)n, " gso=1");
    if (n >= 0 && (size_t)n < cap && j->mcast_addr)
        n += snprintf(line + n, cap - (size_t)n, " mcast=%u.%u.%u.%u:%u", j->mcast_addr >> 24,
                      (j->mcast_addr >> 16) & 255u, (j->mcast_addr >> 8) & 255u,
                      j->mcast_addr & 255u, j->mcast_port);
    return n < 0 || (size_t)n >= cap ? -ENOSPC : 0;
}

/* JOINED's mcast=GROUP:PORT into j (absent: none). 0, or -EINVAL when it is not an IPv4
 * multicast address (224.0.0.0/4) and a port 1..65535. */
static int parse_mcast(const char *line, wire_joined_t *j)
{
    char text[32];
    int rc = ctlline_get(line, "mcast", text, sizeof(text));
    if (rc == -ENOENT)
        return 0;
    struct sockaddr_in a;
    if (rc != 0 || netaddr_parse(text, 0, &a) != 0)
        return -EINVAL;
    uint32_t addr = ntohl(a.sin_addr.s_addr);
    if ((addr >> 28) != 0xEu || a.sin_port == 0)
        return -EINVAL;
    j->mcast_addr = addr;
    j->mcast_port = ntohs(a.sin_port);
    return 0;
}

int wire_joined_parse(const char *line, wire_joined_t *j, char *why, size_t cap)
{
    memset(j, 0, sizeof(*j));
    char fmode[16] = "fixed", proto[16] = "switchml";
    if (wire_verb_of(line) != WIRE_VERB_JOINED || ctl_get_u32(line, "id", &j->id) ||
        ctl_get_u64(line, "token", &j->token) || j->token == 0 ||
        ctl_get_u32(line, "threads", &j->threads) || ctl_get_u32(line, "port", &j->port) ||
        ctl_get_u32(line, "base", &j->base) || j->threads == 0 || j->id > UINT16_MAX ||
        j->port > UINT16_MAX || j->base >= j->threads) {
        return set_err(why, cap, -EPROTO, "unexpected answer from the switch: '%.100s'", line);
    }
    ctl_get_u32(line, "slots", &j->slots);
    ctl_get_u32(line, "elems", &j->elems);
    ctlline_get(line, "float", fmode, sizeof(fmode));
    ctlline_get(line, "protocol", proto, sizeof(proto));
    int crc = ctl_get_u32(line, "contributors", &j->contributors);
    if ((crc != 0 && crc != -ENOENT) || j->contributors > WIRE_MAX_CONTRIBUTORS) {
        return set_err(why, cap, -EPROTO, "bad contributors= in the switch's answer: '%.100s'",
                       line);
    }
    int drc = ctl_get_u32(line, "dpauth", &j->dpauth);
    if ((drc != 0 && drc != -ENOENT) || j->dpauth > 1) {
        return set_err(why, cap, -EPROTO, "bad dpauth= in the switch's answer: '%.100s'", line);
    }
    int grc = ctl_get_u32(line, "gso", &j->gso);
    if ((grc != 0 && grc != -ENOENT) || j->gso > 1) {
        return set_err(why, cap, -EPROTO, "bad gso= in the switch's answer: '%.100s'", line);
    }
    if (parse_mcast(line, j) != 0) {
        return set_err(why, cap, -EPROTO,
                       "bad mcast= in the switch's answer (want an IPv4 multicast GROUP:PORT): "
                       "'%.100s'",
                       line);
    }
    j->float_mode = strcmp(fmode, "native") == 0 ? INAGG_FLOAT_NATIVE : INAGG_FLOAT_FIXED;
    if (wire_protocol_parse(proto, &j->protocol) != 0) {
        return set_err(why, cap, -EPROTO, "unexpected protocol in the switch's answer: '%.100s'",
                       line);
    }
    return 0;
}
