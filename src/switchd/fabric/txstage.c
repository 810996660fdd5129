/*
 * txstage.c - the pipeline's transmit stage (txstage.h). With --fabric-threads 2 it is the
 * second thread of the fabric; with 1 the receive loop calls txstage_pass itself.
 */
#include "switchd/fabric/txstage.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "lib/base/util.h"
#include "lib/netio/ethframe.h"
#include "switchd/fabric/pace.h"
#include "switchd/fabric/stagestat.h"

#define TXBATCH_MAX 32

/* The aggregation class of a frame: 0 a result, 1 a resend, -1 neither. */
static int agg_class(uint8_t lat)
{
    return lat == LAT_RESEND ? 1 : (lat == LAT_AGG_INT || lat == LAT_AGG_FLOAT) ? 0 : -1;
}

/* Out of port pout now. */
static void transmit(txstage_t *t, uint32_t pout, const struct virtio_net_hdr *vh,
                     const uint8_t *frame, uint32_t len, uint8_t lat)
{
    fport_t *p = &t->ports[pout];
    int ok, agg = agg_class(lat);
    if (agg >= 0 && p->agg_fd[agg] >= 0) {
        if (resultgso_add(&t->gso, t->ports, pout, p->agg_fd[agg], frame, len))
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

/* Out of port pout now, or after its link's delay. */
static void egress(txstage_t *t, uint32_t pout, const struct virtio_net_hdr *vh,
                   const uint8_t *frame, uint32_t len, uint64_t t_ns, uint8_t lat)
{
    fport_t *p = &t->ports[pout];
    if (fport_loses(p, 1, frame, len))
        return;
    if (fport_delayed(p)) {
        uint64_t now = util_now_ns();
        if (delayline_push(&p->out, now, t_ns, (uint16_t)pout, lat, vh, frame, len) != 0)
            fstat_add(&p->c[FP_DELAY_DROPS], 1);
        if (lat != LAT_NONE)
            lathist_add(&t->lat[lat], now - t_ns);
        return;
    }
    /* measured up to the hand-over: a veth's sendmsg also runs the peer's receive path */
    if (lat != LAT_NONE)
        lathist_add(&t->lat[lat], util_now_ns() - t_ns);
    transmit(t, pout, vh, frame, len, lat);
}

void txstage_send(txstage_t *t, uint64_t ports, const struct virtio_net_hdr *vh,
                  const uint8_t *frame, uint32_t len, uint64_t t_ns, uint8_t lat)
{
    fstat_add(&t->c[TX_FRAMES], 1);
    for (uint32_t p = 0; ports; p++, ports >>= 1)
        if (ports & 1)
            egress(t, p, vh, frame, len, t_ns, lat);
}

/* Frames the classify stage queued (its own thread): up to 256 records. */
static int drain_ring(txstage_t *t)
{
    int n = 0;
    size_t used = bytering_used(t->ring);
    if (used > atomic_load_explicit(&t->c[TX_QUEUE_MAX], memory_order_relaxed))
        atomic_store_explicit(&t->c[TX_QUEUE_MAX], used, memory_order_relaxed);
    const bytering_rec_t *r;
    for (; n < 256 && (r = bytering_peek(t->ring)); n++) {
        fstat_add(&t->c[TX_FRAMES], 1);
        uint64_t ports = r->ports;
        for (uint32_t p = 0; ports && p < t->nports; p++, ports >>= 1)
            if (ports & 1)
                egress(t, p, r->has_vh ? &r->vh : NULL, r->data, r->len, r->t_ns, r->kind);
        bytering_pop(t->ring);
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

static void batch_flush(txstage_t *t, txbatch_t *b)
{
    if (!b->n)
        return;
    fport_t *p = &t->ports[b->port];
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
 * (no link delay on the port), else through egress. */
static void result_out(txstage_t *t, txbatch_t *b, uint32_t pout, const uint8_t *frame,
                       uint32_t len, uint64_t t_ns, uint8_t lat)
{
    fport_t *p = &t->ports[pout];
    int agg = agg_class(lat);
    if (agg < 0 || p->agg_fd[agg] < 0 || fport_delayed(p)) {
        batch_flush(t, b);
        egress(t, pout, NULL, frame, len, t_ns, lat);
        return;
    }
    if (fport_loses(p, 1, frame, len))
        return;
    if (resultgso_add(&t->gso, t->ports, pout, p->agg_fd[agg], frame, len)) {
        lathist_add(&t->lat[lat], util_now_ns() - t_ns);
        return; /* a UDP result: with the rest of its run, in one super-frame */
    }
    if (b->n && (b->fd != p->agg_fd[agg] || b->n == TXBATCH_MAX))
        batch_flush(t, b);
    b->fd = p->agg_fd[agg];
    b->port = pout;
    b->iov[b->n][0] = (struct iovec){(void *)(uintptr_t)&no_vnet_hdr, sizeof(no_vnet_hdr)};
    b->iov[b->n][1] = (struct iovec){(void *)(uintptr_t)frame, len};
    memset(&b->m[b->n], 0, sizeof(b->m[b->n]));
    b->m[b->n].msg_hdr.msg_iov = b->iov[b->n];
    b->m[b->n].msg_hdr.msg_iovlen = 2;
    b->n++;
    lathist_add(&t->lat[lat], util_now_ns() - t_ns);
}

int txstage_results_waiting(txstage_t *t)
{
    for (uint32_t q = 0; q < t->link->nqueues; q++)
        if (frameq_ready(&t->link->tx[q]))
            return 1;
    return 0;
}

/* The results the aggregation stage queued: up to 256 a queue. */
static int drain_results(txstage_t *t)
{
    int work = 0;
    txbatch_t b;
    b.n = 0;
    for (uint32_t q = 0; q < t->link->nqueues; q++) {
        frameq_t *fq = &t->link->tx[q];
        uint32_t n = frameq_ready(fq);
        if (n > 256)
            n = 256;
        for (uint32_t i = 0; i < n; i++) {
            frameq_slot_t *s = frameq_at(fq, i);
            if (s->port >= t->nports || s->port == t->cpu) {
                fstat_add(&t->c[TX_BAD_PORT], 1);
                continue;
            }
            fstat_add(&t->c[TX_RESULTS], 1);
            uint8_t lat = LAT_NONE;
            const uint8_t *frame = frameq_slot_frame(s);
            const uint8_t *h = fabric_result_header(frame, s->len, &lat);
            if (h)
                lat = fabric_result_class(t->resend, h);
            result_out(t, &b, s->port, frame, s->len, s->t_ns, lat);
        }
        batch_flush(t, &b); /* before the slots are given back */
        resultgso_flush(&t->gso, t->ports);
        if (n) {
            frameq_release(fq, n);
            work += (int)n;
        }
    }
    return work;
}

uint64_t txstage_pass(txstage_t *t, int *work)
{
    if (t->ring)
        *work += drain_ring(t);
    *work += drain_results(t);
    delay_iter_t it;
    delaystage_begin(t->delay, 1, util_now_ns(), &it);
    const delay_rec_t *r;
    uint32_t port;
    uint64_t when;
    while ((r = delaystage_next(&it, &port, &when))) {
        transmit(t, port, &r->vh, r->data, r->len, r->kind); /* due: out of its port */
        (*work)++;
    }
    resultgso_flush(&t->gso, t->ports); /* the run the delay lines and forwarded frames left */
    return delaystage_end(&it);
}

/* The transmit thread's sleep: on the ring's and the results' eventfds, until the next
 * release minus the spin margin. Returns at once when something is (or may be) waiting. */
static void tx_idle_wait(txstage_t *t, uint64_t next_release, uint64_t last_work)
{
    uint64_t v;
    ssize_t r = read(t->link->tx_efd, &v, sizeof(v)); /* clear, then look */
    r = read(t->ring->efd, &v, sizeof(v));
    (void)r;
    bytering_sleep(t->ring, 1);
    int busy = bytering_peek(t->ring) != NULL || txstage_results_waiting(t);
    uint64_t wait_ns = pace_idle_ns(t->idle_spin_ns, next_release, last_work);
    if (!busy && wait_ns) {
        struct pollfd pf[2] = {{.fd = t->ring->efd, .events = POLLIN},
                               {.fd = t->link->tx_efd, .events = POLLIN}};
        struct timespec ts = {(time_t)(wait_ns / 1000000000ull), (long)(wait_ns % 1000000000ull)};
        fstat_add(&t->c[TX_SLEEPS], 1);
        (void)ppoll(pf, 2, &ts, NULL);
    }
    bytering_sleep(t->ring, 0);
}

void *txstage_main(void *arg)
{
    txstage_t *t = arg;
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    uint64_t last_work = 0;
    while (!atomic_load_explicit(t->stop, memory_order_relaxed)) {
        int work = 0;
        uint64_t next = txstage_pass(t, &work);
        if (work) {
            last_work = util_now_ns();
            fstat_add(&t->c[TX_PASSES], 1);
        } else {
            tx_idle_wait(t, next, last_work);
        }
    }
    return NULL;
}

int txstage_init(txstage_t *t)
{
    t->resend = calloc(RESEND_SLOTS, sizeof(*t->resend));
    if (!t->resend)
        return -ENOMEM;
    return udpgso_init(&t->gso.b, ETHF_ETH_LEN + 65535u);
}

void txstage_free(txstage_t *t)
{
    udpgso_free(&t->gso.b);
    free(t->resend);
    t->resend = NULL;
}

void txstage_stats(const txstage_t *t, txstage_stats_t *out)
{
    fstat_read(t->c, out->c, TX_COUNT);
    for (int k = 0; k < LAT_DELAY_LATE; k++)
        out->lat_n[k] = lathist_summary(&t->lat[k], &out->lat_p50_ns[k], &out->lat_p99_ns[k]);
}
