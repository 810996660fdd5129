/*
 * fabric.c - the fabric's life: parse its configuration, open the ports, the internal port,
 * the aggregation queues and the pipeline's ring, wire the stages together (fabric_int.h),
 * start its threads (the receive stage's, and the transmit stage's with --fabric-threads 2),
 * stop.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "lib/base/errmsg.h"
#include "lib/base/util.h"
#include "lib/wire/fabricmsg.h"
#include "switchd/fabric/fabric_int.h"
#include "switchd/fabric/portarp.h"
#include "switchd/fabric/tapdev.h"

#define DELAY_LINE_BYTES (8u << 20)
#define QUEUE_SLOTS 1024
#define TX_RING_BYTES (16u << 20) /* classify -> transmit: 250 GSO frames, 1800 at MTU 9000 */

int fabric_parse_duration(const char *text, uint64_t *ns)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || errno || v < 0 || v > 10e9)
        return -EINVAL;
    double mul;
    if (strcmp(end, "ns") == 0)
        mul = 1;
    else if (strcmp(end, "us") == 0)
        mul = 1e3;
    else if (strcmp(end, "ms") == 0)
        mul = 1e6;
    else if (strcmp(end, "s") == 0)
        mul = 1e9;
    else if (*end == 0 && v == 0)
        mul = 0;
    else
        return -EINVAL;
    *ns = (uint64_t)(v * mul + 0.5);
    return 0;
}

/* One value of a link spec: a duration (which 0 delay, 1 jitter) in ns, or a probability
 * (which 2 loss, "0.01" or "1%", below 1) as a threshold over 2^32. 0 or -EINVAL. */
static int parse_link_value(int which, const char *text, uint64_t *out)
{
    if (which < 2)
        return fabric_parse_duration(text, out);
    char *end;
    double p = strtod(text, &end);
    if (end == text)
        return -EINVAL;
    if (*end == '%') {
        p /= 100;
        end++;
    }
    if (*end || !(p >= 0 && p < 1))
        return -EINVAL;
    *out = (uint64_t)(p * 4294967296.0);
    return 0;
}

static uint64_t *link_field(fport_t *p, int which)
{
    return which == 0 ? &p->delay_ns : which == 1 ? &p->jitter_ns : &p->loss_thresh;
}

/* "V" for every port, or "IF=V,IF=V": into delay_ns (which = 0), jitter_ns (1) or
 * loss_thresh (2). */
static int apply_link_spec(struct fabric *f, const char *spec, int which, char *err, size_t errlen)
{
    if (!spec || !*spec)
        return 0;
    char buf[1024];
    if (strlen(spec) >= sizeof(buf))
        return set_err(err, errlen, -EINVAL, "link spec too long");
    const char *what = which == 0 ? "delay" : which == 1 ? "jitter" : "loss";
    const char *example = which < 2 ? "25us, 1ms, 0" : "0.01, 1%, 0";
    snprintf(buf, sizeof(buf), "%s", spec);
    if (!strchr(buf, '=')) {
        uint64_t ns;
        if (parse_link_value(which, buf, &ns) != 0)
            return set_err(err, errlen, -EINVAL, "bad %s '%s' (expected e.g. %s)", what, spec,
                           example);
        for (uint32_t p = 0; p < f->cpu; p++)
            *link_field(&f->ports[p], which) = ns;
        return 0;
    }
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        uint64_t ns;
        if (!eq || parse_link_value(which, eq + 1, &ns) != 0)
            return set_err(err, errlen, -EINVAL, "bad %s item '%s' (expected IF=V, e.g. p1=%s)",
                           what, item, which < 2 ? "25us" : "0.01");
        *eq = 0;
        uint32_t p = 0;
        while (p < f->cpu && strcmp(f->ports[p].name, item) != 0)
            p++;
        if (p == f->cpu)
            return set_err(err, errlen, -EINVAL, "%s for '%s', which is not a port", what, item);
        *link_field(&f->ports[p], which) = ns;
    }
    return 0;
}

