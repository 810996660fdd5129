/*
 * fabric_int.h - the fabric's state shared by its files: ports, the pipeline's queues,
 * counters, latency histograms. Only src/switchd/fabric/ (and its unit tests) include this.
 *
 * The pipeline (docs/FABRIC.md): receive (rxstage.c) -> classify (forward.c) -> aggregate and
 * buffer (the switch's dataplane threads, through the frame queues of the afpacket link) ->
 * transmit (txstage.c). Thread 0 runs receive and classify: it owns every port's receive
 * ring, the MAC table, the ingress delay lines and the producer side of the aggregation
 * queues. The transmit stage owns the egress delay lines, the result table and the
 * consumer side of the result queues; it runs on thread 0 too (threads = 1) or on its own
 * thread 1 fed by the SPSC ring txq (threads = 2). Counters are relaxed atomic adds (some
 * are written by both threads), so the stats reader sees whole values.
 */
#ifndef INAGG_FABRIC_FABRIC_INT_H
#define INAGG_FABRIC_FABRIC_INT_H

#include <net/if.h>
#include <pthread.h>
#include <stdatomic.h>

#include "lib/base/util.h"
#include "lib/netio/pktsock.h"
#include "lib/netio/udpgso.h"
#include "switchd/fabric/bytering.h"
#include "switchd/fabric/delayline.h"
#include "switchd/fabric/fabric.h"
#include "switchd/fabric/mactable.h"
#include "switchd/fabric/port.h"
#include "switchd/fabric/roce_agg.h"

struct xskport;
struct json_writer;

#define FABRIC_MAX_PORTS 64 /* the internal port included */
#define FABRIC_BURST 64 /* frames taken from one port per pass */
#define FABRIC_TAPBUF (65536 + 64)
/* skb priorities of the frames the fabric sends for the aggregation switch: the class ids
 * 1:11 and 1:12 of an HTB qdisc with handle 1: (forwarded frames keep priority 0) */
#define FABRIC_PRIO_RESULT 0x10011u
#define FABRIC_PRIO_RESEND 0x10012u

enum fport_stat {
    FP_RX,
    FP_RX_BYTES,
    FP_TX,
    FP_TX_BYTES,
    FP_TX_DROPS,
    FP_TX_GSO, /* UDP GSO super-frames of results sent (their frames also count in FP_TX) */
    FP_DELAY_DROPS,
    FP_LOSS_DROPS,
    FP_COUNT
};

enum fabric_stat {
    FG_FORWARDED, /* unicast frames sent to the one port their MAC was learned on */
    FG_FLOODED, /* broadcast / multicast frames sent to every other port */
    FG_UNKNOWN_FLOODED, /* unicast frames to an unknown (or aged) MAC, flooded */
    FG_FILTERED, /* unicast frames whose destination is on the port they came from */
    FG_TO_CPU, /* frames for the switch's MAC that are not aggregation: to the stack */
    FG_FROM_CPU, /* frames the switch's stack sent (ARP replies, TCP) */
    FG_AGG_IN, /* aggregation frames handed to a dataplane queue */
    FG_AGG_OUT, /* result frames the dataplane sent */
    FG_AGG_QUEUE_FULL, /* aggregation frames dropped: the dataplane queue was full */
    FG_AGG_TOO_BIG, /* aggregation frames dropped: larger than a queue slot, or a GSO
                           frame that is not UDP's */
    FG_AGG_GSO, /* UDP GSO frames (a sender's UDP_SEGMENT) cut into aggregation frames */
    FG_AGG_FRAGMENT, /* IPv4 fragments to the switch's IP, dropped (aggregation packets
                           must fit a frame) */
    FG_AGG_BAD_PORT, /* result frames naming a port that does not exist, dropped */
    FG_MALFORMED, /* frames for the switch's MAC with a bad IPv4/UDP header, dropped */
    FG_RUNT, /* frames shorter than an Ethernet header, dropped */
    FG_BAD_SOURCE, /* frames with a multicast or zero source MAC, dropped */
    FG_RING_TRUNCATED, /* frames larger than a ring frame, dropped by the packet socket */
    FG_AGG_PORT_OFF, /* aggregation frames from a port that does not aggregate, dropped */
    FG_AGG_ADD_OFF, /* contributions of a dtype whose adder is off (add mode), dropped */
    FG_SETTINGS_CHANGED, /* FABRIC lines that changed the aggregation ports or add mode */
    FG_COUNT
};

/* The fabric's own latency per frame kind (from taking the frame off its port, after any
 * ingress delay, to handing it to the output port or its delay line), and how late the delay
 * lines released frames against their due time (the link emulation's error). */
enum fabric_lat { LAT_FORWARD, LAT_AGG_INT, LAT_AGG_FLOAT, LAT_RESEND, LAT_DELAY_LATE, LAT_COUNT };
#define LAT_NONE 0xff

