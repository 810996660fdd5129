/*
 * xskport.h - one AF_XDP socket receiving on one interface for the fabric: its UMEM, its
 * fill and receive rings, and the fabric's XDP program (xdpload.h) that steers the
 * fast-path frames (RoCE v1, UDP to the aggregation ports) into it. Every other frame is
 * passed to the kernel, where the port's AF_PACKET socket (netio/pktsock.h) takes it; frames
 * are sent through the AF_PACKET sockets as before (docs/FABRIC.md, "AF_XDP ports").
 *
 * The UMEM is XSKPORT_FRAMES chunks of XSKPORT_CHUNK bytes, all of them receive buffers: a
 * frame larger than XSKPORT_MAX_FRAME (a chunk less the kernel's XDP headroom) is passed to
 * the AF_PACKET path by the program instead. Zero-copy is asked for first (XDP_ZEROCOPY) and
 * copy mode (XDP_COPY, all a veth offers) taken when the driver refuses it.
 * Errors: a negative errno with the reason in err.
 */
#ifndef INAGG_FABRIC_XSKPORT_H
#define INAGG_FABRIC_XSKPORT_H

#include <stddef.h>
#include <stdint.h>

#include "switchd/fabric/xdpload.h"

#define XSKPORT_CHUNK 4096u
#define XSKPORT_FRAMES 4096u
#define XSKPORT_MAX_FRAME (XSKPORT_CHUNK - 256u) /* XDP_PACKET_HEADROOM */

typedef struct xskport xskport_t;

typedef struct xskport_conf {
    uint8_t mac[6]; /* the switch's MAC */
    uint32_t ip; /* the switch's IP, network order */
    uint16_t port_lo; /* aggregation UDP ports [port_lo, port_hi) */
    uint16_t port_hi;
    uint32_t if_mtu; /* the interface's MTU: RoCE is steered only when its frames fit a chunk */
} xskport_conf_t;

/* Attach the program to interface ifname (index ifindex) and open a socket on its receive
 * queue 0. 0 with *out set, or -errno (-EOPNOTSUPP: no native XDP on the device). */
int xskport_open(xskport_t **out, const char *ifname, int ifindex, const xskport_conf_t *conf,
                 char *err, size_t errlen);

/* The next received frame: 1 with frame and len set (valid until xskport_done), 0 when the
 * ring is empty. */
int xskport_peek(xskport_t *x, const uint8_t **frame, uint32_t *len);

/* Give the frame of the last peek back to the fill ring. */
void xskport_done(xskport_t *x);

/* The socket's descriptor (POLLIN when frames wait). */
int xskport_fd(const xskport_t *x);

/* "zerocopy" or "copy". */
const char *xskport_mode(const xskport_t *x);

/* 1 when RoCE frames are steered into the socket (every frame of the interface's MTU fits a
 * chunk); 0 when they are all passed to the AF_PACKET path. */
int xskport_takes_roce(const xskport_t *x);

/* The program's counters: steered into the socket, passed to the kernel, passed as too big
 * for a chunk; and the socket's drops (no fill buffer, ring full, invalid descriptors). */
typedef struct xskport_stats {
    uint64_t redirected, passed, too_big, rx_dropped, rx_ring_full, fill_empty;
} xskport_stats_t;
void xskport_stats(const xskport_t *x, xskport_stats_t *s);

void xskport_close(xskport_t *x);

#endif /* INAGG_FABRIC_XSKPORT_H */
