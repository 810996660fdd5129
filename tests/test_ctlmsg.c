/*
 * test_ctlmsg.c - the control messages and the piggybacked fields (wire/ctlmsg.h, wire.h):
 * every field of JOIN, JOINED and the optimizer round-trips, every refusal is told apart,
 * and malformed requests are refused with the right kind and a reason.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "inagg.h"
#include "lib/client/ctl.h"
#include "lib/wire/ctlmsg.h"
#include "lib/wire/wire.h"

static wire_join_t sample_join(int with_optimizer)
{
    wire_join_t j = {.version = INAGG_PROTOCOL_VERSION,
                     .rank = 3,
                     .world = 7,
                     .slots = 33,
                     .elems = 1234,
                     .float_mode = INAGG_FLOAT_NATIVE,
                     .protocol = INAGG_PROTO_P4SGD,
                     .timeout_ms = 4321};
    snprintf(j.job, sizeof(j.job), "job-%d", with_optimizer);
    if (with_optimizer) {
        j.opt.present = 1;
        j.opt.step = (optim_config_t)OPTIM_CONFIG_INIT;
        j.opt.step.kind = OPTIM_ADAM;
        j.opt.step.lr = 0.0125f;
        j.opt.step.beta1 = 0.8f;
        j.opt.step.beta2 = 0.95f;
        j.opt.step.eps = 3e-7f;
        j.opt.step.eps_placement = OPTIM_EPS_OUTSIDE;
        j.opt.step.momentum = 0.25f;
        j.opt.step.weight_decay = 1e-4f;
        j.opt.params = 4294967296ull;
        j.opt.seeded = 1;
        j.opt.seed = 18446744073709551615ull;
    }
    return j;
}

TEST(ctlmsg_join_roundtrips_every_field, 5)
{
    for (int opt = 0; opt < 2; opt++) {
        wire_join_t a = sample_join(opt), b;
        char line[CTL_LINE_MAX], why[200] = "";
        CHECK(wire_join_format(&a, line, sizeof(line)) == 0);
        CHECK_EQ_INT(wire_verb_of(line), WIRE_VERB_JOIN);
        enum wire_refusal r;
        CHECK_MSG(wire_join_parse(line, &b, &r, why, sizeof(why)) == 0, "%s: %s", line, why);
        CHECK(strcmp(a.job, b.job) == 0);
        CHECK(a.version == b.version && a.rank == b.rank && a.world == b.world);
        CHECK(a.slots == b.slots && a.elems == b.elems && a.float_mode == b.float_mode);
        CHECK(a.protocol == b.protocol && a.timeout_ms == b.timeout_ms);
        CHECK(wire_optimizer_equal(&a.opt, &b.opt));
        CHECK_EQ_INT(b.opt.present, opt);
        if (opt) {
            CHECK(b.opt.step.kind == OPTIM_ADAM && b.opt.step.lr == 0.0125f);
            CHECK(b.opt.step.eps_placement == OPTIM_EPS_OUTSIDE && b.opt.seeded == 1);
            CHECK(b.opt.params == 4294967296ull && b.opt.seed == 18446744073709551615ull);
            CHECK(b.opt.step.momentum == 0.25f && b.opt.step.weight_decay == 1e-4f);
            /* One field off and the optimizers differ. */
            wire_optimizer_t c = b.opt;
            c.step.beta2 = 0.951f;
            CHECK(!wire_optimizer_equal(&b.opt, &c));
            c = b.opt;
            c.seed--;
            CHECK(!wire_optimizer_equal(&b.opt, &c));
        }
    }
    wire_optimizer_t none = {0};
    char text[64];
    wire_optimizer_format(&none, text, sizeof(text));
    CHECK(strcmp(text, "none") == 0);
    /* Every buffer size: too small is refused without writing past it, exactly enough fits. */
    wire_join_t a = sample_join(1);
    char full[CTL_LINE_MAX];
    CHECK(wire_join_format(&a, full, sizeof(full)) == 0);
    size_t need = strlen(full) + 1;
    for (size_t cap = 1; cap <= need + 1; cap++) {
        char *buf = malloc(cap);
        CHECK(buf);
        int rc = wire_join_format(&a, buf, cap);
        CHECK_MSG(rc == (cap >= need ? 0 : -ENOSPC), "cap %zu (need %zu): %d", cap, need, rc);
        if (rc == 0)
            CHECK(strcmp(buf, full) == 0);
        free(buf);
    }
}

