/*
 * forward.h - the pipeline's classify stage: what the fabric does with one received frame,
 * as a verdict the receive loop carries out. Aggregation frames (UDP to the switch's IP and
 * an aggregation queue's port, RoCE Writes of an aggregation flow, roce_agg.h) go to their
 * queue, frames for the switch's MAC to its internal port (its stack), the rest are forwarded
 * by MAC table (mactable.h, learned from the frames' sources) or flooded. Bad frames and
 * frames the settings refuse are counted and dropped. The stage owns the MAC table, the RoCE
 * flow table and the settings that change while it runs (fctl.c writes them: relaxed atomics
 * read per frame); it runs on the receive thread and calls no other stage.
 */
#ifndef INAGG_FABRIC_FORWARD_H
#define INAGG_FABRIC_FORWARD_H

#include <stdatomic.h>
#include <stdint.h>

#include "switchd/fabric/mactable.h"
#include "switchd/fabric/roce_agg.h"

enum classify_stat {
    CL_FRAMES, /* frames classified (after any ingress delay) */
    CL_FORWARDED, /* unicast frames sent to the one port their MAC was learned on */
    CL_FLOODED, /* broadcast / multicast frames sent to every other port */
    CL_UNKNOWN_FLOODED, /* unicast frames to an unknown (or aged) MAC, flooded */
    CL_FILTERED, /* unicast frames whose destination is on the port they came from */
    CL_TO_CPU, /* frames for the switch's MAC that are not aggregation: to the stack */
    CL_FROM_CPU, /* frames the switch's stack sent (ARP replies, TCP) */
    CL_AGG_FRAGMENT, /* IPv4 fragments to the switch's IP, dropped (aggregation packets
                           must fit a frame) */
    CL_MALFORMED, /* frames for the switch's MAC with a bad IPv4/UDP header, dropped */
    CL_RUNT, /* frames shorter than an Ethernet header, dropped */
    CL_BAD_SOURCE, /* frames with a multicast or zero source MAC, dropped */
    CL_AGG_PORT_OFF, /* aggregation frames from a port that does not aggregate, dropped */
    CL_AGG_ADD_OFF, /* contributions of a dtype whose adder is off (add mode), dropped */
    CL_SETTINGS_CHANGED, /* settings changes (classify_set) */
    CL_COUNT
};

typedef struct classify {
    uint32_t nports, cpu; /* the internal port is the last */
    uint8_t mac[6]; /* the switch's */
    uint32_t ip; /* network order */
    uint16_t port0; /* aggregation queue q is UDP port port0 + q */
    uint32_t nqueues;
    mactable_t mt;
    roce_steer_t roce;
    _Atomic uint64_t agg_ports; /* bit p: port p's aggregation frames are aggregated */
    _Atomic uint32_t add_mode; /* enum wire_add_mode */
    _Atomic uint64_t c[CL_COUNT];
} classify_t;

enum verdict_kind {
    VERDICT_DROP, /* counted by the classify stage */
    VERDICT_SEND, /* to the transmit stage for `ports` (the internal port: the switch's stack) */
    VERDICT_AGGREGATE, /* to the aggregation stage's queue `queue` */
};

typedef struct verdict {
    uint8_t kind; /* enum verdict_kind */
    uint8_t lat; /* SEND: the latency class (LAT_FORWARD, or LAT_NONE), lathist.h */
    uint16_t queue; /* AGGREGATE */
    uint64_t ports; /* SEND: bit p, out of port p */
} verdict_t;

/* The verdict on a frame of len bytes that came in on port pin at now (ns). */
verdict_t classify_frame(classify_t *c, uint32_t pin, const uint8_t *frame, uint32_t len,
                         uint64_t now);

/* The settings: which ports' aggregation frames are aggregated, which adder runs. A change
 * (either pointer not NULL) applies from the next frame on, and is counted. */
void classify_set(classify_t *c, const uint64_t *agg_ports, const uint32_t *add_mode);
void classify_settings(const classify_t *c, uint64_t *agg_ports, uint32_t *add_mode);

typedef struct classify_stats {
    uint64_t c[CL_COUNT];
    uint32_t mac_entries; /* live at `now` */
    uint64_t mac_learned, mac_moved, mac_aged, mac_table_full;
    roce_steer_stats_t roce;
} classify_stats_t;

void classify_stats(const classify_t *c, uint64_t now, classify_stats_t *out);

#endif /* INAGG_FABRIC_FORWARD_H */
