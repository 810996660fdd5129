/*
 * forward.c - the pipeline's classify stage (forward.h): the verdict on one frame. Bad
 * frames are counted and dropped, never logged.
 */
#include "switchd/fabric/forward.h"

#include <string.h>

#include "lib/netio/ethframe.h"
#include "lib/wire/fabricmsg.h"
#include "lib/wire/wire.h"
#include "switchd/fabric/lathist.h"
#include "switchd/fabric/stagestat.h"

/* Header fields the fabric reads (wire.h has the layout) */
#define WIRE_OFF_TYPE 3
#define WIRE_OFF_DTYPE 31

static int is_zero_mac(const uint8_t *m) { return (m[0] | m[1] | m[2] | m[3] | m[4] | m[5]) == 0; }

static verdict_t drop(classify_t *c, int stat)
{
    fstat_add(&c->c[stat], 1);
    return (verdict_t){.kind = VERDICT_DROP};
}

static verdict_t send_to(uint64_t ports, uint8_t lat)
{
    return (verdict_t){.kind = VERDICT_SEND, .lat = lat, .ports = ports};
}

/* Every port but pin. */
static verdict_t flood(const classify_t *c, uint32_t pin)
{
    uint64_t all = c->nports >= 64 ? ~0ull : (1ull << c->nports) - 1;
    return send_to(all & ~(1ull << pin), LAT_NONE);
}

static verdict_t to_queue(uint32_t q)
{
    return (verdict_t){.kind = VERDICT_AGGREGATE, .queue = (uint16_t)q};
}

/* Whether port pin's aggregation frames are aggregated (the settings, fctl.c). */
static int port_aggregates(const classify_t *c, uint32_t pin)
{
    return (atomic_load_explicit(&c->agg_ports, memory_order_relaxed) >> pin) & 1;
}

/* Whether the add mode lets this aggregation payload through: only contributions carry
 * numbers to add (acknowledgements and short payloads pass, the dataplane judges those). */
static int adder_on(const classify_t *c, const uint8_t *h, uint32_t len)
{
    uint32_t mode = atomic_load_explicit(&c->add_mode, memory_order_relaxed);
    if (mode == WIRE_ADD_ANY || len < WIRE_HEADER_SIZE || h[WIRE_OFF_TYPE] != WIRE_CONTRIB)
        return 1;
    int is_float = h[WIRE_OFF_DTYPE] == WIRE_FLOAT32 || h[WIRE_OFF_DTYPE] == WIRE_CODED;
    return mode == WIRE_ADD_FLOAT ? is_float : !is_float;
}

/* A frame for the switch's MAC from port pin: aggregation, or the switch's stack. */
static verdict_t to_switch(classify_t *c, uint32_t pin, const uint8_t *frame, uint32_t len,
                           uint64_t now)
{
    if (frame[12] == 0x89 && frame[13] == 0x15) { /* RoCE (roce_agg.h) */
        uint32_t q = 0;
        int r = roce_steer_classify(&c->roce, pin, frame, len, c->nqueues, &q);
        if (r == ROCE_STEER_DROP)
            return (verdict_t){.kind = VERDICT_DROP}; /* counted by the steer */
        if (r == ROCE_STEER_AGGREGATE)
            return port_aggregates(c, pin) ? to_queue(q) : drop(c, CL_AGG_PORT_OFF);
    }
    ethf_udp_t u;
    int k = ethf_parse(frame, len, &u);
    if (k == ETHF_MALFORMED)
        return drop(c, CL_MALFORMED);
    if (k == ETHF_UDP && u.dst_ip == c->ip && u.dst_port >= c->port0 &&
        u.dst_port < c->port0 + c->nqueues) {
        /* aggregation: never learned from, never flooded */
        if (!port_aggregates(c, pin))
            return drop(c, CL_AGG_PORT_OFF);
        if (!adder_on(c, u.payload, u.payload_len))
            return drop(c, CL_AGG_ADD_OFF);
        return to_queue(u.dst_port - c->port0);
    }
    if (k == ETHF_FRAGMENT && u.dst_ip == c->ip)
        return drop(c, CL_AGG_FRAGMENT);
    mactable_learn(&c->mt, frame + 6, (uint16_t)pin, now);
    fstat_add(&c->c[CL_TO_CPU], 1);
    return send_to(1ull << c->cpu, LAT_NONE);
}

verdict_t classify_frame(classify_t *c, uint32_t pin, const uint8_t *frame, uint32_t len,
                         uint64_t now)
{
    fstat_add(&c->c[CL_FRAMES], 1);
    if (len < ETHF_ETH_LEN)
        return drop(c, CL_RUNT);
    const uint8_t *dst = frame, *src = frame + 6;
    if (pin == c->cpu) {
        fstat_add(&c->c[CL_FROM_CPU], 1);
    } else {
        if (ethf_mac_is_multicast(src) || is_zero_mac(src))
            return drop(c, CL_BAD_SOURCE);
        if (memcmp(dst, c->mac, 6) == 0)
            return to_switch(c, pin, frame, len, now);
        mactable_learn(&c->mt, src, (uint16_t)pin, now);
    }
    if (ethf_mac_is_multicast(dst)) {
        fstat_add(&c->c[CL_FLOODED], 1);
        return flood(c, pin);
    }
    int out = mactable_lookup(&c->mt, dst, now);
    if (out < 0) {
        fstat_add(&c->c[CL_UNKNOWN_FLOODED], 1);
        return flood(c, pin);
    }
    if ((uint32_t)out == pin)
        return drop(c, CL_FILTERED);
    fstat_add(&c->c[CL_FORWARDED], 1);
    return send_to(1ull << out, LAT_FORWARD);
}

void classify_set(classify_t *c, const uint64_t *agg_ports, const uint32_t *add_mode)
{
    if (agg_ports)
        atomic_store_explicit(&c->agg_ports, *agg_ports, memory_order_relaxed);
    if (add_mode)
        atomic_store_explicit(&c->add_mode, *add_mode, memory_order_relaxed);
    if (agg_ports || add_mode)
        fstat_add(&c->c[CL_SETTINGS_CHANGED], 1);
}

void classify_settings(const classify_t *c, uint64_t *agg_ports, uint32_t *add_mode)
{
    *agg_ports = atomic_load_explicit(&c->agg_ports, memory_order_relaxed);
    *add_mode = atomic_load_explicit(&c->add_mode, memory_order_relaxed);
}

void classify_stats(const classify_t *c, uint64_t now, classify_stats_t *out)
{
    fstat_read(c->c, out->c, CL_COUNT);
    out->mac_entries = mactable_count(&c->mt, now);
    out->mac_learned = c->mt.learned;
    out->mac_moved = c->mt.moved;
    out->mac_aged = c->mt.aged;
    out->mac_table_full = c->mt.full;
    roce_steer_stats(&c->roce, &out->roce);
}