static void refused(const char *line, enum wire_refusal kind, const char *reason)
{
    wire_join_t j;
    enum wire_refusal r = WIRE_REFUSED;
    char why[200] = "";
    int want = kind == WIRE_REFUSED_INVALID ? -EPROTO : -EPROTONOSUPPORT;
    int rc = wire_join_parse(line, &j, &r, why, sizeof(why));
    CHECK_MSG(rc == want, "'%s': %d, want %d", line, rc, want);
    CHECK_MSG(r == kind, "'%s': refusal %s, want %s", line, wire_refusal_name(r),
              wire_refusal_name(kind));
    CHECK_MSG(strstr(why, reason) != NULL, "'%s': reason '%s' lacks '%s'", line, why, reason);
}

/* The proof of a job secret travels as verifier= or proof= (64 hex digits), never both. */
TEST(ctlmsg_join_auth_fields, 5)
{
    for (int auth = WIRE_AUTH_NONE; auth <= WIRE_AUTH_PROOF; auth++) {
        wire_join_t a = sample_join(1), b;
        a.auth = auth;
        for (int i = 0; i < 32; i++)
            a.mac[i] = (uint8_t)(i * 37 + auth);
        char line[CTL_LINE_MAX], why[200] = "";
        enum wire_refusal r;
        CHECK(wire_join_format(&a, line, sizeof(line)) == 0);
        CHECK_MSG(wire_join_parse(line, &b, &r, why, sizeof(why)) == 0, "%s: %s", line, why);
        CHECK_EQ_INT(b.auth, auth);
        CHECK(auth == WIRE_AUTH_NONE || memcmp(a.mac, b.mac, 32) == 0);
        CHECK((strstr(line, "verifier=") != NULL) == (auth == WIRE_AUTH_VERIFIER));
        CHECK((strstr(line, "proof=") != NULL) == (auth == WIRE_AUTH_PROOF));
    }
    const char *bad[] = {
        "proof=abc",
        "verifier=" /* empty */,
        "proof=zz00000000000000000000000000000000000000000000000000000000000000",
        "verifier=0000000000000000000000000000000000000000000000000000000000000000 "
        "proof=0000000000000000000000000000000000000000000000000000000000000000",
    };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        char line[CTL_LINE_MAX], why[200] = "";
        snprintf(line, sizeof(line), "JOIN version=%d job=a rank=0 world=1 slots=1 elems=1 %s",
                 INAGG_PROTOCOL_VERSION, bad[k]);
        wire_join_t b;
        enum wire_refusal r;
        CHECK_MSG(wire_join_parse(line, &b, &r, why, sizeof(why)) == -EPROTO, "%s", line);
        CHECK_EQ_INT(r, WIRE_REFUSED_INVALID);
    }
}

