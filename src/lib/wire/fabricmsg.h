/*
 * fabricmsg.h - the control line that changes a running L2 fabric (`inagg switch --l2`) and
 * its answer, as a struct with one encoder and one decoder:
 *
 *   admin  -> switch   FABRIC [agg_ports=IF,IF,...|all|none] [add=any|fixed|float]
 *   switch -> admin    FABRIC_STATE agg_ports=IF,IF,...|all|none add=any|fixed|float
 *                      or ERR invalid|refused|unsupported <text>
 *
 * A FABRIC line without keys only asks for the state. agg_ports: the ports whose aggregation
 * frames the fabric aggregates (frames of the others are counted and dropped); add: which
 * adder runs (fixed: int32 and block fixed point only, float: float32 and coded only, any:
 * both). docs/FABRIC.md "Changing a running fabric" says what each does.
 */
#ifndef INAGG_WIRE_FABRICMSG_H
#define INAGG_WIRE_FABRICMSG_H

#include <stddef.h>
#include <stdint.h>

#include "lib/wire/ctlmsg.h"

enum wire_add_mode { WIRE_ADD_ANY = 0, WIRE_ADD_FIXED, WIRE_ADD_FLOAT, WIRE_ADD_COUNT };

#define WIRE_FABRIC_PORTS_MAX 768 /* "IF,IF,...": up to 63 names of up to 15 characters */

typedef struct wire_fabric {
    int has_ports; /* agg_ports= present */
    char ports[WIRE_FABRIC_PORTS_MAX]; /* "all", "none" or "IF,IF,..." (names checked for
                                           syntax here, against the ports by the fabric) */
    int has_add; /* add= present */
    uint32_t add; /* enum wire_add_mode */
} wire_fabric_t;

/* "any" / "fixed" / "float", and back (0, or -EINVAL for an unknown name). */
const char *wire_add_mode_name(uint32_t add);
int wire_add_mode_parse(const char *name, uint32_t *add);

/* Encode a FABRIC (verb WIRE_VERB_FABRIC: only the keys present) or FABRIC_STATE line (both
 * keys required). -ENOSPC if it does not fit in cap, -EINVAL if a key is missing. */
int wire_fabric_format(enum wire_verb verb, const wire_fabric_t *m, char *line, size_t cap);
/* Decode a FABRIC or FABRIC_STATE line: known keys only, each at most once, values checked
 * for syntax; a FABRIC_STATE line must carry both. 0, or -EPROTO with the reason in why. */
int wire_fabric_parse(const char *line, wire_fabric_t *m, char *why, size_t why_cap);

#endif /* INAGG_WIRE_FABRICMSG_H */
