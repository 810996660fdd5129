/*
 * peers.h - what the switch's control plane holds per client address: open control
 * connections and slots of the jobs that address registered (failed authentications are
 * counted per address and job, authlimit.h). The admission limits (control.c, PROTOCOL.md "Admission") are
 * checked against these. Used by the control thread only.
 */
#ifndef INAGG_SWITCH_PEERS_H
#define INAGG_SWITCH_PEERS_H

#include <stdint.h>
#include <sys/socket.h>

typedef struct peer {
    int used;
    uint8_t addr[16]; /* IPv4 as IPv4-mapped IPv6 */
    uint32_t conns; /* open control connections */
    uint32_t slots; /* slots held by jobs this address registered */
} peer_t;

typedef struct peer_table {
    peer_t *p;
    uint32_t cap;
} peer_table_t;

/* A table for up to cap addresses. 0 or -ENOMEM. */
int peers_init(peer_table_t *t, uint32_t cap);
void peers_free(peer_table_t *t);
/* The entry of a socket address, created if absent; NULL when the table is full. The
 * pointer stays valid until peers_release() frees the entry. */
peer_t *peers_get(peer_table_t *t, const struct sockaddr_storage *ss);
/* Free the entry once nothing refers to it (no connections, no slots). */
void peers_release(peer_t *p);
/* "1.2.3.4" or "::1" into buf, for log lines. */
void peers_format(const peer_t *p, char *buf, size_t cap);

#endif /* INAGG_SWITCH_PEERS_H */
