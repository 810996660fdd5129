/*
 * transport.h - how dataplane packets leave and arrive. The switch's dataplane threads and the
 * worker engines see only this interface; each way of moving packets is one file in this
 * folder behind an ops table (udp.c, afpacket.c, roce.c, each a line in transport.c's table),
 * fault injection (faulty.c) is a transport that wraps another, and an endpoint kind that
 * only a switch uses comes from its owner through a transport_opener_t (the L2 fabric's
 * aggregation port, fabric/port.h).
 *
 * An endpoint is one queue of a switch, or one socket of a worker. A switch listens on queues
 * 0 .. nqueues-1 (UDP: ports P .. P+nqueues-1, one per dataplane thread); the slots of a job
 * are spread over the queues by transport_slot_queue(), the only place that rule is written.
 *
 * Addresses are opaque to callers: they are copied, compared with transport_addr_equal(),
 * printed, and obtained from the transport (the source of a received packet, or the address
 * of a switch queue). Received packets point into the endpoint's own buffers and stay valid
 * until the next receive on it. A send gathers a header and a payload that stay the caller's
 * and may be reused as soon as send returns.
 *
 * Errors: functions return 0 (or a count) on success and -errno on failure; open also writes a
 * reason into the caller's buffer.
 */
#ifndef INAGG_TRANSPORT_TRANSPORT_H
#define INAGG_TRANSPORT_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#define TRANSPORT_ADDR_BYTES 32

/* An endpoint address. kind 0 means "not set"; otherwise the bytes belong to the transport
 * that made it (UDP: a struct sockaddr_in). */
typedef struct transport_addr {
    uint32_t kind;
    uint32_t len; /* bytes of `bytes` in use */
    union {
        uint8_t bytes[TRANSPORT_ADDR_BYTES];
        uint64_t align_;
    } u;
} transport_addr_t;

/* One packet to send: `head` then `body` (either may be empty), to `to`. */
typedef struct transport_tx {
    const void *head;
    const void *body;
    uint32_t head_len, body_len;
    transport_addr_t to;
} transport_tx_t;

/* One received packet: `len` bytes at `data`, valid until the next receive. */
typedef struct transport_rx {
    const uint8_t *data;
    uint32_t len;
    transport_addr_t from;
} transport_rx_t;

typedef struct transport transport_t;

typedef struct transport_ops {
    const char *name;
    /* Send n packets. Waits up to timeout_ms while the device is full; what still does not
     * fit is dropped (the protocols retransmit). Returns how many left, or -errno. */
    int (*send)(transport_t *t, const transport_tx_t *pkts, int n, int timeout_ms);
    /* Receive up to max packets, waiting up to timeout_ms for the first (0: do not wait).
     * Returns how many (0 on timeout), or -errno. */
    int (*recv)(transport_t *t, transport_rx_t *out, int max, int timeout_ms);
    /* A descriptor that polls readable when recv would return packets, or -1. */
    int (*pollfd)(const transport_t *t);
    /* This endpoint's own address (for a switch queue, what workers send to). */
    int (*local_addr)(const transport_t *t, transport_addr_t *out);
    /* The address of queue `queue` of the switch whose queue 0 is at `queue0`. */
    int (*queue_addr)(const transport_t *t, const transport_addr_t *queue0, uint32_t queue,
                      transport_addr_t *out);
    /* Counters of what the transport itself decided (fault injection): may be NULL. */
    void (*fault_counts)(const transport_t *t, uint64_t *dropped, uint64_t *duplicated,
                         uint64_t *reordered);
    /* Add the transport's own counters (its kind's counter_name names them) to acc[0..n):
     * n, at most max. May be NULL: none. */
    uint32_t (*counters)(const transport_t *t, uint64_t *acc, uint32_t max);
    void (*close)(transport_t *t);
} transport_ops_t;

/* Every transport's state starts with this. */
struct transport {
    const transport_ops_t *ops;
};

