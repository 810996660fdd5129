/*
 * rxstage.c - the pipeline's receive stage and the fabric's first thread: takes bursts off
 * every port's receive ring (and the internal port's TAP, every TAP_LOOK_NS while the loop
 * spins: a read is a system call), applies each input link's loss
 * and delay, and hands every frame to the classify stage (forward.c), which queues
 * aggregation frames to the aggregation stage (the switch's dataplane threads) and frames to
 * send to the transmit stage (txstage.c: through its ring on its own thread, or run here
 * with --fabric-threads 1), and with inline aggregation runs the aggregation stage itself
 * (fabric_attach_aggregation). Sleeps in ppoll when idle (after the spin --poll asks for),
 * spinning instead when a delayed frame
 * is due within SPIN_NS (timer wake-ups here are tens of microseconds late under load).
 */
#include <poll.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "lib/base/util.h"
#include "switchd/fabric/fabric_int.h"
#include "switchd/fabric/xskport.h"

#define SPIN_NS 150000ull /* closer than this to a release: spin, do not sleep */
#define IDLE_SLEEP_MS 20
#define TAP_LOOK_NS 20000ull /* a spinning loop reads the internal port's TAP this often */

uint64_t fabric_idle_ns(const struct fabric *f, uint64_t next_release, uint64_t last_work)
{
    uint64_t now = util_now_ns();
    if (next_release != UINT64_MAX && next_release <= now + SPIN_NS)
        return 0; /* spin: a frame is due within microseconds */
    if ((f->idle_spin_ns == UINT64_MAX || now - last_work < f->idle_spin_ns) &&
        switch_poll_may_spin(now))
        return 0; /* --poll: spin after work (results and the next frames follow closely) */
    uint64_t wait_ns = (uint64_t)IDLE_SLEEP_MS * 1000000ull;
    if (next_release != UINT64_MAX && next_release - now - SPIN_NS < wait_ns)
        wait_ns = next_release - now - SPIN_NS;
    return wait_ns;
}

/* Whether the internal port's TAP is worth a read now: a read is a system call, and the TAP
 * carries only the switch's own traffic (ARP, its control connections), so a spinning loop
 * looks at most every TAP_LOOK_NS unless the last look found a frame or ppoll said so. */
static int tap_look_now(struct fabric *f)
{
    if (f->tap_ready)
        return 1;
    uint64_t now = util_now_ns();
    if (now - f->tap_looked_ns < TAP_LOOK_NS)
        return 0;
    f->tap_looked_ns = now;
    return 1;
}

static void rx_port(struct fabric *f, uint32_t p, int *work)
{
    fport_t *port = &f->ports[p];
    if (port->is_cpu && !tap_look_now(f))
        return;
    for (int k = 0; k < FABRIC_BURST; k++) {
        const uint8_t *frame;
        uint32_t len;
        const struct virtio_net_hdr *vh = NULL;
        int from_xsk = 0;
        if (port->is_cpu) {
            ssize_t r = read(port->tap_fd, f->tapbuf, FABRIC_TAPBUF);
            f->tap_ready = r > (ssize_t)sizeof(struct virtio_net_hdr); /* more may wait */
            if (!f->tap_ready)
                return;
            vh = (const struct virtio_net_hdr *)(const void *)f->tapbuf;
            frame = f->tapbuf + sizeof(*vh);
            len = (uint32_t)r - (uint32_t)sizeof(*vh);
        } else if (port->xsk && xskport_peek(port->xsk, &frame, &len)) {
            from_xsk = 1; /* the fast path (AF_XDP): no virtio-net header */
        } else if (!pktsock_peek(&port->ps, &frame, &len, &vh)) {
            return;
        }
        uint64_t now = util_now_ns();
        fstat_add(&port->c[FP_RX], 1);
        fstat_add(&port->c[FP_RX_BYTES], len);
        fstat_add(&f->st[ST_RX_FRAMES], 1);
        if (fabric_link_loses(f, p, 0, frame, len)) {
            /* lost on the link on its way in */
        } else if (port->delay_ns || port->jitter_ns) {
            if (delayline_push(&port->in, now, now, (uint16_t)p, LAT_NONE, vh, frame, len) != 0)
                fstat_add(&port->c[FP_DELAY_DROPS], 1);
            else
                fstat_add(&f->st[ST_RX_DELAYED], 1);
        } else {
            fabric_frame_in(f, p, vh, frame, len, now);
        }
        if (from_xsk)
            xskport_done(port->xsk);
        else if (!port->is_cpu)
            pktsock_done(&port->ps);
        (*work)++;
    }
}

