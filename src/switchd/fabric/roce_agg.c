/*
 * roce_agg.c - Table VI classification and flow steering of RoCE frames in the fabric (see
 * roce_agg.h), and the counters of it and of the switch's RoCE endpoints. Part of the
 * classify stage (forward.c): it returns a verdict and calls no other stage.
 */
#include "switchd/fabric/roce_agg.h"

#include <inttypes.h>
#include <string.h>

#include "inagg/version.h"
#include "lib/json/json.h"
#include "lib/netio/roce_frame.h"
#include "lib/transport/roce.h"
#include "lib/wire/wire.h"
#include "switchd/fabric/stagestat.h"

static void count(roce_steer_t *s, int i) { fstat_add(&s->c[i], 1); }

/* The flow (pin, qp), created if absent when `create`. Entries are never emptied, so a probe
 * window full of flows gives a new one the entry of the flow that had a frame least recently
 * (in place: lookups of the others still probe past it). */
static roce_steer_ent_t *lookup(roce_steer_t *s, uint32_t pin, uint32_t qp, int create)
{
    uint32_t h = (qp * 0x9e3779b1u) ^ (pin * 0x85ebca6bu);
    roce_steer_ent_t *lru = NULL;
    s->clock++;
    for (uint32_t k = 0; k < 64; k++) { /* bounded probe */
        roce_steer_ent_t *e = &s->t[(h + k) & (ROCE_STEER_FLOWS - 1)];
        if (e->qp == qp && e->port == pin && qp != 0) {
            e->last = s->clock;
            return e;
        }
        if (e->qp == 0) {
            if (!create || qp == 0)
                return NULL;
            *e = (roce_steer_ent_t){.qp = qp, .port = (uint16_t)pin, .last = s->clock};
            return e;
        }
        if (!lru || e->last < lru->last)
            lru = e;
    }
    if (!create || qp == 0 || !lru)
        return NULL;
    count(s, RG_RECYCLED);
    *lru = (roce_steer_ent_t){.qp = qp, .port = (uint16_t)pin, .last = s->clock};
    return lru;
}

int roce_steer_classify(roce_steer_t *s, uint32_t pin, const uint8_t *frame, uint32_t len,
                        uint32_t nqueues, uint32_t *queue)
{
    if (len < ROCE_ETH_LEN + ROCE_GRH_LEN + ROCE_BTH_LEN) {
        count(s, RG_MALFORMED);
        return ROCE_STEER_DROP;
    }
    const uint8_t *bth = frame + ROCE_ETH_LEN + ROCE_GRH_LEN;
    uint8_t op = bth[0];
    uint32_t qp = (uint32_t)bth[5] << 16 | (uint32_t)bth[6] << 8 | bth[7];
    if (!roce_op_is_write(op)) {
        count(s, RG_NOT_WRITE);
        return ROCE_STEER_FORWARD;
    }
    roce_steer_ent_t *e;
    if (roce_op_is_first(op)) {
        roce_frame_t fr;
        enum roce_reason r = roce_parse(frame, len, 0, &fr);
        if (r != ROCE_OK) {
            e = lookup(s, pin, qp, 0);
            if (!e) {
                count(s, RG_MALFORMED);
                return ROCE_STEER_DROP;
            }
            /* a known flow: its endpoint counts the reason */
        } else {
            const uint8_t *p = fr.payload;
            if (fr.payload_len < WIRE_HEADER_SIZE || p[0] != (WIRE_MAGIC >> 8) ||
                p[1] != (WIRE_MAGIC & 0xff) || p[2] != INAGG_PROTOCOL_VERSION ||
                fr.h.rkey >= nqueues) {
                count(s, RG_NO_MATCH);
                return ROCE_STEER_FORWARD;
            }
            e = lookup(s, pin, qp, 1);
            if (!e) {
                count(s, RG_TABLE_FULL);
                return ROCE_STEER_FORWARD;
            }
            e->queue = (uint16_t)fr.h.rkey;
            count(s, RG_FIRST);
        }
    } else {
        e = lookup(s, pin, qp, 0);
        if (!e) {
            count(s, RG_NO_FLOW);
            return ROCE_STEER_FORWARD;
        }
        count(s, RG_STEERED);
    }
    *queue = e->queue;
    return ROCE_STEER_AGGREGATE;
}

static const char *const names[RG_COUNT] = {"first",           "steered",       "not_write",
                                            "no_match",        "no_flow",       "malformed",
                                            "flow_table_full", "flows_recycled"};

void roce_steer_stats(const roce_steer_t *s, roce_steer_stats_t *out)
{
    fstat_read(s->c, out->c, RG_COUNT);
}

void roce_steer_write_text(const roce_steer_stats_t *s, const roce_stats_t *endpoints, FILE *out)
{
    fprintf(out, "fabric roce:");
    for (int i = 0; i < RG_COUNT; i++)
        fprintf(out, " %s=%" PRIu64, names[i], s->c[i]);
    fprintf(out, "\n");
    roce_stats_write_text(endpoints, "fabric roce endpoints:", out);
}

void roce_steer_write_json(const roce_steer_stats_t *s, const roce_stats_t *endpoints,
                           struct json_writer *w)
{
    json_newline(w);
    json_begin_object(w, "roce");
    for (int i = 0; i < RG_COUNT; i++)
        json_int(w, names[i], (int64_t)s->c[i]);
    json_newline(w);
    json_begin_object(w, "endpoints");
    for (int i = 0; i < RS_COUNT; i++)
        json_int(w, roce_stat_name(i),
                 (int64_t)atomic_load_explicit(&endpoints->c[i], memory_order_relaxed));
    json_end_object(w);
    json_end_object(w);
}
