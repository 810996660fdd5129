/*
 * fctl.c - the fabric's settings that change while it runs: which ports aggregate (their
 * aggregation frames go to the dataplane; those of the other ports are counted and dropped)
 * and which adder runs (any, fixed: int32 and block fixed point, float: float32 and coded).
 * The control thread changes them (a FABRIC line on the switch's TCP control port,
 * wire/fabricmsg.h) through the classify stage's classify_set, which owns them and reads
 * them per frame: a change applies from the next frame on.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "lib/base/errmsg.h"
#include "lib/wire/fabricmsg.h"
#include "switchd/fabric/fabric_int.h"

uint64_t fabric_all_ports(const struct fabric *f)
{
    return f->cpu >= 64 ? ~0ull : (1ull << f->cpu) - 1;
}

int fabric_ports_mask(const struct fabric *f, const char *spec, uint64_t *mask, char *err,
                      size_t errlen)
{
    if (strcmp(spec, "all") == 0) {
        *mask = fabric_all_ports(f);
        return 0;
    }
    if (strcmp(spec, "none") == 0) {
        *mask = 0;
        return 0;
    }
    char buf[WIRE_FABRIC_PORTS_MAX];
    if (!*spec || strlen(spec) >= sizeof(buf))
        return set_err(err, errlen, -EINVAL,
                       "bad aggregation port list (expected IF,IF,..., all or none)");
    snprintf(buf, sizeof(buf), "%s", spec);
    uint64_t m = 0;
    char *save = NULL;
    for (char *n = strtok_r(buf, ",", &save); n; n = strtok_r(NULL, ",", &save)) {
        uint32_t p = 0;
        while (p < f->cpu && strcmp(f->ports[p].name, n) != 0)
            p++;
        if (p == f->cpu)
            return set_err(err, errlen, -EINVAL,
                           "aggregation port '%.20s' is not one of the fabric's ports", n);
        m |= 1ull << p;
    }
    *mask = m;
    return 0;
}

/* "all", "none" or the names, into buf. */
static void ports_text(const struct fabric *f, uint64_t mask, char *buf, size_t cap)
{
    if (mask == fabric_all_ports(f)) {
        snprintf(buf, cap, "all");
        return;
    }
    if (mask == 0) {
        snprintf(buf, cap, "none");
        return;
    }
    size_t n = 0;
    buf[0] = 0;
    for (uint32_t p = 0; p < f->cpu && n < cap; p++)
        if (mask & (1ull << p))
            n += (size_t)snprintf(buf + n, cap - n, "%s%s", n ? "," : "", f->ports[p].name);
}

void fabric_settings_text(const struct fabric *f, char *ports, size_t cap, const char **add)
{
    uint64_t mask;
    uint32_t mode;
    classify_settings(&f->classify, &mask, &mode);
    ports_text(f, mask, ports, cap);
    *add = wire_add_mode_name(mode);
}

/* A change may come only from the switch's own host: its IP or loopback. */
static int peer_is_local(const struct fabric *f, const uint8_t a[16])
{
    static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    static const uint8_t v6lo[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    if (memcmp(a, v6lo, 16) == 0)
        return 1;
    if (memcmp(a, v4mapped, 12) != 0)
        return 0;
    return a[12] == 127 || memcmp(a + 12, &f->ip, 4) == 0;
}

void fabric_control(void *ctx, const char *line, const uint8_t peer[16], char *reply, size_t cap)
{
    struct fabric *f = ctx;
    wire_fabric_t m;
    char why[160];
    if (wire_fabric_parse(line, &m, why, sizeof(why)) != 0 ||
        wire_verb_of(line) != WIRE_VERB_FABRIC) {
        wire_err_format(WIRE_REFUSED_INVALID, why, reply, cap);
        return;
    }
    uint64_t mask = 0;
    if (m.has_ports && fabric_ports_mask(f, m.ports, &mask, why, sizeof(why)) != 0) {
        wire_err_format(WIRE_REFUSED_INVALID, why, reply, cap);
        return;
    }
    if ((m.has_ports || m.has_add) && !peer_is_local(f, peer)) {
        wire_err_format(WIRE_REFUSED,
                        "FABRIC changes are taken only from the switch's own "
                        "host (its address or loopback)",
                        reply, cap);
        return;
    }
    classify_set(&f->classify, m.has_ports ? &mask : NULL, m.has_add ? &m.add : NULL);
    wire_fabric_t st = {.has_ports = 1, .has_add = 1};
    const char *add;
    fabric_settings_text(f, st.ports, sizeof(st.ports), &add);
    wire_add_mode_parse(add, &st.add);
    if (wire_fabric_format(WIRE_VERB_FABRIC_STATE, &st, reply, cap) != 0)
        wire_err_format(WIRE_REFUSED_SYSTEM, "the state does not fit a line", reply, cap);
}
