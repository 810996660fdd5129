/*
 * textlist.h - names written as an English list for messages: "a", "a and b", "a, b and c".
 */
#ifndef INAGG_BASE_TEXTLIST_H
#define INAGG_BASE_TEXTLIST_H

#include <stddef.h>

/* Append name, the i-th of n, to the list of the i before it in buf (len bytes of it so
 * far; buf[0] is '\0' before the first), with the separator its place asks for. The new
 * length, as snprintf counts it: at cap or past it, the list was cut, and the calls that
 * follow add nothing. buf stays NUL-terminated. */
size_t textlist_add(char *buf, size_t cap, size_t len, size_t i, size_t n, const char *name);

#endif /* INAGG_BASE_TEXTLIST_H */
