/*
 * test_switch_tables.c - the switch's tables and protocol modules without sockets: every
 * counter and drop reason has one name and a meaning, the protocol table finds both
 * protocols, and each protocol's packet handling gives the outcomes the dataplane acts on
 * (accepted, completed with the sum as result, resent, dropped for the right reason).
 */
#include <arpa/inet.h>
#include <string.h>

#include "harness.h"
#include "inagg.h"
#include "lib/wire/ctlmsg.h"
#include "switchd/server/job.h"
#include "switchd/server/proto.h"
#include "switchd/server/stats.h"

TEST(switch_stats_table_names_every_counter_once, 10)
{
    for (int s = 1; s < STAT_COUNT; s++) {
        const char *n = stat_name(s);
        CHECK_MSG(n && *n && strcmp(n, "unknown") != 0, "stat %d has no name", s);
        CHECK_MSG(stat_table[s].meaning && *stat_table[s].meaning, "%s has no meaning", n);
        CHECK_MSG(((stat_table[s].flags & STAT_DROP) != 0) == (s < DROP_REASON_COUNT),
                  "%s: drop reasons are exactly the first ones", n);
        if (stat_table[s].flags & STAT_LOG)
            CHECK_MSG(stat_table[s].log && *stat_table[s].log, "%s: no log words", n);
        int under = stat_table[s].log_under;
        if (under)
            CHECK_MSG(stat_table[under].flags & STAT_LOG, "%s: logged under an unlogged one", n);
        for (int u = 1; u < s; u++)
            CHECK_MSG(strcmp(stat_name(u), n) != 0, "%s named twice", n);
    }
    CHECK(strcmp(stat_name(WIRE_BAD_MAGIC), "bad_magic") == 0);
    CHECK(strcmp(stat_name(DROP_NOT_RESULT_PATH), "result_to_switch") == 0);
    CHECK(strcmp(stat_name(DROP_DUP_ACK), "dup_ack") == 0);
    CHECK(strcmp(stat_name(STAT_OPT_STEPS), "optimizer_steps") == 0);
    CHECK(strcmp(stat_name(STAT_COUNT), "unknown") == 0);
}

TEST(switch_protocol_table_finds_both_protocols, 10)
{
    const uint32_t ids[] = {INAGG_PROTO_SWITCHML, INAGG_PROTO_P4SGD};
    for (size_t i = 0; i < 2; i++) {
        const switch_proto_ops_t *p = proto_find(ids[i]);
        CHECK(p != NULL);
        CHECK_EQ_INT(p->id, ids[i]);
        CHECK(strcmp(p->name, wire_protocol_name(ids[i])) == 0);
        CHECK(p->accepts & (1u << WIRE_CONTRIB));
        CHECK(!(p->accepts & ((1u << WIRE_RESULT) | (1u << WIRE_CONFIRM))));
        for (int s = 0; s < STAT_COUNT; s++)
            if (p->stats & (1ull << s))
                CHECK_MSG(stat_table[s].flags & STAT_PROTOCOL, "%s reports %s", p->name,
                          stat_name(s));
    }
    CHECK(proto_find(99) == NULL);
    CHECK_EQ_INT(proto_accepts_any(), (1u << WIRE_CONTRIB) | (1u << WIRE_ACK));
    char list[64];
    proto_list(list, sizeof(list));
    CHECK(strcmp(list, "switchml and p4sgd") == 0);
}

static wire_header_t contribution(uint16_t rank, uint32_t round, uint16_t count, uint8_t dtype)
{
    wire_header_t h = {.version = 1,
                       .type = WIRE_CONTRIB,
                       .rank = rank,
                       .round = round,
                       .chunk = 7,
                       .count = count,
                       .flags = (uint8_t)(round & 1u),
                       .dtype = dtype};
    return h;
}

/* World 2, one thread: rank 0 then rank 1 contribute {i, 10 i}; a duplicate of the complete
 * round is resent; a mismatched round-1 start is refused. */
static void check_protocol(uint32_t id, int expect_chunk)
{
    job_t *j = job_create(1, "t", proto_find(id), 2, 4, 8, 1, 0);
    CHECK(j != NULL);
    stat_counters_t c = {0};
    transport_addr_t from = {0};
    proto_ctx_t x = {.job = j, .state = j->proto_state, .c = &c, .from = &from};
    uint32_t a[3] = {htonl(1), htonl(2), htonl(3)}, b[3] = {htonl(10), htonl(20), htonl(30)};
    proto_outcome_t o;
    wire_header_t h = contribution(0, 0, 3, WIRE_INT32);
    j->proto->handle(&x, &h, a, &o);
    CHECK_EQ_INT(o.action, PROTO_PARTIAL);
    j->proto->handle(&x, &h, a, &o);
    CHECK_EQ_INT(o.action, PROTO_DROP);
    CHECK_EQ_INT(o.drop, DROP_DUP_OPEN);
    h.rank = 1;
    j->proto->handle(&x, &h, b, &o);
    CHECK_EQ_INT(o.action, PROTO_COMPLETE);
    CHECK_EQ_INT(o.result.round, 0);
    CHECK_EQ_INT(o.result.count, 3);
    CHECK_EQ_INT(o.result.dtype, WIRE_INT32);
    CHECK_EQ_INT(o.result.chunk, expect_chunk ? 7 : 0);
    CHECK_EQ_INT(o.chunk, 7);
    for (int i = 0; i < 3; i++)
        CHECK_EQ_INT(ntohl(o.data[i]), 11 * (i + 1));
    j->proto->handle(&x, &h, b, &o);
    CHECK_EQ_INT(o.action, PROTO_RESEND);
    CHECK_EQ_INT(ntohl(o.data[2]), 33);
    h = contribution(0, 5, 3, WIRE_INT32);
    j->proto->handle(&x, &h, a, &o);
    CHECK_EQ_INT(o.action, PROTO_DROP);
    CHECK_EQ_INT(o.drop, DROP_AHEAD);
    job_free(j);
}

TEST(switch_protocols_give_shared_outcomes, 10)
{
    check_protocol(INAGG_PROTO_SWITCHML, 1);
    check_protocol(INAGG_PROTO_P4SGD, 0); /* p4sgd's result chunk carries confirmations */
}