static int parse_mac(const char *s, uint8_t mac[6])
{
    unsigned v[6];
    char tail;
    if (sscanf(s, "%x:%x:%x:%x:%x:%x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &tail) != 6)
        return -EINVAL;
    for (int i = 0; i < 6; i++) {
        if (v[i] > 255)
            return -EINVAL;
        mac[i] = (uint8_t)v[i];
    }
    return (mac[0] & 1) || (mac[0] | mac[1] | mac[2] | mac[3] | mac[4] | mac[5]) == 0 ? -EINVAL : 0;
}

static int parse_config(struct fabric *f, const fabric_config_t *c, char *err, size_t errlen)
{
    char ip[64];
    if (!c->ip || strlen(c->ip) >= sizeof(ip))
        return set_err(err, errlen, -EINVAL,
                       "the fabric needs the switch's IP address (--l2-ip A.B.C.D/P)");
    snprintf(ip, sizeof(ip), "%s", c->ip);
    f->prefix = 24;
    char *slash = strchr(ip, '/');
    if (slash) {
        char *end;
        long p = strtol(slash + 1, &end, 10);
        if (*end || end == slash + 1 || p < 1 || p > 32)
            return set_err(err, errlen, -EINVAL, "bad prefix length in '%s'", c->ip);
        f->prefix = (int)p;
        *slash = 0;
    }
    struct in_addr a;
    if (inet_pton(AF_INET, ip, &a) != 1 || a.s_addr == 0)
        return set_err(err, errlen, -EINVAL, "bad switch IP '%s' (expected A.B.C.D[/PREFIX])",
                       c->ip);
    f->ip = a.s_addr;
    inet_ntop(AF_INET, &a, f->ip_text, sizeof(f->ip_text));
    if (c->mac) {
        if (parse_mac(c->mac, f->mac) != 0)
            return set_err(err, errlen, -EINVAL,
                           "bad switch MAC '%s' (expected a unicast xx:xx:xx:xx:xx:xx)", c->mac);
    } else {
        const uint8_t *b = (const uint8_t *)&f->ip;
        uint8_t m[6] = {0x02, 0x69, 0x61, b[1], b[2], b[3]};
        memcpy(f->mac, m, 6);
    }
    if (c->queues == 0 || c->queues > FABRIC_LINK_MAX_QUEUES)
        return set_err(err, errlen, -EINVAL, "the fabric serves 1..%u aggregation queues",
                       FABRIC_LINK_MAX_QUEUES);
    if (c->agg_port == 0 || (uint32_t)c->agg_port + c->queues > 65536)
        return set_err(err, errlen, -EINVAL,
                       "the fabric needs a fixed UDP port for aggregation (not 0)");
    char list[1024];
    if (!c->ports || !*c->ports || strlen(c->ports) >= sizeof(list))
        return set_err(err, errlen, -EINVAL, "no ports given (--l2 IF1,IF2,...)");
    snprintf(list, sizeof(list), "%s", c->ports);
    char *save = NULL;
    for (char *n = strtok_r(list, ",", &save); n; n = strtok_r(NULL, ",", &save)) {
        if (f->nports + 1 >= FABRIC_MAX_PORTS)
            return set_err(err, errlen, -EINVAL, "at most %d ports", FABRIC_MAX_PORTS - 1);
        if (strlen(n) >= IFNAMSIZ)
            return set_err(err, errlen, -EINVAL, "bad interface name '%s'", n);
        for (uint32_t p = 0; p < f->nports; p++)
            if (strcmp(f->ports[p].name, n) == 0)
                return set_err(err, errlen, -EINVAL, "port '%s' given twice", n);
        snprintf(f->ports[f->nports++].name, IFNAMSIZ, "%s", n);
    }
    if (f->nports == 0)
        return set_err(err, errlen, -EINVAL, "no ports given (--l2 IF1,IF2,...)");
    f->cpu = f->nports++;
    fport_t *cpu = &f->ports[f->cpu];
    snprintf(cpu->name, IFNAMSIZ, "%s", c->cpu_port ? c->cpu_port : "inagg0");
    cpu->is_cpu = 1;
    if (apply_link_spec(f, c->delay, 0, err, errlen) != 0 ||
        apply_link_spec(f, c->jitter, 1, err, errlen) != 0 ||
        apply_link_spec(f, c->loss, 2, err, errlen) != 0)
        return -EINVAL;
    uint64_t mask = fabric_all_ports(f);
    if (c->agg_ports && fabric_ports_mask(f, c->agg_ports, &mask, err, errlen) != 0)
        return -EINVAL;
    atomic_store(&f->classify.agg_ports, mask);
    uint32_t add = WIRE_ADD_ANY;
    if (c->add_mode && wire_add_mode_parse(c->add_mode, &add) != 0)
        return set_err(err, errlen, -EINVAL, "bad add mode '%s' (expected any, fixed or float)",
                       c->add_mode);
    atomic_store(&f->classify.add_mode, add);
    for (uint32_t p = 0; p < f->nports; p++) { /* two streams per port, from the seed */
        uint64_t s = c->loss_seed ^ (0x9e3779b97f4a7c15ull * (p + 1));
        f->ports[p].loss_rng[0] = util_splitmix64(&s);
        f->ports[p].loss_rng[1] = util_splitmix64(&s);
    }
    if (fabric_xdp_parse(c->xdp, &f->xdp_mode) != 0)
        return set_err(err, errlen, -EINVAL, "bad --xdp '%s' (expected auto, on or off)", c->xdp);
    f->threads = c->threads ? c->threads : 1;
    f->rx.idle_spin_ns = f->tx.idle_spin_ns =
        c->poll_set ? switch_poll_spin_ns(c->poll, c->poll_spin_us) : FABRIC_IDLE_SPIN_US * 1000ull;
    if (f->threads > 2)
        return set_err(err, errlen, -EINVAL,
                       "the fabric runs on 1 or 2 threads (--fabric-threads), not %u", f->threads);
    return 0;
}

/* The stages' views of the ports, of the switch's addresses and of each other. */
static void wire_stages(struct fabric *f)
{
    classify_t *cl = &f->classify;
    cl->nports = f->nports;
    cl->cpu = f->cpu;
    memcpy(cl->mac, f->mac, 6);
    cl->ip = f->ip;
    cl->port0 = f->link.port0;
    cl->nqueues = f->link.nqueues;
    f->agg.link = &f->link;
    f->delay = (delaystage_t){.ports = f->ports, .nports = f->nports};
    txstage_t *tx = &f->tx;
    tx->ports = f->ports;
    tx->nports = f->nports;
    tx->cpu = f->cpu;
    tx->link = &f->link;
    tx->ring = f->threads > 1 ? &f->txq : NULL;
    tx->delay = &f->delay;
    tx->stop = &f->stop;
    rxstage_t *rx = &f->rx;
    rx->ports = f->ports;
    rx->nports = f->nports;
    rx->cpu = f->cpu;
    rx->classify = cl;
    rx->agg = &f->agg;
    rx->ring = tx->ring;
    rx->tx = tx;
    rx->delay = &f->delay;
    rx->link = &f->link;
    rx->stop = &f->stop;
}

static void free_all(struct fabric *f)
{
    fabric_xdp_close(f);
    for (uint32_t p = 0; p < f->nports; p++) {
        fport_t *port = &f->ports[p];
        if (port->is_cpu) {
            if (port->tap_fd >= 0)
                close(port->tap_fd);
        } else {
            pktsock_close(&port->ps);
            if (port->arp_quieted)
                portarp_restore(port->name, port->arp_was_off);
        }
        for (int k = 0; k < 2; k++)
            if (port->agg_fd[k] >= 0)
                close(port->agg_fd[k]);
        delayline_free(&port->in);
        delayline_free(&port->out);
    }
    for (uint32_t q = 0; q < FABRIC_LINK_MAX_QUEUES; q++) {
        frameq_free(&f->link.rx[q]);
        frameq_free(&f->link.tx[q]);
    }
    if (f->link.tx_efd >= 0)
        close(f->link.tx_efd);
    mactable_free(&f->classify.mt);
    txstage_free(&f->tx);
    rxstage_free(&f->rx);
    bytering_free(&f->txq);
    free(f);
}

int fabric_start(const fabric_config_t *c, fabric_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (err && errlen)
        err[0] = 0;
    struct fabric *f = calloc(1, sizeof(*f));
    if (!f)
        return set_err(err, errlen, -ENOMEM, "out of memory");
    f->link.tx_efd = -1;
    f->txq.efd = -1;
    for (uint32_t q = 0; q < FABRIC_LINK_MAX_QUEUES; q++)
        f->link.rx[q].efd = f->link.tx[q].efd = -1;
    for (uint32_t p = 0; p < FABRIC_MAX_PORTS; p++) {
        f->ports[p].tap_fd = -1;
        f->ports[p].ps.fd = -1;
        f->ports[p].agg_fd[0] = f->ports[p].agg_fd[1] = -1;
    }
    int rc = parse_config(f, c, err, errlen);
    if (rc != 0) {
        free_all(f);
        return rc;
    }
    uint64_t age = (uint64_t)(c->mac_age_ms ? c->mac_age_ms : 300000) * 1000000ull;
    rc = rxstage_init(&f->rx);
    if (rc == 0)
        rc = txstage_init(&f->tx);
    if (rc == 0)
        rc = mactable_init(&f->classify.mt, 8192, age);
    uint32_t mtu = 65535;
    for (uint32_t p = 0; rc == 0 && p < f->nports; p++) {
        fport_t *port = &f->ports[p];
        if (!port->is_cpu) {
            /* before any frame is switched: no host may learn the port's MAC for ours */
            rc = portarp_quiet(port->name, &port->arp_was_off, err, errlen);
            port->arp_quieted = rc == 0;
            if (rc == 0)
                rc = pktsock_open(&port->ps, port->name, 0, err, errlen);
            if (rc == 0 && port->ps.mtu < mtu)
                mtu = port->ps.mtu;
            for (int k = 0; rc == 0 && k < 2; k++) {
                rc = pktsock_open_tx(port->ps.ifindex, k ? FABRIC_PRIO_RESEND : FABRIC_PRIO_RESULT);
                if (rc >= 0) {
                    port->agg_fd[k] = rc;
                    rc = 0;
                } else {
                    rc = set_err(err, errlen, rc, "port %s: a send socket for results: %s",
                                 port->name, strerror(-rc));
                }
            }
        }
        if (rc == 0 && fport_delayed(port)) {
            rc = delayline_init(&port->in, DELAY_LINE_BYTES, port->delay_ns, port->jitter_ns,
                                2 * p + 1);
            if (rc == 0)
                rc = delayline_init(&port->out, DELAY_LINE_BYTES, port->delay_ns, port->jitter_ns,
                                    2 * p + 2);
        }
    }
    if (rc == 0) { /* the XDP program matches the aggregation queues' UDP ports */
        f->link.nqueues = c->queues;
        f->link.port0 = c->agg_port;
        rc = fabric_xdp_open(f, f->xdp_mode, err, errlen);
    }
    if (rc == 0) {
        fport_t *cpu = &f->ports[f->cpu];
        rc = tapdev_open(cpu->name, f->mac, f->ip, f->prefix, mtu, err, errlen);
        if (rc >= 0) {
            cpu->tap_fd = rc;
            rc = 0;
        }
    }
    f->link.nqueues = c->queues;
    memcpy(f->link.mac, f->mac, 6);
    f->link.ip = f->ip;
    f->link.port0 = c->agg_port;
    fabric_port_config_init(&f->port, &f->link, c->roce_resbuf_rows, c->roce_resbuf_depth);
    for (uint32_t q = 0; rc == 0 && q < c->queues; q++) {
        rc = frameq_init(&f->link.rx[q], QUEUE_SLOTS);
        if (rc == 0)
            rc = frameq_init(&f->link.tx[q], QUEUE_SLOTS);
    }
    if (rc == 0) {
        f->link.tx_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (f->link.tx_efd < 0)
            rc = -errno;
    }
    if (rc == 0 && f->threads > 1)
        rc = bytering_init(&f->txq, TX_RING_BYTES);
    if (rc == 0) {
        wire_stages(f);
        mactable_fix(&f->classify.mt, f->mac, (uint16_t)f->cpu);
        if (pthread_create(&f->tid, NULL, rxstage_main, &f->rx) != 0)
            rc = -EAGAIN;
        else
            f->running = 1;
    }
    if (rc == 0 && f->threads > 1) {
        if (pthread_create(&f->tx_tid, NULL, txstage_main, &f->tx) != 0)
            rc = -EAGAIN;
        else
            f->tx_running = 1;
    }
    if (rc != 0) {
        if (!err[0])
            (void)set_err(err, errlen, rc, "starting the fabric: %s", strerror(-rc));
        fabric_stop(f);
        return rc;
    }
    *out = f;
    return 0;
}

const transport_opener_t *fabric_port_opener(fabric_t *f) { return &f->port.opener; }
const char *fabric_ip_text(const fabric_t *f) { return f->ip_text; }

void fabric_attach_aggregation(void *fp, int (*pass)(void *sw, uint32_t queue), void *sw)
{
    fabric_t *f = fp;
    aggstage_attach(&f->agg, pass, sw, f->threads == 1);
    if (pass)
        return;
    /* A pass that started before the detach ends before thread 0's next loop head (within 20
     * ms when idle, a batch when busy). No time limit: returning while a pass runs would let
     * the switch free what it uses, and thread 0 only stops advancing if it has ended. */
    uint64_t seen = rxstage_loops(&f->rx);
    while (f->running && !atomic_load(&f->stop) && rxstage_loops(&f->rx) < seen + 2)
        usleep(100);
}

void fabric_stop(fabric_t *f)
{
    if (!f)
        return;
    atomic_store(&f->stop, 1);
    if (f->running)
        pthread_join(f->tid, NULL);
    if (f->tx_running)
        pthread_join(f->tx_tid, NULL);
    free_all(f);
}
