/*
 * xskport.c - an AF_XDP receive socket on one interface (see xskport.h): UMEM, rings, the
 * socket created with libxdp's xsk.h without its program (the fabric's own is attached by
 * xdpload.c and the socket put into its XSKMAP here), zero-copy or copy mode.
 */
#include "switchd/fabric/xskport.h"

#include <bpf/bpf.h>
#include <errno.h>
#include <linux/if_xdp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <xdp/xsk.h>

#include "lib/base/errmsg.h"

struct xskport {
    xdpload_t prog;
    void *area; /* the UMEM: XSKPORT_FRAMES chunks */
    struct xsk_umem *umem;
    struct xsk_socket *xsk;
    struct xsk_ring_prod fill;
    struct xsk_ring_cons comp;
    struct xsk_ring_cons rx;
    uint32_t idx; /* the receive ring index of the frame peeked, when held */
    uint64_t addr; /* its chunk */
    int held;
    int zerocopy;
    int roce; /* RoCE frames are steered here (steer_conf.roce) */
};

/* Hand n chunk addresses (from addr[]) to the fill ring: all fit, the ring has room for
 * every chunk. */
static void fill_put(xskport_t *x, const uint64_t *addr, uint32_t n)
{
    uint32_t idx;
    if (xsk_ring_prod__reserve(&x->fill, n, &idx) != n)
        return; /* cannot happen: the fill ring holds every chunk */
    for (uint32_t i = 0; i < n; i++)
        *xsk_ring_prod__fill_addr(&x->fill, idx + i) = addr[i];
    xsk_ring_prod__submit(&x->fill, n);
}

static int open_socket(xskport_t *x, const char *ifname, uint16_t bind_flags)
{
    struct xsk_socket_config sc = {
        .rx_size = XSKPORT_FRAMES,
        .tx_size = 0,
        .libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD,
        .bind_flags = bind_flags,
    };
    return xsk_socket__create(&x->xsk, ifname, 0, x->umem, &x->rx, NULL, &sc);
}

int xskport_open(xskport_t **out, const char *ifname, int ifindex, const xskport_conf_t *conf,
                 char *err, size_t errlen)
{
    *out = NULL;
    xskport_t *x = calloc(1, sizeof(*x));
    if (!x)
        return set_err(err, errlen, -ENOMEM, "out of memory");
    x->prog.prog_fd = x->prog.link_fd = x->prog.xsks_fd = x->prog.stats_fd = -1;
    struct steer_conf sc = {.port_lo = conf->port_lo,
                            .port_hi = conf->port_hi,
                            .ip = conf->ip,
                            .max_frame = XSKPORT_MAX_FRAME,
                            .roce = conf->if_mtu + 14u <= XSKPORT_MAX_FRAME};
    x->roce = (int)sc.roce;
    memcpy(sc.mac, conf->mac, 6);
    int rc = xdpload_load(&x->prog, ifname, &sc, err, errlen);
    if (rc == 0)
        rc = xdpload_attach(&x->prog, ifname, ifindex, err, errlen);
    if (rc < 0) {
        xdpload_detach(&x->prog);
        free(x);
        return rc;
    }
    size_t len = (size_t)XSKPORT_FRAMES * XSKPORT_CHUNK;
    x->area = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (x->area == MAP_FAILED) {
        x->area = NULL;
        rc = set_err(err, errlen, -errno, "port %s: the AF_XDP UMEM (%zu bytes): %s", ifname, len,
                     strerror(errno));
        goto fail;
    }
    struct xsk_umem_config uc = {.fill_size = XSKPORT_FRAMES,
                                 .comp_size = 64,
                                 .frame_size = XSKPORT_CHUNK,
                                 .frame_headroom = 0};
    rc = xsk_umem__create(&x->umem, x->area, len, &x->fill, &x->comp, &uc);
    if (rc < 0) {
        x->umem = NULL;
        rc = set_err(err, errlen, rc, "no XDP support on %s: the AF_XDP UMEM: %s", ifname,
                     strerror(-rc));
        goto fail;
    }
    rc = open_socket(x, ifname, XDP_ZEROCOPY);
    x->zerocopy = rc == 0;
    if (rc < 0) {
        x->xsk = NULL;
        rc = open_socket(x, ifname, XDP_COPY);
    }
    if (rc < 0) {
        x->xsk = NULL;
        rc = set_err(err, errlen, rc, "no XDP support on %s: an AF_XDP socket: %s", ifname,
                     strerror(-rc));
        goto fail;
    }
    uint32_t q0 = 0;
    int fd = xsk_socket__fd(x->xsk);
    if (bpf_map_update_elem(x->prog.xsks_fd, &q0, &fd, 0) != 0) {
        rc = set_err(err, errlen, -errno, "no XDP support on %s: the socket into the XSKMAP: %s",
                     ifname, strerror(errno));
        goto fail;
    }
    uint64_t addr[256];
    for (uint32_t i = 0; i < XSKPORT_FRAMES; i += 256) {
        for (uint32_t k = 0; k < 256; k++)
            addr[k] = (uint64_t)(i + k) * XSKPORT_CHUNK;
        fill_put(x, addr, 256);
    }
    *out = x;
    return 0;
fail:
    xskport_close(x);
    return rc;
}

