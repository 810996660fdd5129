/*
 * fabricmsg.c - encode and decode FABRIC / FABRIC_STATE (fabricmsg.h): which keys the lines
 * have and how their values are spelled.
 */
#include "lib/wire/fabricmsg.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "lib/base/errmsg.h"

static const char *const add_names[WIRE_ADD_COUNT] = {"any", "fixed", "float"};

const char *wire_add_mode_name(uint32_t add) { return add < WIRE_ADD_COUNT ? add_names[add] : "?"; }

int wire_add_mode_parse(const char *name, uint32_t *add)
{
    for (uint32_t a = 0; a < WIRE_ADD_COUNT; a++)
        if (strcmp(name, add_names[a]) == 0) {
            *add = a;
            return 0;
        }
    return -EINVAL;
}

/* "all", "none", or 1..63 comma-separated interface names of 1..15 characters [A-Za-z0-9._@-] */
static int ports_ok(const char *v)
{
    if (strcmp(v, "all") == 0 || strcmp(v, "none") == 0)
        return 1;
    int names = 0;
    size_t n = 0;
    for (const char *c = v;; c++) {
        if (*c == ',' || *c == '\0') {
            if (n == 0 || n > 15 || ++names > 63)
                return 0;
            n = 0;
            if (*c == '\0')
                return 1;
            continue;
        }
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '.' || *c == '_' || *c == '-' || *c == '@'))
            return 0;
        n++;
    }
}

int wire_fabric_format(enum wire_verb verb, const wire_fabric_t *m, char *line, size_t cap)
{
    if ((verb != WIRE_VERB_FABRIC && verb != WIRE_VERB_FABRIC_STATE) ||
        (verb == WIRE_VERB_FABRIC_STATE && (!m->has_ports || !m->has_add)) ||
        (m->has_ports && !ports_ok(m->ports)) || (m->has_add && m->add >= WIRE_ADD_COUNT))
        return -EINVAL;
    int n = snprintf(line, cap, "%s%s%s%s%s", wire_verb_name(verb),
                     m->has_ports ? " agg_ports=" : "", m->has_ports ? m->ports : "",
                     m->has_add ? " add=" : "", m->has_add ? wire_add_mode_name(m->add) : "");
    return n < 0 || (size_t)n >= cap ? -ENOSPC : 0;
}

int wire_fabric_parse(const char *line, wire_fabric_t *m, char *why, size_t why_cap)
{
    memset(m, 0, sizeof(*m));
    enum wire_verb verb = wire_verb_of(line);
    if (verb != WIRE_VERB_FABRIC && verb != WIRE_VERB_FABRIC_STATE) {
        return set_err(why, why_cap, -EPROTO, "not a FABRIC line: '%.60s'", line);
    }
    const char *p = line + strlen(wire_verb_name(verb));
    for (int words = 0; *p; words++) {
        if (*p != ' ' || words >= 8) {
            return set_err(why, why_cap, -EPROTO,
                           "expected FABRIC [agg_ports=IF,IF,...|all|none] "
                           "[add=any|fixed|float]");
        }
        p++;
        size_t len = strcspn(p, " ");
        const char *eq = memchr(p, '=', len);
        size_t klen = eq ? (size_t)(eq - p) : len;
        size_t vlen = eq ? len - klen - 1 : 0;
        char val[WIRE_FABRIC_PORTS_MAX];
        if (!eq || vlen == 0 || vlen >= sizeof(val)) {
            return set_err(why, why_cap, -EPROTO, "bad item '%.*s' (expected key=value)",
                           (int)(len > 60 ? 60 : len), p);
        }
        memcpy(val, eq + 1, vlen);
        val[vlen] = '\0';
        if (klen == 9 && strncmp(p, "agg_ports", 9) == 0) {
            if (m->has_ports) {
                return set_err(why, why_cap, -EPROTO, "agg_ports given twice");
            }
            if (!ports_ok(val)) {
                return set_err(why, why_cap, -EPROTO,
                               "bad agg_ports '%.60s' (expected IF,IF,... of interface "
                               "names, all or none)",
                               val);
            }
            m->has_ports = 1;
            memcpy(m->ports, val, vlen + 1);
        } else if (klen == 3 && strncmp(p, "add", 3) == 0) {
            if (m->has_add) {
                return set_err(why, why_cap, -EPROTO, "add given twice");
            }
            if (wire_add_mode_parse(val, &m->add) != 0) {
                return set_err(why, why_cap, -EPROTO,
                               "bad add '%.20s' (expected any, fixed or float)", val);
            }
            m->has_add = 1;
        } else {
            return set_err(why, why_cap, -EPROTO,
                           "unknown key '%.*s' (FABRIC takes agg_ports= and add=)",
                           (int)(klen > 30 ? 30 : klen), p);
        }
        p += len;
    }
    if (verb == WIRE_VERB_FABRIC_STATE && (!m->has_ports || !m->has_add)) {
        return set_err(why, why_cap, -EPROTO, "FABRIC_STATE without agg_ports= or add=");
    }
    return 0;
}
