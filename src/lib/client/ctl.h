/*
 * ctl.h - the control protocol between workers and the switch: text lines over TCP.
 *
 * A line is a verb followed by space-separated key=value pairs, e.g.
 *   JOIN version=3 job=bench rank=0 world=4 slots=16 elems=16360 float=fixed protocol=switchml
 *        timeout=30000                                       (one line)
 *   JOINED id=3 token=12379813738877118345 threads=2 port=7000 base=1 slots=16 elems=16360 float=fixed
 *   ERR refused pool exhausted: job 'bench' asks 512 slots, 100 of 8192 free
 * Values never contain spaces, except the free text after ERR and FAILED. Text lines make
 * the control plane easy to watch and to poke with nc; it is never on the packet path.
 *
 * This module offers: a buffered line reader for non-blocking sockets, blocking helpers with
 * deadlines for clients, a bounded output queue, connecting and listening. A line's grammar
 * (key=value lookups) is wire/ctlline.h, included here. Functions return 0 or -errno.
 */
#ifndef INAGG_CONTROL_CTL_H
#define INAGG_CONTROL_CTL_H

#include <stddef.h>
#include <stdint.h>

#include "lib/wire/ctlline.h"

typedef struct ctl_reader {
    char buf[4 * CTL_LINE_MAX];
    size_t len;
} ctl_reader_t;

/* Read what the socket has into r without blocking. Returns bytes read, 0 on EOF,
 * -EAGAIN if nothing was there, -EMSGSIZE if a line exceeds CTL_LINE_MAX, or -errno. */
long ctl_fill(int fd, ctl_reader_t *r);

/* Take one complete line out of r into line (without the newline). 1 if a line was taken,
 * 0 if none is complete yet. */
int ctl_take_line(ctl_reader_t *r, char *line, size_t cap);

/* Block until a whole line arrives or timeout_ms passes: 0, -ETIMEDOUT, -ECONNRESET (EOF),
 * or -errno. */
int ctl_read_line(int fd, ctl_reader_t *r, char *line, size_t cap, int timeout_ms);

/* Write a whole line (a newline is appended). Blocks at most timeout_ms. */
int ctl_write_line(int fd, const char *line, int timeout_ms);

/* A bounded output queue for a non-blocking socket (the switch's side): lines are queued and
 * sent as the peer takes them, so a peer that never reads cannot block the sender; one that
 * lets `max` bytes pile up is refused more (the caller closes it). */
typedef struct ctl_writer {
    char *buf;
    size_t len, cap, max;
    uint64_t since_ns; /* when the queue last went from empty to non-empty; 0 when empty */
} ctl_writer_t;

/* Queue a line (a newline is appended): 0, -ENOBUFS past w->max, -EMSGSIZE, -ENOMEM. */
int ctl_queue_line(ctl_writer_t *w, const char *line);
/* Send what the socket takes now: bytes sent (0 if none), or -errno of a broken socket. */
long ctl_flush(int fd, ctl_writer_t *w);
void ctl_writer_free(ctl_writer_t *w);

/* Connect a TCP socket to addr within timeout_ms; returns fd or -errno. */
struct sockaddr_in;
int ctl_connect(const struct sockaddr_in *addr, int timeout_ms);
/* The same for "HOST:PORT" (base/netaddr.h); -EINVAL or -EHOSTUNREACH for a bad address. */
int ctl_connect_to(const char *host_port, int timeout_ms);

/* A non-blocking TCP listener on "HOST:PORT" (port 0: the kernel picks); fd or -errno. */
int ctl_listen(const char *host_port);

#endif /* INAGG_CONTROL_CTL_H */