typedef struct transport_config transport_config_t;

/* An endpoint kind that is not in transport.c's table but provided by the caller (the L2
 * fabric's aggregation port, fabric/port.h): transport_open opens through it, then wraps the
 * endpoint in fault injection as for any kind. Embed it in the kind's own typed settings. */
typedef struct transport_opener transport_opener_t;
struct transport_opener {
    const char *name;
    int (*open)(const transport_opener_t *self, const transport_config_t *cfg, transport_t **out,
                char *err, size_t errlen);
};

/* The settings of one kind, each used by that kind only. */
typedef struct transport_afpacket_config {
    const char *iface; /* the interface to open */
} transport_afpacket_config_t;

typedef struct transport_udp_config {
    /* A worker's endpoint that only takes its switch's multicast results (PROTOCOL.md 9.6):
     * bound to group:port (host order; 0: an ordinary endpoint) and joined on the interface
     * toward mcast_peer, the switch. */
    uint32_t mcast_group;
    uint16_t mcast_port;
    const struct transport_addr *mcast_peer;
    /* A switch's queue: multicast sends leave from the bound address (TTL 1). */
    int mcast_send;
} transport_udp_config_t;

typedef struct transport_roce_config {
    const struct transport_addr *peer; /* the switch's queue 0 ("IP:PORT") */
    const char *iface; /* the interface towards it (NULL: the neighbour table's) */
    uint32_t psn0; /* the first PSN of every QP, when psn0_set (else random) */
    int psn0_set;
    int no_replay; /* retransmissions always take new PSNs */
    uint32_t mtu; /* the path MTU, 256..4096 (0: the largest the interface carries) */
} transport_roce_config_t;

struct transport_config {
    const char *kind; /* "udp", "afpacket" or "roce" (NULL: "udp") */
    const char *bind; /* switch: "HOST:PORT" of queue 0 (port 0: the kernel picks);
                               worker: NULL, any address and a free port */
    uint32_t queue; /* switch: the queue this endpoint serves (UDP: port + queue) */
    int buffer_bytes; /* socket buffers (0: the system's default) */
    uint32_t batch; /* most packets one receive returns (0: 64) */
    uint32_t max_packet; /* largest packet received, bytes (0: 65536) */
    int sleep_ms; /* > 0: a receive that waits sleeps inside one system call, woken
                               by the first packet or after this many ms (whatever its own
                               timeout): one system call per wake-up for a busy receiver */
    const char *faults; /* fault spec (transport/faults.h) for both directions, or NULL:
                               the endpoint is wrapped in the faulty transport */
    const char *faults_in; /* ... or a separate spec per direction (used when faults is NULL) */
    const char *faults_out;
    uint64_t fault_stream; /* each endpoint of a run draws its own decisions from the seed */
    int peer_takes_gso; /* udp: its peers take a UDP_SEGMENT send as its datagrams (a
                               switch's JOINED gso=1; a switch's peers are kernel sockets),
                               so sends use GSO where the kernel has it; INAGG_UDP_GSO=0|1
                               overrides */
    transport_udp_config_t udp;
    transport_afpacket_config_t afpacket;
    transport_roce_config_t roce;
    const transport_opener_t *opener; /* non-NULL: open through it instead of `kind` */
};

/* Open an endpoint. 0 with *out set, or -errno with a reason in err. */
int transport_open(const transport_config_t *cfg, transport_t **out, char *err, size_t errlen);

/* Parse "HOST:PORT" into the address of a switch's queue 0 for transport `kind` (NULL: udp).
 * 0 or -EINVAL / -EHOSTUNREACH. */
int transport_parse_addr(const char *kind, const char *text, transport_addr_t *out);

/* The switch queue that serves pool slot `slot` of a job whose slots start at queue `base`
 * of `nqueues`. The one place this rule is written. */
static inline uint32_t transport_slot_queue(uint32_t base, uint32_t nqueues, uint32_t slot)
{
    return (base + slot) % nqueues;
}