TEST(ctlmsg_join_refusals, 5)
{
    char v[32];
    snprintf(v, sizeof(v), "version=%d", INAGG_PROTOCOL_VERSION);
    char line[512];
#define J(fmt) (snprintf(line, sizeof(line), "JOIN %s " fmt, v), line)
    refused("JOIN version=99 job=x rank=0 world=1 slots=1 elems=1", WIRE_REFUSED_VERSION,
            "worker sent 99");
    refused("JOIN job=x rank=0 world=1 slots=1 elems=1", WIRE_REFUSED_VERSION, "protocol");
    refused(J("job=x rank=0 world=1 slots=1"), WIRE_REFUSED_INVALID, "needs job");
    refused(J("job= rank=0 world=1 slots=1 elems=1"), WIRE_REFUSED_INVALID, "job name");
    refused(J("job=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa rank=0 "
              "world=1 slots=1 elems=1"),
            WIRE_REFUSED_INVALID, "needs job");
    refused(J("job=x rank=2 world=2 slots=1 elems=1"), WIRE_REFUSED_INVALID, "rank < world");
    refused(J("job=x rank=0 world=65 slots=1 elems=1"), WIRE_REFUSED_INVALID, "world");
    refused(J("job=x rank=0 world=1 slots=0 elems=1"), WIRE_REFUSED_INVALID, "slots 0");
    refused(J("job=x rank=0 world=1 slots=1 elems=99999"), WIRE_REFUSED_INVALID, "elems");
    refused(J("job=x rank=0 world=1 slots=1 elems=1 float=half"), WIRE_REFUSED_INVALID,
            "float mode 'half'");
    refused(J("job=x rank=0 world=1 slots=1 elems=1 protocol=ring"), WIRE_REFUSED_UNSUPPORTED,
            "protocol 'ring'");
    refused(J("job=x rank=0 world=1 slots=1 elems=1 timeout=soon"), WIRE_REFUSED_INVALID,
            "timeout");
    refused(J("job=x rank=0 world=1 slots=1 elems=1 optimizer=rmsprop params=3"),
            WIRE_REFUSED_INVALID, "unknown optimizer");
    refused(J("job=x rank=0 world=1 slots=1 elems=1 optimizer=sgd params=0"), WIRE_REFUSED_INVALID,
            "params=");
    refused(J("job=x rank=0 world=1 slots=1 elems=1 optimizer=sgd params=3 lr=-1"),
            WIRE_REFUSED_INVALID, "lr");
    refused(J("job=x rank=0 world=1 slots=1 elems=1 optimizer=sgd params=3 seed=x"),
            WIRE_REFUSED_INVALID, "seed");
    /* Defaults: fixed float, switchml, the switch's timeout, no optimizer. */
    wire_join_t j;
    enum wire_refusal r;
    char why[100];
    CHECK(wire_join_parse(J("job=x rank=0 world=1 slots=1 elems=1"), &j, &r, why, sizeof(why)) ==
          0);
    CHECK(j.float_mode == INAGG_FLOAT_FIXED && j.protocol == INAGG_PROTO_SWITCHML);
    CHECK(j.timeout_ms == 0 && !j.opt.present);
    /* Each limit exactly: the largest value in range is taken, one more is refused. */
    char lim[160];
#define L() (snprintf(line, sizeof(line), "JOIN %s %s", v, lim), line)
    snprintf(lim, sizeof(lim), "job=x rank=0 world=1 slots=1 elems=%u", WIRE_MAX_ELEMS);
    CHECK(wire_join_parse(L(), &j, &r, why, sizeof(why)) == 0 && j.elems == WIRE_MAX_ELEMS);
    snprintf(lim, sizeof(lim), "job=x rank=0 world=1 slots=1 elems=%u", WIRE_MAX_ELEMS + 1);
    refused(L(), WIRE_REFUSED_INVALID, "elems");
    snprintf(lim, sizeof(lim), "job=x rank=%u world=%u slots=1 elems=1", INAGG_MAX_WORLD - 1,
             INAGG_MAX_WORLD);
    CHECK(wire_join_parse(L(), &j, &r, why, sizeof(why)) == 0 && j.world == INAGG_MAX_WORLD &&
          j.rank == INAGG_MAX_WORLD - 1);
#undef L
#undef J
}

