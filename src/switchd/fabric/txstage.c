/*
 * txstage.c - the pipeline's transmit stage: takes the frames the classify stage decided to
 * send (through the SPSC ring when it runs on its own thread, or directly) and the results
 * the aggregation stage queued (the dataplane threads' frame queues), applies each output
 * link's loss and delay, and sends them out of their ports. With --fabric-threads 2 it is
 * the second thread of the fabric; with 1 the receive thread calls fabric_tx_pass itself.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "lib/base/util.h"
#include "lib/netio/ethframe.h"
#include "lib/wire/wire.h"
#include "switchd/fabric/fabric_int.h"

#define TXBATCH_MAX 32

/* The aggregation class of a frame: 0 a result, 1 a resend, -1 neither. */
static int agg_class(uint8_t lat)
{
    return lat == LAT_RESEND ? 1 : (lat == LAT_AGG_INT || lat == LAT_AGG_FLOAT) ? 0 : -1;
}

void fabric_transmit(struct fabric *f, uint32_t pout, const struct virtio_net_hdr *vh,
                     const uint8_t *frame, uint32_t len, uint8_t lat)
{
    fport_t *p = &f->ports[pout];
    int ok, agg = agg_class(lat);
    if (agg >= 0 && p->agg_fd[agg] >= 0) {
        if (fabric_gso_add(f, pout, p->agg_fd[agg], frame, len))
            return; /* a UDP result: in its run's super-frame, counted when that leaves */
        ok = pktsock_send_fd(p->agg_fd[agg], NULL, frame, len, NULL, 0) == 0;
    } else if (p->is_cpu) {
        static const struct virtio_net_hdr none;
        struct iovec iov[2] = {{(void *)(uintptr_t)(vh ? vh : &none), sizeof(none)},
                               {(void *)(uintptr_t)frame, len}};
        ok = writev(p->tap_fd, iov, 2) == (ssize_t)(sizeof(none) + len);
    } else {
        ok = pktsock_send(&p->ps, vh, frame, len, NULL, 0) == 0;
    }
    if (ok) {
        fstat_add(&p->c[FP_TX], 1);
        fstat_add(&p->c[FP_TX_BYTES], len);
    } else {
        fstat_add(&p->c[FP_TX_DROPS], 1);
    }
}

void fabric_egress(struct fabric *f, uint32_t pout, const struct virtio_net_hdr *vh,
                   const uint8_t *frame, uint32_t len, uint64_t t_ns, uint8_t lat)
{
    fport_t *p = &f->ports[pout];
    if (fabric_link_loses(f, pout, 1, frame, len))
        return;
    if (p->delay_ns || p->jitter_ns) {
        uint64_t now = util_now_ns();
        if (delayline_push(&p->out, now, t_ns, (uint16_t)pout, lat, vh, frame, len) != 0)
            fstat_add(&p->c[FP_DELAY_DROPS], 1);
        if (lat != LAT_NONE)
            lathist_add(&f->lat[lat], now - t_ns);
        return;
    }
    /* measured up to the hand-over: a veth's sendmsg also runs the peer's receive path */
    if (lat != LAT_NONE)
        lathist_add(&f->lat[lat], util_now_ns() - t_ns);
    fabric_transmit(f, pout, vh, frame, len, lat);
}

void fabric_send_ports(struct fabric *f, uint64_t ports, const struct virtio_net_hdr *vh,
                       const uint8_t *frame, uint32_t len, uint64_t t_ns, uint8_t lat)
{
    if (f->threads > 1) {
        if (bytering_push(&f->txq, ports, t_ns, lat, vh, frame, len) != 0) {
            fstat_add(&f->st[ST_CL_QUEUE_FULL], 1);
            return;
        }
        fstat_add(&f->st[ST_CL_TO_TX], 1);
        f->txq_pushed = 1;
        return;
    }
    fstat_add(&f->st[ST_CL_TO_TX], 1);
    fstat_add(&f->st[ST_TX_FRAMES], 1);
    for (uint32_t p = 0; ports; p++, ports >>= 1)
        if (ports & 1)
            fabric_egress(f, p, vh, frame, len, t_ns, lat);
}

