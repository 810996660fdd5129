/*
 * rxstage.c - the pipeline's receive stage and the fabric's first thread (rxstage.h).
 * Sleeps in ppoll when idle (after the spin --poll asks for), spinning instead when a delayed
 * frame is due soon (pace.h).
 */
#include "switchd/fabric/rxstage.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "lib/base/pollmode.h"
#include "lib/base/util.h"
#include "switchd/fabric/pace.h"
#include "switchd/fabric/stagestat.h"
#include "switchd/fabric/xskport.h"

#define TAP_LOOK_NS 20000ull /* a spinning loop reads the internal port's TAP this often */

/* Whether the internal port's TAP is worth a read now: a read is a system call, and the TAP
 * carries only the switch's own traffic (ARP, its control connections), so a spinning loop
 * looks at most every TAP_LOOK_NS unless the last look found a frame or ppoll said so. */
static int tap_look_now(rxstage_t *r)
{
    if (r->tap_ready)
        return 1;
    uint64_t now = util_now_ns();
    if (now - r->tap_looked_ns < TAP_LOOK_NS)
        return 0;
    r->tap_looked_ns = now;
    return 1;
}

/* A frame to send out of the ports in the mask: to the transmit stage. */
static void to_transmit(rxstage_t *r, uint64_t ports, const struct virtio_net_hdr *vh,
                        const uint8_t *frame, uint32_t len, uint64_t t_ns, uint8_t lat)
{
    if (r->ring) {
        if (bytering_push(r->ring, ports, t_ns, lat, vh, frame, len) != 0) {
            fstat_add(&r->c[RX_TX_FULL], 1);
            return;
        }
        fstat_add(&r->c[RX_TO_TX], 1);
        r->pushed = 1;
        return;
    }
    fstat_add(&r->c[RX_TO_TX], 1);
    txstage_send(r->tx, ports, vh, frame, len, t_ns, lat);
}

/* One received frame (after its ingress delay): the classify stage's verdict, carried out. */
static void classify_and_hand_on(rxstage_t *r, uint32_t pin, const struct virtio_net_hdr *vh,
                                 const uint8_t *frame, uint32_t len, uint64_t t_ns)
{
    verdict_t v = classify_frame(r->classify, pin, frame, len, t_ns);
    if (v.kind == VERDICT_AGGREGATE)
        aggstage_enqueue(r->agg, v.queue, pin, vh, frame, len, t_ns);
    else if (v.kind == VERDICT_SEND)
        to_transmit(r, v.ports, vh, frame, len, t_ns, v.lat);
}

/* The next frame of port p, or 0 when it has none (from_xsk: it came through AF_XDP). */
static int next_frame(rxstage_t *r, fport_t *port, const uint8_t **frame, uint32_t *len,
                      const struct virtio_net_hdr **vh, int *from_xsk)
{
    *vh = NULL;
    *from_xsk = 0;
    if (port->is_cpu) {
        ssize_t n = read(port->tap_fd, r->tapbuf, FABRIC_TAPBUF);
        r->tap_ready = n > (ssize_t)sizeof(struct virtio_net_hdr); /* more may wait */
        if (!r->tap_ready)
            return 0;
        *vh = (const struct virtio_net_hdr *)(const void *)r->tapbuf;
        *frame = r->tapbuf + sizeof(**vh);
        *len = (uint32_t)n - (uint32_t)sizeof(**vh);
        return 1;
    }
    if (port->xsk && xskport_peek(port->xsk, frame, len)) {
        *from_xsk = 1; /* the fast path (AF_XDP): no virtio-net header */
        return 1;
    }
    return pktsock_peek(&port->ps, frame, len, vh);
}

static void rx_port(rxstage_t *r, uint32_t p, int *work)
{
    fport_t *port = &r->ports[p];
    if (port->is_cpu && !tap_look_now(r))
        return;
    for (int k = 0; k < FABRIC_BURST; k++) {
        const uint8_t *frame;
        uint32_t len;
        const struct virtio_net_hdr *vh;
        int from_xsk;
        if (!next_frame(r, port, &frame, &len, &vh, &from_xsk))
            return;
        uint64_t now = util_now_ns();
        fstat_add(&port->c[FP_RX], 1);
        fstat_add(&port->c[FP_RX_BYTES], len);
        fstat_add(&r->c[RX_FRAMES], 1);
        if (fport_loses(port, 0, frame, len)) {
            /* lost on the link on its way in */
        } else if (fport_delayed(port)) {
            if (delayline_push(&port->in, now, now, (uint16_t)p, LAT_NONE, vh, frame, len) != 0)
                fstat_add(&port->c[FP_DELAY_DROPS], 1);
            else
                fstat_add(&r->c[RX_DELAYED], 1);
        } else {
            classify_and_hand_on(r, p, vh, frame, len, now);
        }
        if (from_xsk)
            xskport_done(port->xsk);
        else if (!port->is_cpu)
            pktsock_done(&port->ps);
        (*work)++;
    }
}

