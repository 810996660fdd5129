/*
 * udp.h - UDP sockets: open with large buffers, batched send/receive over sendmmsg/recvmmsg.
 * The dataplane reaches these through the UDP transport (transport.h, transport_kind_udp);
 * `inagg bench udp` uses the raw calls. Addresses are base/netaddr.h's. Functions return 0
 * (or a count) on success and -errno on failure.
 */
#ifndef INAGG_TRANSPORT_UDP_H
#define INAGG_TRANSPORT_UDP_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Open a non-blocking UDP socket bound to `bind_addr` (port 0: the kernel picks) with
 * receive and send buffers of `buffer_bytes` (forced past the sysctl limit when root). */
int udp_open(const struct sockaddr_in *bind_addr, int buffer_bytes);

/* A non-blocking UDP socket on any address and a port the kernel picks (a worker's). */
int udp_open_any(int buffer_bytes);

/* The port a socket is bound to, in host order (0 on error). */
uint16_t udp_bound_port(int fd);

/* Send n prepared messages; retries partial batches; waits (poll) up to timeout_ms when
 * the socket buffer is full. Returns the number sent or -errno. */
int udp_send_batch(int fd, struct mmsghdr *msgs, int n, int timeout_ms);

/* Receive up to n messages; waits up to timeout_ms for the first (0: do not wait).
 * Returns the number received (0 on timeout) or -errno. */
int udp_recv_batch(int fd, struct mmsghdr *msgs, int n, int timeout_ms);

/* Make fd blocking with a receive timeout, for udp_recv_batch_blocking (sends stay
 * non-blocking: udp_send_batch passes MSG_DONTWAIT). 0 or -errno. */
int udp_set_receive_timeout(int fd, int timeout_ms);

/* Receive up to n messages in one system call, sleeping in it until the first arrives or
 * the socket's receive timeout passes (0 then). Returns the number received or -errno. */
int udp_recv_batch_blocking(int fd, struct mmsghdr *msgs, int n);

#endif /* INAGG_TRANSPORT_UDP_H */