/* Frames the classify stage queued (its own thread): up to 256 records. */
static int drain_ring(struct fabric *f)
{
    int n = 0;
    size_t used = bytering_used(&f->txq);
    if (used > atomic_load_explicit(&f->st[ST_TX_QUEUE_MAX], memory_order_relaxed))
        atomic_store_explicit(&f->st[ST_TX_QUEUE_MAX], used, memory_order_relaxed);
    const bytering_rec_t *r;
    for (; n < 256 && (r = bytering_peek(&f->txq)); n++) {
        fstat_add(&f->st[ST_TX_FRAMES], 1);
        uint64_t ports = r->ports;
        for (uint32_t p = 0; ports && p < f->nports; p++, ports >>= 1)
            if (ports & 1)
                fabric_egress(f, p, r->has_vh ? &r->vh : NULL, r->data, r->len, r->t_ns, r->kind);
        bytering_pop(&f->txq);
    }
    return n;
}

/* Result frames on their way out of one send-only socket, sent by one sendmmsg: a RoCE
 * result is several frames to the same port, and a system call per frame costs the transmit
 * stage as much as the frame's own work. The frames stay in their frame queue slots until
 * the batch is flushed (before the slots are released). */
typedef struct txbatch {
    int fd;
    uint32_t port, n;
    struct mmsghdr m[TXBATCH_MAX];
    struct iovec iov[TXBATCH_MAX][2]; /* the virtio-net header (none), the frame */
} txbatch_t;

static const struct virtio_net_hdr no_vnet_hdr;

static void batch_flush(struct fabric *f, txbatch_t *b)
{
    if (!b->n)
        return;
    fport_t *p = &f->ports[b->port];
    uint32_t sent = 0;
    for (int tries = 0; sent < b->n && tries < 4; tries++) {
        int r = sendmmsg(b->fd, b->m + sent, b->n - sent, MSG_DONTWAIT);
        if (r > 0) {
            for (uint32_t i = sent; i < sent + (uint32_t)r; i++)
                fstat_add(&p->c[FP_TX_BYTES], b->iov[i][1].iov_len);
            sent += (uint32_t)r;
        } else if (r < 0 && errno != EINTR) {
            break; /* the device queue is full (or worse): the rest are drops, as for send */
        }
    }
    fstat_add(&p->c[FP_TX], sent);
    if (sent < b->n)
        fstat_add(&p->c[FP_TX_DROPS], b->n - sent);
    b->n = 0;
}

/* A result frame for port pout: batched when it goes straight out of an aggregation socket
 * (no link delay on the port), else through fabric_egress. */
static void result_out(struct fabric *f, txbatch_t *b, uint32_t pout, const uint8_t *frame,
                       uint32_t len, uint64_t t_ns, uint8_t lat)
{
    fport_t *p = &f->ports[pout];
    int agg = agg_class(lat);
    if (agg < 0 || p->agg_fd[agg] < 0 || p->delay_ns || p->jitter_ns) {
        batch_flush(f, b);
        fabric_egress(f, pout, NULL, frame, len, t_ns, lat);
        return;
    }
    if (fabric_link_loses(f, pout, 1, frame, len))
        return;
    if (fabric_gso_add(f, pout, p->agg_fd[agg], frame, len)) {
        lathist_add(&f->lat[lat], util_now_ns() - t_ns);
        return; /* a UDP result: with the rest of its run, in one super-frame */
    }
    if (b->n && (b->fd != p->agg_fd[agg] || b->n == TXBATCH_MAX))
        batch_flush(f, b);
    b->fd = p->agg_fd[agg];
    b->port = pout;
    b->iov[b->n][0] = (struct iovec){(void *)(uintptr_t)&no_vnet_hdr, sizeof(no_vnet_hdr)};
    b->iov[b->n][1] = (struct iovec){(void *)(uintptr_t)frame, len};
    memset(&b->m[b->n], 0, sizeof(b->m[b->n]));
    b->m[b->n].msg_hdr.msg_iov = b->iov[b->n];
    b->m[b->n].msg_hdr.msg_iovlen = 2;
    b->n++;
    lathist_add(&f->lat[lat], util_now_ns() - t_ns);
}