/* A record due on an ingress delay line enters the classify stage. */
static void release_ingress(struct fabric *f, uint32_t port, const delay_rec_t *r, uint64_t t)
{
    fabric_frame_in(f, port, &r->vh, r->data, r->len, t);
}

/* Results the dataplane threads queued for this thread to send (it also transmits). */
static int results_waiting(struct fabric *f)
{
    for (uint32_t q = 0; q < f->link.nqueues; q++)
        if (frameq_ready(&f->link.tx[q]))
            return 1;
    return 0;
}

static void rx_idle_wait(struct fabric *f, uint64_t next_release, uint64_t last_work)
{
    int with_tx = f->threads == 1; /* this thread also transmits: watch the results */
    if (with_tx && results_waiting(f))
        return;
    uint64_t wait_ns = fabric_idle_ns(f, next_release, last_work);
    if (!wait_ns) {
        switch_poll_idle(); /* spinning: a host process woken on this core runs now */
        return;
    }
    if (with_tx) {
        uint64_t v;
        ssize_t r = read(f->link.tx_efd, &v, sizeof(v)); /* clear, then look once more */
        (void)r;
        if (results_waiting(f))
            return;
    }
    struct pollfd pf[2 * FABRIC_MAX_PORTS + 1];
    nfds_t n = 0;
    for (uint32_t p = 0; p < f->nports; p++) {
        pf[n++] = (struct pollfd){.fd = f->ports[p].is_cpu ? f->ports[p].tap_fd : f->ports[p].ps.fd,
                                  .events = POLLIN};
        if (f->ports[p].xsk)
            pf[n++] = (struct pollfd){.fd = xskport_fd(f->ports[p].xsk), .events = POLLIN};
    }
    if (with_tx)
        pf[n++] = (struct pollfd){.fd = f->link.tx_efd, .events = POLLIN};
    struct timespec ts = {(time_t)(wait_ns / 1000000000ull), (long)(wait_ns % 1000000000ull)};
    fstat_add(&f->st[ST_THREAD0_SLEEPS], 1);
    if (ppoll(pf, n, &ts, NULL) > 0)
        for (nfds_t i = 0; i < n; i++)
            if (pf[i].fd == f->ports[f->cpu].tap_fd && pf[i].revents)
                f->tap_ready = 1;
}

void *fabric_rx_main(void *arg)
{
    struct fabric *f = arg;
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    uint64_t last_work = 0;
    while (!atomic_load_explicit(&f->stop, memory_order_relaxed)) {
        atomic_fetch_add(&f->loop_seq, 1); /* seq_cst: pairs with the detach (fabric.c) */
        int work = 0;
        for (uint32_t p = 0; p < f->nports; p++)
            rx_port(f, p, &work);
        uint64_t next = fabric_run_delays(f, 0, util_now_ns(), &work, release_ingress);
        int (*pass)(void *, uint32_t) = atomic_load(&f->agg_pass);
        if (pass) {
            void *sw = atomic_load_explicit(&f->agg_arg, memory_order_relaxed);
            for (uint32_t q = 0; q < f->link.nqueues; q++)
                if (pass(sw, q) > 0)
                    work++; /* come round again: more may be queued behind the batch */
            f->kick = 0; /* nobody sleeps on the queues */
        }
        if (f->threads == 1) {
            uint64_t t = fabric_tx_pass(f, &work);
            if (t < next)
                next = t;
        } else if (f->txq_pushed) {
            f->txq_pushed = 0;
            atomic_thread_fence(memory_order_seq_cst); /* the pushes before the look: pairs
                                                          with the consumer's store */
            if (atomic_load_explicit(&f->tx_sleeping, memory_order_relaxed))
                bytering_kick(&f->txq);
        }
        for (uint32_t q = 0; f->kick && q < f->link.nqueues; q++)
            if (f->kick & (1u << q))
                frameq_kick(&f->link.rx[q]);
        f->kick = 0;
        if (work) {
            last_work = util_now_ns();
            fstat_add(&f->st[ST_THREAD0_PASSES], 1);
        } else {
            rx_idle_wait(f, next, last_work);
        }
    }
    return NULL;
}
