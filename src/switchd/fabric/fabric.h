/*
 * fabric.h - the L2 fabric: an Ethernet switch over AF_PACKET ports that forwards ordinary
 * frames (MAC learning with ageing, flooding of broadcast and unknown destinations) and hands
 * the aggregation protocol's frames addressed to the switch's own IP and UDP ports to the
 * aggregation switch (switch.h) through its aggregation port (port.h). The switch's
 * IP and MAC live on an internal TAP port (tapdev.h), so ARP, ICMP and the TCP control port
 * are the kernel's. Every port can emulate a link's one-way delay and jitter (delayline.h)
 * and random loss of IPv4 frames (seeded, counted per port).
 * `inagg switch --l2` is the command around it; docs/FABRIC.md describes it.
 */
#ifndef INAGG_FABRIC_FABRIC_H
#define INAGG_FABRIC_FABRIC_H

#include "lib/base/pollmode.h"
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/transport/transport.h"

struct json_writer;

#define FABRIC_IDLE_SPIN_US 20u /* without --poll: results and the next frames follow closely */

typedef struct fabric_config {
    const char *ports; /* "IF1,IF2,...": the interfaces to switch between */
    const char *ip; /* the switch's address "A.B.C.D[/PREFIX]" (prefix default 24) */
    const char *mac; /* "xx:xx:xx:xx:xx:xx", or NULL: 02:69:61 + the IP's low 3 bytes */
    const char *cpu_port; /* the internal TAP port's name (NULL: "inagg0") */
    uint16_t agg_port; /* UDP port of aggregation queue 0 */
    uint32_t queues; /* aggregation queues (the switch's dataplane threads) */
    const char *delay; /* one-way delay of each link: "D" for all, or "IF=D,IF=D,...";
                               D is a number with ns, us, ms or s (NULL: none) */
    const char *jitter; /* uniform extra delay 0..J per frame, same syntax (NULL: none) */
    const char *loss; /* drop probability of each IPv4 frame on each link, each way: "P"
                               (0.01 or 1%) for all, or "IF=P,IF=P,..." (NULL: none); ARP and
                               other frames are never dropped */
    uint64_t loss_seed; /* the drops' random stream (per port: seeded by it and the port) */
    uint32_t mac_age_ms; /* an entry not refreshed this long is forgotten (0: 300000) */
    const char *agg_ports; /* ports whose aggregation frames are aggregated: "IF,IF,...",
                               "all" or "none" (NULL: all); changeable (fabric_control) */
    const char *add_mode; /* "any" (NULL), "fixed" or "float"; changeable */
    uint32_t threads; /* the pipeline's threads: 1 (0 too) receive, classify and
                               transmit on one; 2: transmit on its own */
    uint32_t roce_resbuf_rows; /* RoCE result buffer per queue: flows x frames (0 x 0: the
                                   default 4 x 128; 0 x 1: none) */
    uint32_t roce_resbuf_depth;
    const char *xdp; /* how ports receive: "off" (NULL: AF_PACKET), "on" (AF_XDP for
                               the fast-path frames, or fail), "auto" (AF_XDP where it loads,
                               else AF_PACKET with a log line saying why) */
    int poll_set; /* poll and poll_spin_us were given (`inagg switch --poll`); else the
                               pipeline spins FABRIC_IDLE_SPIN_US after its last frame */
    switch_poll_t poll; /* how the pipeline's threads wait when idle */
    uint32_t poll_spin_us; /* adaptive: spin this long after the last frame */
} fabric_config_t;

enum fabric_xdp_mode { FABRIC_XDP_OFF, FABRIC_XDP_AUTO, FABRIC_XDP_ON };

/* "off", "auto" or "on" (NULL: off) into *mode; 0 or -EINVAL. */
int fabric_xdp_parse(const char *text, int *mode);

typedef struct fabric fabric_t;

/* Open the ports and the internal port, start the forwarding thread. 0 or -errno with a
 * reason in err. */
int fabric_start(const fabric_config_t *cfg, fabric_t **out, char *err, size_t errlen);

/* What the switch opens its dataplane endpoints with (transport_config_t.opener): the
 * fabric's aggregation port (port.h), one endpoint per aggregation queue. */
const transport_opener_t *fabric_port_opener(fabric_t *f);

/* The switch's IP as text ("A.B.C.D"). */
const char *fabric_ip_text(const fabric_t *f);

/* Counters: text lines, or members "fabric":{...} of an open JSON object. The ctx is the
 * fabric (these fit switch_config_t.extra_text / extra_json). */
void fabric_write_text(void *f, FILE *out);
void fabric_write_json(void *f, struct json_writer *w);
/* The fabric's counters as Prometheus text families (inagg_fabric_...). */
void fabric_write_metrics(void *f, FILE *out);

/* A FABRIC control line (wire/fabricmsg.h) from a client at peer (IPv4-mapped IPv6): apply
 * it and write the answer (FABRIC_STATE, or ERR invalid / refused) into reply. Changes are
 * taken only from the switch's own address or loopback. Fits switch_config_t.extra_ctl. */
void fabric_control(void *f, const char *line, const uint8_t peer[16], char *reply, size_t cap);

/* Inline aggregation (switch_config_t.inline_attach; the ctx is the fabric): the receive
 * thread runs pass(sw, q) for every aggregation queue on each turn of its loop, after the
 * frames it classified and before it transmits, so an aggregation frame reaches the slot
 * protocols and its results leave without a hand-off to another thread. pass NULL detaches,
 * returning once no pass runs. */
void fabric_attach_aggregation(void *f, int (*pass)(void *sw, uint32_t queue), void *sw);

void fabric_stop(fabric_t *f);

/* Parsing helpers (also used by the command line): a duration "25us" into ns; 0 or -EINVAL. */
int fabric_parse_duration(const char *text, uint64_t *ns);

#endif /* INAGG_FABRIC_FABRIC_H */
