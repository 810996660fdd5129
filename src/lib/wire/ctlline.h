/*
 * ctlline.h - the grammar of a control line (control/ctl.h moves lines over TCP, wire/ctlmsg.h
 * says what they mean): a verb, then space-separated key=value pairs, or free text after ERR,
 * FAILED and SHUTDOWN; at most CTL_LINE_MAX bytes. Pure text, no I/O. Functions return 0 or
 * -errno.
 */
#ifndef INAGG_WIRE_CTLLINE_H
#define INAGG_WIRE_CTLLINE_H

#include <stddef.h>
#include <stdint.h>

#define CTL_LINE_MAX 1024

/* The verb (first word) of a line compared with `verb`. */
int ctlline_is(const char *line, const char *verb);

/* Look up key=value in a line; copies the value. 0, -ENOENT if absent, -ENOSPC if the
 * value does not fit in cap. The numeric lookups give -EINVAL for a non-number or a value
 * too long, -ERANGE past the type's range. */
int ctlline_get(const char *line, const char *key, char *out, size_t cap);
int ctl_get_u32(const char *line, const char *key, uint32_t *out);
int ctl_get_u64(const char *line, const char *key, uint64_t *out);

/* The free text after the first word ("ERR <text>"). */
const char *ctlline_rest(const char *line);

#endif /* INAGG_WIRE_CTLLINE_H */
