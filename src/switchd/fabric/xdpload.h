/*
 * xdpload.h - the fabric's XDP program (xdp/steer.bpf.c, embedded in the binary) on one
 * interface: opened from memory with libbpf, configured (the switch's MAC, IP and
 * aggregation UDP ports), loaded and attached in native (driver) mode through a bpf_link, so
 * it goes away with the process. No bpffs is needed: the sockets are put into its XSKMAP
 * through the map's descriptor (xskport.c), not by libxdp's dispatcher.
 * Errors: a negative errno with the reason in err.
 */
#ifndef INAGG_FABRIC_XDPLOAD_H
#define INAGG_FABRIC_XDPLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "switchd/fabric/xdp/steer_conf.h"

struct bpf_object;

typedef struct xdpload {
    struct bpf_object *obj;
    int prog_fd; /* the loaded program */
    int link_fd; /* the attachment: closing it detaches the program */
    int xsks_fd; /* the XSKMAP: rx queue -> socket */
    int stats_fd; /* per-CPU counters (enum steer_stat) */
} xdpload_t;

/* Load the program with configuration conf, for interface ifname (named in the messages);
 * attached nowhere yet. 0 or -errno. */
int xdpload_load(xdpload_t *x, const char *ifname, const struct steer_conf *conf, char *err,
                 size_t errlen);

/* Attach the loaded program to ifindex in native (driver) mode; 0 or -errno (-EOPNOTSUPP: the
 * driver has no native XDP). */
int xdpload_attach(xdpload_t *x, const char *ifname, int ifindex, char *err, size_t errlen);

/* The program's counter `which` summed over CPUs (0 when unreadable). */
uint64_t xdpload_stat(const xdpload_t *x, enum steer_stat which);

/* Detach and free (safe on a zeroed or failed one). */
void xdpload_detach(xdpload_t *x);

#endif /* INAGG_FABRIC_XDPLOAD_H */