static inline int transport_send(transport_t *t, const transport_tx_t *p, int n, int timeout_ms)
{
    return t->ops->send(t, p, n, timeout_ms);
}
static inline int transport_recv(transport_t *t, transport_rx_t *out, int max, int timeout_ms)
{
    return t->ops->recv(t, out, max, timeout_ms);
}
int transport_local_addr(const transport_t *t, transport_addr_t *out);
int transport_queue_addr(const transport_t *t, const transport_addr_t *queue0, uint32_t queue,
                         transport_addr_t *out);
void transport_close(transport_t *t);

/* Wait up to timeout_ms until one of n (at most 8) endpoints has packets: a mask of those
 * that have (bit i: ts[i]; an endpoint without a descriptor to poll always counts as having
 * some, and then there is no wait), 0 on timeout, -errno on error. NULL entries are skipped. */
int transport_wait_ready(transport_t *const *ts, int n, int timeout_ms);

/* As transport_wait_ready, but for the first spin_us microseconds of the wait (at most
 * timeout_ms) the endpoints are asked without sleeping, again and again (UINT32_MAX: the
 * whole wait); only then does it sleep for the rest. spin_us 0 is transport_wait_ready. The
 * asks that found nothing are added to *empty_polls (may be NULL). */
int transport_wait_ready_spin(transport_t *const *ts, int n, int timeout_ms, uint32_t spin_us,
                              uint64_t *empty_polls);

/* Add the endpoint's own counters to acc[0..n) (see transport_ops_t.counters): n. */
uint32_t transport_counters(const transport_t *t, uint64_t *acc, uint32_t max);
/* The name of counter i of transport `kind` (NULL: udp), or NULL past its last. */
const char *transport_counter_name(const char *kind, uint32_t i);

/* Fault-injection decisions taken so far (all zero when the endpoint has none). */
void transport_fault_counts(const transport_t *t, uint64_t *dropped, uint64_t *duplicated,
                            uint64_t *reordered);

static inline int transport_addr_is_set(const transport_addr_t *a) { return a->kind != 0; }
int transport_addr_equal(const transport_addr_t *a, const transport_addr_t *b);
/* The port of an address whose transport has ports (UDP), else 0; and setting it. */
uint16_t transport_addr_port(const transport_addr_t *a);
void transport_addr_set_port(transport_addr_t *a, uint16_t port);
/* "a.b.c.d:port" for UDP; always NUL-terminated. */
void transport_addr_format(const transport_addr_t *a, char *buf, size_t len);

/* For transport implementations: what transport.c's table holds for each kind. */
typedef struct transport_kind {
    const char *name; /* the spelling of transport_config_t.kind and --transport */
    uint32_t addr_kind; /* the transport_addr_t.kind of its addresses (non-zero) */
    int (*open)(const transport_config_t *cfg, transport_t **out, char *err, size_t errlen);
    int (*parse_addr)(const char *text, transport_addr_t *out);
    void (*addr_format)(const transport_addr_t *a, char *buf, size_t len);
    uint16_t (*addr_port)(const transport_addr_t *a);
    void (*addr_set_port)(transport_addr_t *a, uint16_t port);
    const char *(*counter_name)(uint32_t i); /* its counters' names (NULL: it has none) */
} transport_kind_t;

/* The kinds in transport.c's table: what a worker can use. */
extern const transport_kind_t transport_kind_udp; /* udp.c */
extern const transport_kind_t transport_kind_afpacket; /* afpacket.c */
extern const transport_kind_t transport_kind_roce; /* roce.c */
/* The faulty transport wraps `inner` (and owns it). */
int transport_faulty_wrap(transport_t *inner, const char *spec_in, const char *spec_out,
                          uint64_t stream, transport_t **out, char *err, size_t errlen);

#endif /* INAGG_TRANSPORT_TRANSPORT_H */
