/*
 * xdpports.c - the fabric's --xdp mode: which ports receive their fast-path frames through
 * an AF_XDP socket (xskport.h) and which through AF_PACKET alone, the fallback (auto) with
 * its one log line naming the cause, and each port's path in the stats (text, JSON,
 * Prometheus). docs/FABRIC.md, "AF_XDP ports".
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lib/base/errmsg.h"
#include "lib/base/log.h"
#include "lib/json/json.h"
#include "lib/json/promtext.h"
#include "switchd/fabric/fabric_int.h"
#include "switchd/fabric/xskport.h"

int fabric_xdp_parse(const char *text, int *mode)
{
    if (!text || strcmp(text, "off") == 0)
        *mode = FABRIC_XDP_OFF;
    else if (strcmp(text, "auto") == 0)
        *mode = FABRIC_XDP_AUTO;
    else if (strcmp(text, "on") == 0)
        *mode = FABRIC_XDP_ON;
    else
        return -EINVAL;
    return 0;
}

int fabric_xdp_open(struct fabric *f, int mode, char *err, size_t errlen)
{
    f->xdp_mode = mode;
    if (mode == FABRIC_XDP_OFF)
        return 0;
    xskport_conf_t c = {.ip = f->ip,
                        .port_lo = f->link.port0,
                        .port_hi = (uint16_t)(f->link.port0 + f->link.nqueues)};
    memcpy(c.mac, f->mac, 6);
    for (uint32_t p = 0; p < f->nports; p++) {
        fport_t *port = &f->ports[p];
        if (port->is_cpu)
            continue;
        char why[192];
        c.if_mtu = port->ps.mtu;
        int rc = xskport_open(&port->xsk, port->name, port->ps.ifindex, &c, why, sizeof(why));
        if (rc == 0)
            continue;
        if (mode == FABRIC_XDP_ON)
            return set_err(err, errlen, rc, "port %s: --xdp on: %s", port->name, why);
        snprintf(port->xdp_why, sizeof(port->xdp_why), "%s", why);
        LOG_W("fabric: port %s receives through AF_PACKET: %s", port->name, why);
    }
    return 0;
}

void fabric_xdp_close(struct fabric *f)
{
    for (uint32_t p = 0; p < f->nports; p++) {
        xskport_close(f->ports[p].xsk);
        f->ports[p].xsk = NULL;
    }
}

static const char *path_of(const fport_t *port) { return port->xsk ? "af_xdp" : "af_packet"; }

void fabric_xdp_write_text(const struct fabric *f, FILE *out)
{
    for (uint32_t p = 0; p < f->nports; p++) {
        const fport_t *port = &f->ports[p];
        if (port->is_cpu)
            continue;
        fprintf(out, "fabric port %s path: %s", port->name, path_of(port));
        if (port->xsk) {
            xskport_stats_t s;
            xskport_stats(port->xsk, &s);
            fprintf(out,
                    " mode=%s roce=%s redirected=%" PRIu64 " passed=%" PRIu64 " too_big=%" PRIu64
                    " xsk_dropped=%" PRIu64 " xsk_ring_full=%" PRIu64 " fill_empty=%" PRIu64 "\n",
                    xskport_mode(port->xsk), xskport_takes_roce(port->xsk) ? "xsk" : "af_packet",
                    s.redirected, s.passed, s.too_big, s.rx_dropped, s.rx_ring_full, s.fill_empty);
        } else {
            fprintf(out, " (%s)\n", f->xdp_mode == FABRIC_XDP_OFF ? "--xdp off" : port->xdp_why);
        }
    }
}

void fabric_xdp_write_json(const struct fabric *f, struct json_writer *w)
{
    json_newline(w);
    json_string(w, "xdp",
                f->xdp_mode == FABRIC_XDP_ON     ? "on"
                : f->xdp_mode == FABRIC_XDP_AUTO ? "auto"
                                                 : "off");
    json_begin_array(w, "port_paths");
    for (uint32_t p = 0; p < f->nports; p++) {
        const fport_t *port = &f->ports[p];
        if (port->is_cpu)
            continue;
        json_newline(w);
        json_begin_object(w, NULL);
        json_string(w, "name", port->name);
        json_string(w, "path", path_of(port));
        if (port->xsk) {
            xskport_stats_t s;
            xskport_stats(port->xsk, &s);
            json_string(w, "mode", xskport_mode(port->xsk));
            json_bool(w, "roce_on_xsk", xskport_takes_roce(port->xsk));
            json_int(w, "redirected", (int64_t)s.redirected);
            json_int(w, "passed", (int64_t)s.passed);
            json_int(w, "too_big", (int64_t)s.too_big);
            json_int(w, "xsk_dropped", (int64_t)s.rx_dropped);
            json_int(w, "xsk_ring_full", (int64_t)s.rx_ring_full);
            json_int(w, "fill_empty", (int64_t)s.fill_empty);
        } else if (f->xdp_mode != FABRIC_XDP_OFF) {
            json_string(w, "why", port->xdp_why);
        }
        json_end_object(w);
    }
    json_end_array(w);
}

void fabric_xdp_write_metrics(const struct fabric *f, FILE *out)
{
    prom_family(out, "inagg_fabric_port_af_xdp", "gauge",
                "1 when the port receives its fast-path frames through AF_XDP, 0 AF_PACKET");
    for (uint32_t p = 0; p < f->nports; p++) {
        if (f->ports[p].is_cpu)
            continue;
        char l[96];
        prom_labels(l, sizeof(l), "port", f->ports[p].name, NULL);
        prom_u64(out, "inagg_fabric_port_af_xdp", l, f->ports[p].xsk ? 1 : 0);
    }
    prom_family(out, "inagg_fabric_port_xdp_redirected_total", "counter",
                "frames the XDP program steered into the port's AF_XDP socket");
    for (uint32_t p = 0; p < f->nports; p++) {
        if (!f->ports[p].xsk)
            continue;
        xskport_stats_t s;
        xskport_stats(f->ports[p].xsk, &s);
        char l[96];
        prom_labels(l, sizeof(l), "port", f->ports[p].name, NULL);
        prom_u64(out, "inagg_fabric_port_xdp_redirected_total", l, s.redirected);
    }
}
