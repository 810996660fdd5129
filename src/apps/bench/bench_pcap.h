/*
 * bench_pcap.h - `bench allreduce --pcap FILE`: capture every frame on the L2 fabric's ports
 * (both directions) of a testbed into a pcap file, from a thread that enters the testbed's
 * switch namespace. Bounded in frames and bytes; frames beyond the bound are counted.
 */
#ifndef INAGG_BENCH_BENCH_PCAP_H
#define INAGG_BENCH_BENCH_PCAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct bench_pcap bench_pcap_t;

/* Start capturing ports p1..p<nports> of network namespace `netns` into path. 0, or -errno
 * with a reason in err. */
int bench_pcap_start(const char *netns, unsigned nports, const char *path, bench_pcap_t **out,
                     char *err, size_t errlen);

/* Stop, flush and close; the frames written and those past the bound. */
void bench_pcap_stop(bench_pcap_t *p, uint64_t *written, uint64_t *skipped);

#endif /* INAGG_BENCH_BENCH_PCAP_H */