#define LAT_BUCKETS (44 * 16)
typedef struct lathist {
    _Atomic uint64_t b[LAT_BUCKETS];
} lathist_t;

typedef struct fport {
    char name[IFNAMSIZ];
    int is_cpu;
    int tap_fd; /* the internal port */
    pktsock_t ps; /* the others */
    int arp_quieted; /* the host's ARP was turned off on it (portarp.h) ... */
    int arp_was_off; /* ... and whether it was off before */
    struct xskport *xsk; /* the AF_XDP socket its fast-path frames arrive on (xdpports.c),
                              or NULL: everything through ps */
    char xdp_why[192]; /* --xdp auto without AF_XDP: the reason */
    int agg_fd[2]; /* send-only sockets on the same interface for results and for
                              resends, whose frames carry FABRIC_PRIO_RESULT / _RESEND as their
                              priority: an arbitrating qdisc on the port (tools/testbed
                              --arbitration) tells them from forwarded frames by it */
    uint64_t delay_ns, jitter_ns;
    uint64_t loss_thresh; /* an IPv4 frame is dropped when a 32-bit draw is below this */
    uint64_t loss_rng[2]; /* splitmix64 states of the port's drops in and out (the two
                              directions may run on different threads) */
    delayline_t in, out; /* used when delay_ns or jitter_ns is set */
    _Atomic uint64_t c[FP_COUNT];
} fport_t;

/* Per-stage and per-thread counters of the pipeline. */
enum fabric_stage_stat {
    ST_RX_FRAMES, /* receive: frames taken off the ports */
    ST_RX_DELAYED, /* receive: of those, queued in an ingress delay line */
    ST_CL_FRAMES, /* classify: frames classified (after any ingress delay) */
    ST_CL_TO_TX, /* classify: frames handed to the transmit stage */
    ST_CL_QUEUE_FULL, /* classify: frames dropped, the transmit ring was full */
    ST_TX_FRAMES, /* transmit: frames taken from the classify stage */
    ST_TX_RESULTS, /* transmit: result frames taken from the aggregation stage */
    ST_TX_QUEUE_MAX, /* transmit: deepest the ring was (bytes) */
    ST_THREAD0_PASSES,
    ST_THREAD0_SLEEPS, /* passes of the loop that did work; sleeps */
    ST_THREAD1_PASSES,
    ST_THREAD1_SLEEPS,
    ST_COUNT
};

typedef struct resend_ent {
    uint32_t tag, round;
} resend_ent_t;
#define RESEND_SLOTS 65536

/* The transmit stage's run of results being coalesced into one super-frame (resultgso.c). */
typedef struct result_gso {
    udpgso_t b;
    uint32_t port; /* the run's port and send socket */
    int fd;
    int off; /* the kernel refused a super-frame: no more coalescing */
} result_gso_t;

struct fabric {
    fport_t ports[FABRIC_MAX_PORTS];
    uint32_t nports; /* the internal port is the last */
    uint32_t cpu;
    uint8_t mac[6];
    uint32_t ip; /* network order */
    int prefix;
    char ip_text[16];
    mactable_t mt;
    fabric_link_t link; /* the aggregation port's frame queues (port.h) */
    fabric_port_config_t port; /* what the switch opens its endpoints with */
    uint32_t kick; /* aggregation queues that got frames this pass */
    resend_ent_t *resend; /* (job, slot, rank) -> last result round sent */
    uint8_t *tapbuf;
    int tap_ready; /* thread 0: the TAP has (or may have) a frame: read it next pass */
    uint64_t tap_looked_ns; /* thread 0: its last read when it had none */
    uint32_t threads; /* 1: every stage on thread 0; 2: transmit on thread 1 */
    uint64_t idle_spin_ns; /* after the last frame: spin this long before sleeping
                               (UINT64_MAX: never sleep; --poll) */
    bytering_t txq; /* classify -> transmit, when threads = 2 */
    int txq_pushed; /* thread 0: records pushed this pass (kick the consumer) */
    _Atomic int tx_sleeping; /* thread 1 is (about to be) asleep: kick it */
    pthread_t tid, tx_tid;
    int running, tx_running;
    _Atomic int stop;
    _Atomic uint64_t g[FG_COUNT];
    _Atomic uint64_t st[ST_COUNT];
    lathist_t lat[LAT_COUNT];
    roce_steer_t roce; /* RoCE aggregation flows and their counters (roce_agg.c) */
    /* changed while running (fctl.c): read per frame by the forwarding thread */
    _Atomic uint64_t agg_ports; /* bit p: port p's aggregation frames are aggregated */
    _Atomic uint32_t add_mode; /* enum wire_add_mode */
    /* inline aggregation (fabric_attach_aggregation): thread 0 runs each queue's pass */
    int (*_Atomic agg_pass)(void *sw, uint32_t queue);
    void *_Atomic agg_arg;
    _Atomic uint64_t loop_seq; /* thread 0's loop heads, so a detach can wait out a pass */
    int xdp_mode; /* enum fabric_xdp_mode */
    result_gso_t gso; /* the transmit stage's (one thread's) */
};

