/*
 * test_txgroup.c - queued packets grouped by destination
 * (transport/txgroup.h): results queued round by round to four ranks leave rank by rank, each
 * rank's in the order queued; one destination, or more than the table holds, leave as queued.
 */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "lib/transport/transport.h"
#include "lib/transport/txgroup.h"

static transport_addr_t rank_addr(int r)
{
    char text[32];
    snprintf(text, sizeof(text), "10.9.0.%d:%d", 1 + r % 250, 40000 + r);
    transport_addr_t a;
    CHECK_EQ_INT(transport_parse_addr("udp", text, &a), 0);
    return a;
}

TEST(txgroup_results_leave_rank_by_rank_in_queued_order, 5)
{
    enum { RANKS = 4, ROUNDS = 5, N = RANKS * ROUNDS };
    static uint32_t round_of[N];
    transport_tx_t pkts[N], out[N];
    uint8_t scratch[N];
    for (int i = 0; i < N; i++) { /* round i / RANKS, to rank i % RANKS */
        round_of[i] = (uint32_t)(i / RANKS);
        pkts[i] = (transport_tx_t){.head = &round_of[i], .head_len = 4, .to = rank_addr(i % RANKS)};
    }
    const transport_tx_t *g = txgroup_by_destination(pkts, N, out, scratch);
    CHECK(g == out);
    for (int i = 0; i < N; i++) {
        transport_addr_t want = rank_addr(i / ROUNDS);
        CHECK_MSG(transport_addr_equal(&g[i].to, &want), "packet %d goes to the wrong rank", i);
        CHECK_MSG(*(const uint32_t *)g[i].head == (uint32_t)(i % ROUNDS),
                  "packet %d: round %u, expected %d", i, *(const uint32_t *)g[i].head, i % ROUNDS);
    }
}

TEST(txgroup_leaves_one_destination_or_too_many_as_queued, 5)
{
    enum { N = TXGROUP_MAX_DESTINATIONS + 2 };
    transport_tx_t pkts[N], out[N];
    uint8_t scratch[N];
    for (int i = 0; i < N; i++)
        pkts[i] = (transport_tx_t){.to = rank_addr(0)};
    CHECK(txgroup_by_destination(pkts, N, out, scratch) == pkts);
    for (int i = 0; i < N; i++) /* every packet elsewhere, and the first place again last */
        pkts[i].to = rank_addr(i == N - 1 ? 0 : i);
    CHECK(txgroup_by_destination(pkts, N, out, scratch) == pkts);
    CHECK(txgroup_by_destination(pkts, 0, out, scratch) == pkts);
}
