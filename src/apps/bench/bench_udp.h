/*
 * bench_udp.h - the run of `inagg bench udp`: its options, one repeat's measurement, and the
 * steps the command calls (bench_udp.c). The command's parsing and rendering are
 * cli/cmd_bench_udp.c.
 */
#ifndef INAGG_BENCH_BENCH_UDP_H
#define INAGG_BENCH_BENCH_UDP_H

#include <stddef.h>
#include <stdint.h>

#define UDP_MIN_SIZE 16u /* room for the datagram header below */
#define UDP_MAX_SIZE 65507u /* largest UDP payload over IPv4 */
#define UDP_MAX_BATCH 1024u /* UIO_MAXIOV: the kernel's limit for one sendmmsg/recvmmsg */
#define UDP_MAX_REPEATS 100u

struct udp_opts {
    unsigned size;
    double seconds;
    unsigned batch;
    unsigned repeats;
    int sockbuf;
    const char *json; /* NULL, "-" or a file */
};

struct udp_run {
    double recv_per_s, gbps, sent_per_s, loss_pct;
    uint64_t sent, received;
    int rcvbuf, sndbuf;
};

/* One repeat: a sender process for o->seconds, this process receiving. 0 with res filled, or
 * -1 after a message. */
int udp_run_once(const struct udp_opts *o, struct udp_run *res);

/* The median over runs[n] of the double at field_offset in struct udp_run. */
double udp_median_of(const struct udp_run *runs, unsigned n, size_t field_offset);

#endif /* INAGG_BENCH_BENCH_UDP_H */
