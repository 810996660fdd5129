/*
 * netaddr.h - IPv4 "HOST:PORT" addresses, for the UDP transport and the TCP control plane
 * alike: parsing (a dotted quad or a name resolving to IPv4, e.g. "localhost") and
 * formatting. 0 or -errno.
 */
#ifndef INAGG_BASE_NETADDR_H
#define INAGG_BASE_NETADDR_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

/* Parse "HOST:PORT" into out. Without ":PORT", default_port is used, or -EINVAL when it is
 * 0. -EINVAL for a malformed text, -EHOSTUNREACH for a name that does not resolve. */
int netaddr_parse(const char *text, uint16_t default_port, struct sockaddr_in *out);

/* Why text failed netaddr_parse with rc, as a phrase for "bad address 'X': <phrase>": a host
 * name that does not resolve names getaddrinfo's reason (gai_strerror), a malformed text says
 * what was expected. */
void netaddr_explain(const char *text, int rc, char *buf, size_t len);

/* "a.b.c.d:port" into buf, always NUL-terminated. */
void netaddr_format(const struct sockaddr_in *a, char *buf, size_t len);

#endif /* INAGG_BASE_NETADDR_H */