TEST(ctlmsg_joined_err_and_verbs, 5)
{
    wire_joined_t a = {.id = 65535,
                       .token = 0xfedcba9876543210ull,
                       .threads = 4,
                       .port = 65000,
                       .base = 3,
                       .slots = 16,
                       .elems = 16368,
                       .float_mode = INAGG_FLOAT_NATIVE,
                       .protocol = INAGG_PROTO_P4SGD,
                       .gso = 1},
                  b;
    char line[CTL_LINE_MAX], why[200];
    CHECK(wire_joined_format(&a, line, sizeof(line)) == 0);
    CHECK(strstr(line, " gso=1") != NULL);
    CHECK(wire_joined_parse(line, &b, why, sizeof(why)) == 0);
    CHECK(memcmp(&a, &b, sizeof(a)) == 0);
    /* a switch that does not say gso=1 (one of an earlier build) gets no GSO sends */
    CHECK(wire_joined_parse("JOINED id=1 token=2 threads=2 port=1 base=0", &b, why, sizeof(why)) ==
              0 &&
          b.gso == 0);
    CHECK(wire_joined_parse("JOINED id=1 token=2 threads=2 port=1 base=0 gso=2", &b, why,
                            sizeof(why)) == -EPROTO);
    CHECK(wire_joined_parse("JOINED id=1 token=2 threads=0 port=1 base=0", &b, why, sizeof(why)) ==
          -EPROTO);
    CHECK(wire_joined_parse("JOINED id=1 token=2 threads=2 port=1 base=2", &b, why, sizeof(why)) ==
          -EPROTO);
    CHECK(wire_joined_parse("JOINED id=70000 token=2 threads=2 port=1 base=0", &b, why,
                            sizeof(why)) == -EPROTO);
    CHECK(wire_joined_parse("JOINED id=1 token=0 threads=2 port=1 base=0", &b, why, sizeof(why)) ==
          -EPROTO); /* a token is never 0 */
    CHECK(wire_joined_parse("HELLO", &b, why, sizeof(why)) == -EPROTO);
    CHECK(strstr(why, "unexpected answer") != NULL);

    for (int r = 0; r < WIRE_REFUSAL_COUNT; r++) {
        wire_err_format((enum wire_refusal)r, "because of x", line, sizeof(line));
        CHECK_EQ_INT(wire_verb_of(line), WIRE_VERB_ERR);
        const char *text = NULL;
        CHECK_EQ_INT(wire_err_parse(line, &text), r);
        CHECK(strcmp(text, "because of x") == 0);
    }
    const char *text;
    CHECK_EQ_INT(wire_err_parse("ERR versions are odd", &text), WIRE_REFUSED);
    CHECK_EQ_INT(wire_err_parse("ERR timeout", &text), WIRE_REFUSED_TIMEOUT);
    CHECK(strcmp(text, "") == 0);

    for (int v = 1; v < WIRE_VERB_COUNT; v++) {
        snprintf(line, sizeof(line), "%s x=1", wire_verb_name((enum wire_verb)v));
        CHECK_EQ_INT(wire_verb_of(line), v);
    }
    CHECK_EQ_INT(wire_verb_of("JOINX"), WIRE_VERB_UNKNOWN);
    CHECK_EQ_INT(wire_verb_of("BARRIER_DONE"), WIRE_VERB_BARRIER_DONE);
    CHECK_EQ_INT(wire_verb_of("BARRIER"), WIRE_VERB_BARRIER);
    CHECK_EQ_INT(wire_verb_of(""), WIRE_VERB_UNKNOWN);
    wire_shutdown_format("stopped by SIGTERM", line, sizeof(line));
    CHECK(strcmp(line, "SHUTDOWN stopped by SIGTERM") == 0);
    CHECK(strcmp(wire_shutdown_parse(line), "stopped by SIGTERM") == 0);
    wire_shutdown_format(NULL, line, sizeof(line));
    CHECK(strcmp(wire_shutdown_parse(line), "the switch is stopping") == 0);
    CHECK(wire_shutdown_parse("SHUTDOWNX y") == NULL);
    CHECK(wire_shutdown_parse("FAILED x") == NULL);
    CHECK(strcmp(wire_shutdown_parse("SHUTDOWN"), "") == 0);
}

/* The piggybacked acknowledgement/confirmation survives the header's encoding, at the edges
 * of its ranges, and a header without one says so. */
TEST(ctlmsg_piggyback_through_the_header, 5)
{
    const uint32_t slots[] = {0, 1, 65535, 0xfffffffeu};
    const uint32_t rounds[] = {0, 1, 0xffffu, 0x10000u, 0xdeadbeefu, 0xffffffffu};
    for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]); i++)
        for (size_t k = 0; k < sizeof(rounds) / sizeof(rounds[0]); k++) {
            wire_header_t h = {.version = INAGG_PROTOCOL_VERSION,
                               .type = WIRE_CONTRIB,
                               .slot = 5,
                               .round = 8,
                               .dtype = WIRE_FLOAT32},
                          d;
            wire_put_piggyback(&h, slots[i], rounds[k]);
            uint8_t buf[WIRE_HEADER_SIZE];
            wire_encode_header(&h, buf);
            CHECK_EQ_INT(wire_decode(buf, sizeof(buf), &d), WIRE_OK);
            uint32_t s, r;
            CHECK(wire_get_piggyback(&d, &s, &r));
            CHECK(s == slots[i] && r == rounds[k]);
        }
    wire_header_t none = {0};
    uint32_t s = 7, r = 7;
    CHECK(!wire_get_piggyback(&none, &s, &r));
    CHECK(s == 7 && r == 7);
}

/* contributors= (a leaf switch's JOIN upstream, and JOINED to hosts under a spine): carried
 * both ways, absent means 0 (the world), out of range refused. */