int fabric_drain_results(struct fabric *f)
{
    int work = 0;
    txbatch_t b;
    b.n = 0;
    for (uint32_t q = 0; q < f->link.nqueues; q++) {
        frameq_t *fq = &f->link.tx[q];
        uint32_t n = frameq_ready(fq);
        if (n > 256)
            n = 256;
        for (uint32_t i = 0; i < n; i++) {
            frameq_slot_t *s = frameq_at(fq, i);
            if (s->port >= f->nports || s->port == f->cpu) {
                fstat_add(&f->g[FG_AGG_BAD_PORT], 1);
                continue;
            }
            fstat_add(&f->g[FG_AGG_OUT], 1);
            fstat_add(&f->st[ST_TX_RESULTS], 1);
            uint8_t lat = LAT_NONE;
            const uint8_t *frame = frameq_slot_frame(s);
            const uint8_t *h = fabric_result_header(frame, s->len, &lat);
            if (h)
                lat = fabric_result_class(f->resend, h);
            result_out(f, &b, s->port, frame, s->len, s->t_ns, lat);
        }
        batch_flush(f, &b); /* before the slots are given back */
        fabric_gso_flush(f);
        if (n) {
            frameq_release(fq, n);
            work += (int)n;
        }
    }
    return work;
}

/* A record due on an egress delay line goes out of its port. */
static void release_egress(struct fabric *f, uint32_t port, const delay_rec_t *r, uint64_t t)
{
    (void)t;
    fabric_transmit(f, port, &r->vh, r->data, r->len, r->kind);
}

uint64_t fabric_tx_pass(struct fabric *f, int *work)
{
    if (f->threads > 1)
        *work += drain_ring(f);
    *work += fabric_drain_results(f);
    uint64_t next = fabric_run_delays(f, 1, util_now_ns(), work, release_egress);
    fabric_gso_flush(f); /* the run the delay lines and forwarded frames left */
    return next;
}

/* The transmit thread's sleep: on the ring's and the results' eventfds, until the next
 * release minus the spin margin. Returns at once when something is (or may be) waiting. */
static void tx_idle_wait(struct fabric *f, uint64_t next_release, uint64_t last_work)
{
    uint64_t v;
    ssize_t r = read(f->link.tx_efd, &v, sizeof(v)); /* clear, then look */
    r = read(f->txq.efd, &v, sizeof(v));
    (void)r;
    atomic_store(&f->tx_sleeping, 1); /* seq_cst: the producer's check after its push sees it */
    int busy = bytering_peek(&f->txq) != NULL;
    for (uint32_t q = 0; !busy && q < f->link.nqueues; q++)
        busy = frameq_ready(&f->link.tx[q]) != 0;
    uint64_t wait_ns = fabric_idle_ns(f, next_release, last_work);
    if (!busy && wait_ns) {
        struct pollfd pf[2] = {{.fd = f->txq.efd, .events = POLLIN},
                               {.fd = f->link.tx_efd, .events = POLLIN}};
        struct timespec ts = {(time_t)(wait_ns / 1000000000ull), (long)(wait_ns % 1000000000ull)};
        fstat_add(&f->st[ST_THREAD1_SLEEPS], 1);
        (void)ppoll(pf, 2, &ts, NULL);
    }
    atomic_store(&f->tx_sleeping, 0);
}

void *fabric_tx_main(void *arg)
{
    struct fabric *f = arg;
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    uint64_t last_work = 0;
    while (!atomic_load_explicit(&f->stop, memory_order_relaxed)) {
        int work = 0;
        uint64_t next = fabric_tx_pass(f, &work);
        if (work) {
            last_work = util_now_ns();
            fstat_add(&f->st[ST_THREAD1_PASSES], 1);
        } else {
            tx_idle_wait(f, next, last_work);
        }
    }
    return NULL;
}
