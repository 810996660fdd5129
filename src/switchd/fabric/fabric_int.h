/*
 * fabric_int.h - the fabric as its files see it: the ports, the pipeline's stages (each with
 * its own context, declared in its own header) and the wiring between them. Only
 * src/switchd/fabric/ (and its unit tests) include this.
 *
 * The pipeline (docs/FABRIC.md), each arrow a hand-off through a queue or a verdict, never a
 * call back into the stage that called:
 *
 *   receive (rxstage.h) --frame--> classify (forward.h) --verdict--> receive, which carries it out:
 *     aggregate -> the aggregation stage (aggstage.h) -> link.rx[q] -> the switch's dataplane
 *     send      -> the transmit stage (txstage.h): through txq (threads = 2) or txstage_send
 *   dataplane -> link.tx[q] -> transmit -> the ports (now, or via the delay stage's egress lines)
 *   ports -> the delay stage's ingress lines (delaystage.h) -> receive -> classify
 *
 * Thread 0 runs receive, classify and the aggregation stage's side (and its inline pass);
 * transmit runs on thread 0 too (threads = 1) or on its own thread 1. fstats.c assembles the
 * counters from each stage's X_stats.
 */
#ifndef INAGG_FABRIC_FABRIC_INT_H
#define INAGG_FABRIC_FABRIC_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "switchd/fabric/aggstage.h"
#include "switchd/fabric/bytering.h"
#include "switchd/fabric/delaystage.h"
#include "switchd/fabric/fabric.h"
#include "switchd/fabric/forward.h"
#include "switchd/fabric/fport.h"
#include "switchd/fabric/port.h"
#include "switchd/fabric/rxstage.h"
#include "switchd/fabric/txstage.h"

struct json_writer;

/* skb priorities of the frames the fabric sends for the aggregation switch: the class ids
 * 1:11 and 1:12 of an HTB qdisc with handle 1: (forwarded frames keep priority 0) */
#define FABRIC_PRIO_RESULT 0x10011u
#define FABRIC_PRIO_RESEND 0x10012u

struct fabric {
    /* the ports */
    fport_t ports[FABRIC_MAX_PORTS];
    uint32_t nports; /* the internal port is the last */
    uint32_t cpu;
    /* the switch's addresses (the classify stage keeps its copy of mac and ip) */
    uint8_t mac[6];
    uint32_t ip; /* network order */
    int prefix;
    char ip_text[16];
    int xdp_mode; /* enum fabric_xdp_mode */
    /* the stages */
    rxstage_t rx;
    classify_t classify;
    aggstage_t agg;
    txstage_t tx;
    delaystage_t delay;
    /* the wiring */
    fabric_link_t link; /* the aggregation port's frame queues (port.h) */
    fabric_port_config_t port; /* what the switch opens its endpoints with */
    bytering_t txq; /* classify -> transmit, when threads = 2 */
    uint32_t threads; /* 1: every stage on thread 0; 2: transmit on thread 1 */
    pthread_t tid, tx_tid;
    int running, tx_running;
    _Atomic int stop;
};

/* fctl.c: every physical port's bit; a port list ("IF,IF", "all", "none") as a mask (0 or
 * -EINVAL with a reason); the settings as text (ports into buf, add mode's name). */
uint64_t fabric_all_ports(const struct fabric *f);
int fabric_ports_mask(const struct fabric *f, const char *spec, uint64_t *mask, char *err,
                      size_t errlen);
void fabric_settings_text(const struct fabric *f, char *ports, size_t cap, const char **add);

/* xdpports.c: open every port's AF_XDP socket per mode (fabric_xdp_parse; auto: a port
 * that cannot is logged and stays on AF_PACKET; on: its error), close them, their stats. */
int fabric_xdp_open(struct fabric *f, int mode, char *err, size_t errlen);
void fabric_xdp_close(struct fabric *f);
void fabric_xdp_write_text(const struct fabric *f, FILE *out);
void fabric_xdp_write_json(const struct fabric *f, struct json_writer *w);
void fabric_xdp_write_metrics(const struct fabric *f, FILE *out);

#endif /* INAGG_FABRIC_FABRIC_INT_H */
