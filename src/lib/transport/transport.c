/*
 * transport.c - the table of transports and what every transport shares: opening by kind
 * (wrapped in fault injection when asked), address helpers, waiting on several endpoints.
 * A new transport is a new file in this folder and one line in `kinds` below.
 */
#include "lib/transport/transport.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "lib/base/errmsg.h"
#include "lib/base/pollmode.h"
#include "lib/base/util.h"

static const transport_kind_t *const kinds[] = {
    &transport_kind_udp,
    &transport_kind_afpacket,
    &transport_kind_roce,
};

static const transport_kind_t *kind_by_name(const char *name)
{
    if (!name)
        name = "udp";
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        if (strcmp(kinds[i]->name, name) == 0)
            return kinds[i];
    return NULL;
}

static const transport_kind_t *kind_of_addr(const transport_addr_t *a)
{
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        if (kinds[i]->addr_kind == a->kind)
            return kinds[i];
    return NULL;
}

int transport_open(const transport_config_t *cfg, transport_t **out, char *err, size_t errlen)
{
    *out = NULL;
    const transport_kind_t *k = cfg->opener ? NULL : kind_by_name(cfg->kind);
    if (!k && !cfg->opener)
        return set_err(err, errlen, -EINVAL, "unknown transport '%s'", cfg->kind);
    transport_t *t = NULL;
    int rc =
        k ? k->open(cfg, &t, err, errlen) : cfg->opener->open(cfg->opener, cfg, &t, err, errlen);
    if (rc != 0)
        return rc;
    const char *in = cfg->faults ? cfg->faults : cfg->faults_in;
    const char *outs = cfg->faults ? cfg->faults : cfg->faults_out;
    if ((in && *in) || (outs && *outs)) {
        transport_t *w = NULL;
        rc = transport_faulty_wrap(t, in, outs, cfg->fault_stream, &w, err, errlen);
        if (rc != 0) {
            transport_close(t);
            return rc;
        }
        t = w;
    }
    *out = t;
    return 0;
}

int transport_parse_addr(const char *kind, const char *text, transport_addr_t *out)
{
    const transport_kind_t *k = kind_by_name(kind);
    memset(out, 0, sizeof(*out));
    return k ? k->parse_addr(text, out) : -EINVAL;
}

int transport_local_addr(const transport_t *t, transport_addr_t *out)
{
    return t->ops->local_addr(t, out);
}

int transport_queue_addr(const transport_t *t, const transport_addr_t *queue0, uint32_t queue,
                         transport_addr_t *out)
{
    return t->ops->queue_addr(t, queue0, queue, out);
}

void transport_close(transport_t *t)
{
    if (t)
        t->ops->close(t);
}

int transport_wait_ready(transport_t *const *ts, int n, int timeout_ms)
{
    struct pollfd p[8];
    int idx[8], m = 0, unpolled = 0;
    for (int i = 0; i < n && i < 8; i++) {
        if (!ts[i])
            continue;
        int fd = ts[i]->ops->pollfd(ts[i]);
        if (fd < 0) {
            unpolled |= 1 << i;
            continue;
        }
        p[m] = (struct pollfd){.fd = fd, .events = POLLIN};
        idx[m++] = i;
    }
    if (m == 0 || unpolled)
        timeout_ms = 0;
    if (m == 0)
        return unpolled;
    int r = poll(p, (nfds_t)m, timeout_ms);
    if (r < 0)
        return errno == EINTR ? unpolled : -errno;
    int mask = unpolled;
    for (int i = 0; i < m && r > 0; i++)
        if (p[i].revents)
            mask |= 1 << idx[i];
    return mask;
}

int transport_wait_ready_spin(transport_t *const *ts, int n, int timeout_ms, uint32_t spin_us,
                              uint64_t *empty_polls)
{
    if (spin_us == 0 || timeout_ms <= 0)
        return transport_wait_ready(ts, n, timeout_ms);
    uint64_t start = util_now_ns(), wait_ns = (uint64_t)timeout_ms * 1000000u;
    uint64_t spin_ns = spin_us == UINT32_MAX ? wait_ns : (uint64_t)spin_us * 1000u;
    if (spin_ns > wait_ns)
        spin_ns = wait_ns;
    uint64_t now = start;
    while (now - start < spin_ns && switch_poll_may_spin(now)) {
        int r = transport_wait_ready(ts, n, 0);
        if (r != 0)
            return r;
        if (empty_polls)
            (*empty_polls)++;
        switch_poll_idle();
        now = util_now_ns();
    }
    uint64_t left_ns = now - start >= wait_ns ? 0 : wait_ns - (now - start);
    return transport_wait_ready(ts, n, (int)((left_ns + 999999u) / 1000000u));
}

uint32_t transport_counters(const transport_t *t, uint64_t *acc, uint32_t max)
{
    return t && t->ops->counters ? t->ops->counters(t, acc, max) : 0;
}

const char *transport_counter_name(const char *kind, uint32_t i)
{
    const transport_kind_t *k = kind_by_name(kind);
    return k && k->counter_name ? k->counter_name(i) : NULL;
}

void transport_fault_counts(const transport_t *t, uint64_t *dropped, uint64_t *duplicated,
                            uint64_t *reordered)
{
    *dropped = *duplicated = *reordered = 0;
    if (t && t->ops->fault_counts)
        t->ops->fault_counts(t, dropped, duplicated, reordered);
}

int transport_addr_equal(const transport_addr_t *a, const transport_addr_t *b)
{
    return a->kind == b->kind && a->len == b->len && memcmp(a->u.bytes, b->u.bytes, a->len) == 0;
}

void transport_addr_format(const transport_addr_t *a, char *buf, size_t len)
{
    const transport_kind_t *k = kind_of_addr(a);
    if (k)
        k->addr_format(a, buf, len);
    else
        snprintf(buf, len, "%s", a->kind ? "(unknown address)" : "(none)");
}

uint16_t transport_addr_port(const transport_addr_t *a)
{
    const transport_kind_t *k = kind_of_addr(a);
    return k && k->addr_port ? k->addr_port(a) : 0;
}

void transport_addr_set_port(transport_addr_t *a, uint16_t port)
{
    const transport_kind_t *k = kind_of_addr(a);
    if (k && k->addr_set_port)
        k->addr_set_port(a, port);
}