static inline void fstat_add(_Atomic uint64_t *c, uint64_t v)
{
    atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

/* forward.c (classify): one received frame, after its ingress delay. */
void fabric_frame_in(struct fabric *f, uint32_t pin, const struct virtio_net_hdr *vh,
                     const uint8_t *frame, uint32_t len, uint64_t t_ns);

/* txstage.c (transmit). Hand a frame to the transmit stage for the ports in the mask (thread
 * 0: through the ring when threads = 2); lat: its latency class or LAT_NONE. */
void fabric_send_ports(struct fabric *f, uint64_t ports, const struct virtio_net_hdr *vh,
                       const uint8_t *frame, uint32_t len, uint64_t t_ns, uint8_t lat);
/* Send a frame out of port pout now or after its delay (transmit stage only). */
void fabric_egress(struct fabric *f, uint32_t pout, const struct virtio_net_hdr *vh,
                   const uint8_t *frame, uint32_t len, uint64_t t_ns, uint8_t lat);
void fabric_transmit(struct fabric *f, uint32_t pout, const struct virtio_net_hdr *vh,
                     const uint8_t *frame, uint32_t len, uint8_t lat);
int fabric_drain_results(struct fabric *f);
/* resultgso.c: take a UDP result frame leaving port by send socket fd into the run being
 * coalesced (1; counted when the run leaves), sending the run first when the frame cannot
 * join it; 0: the frame cannot be coalesced (send it as it is, after fabric_gso_flush).
 * fabric_gso_flush sends the run; it ends every pass of the transmit stage. */
int fabric_gso_add(struct fabric *f, uint32_t port, int fd, const uint8_t *frame, uint32_t len);
void fabric_gso_flush(struct fabric *f);
/* One pass of the transmit stage (ring, results, egress delay lines): adds what it did to
 * *work, returns the earliest pending egress release (UINT64_MAX: none). */
uint64_t fabric_tx_pass(struct fabric *f, int *work);
void *fabric_tx_main(void *f);
/* forward.c: an aggregation frame for queue q, copied into the queue (or counted). */
void fabric_to_dataplane(struct fabric *f, uint32_t q, uint32_t pin,
                         const struct virtio_net_hdr *vh, const uint8_t *frame, uint32_t len,
                         uint64_t t_ns);
/* forward.c: the wire header inside a result frame (UDP, or a RoCE message's first frame),
 * or NULL with the class to use in *lat (RoCE frames after the first: aggregated int32). */
const uint8_t *fabric_result_header(const uint8_t *frame, uint32_t len, uint8_t *lat);

/* rxstage.c (receive): thread 0's loop; how long an idle thread may sleep (0: spin) given
 * the next delayed release and the time of its last work. */
void *fabric_rx_main(void *f);
uint64_t fabric_idle_ns(const struct fabric *f, uint64_t next_release, uint64_t last_work);

/* forward.c: the latency class of a result whose wire header is h: LAT_RESEND when the same
 * (job, slot, rank) was already sent this round (remembered in resend), else its dtype's. */
uint8_t fabric_result_class(resend_ent_t *resend, const uint8_t *h);

/* forward.c: whether the link of port p loses this frame now, on its way in (out = 0) or
 * out (1) (random, IPv4 only); counted. */
int fabric_link_loses(struct fabric *f, uint32_t p, int out, const uint8_t *frame, uint32_t len);

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

/* fstats.c */
void lathist_add(lathist_t *h, uint64_t ns);

/* Release what is due by `now` on one direction's delay line of every delayed port (at most
 * 256 records a port a pass) through release(f, port, record, t), counting each record's
 * lateness and each release in *work; the earliest release still pending. The ingress and
 * egress stages differ only in `egress` and `release`, which inlining makes direct calls. */
static inline uint64_t fabric_run_delays(struct fabric *f, int egress, uint64_t now, int *work,
                                         void (*release)(struct fabric *f, uint32_t port,
                                                         const delay_rec_t *r, uint64_t t))
{
    uint64_t next = UINT64_MAX;
    for (uint32_t p = 0; p < f->nports; p++) {
        fport_t *port = &f->ports[p];
        if (!port->delay_ns && !port->jitter_ns)
            continue;
        delayline_t *line = egress ? &port->out : &port->in;
        const delay_rec_t *r;
        for (int k = 0; k < 256 && (r = delayline_due(line, now)); k++) {
            uint64_t t = util_now_ns();
            lathist_add(&f->lat[LAT_DELAY_LATE], t - r->release_ns);
            release(f, p, r, t);
            delayline_pop(line);
            (*work)++;
        }
        uint64_t due = delayline_next(line);
        if (due < next)
            next = due;
    }
    return next;
}

#endif /* INAGG_FABRIC_FABRIC_INT_H */