TEST(ctlmsg_contributors, 5)
{
    wire_join_t a = {.version = INAGG_PROTOCOL_VERSION,
                     .job = "j",
                     .rank = 1,
                     .world = 2,
                     .slots = 4,
                     .elems = 8,
                     .contributors = 12},
                b;
    enum wire_refusal r;
    char line[CTL_LINE_MAX], why[200];
    CHECK(wire_join_format(&a, line, sizeof(line)) == 0);
    CHECK(strstr(line, " contributors=12") != NULL);
    CHECK_MSG(wire_join_parse(line, &b, &r, why, sizeof(why)) == 0, "%s", why);
    CHECK_EQ_INT(b.contributors, 12);
    a.contributors = 1; /* a worker's: not written */
    CHECK(wire_join_format(&a, line, sizeof(line)) == 0 && !strstr(line, "contributors"));
    /* the current version, so that contributors= is what is refused */
    const char *bad_contributors[] = {"70000", "x"};
    for (int k = 0; k < 2; k++) {
        snprintf(line, sizeof(line),
                 "JOIN version=%d job=j rank=0 world=1 slots=1 elems=1 contributors=%s",
                 INAGG_PROTOCOL_VERSION, bad_contributors[k]);
        CHECK_MSG(wire_join_parse(line, &b, &r, why, sizeof(why)) == -EPROTO &&
                      strstr(why, "contributors="),
                  "%s: %s", line, why);
    }
    wire_joined_t c = {.id = 3,
                       .token = 9,
                       .threads = 2,
                       .port = 7000,
                       .base = 1,
                       .slots = 4,
                       .elems = 8,
                       .contributors = 8},
                  d;
    CHECK(wire_joined_format(&c, line, sizeof(line)) == 0);
    CHECK(wire_joined_parse(line, &d, why, sizeof(why)) == 0 && d.contributors == 8);
    CHECK(wire_joined_parse("JOINED id=1 token=2 threads=2 port=1 base=0", &d, why, sizeof(why)) ==
              0 &&
          d.contributors == 0);
    CHECK(wire_joined_parse("JOINED id=1 token=2 threads=2 port=1 base=0 contributors=70000", &d,
                            why, sizeof(why)) == -EPROTO);
}

/* Multicast of results (PROTOCOL.md 9.6): a rank offers with mcast=1 in JOIN, and the switch
 * names the job's group in JOINED; what is not an IPv4 multicast GROUP:PORT is refused. */
TEST(ctlmsg_multicast_fields, 5)
{
    wire_join_t a = {.version = INAGG_PROTOCOL_VERSION,
                     .job = "j",
                     .rank = 0,
                     .world = 2,
                     .slots = 4,
                     .elems = 8,
                     .mcast = 1},
                b;
    enum wire_refusal r;
    char line[CTL_LINE_MAX], why[200];
    CHECK(wire_join_format(&a, line, sizeof(line)) == 0 && strstr(line, " mcast=1"));
    CHECK_MSG(wire_join_parse(line, &b, &r, why, sizeof(why)) == 0 && b.mcast == 1, "%s", why);
    a.mcast = 0; /* not offered: not written, and read as 0 */
    CHECK(wire_join_format(&a, line, sizeof(line)) == 0 && !strstr(line, "mcast"));
    CHECK(wire_join_parse(line, &b, &r, why, sizeof(why)) == 0 && b.mcast == 0);
    snprintf(line, sizeof(line), "JOIN version=%d job=j rank=0 world=1 slots=1 elems=1 mcast=2",
             INAGG_PROTOCOL_VERSION);
    CHECK(wire_join_parse(line, &b, &r, why, sizeof(why)) == -EPROTO && strstr(why, "mcast="));

    wire_joined_t c = {.id = 5,
                       .token = 9,
                       .threads = 1,
                       .port = 7000,
                       .mcast_addr = 0xef4d0005u,
                       .mcast_port = 7399},
                  d;
    CHECK(wire_joined_format(&c, line, sizeof(line)) == 0 &&
          strstr(line, " mcast=239.77.0.5:7399"));
    CHECK_MSG(wire_joined_parse(line, &d, why, sizeof(why)) == 0 && d.mcast_addr == 0xef4d0005u &&
                  d.mcast_port == 7399,
              "%s: %s", line, why);
    CHECK(wire_joined_parse("JOINED id=1 token=2 threads=2 port=1 base=0", &d, why, sizeof(why)) ==
              0 &&
          d.mcast_addr == 0 && d.mcast_port == 0);
    const char *bad[] = {"10.0.0.1:7399", "239.77.0.5:0", "239.77.0.5", "240.1.1.1:7399",
                         "mcast:1"};
    for (int k = 0; k < 5; k++) {
        snprintf(line, sizeof(line), "JOINED id=1 token=2 threads=2 port=1 base=0 mcast=%s",
                 bad[k]);
        CHECK_MSG(wire_joined_parse(line, &d, why, sizeof(why)) == -EPROTO && strstr(why, "mcast="),
                  "%s", line);
    }
}