/* The records due on the ingress delay lines enter the classify stage; the next release. */
static uint64_t release_ingress(rxstage_t *r, int *work)
{
    delay_iter_t it;
    delaystage_begin(r->delay, 0, util_now_ns(), &it);
    const delay_rec_t *rec;
    uint32_t port;
    uint64_t t;
    while ((rec = delaystage_next(&it, &port, &t))) {
        classify_and_hand_on(r, port, &rec->vh, rec->data, rec->len, t);
        (*work)++;
    }
    return delaystage_end(&it);
}

static void rx_idle_wait(rxstage_t *r, uint64_t next_release, uint64_t last_work)
{
    int with_tx = r->ring == NULL; /* this thread also transmits: watch the results */
    if (with_tx && txstage_results_waiting(r->tx))
        return;
    uint64_t wait_ns = pace_idle_ns(r->idle_spin_ns, next_release, last_work);
    if (!wait_ns) {
        switch_poll_idle(); /* spinning: a host process woken on this core runs now */
        return;
    }
    if (with_tx) {
        uint64_t v;
        ssize_t n = read(r->link->tx_efd, &v, sizeof(v)); /* clear, then look once more */
        (void)n;
        if (txstage_results_waiting(r->tx))
            return;
    }
    struct pollfd pf[2 * FABRIC_MAX_PORTS + 1];
    nfds_t n = 0;
    for (uint32_t p = 0; p < r->nports; p++) {
        pf[n++] = (struct pollfd){.fd = r->ports[p].is_cpu ? r->ports[p].tap_fd : r->ports[p].ps.fd,
                                  .events = POLLIN};
        if (r->ports[p].xsk)
            pf[n++] = (struct pollfd){.fd = xskport_fd(r->ports[p].xsk), .events = POLLIN};
    }
    if (with_tx)
        pf[n++] = (struct pollfd){.fd = r->link->tx_efd, .events = POLLIN};
    struct timespec ts = {(time_t)(wait_ns / 1000000000ull), (long)(wait_ns % 1000000000ull)};
    fstat_add(&r->c[RX_SLEEPS], 1);
    if (ppoll(pf, n, &ts, NULL) > 0)
        for (nfds_t i = 0; i < n; i++)
            if (pf[i].fd == r->ports[r->cpu].tap_fd && pf[i].revents)
                r->tap_ready = 1;
}

void *rxstage_main(void *arg)
{
    rxstage_t *r = arg;
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    uint64_t last_work = 0;
    while (!atomic_load_explicit(r->stop, memory_order_relaxed)) {
        atomic_fetch_add(&r->loop_seq, 1); /* seq_cst: pairs with the detach (aggstage.c) */
        int work = 0;
        for (uint32_t p = 0; p < r->nports; p++)
            rx_port(r, p, &work);
        uint64_t next = release_ingress(r, &work);
        work += aggstage_run_inline(r->agg); /* come round again: more may be queued */
        if (!r->ring) {
            uint64_t t = txstage_pass(r->tx, &work);
            if (t < next)
                next = t;
        } else if (r->pushed) {
            r->pushed = 0;
            bytering_kick_if_sleeping(r->ring);
        }
        aggstage_kick(r->agg);
        if (work) {
            last_work = util_now_ns();
            fstat_add(&r->c[RX_PASSES], 1);
        } else {
            rx_idle_wait(r, next, last_work);
        }
    }
    return NULL;
}

int rxstage_init(rxstage_t *r)
{
    r->tapbuf = malloc(FABRIC_TAPBUF);
    return r->tapbuf ? 0 : -ENOMEM;
}

void rxstage_free(rxstage_t *r)
{
    free(r->tapbuf);
    r->tapbuf = NULL;
}

void rxstage_stats(const rxstage_t *r, rxstage_stats_t *out) { fstat_read(r->c, out->c, RX_COUNT); }