int xskport_peek(xskport_t *x, const uint8_t **frame, uint32_t *len)
{
    if (!x->held) {
        if (xsk_ring_cons__peek(&x->rx, 1, &x->idx) != 1)
            return 0;
        x->held = 1;
    }
    const struct xdp_desc *d = xsk_ring_cons__rx_desc(&x->rx, x->idx);
    x->addr = xsk_umem__extract_addr(d->addr);
    *frame = (const uint8_t *)xsk_umem__get_data(x->area, xsk_umem__add_offset_to_addr(d->addr));
    *len = d->len;
    return 1;
}

void xskport_done(xskport_t *x)
{
    if (!x->held)
        return;
    xsk_ring_cons__release(&x->rx, 1);
    x->held = 0;
    /* the chunk's start, not the frame's: the kernel adds the headroom itself */
    uint64_t a = x->addr - x->addr % XSKPORT_CHUNK;
    fill_put(x, &a, 1);
}

int xskport_fd(const xskport_t *x) { return xsk_socket__fd(x->xsk); }

const char *xskport_mode(const xskport_t *x) { return x->zerocopy ? "zerocopy" : "copy"; }

int xskport_takes_roce(const xskport_t *x) { return x->roce; }

void xskport_stats(const xskport_t *x, xskport_stats_t *s)
{
    memset(s, 0, sizeof(*s));
    s->redirected = xdpload_stat(&x->prog, STEER_REDIRECTED);
    s->passed = xdpload_stat(&x->prog, STEER_PASSED);
    s->too_big = xdpload_stat(&x->prog, STEER_TOO_BIG);
    struct xdp_statistics st;
    socklen_t sl = sizeof(st);
    if (x->xsk && getsockopt(xsk_socket__fd(x->xsk), SOL_XDP, XDP_STATISTICS, &st, &sl) == 0) {
        s->rx_dropped = st.rx_dropped + st.rx_invalid_descs;
        s->rx_ring_full = st.rx_ring_full;
        s->fill_empty = st.rx_fill_ring_empty_descs;
    }
}

void xskport_close(xskport_t *x)
{
    if (!x)
        return;
    xdpload_detach(&x->prog); /* first: no frame is steered to a closing socket */
    if (x->xsk)
        xsk_socket__delete(x->xsk);
    if (x->umem)
        xsk_umem__delete(x->umem);
    if (x->area)
        munmap(x->area, (size_t)XSKPORT_FRAMES * XSKPORT_CHUNK);
    free(x);
}
