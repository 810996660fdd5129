/*
 * steer_conf.h - what the fabric's XDP program (steer.bpf.c) and its loader (xdpload.c)
 * share: the config map's one value and the program's counters. Plain fixed-size types, as
 * the program is compiled for the BPF target and the loader for the host.
 */
#ifndef INAGG_FABRIC_XDP_STEER_CONF_H
#define INAGG_FABRIC_XDP_STEER_CONF_H

#include <linux/types.h>

#define STEER_MAX_QUEUES 64
#define STEER_ETH_P_ROCE 0x8915

struct steer_conf {
    unsigned char mac[6]; /* the switch's MAC */
    __u16 port_lo; /* the aggregation queues' UDP ports: [port_lo, port_hi) */
    __u16 port_hi;
    __u16 pad;
    __u32 ip; /* the switch's IPv4 address, network order */
    __u32 max_frame; /* the largest frame an XSK chunk holds; larger ones are passed */
    __u32 roce; /* 1: RoCE frames go to the socket too. Only when every frame the port's MTU
                   allows fits a chunk: the frames of one message must not take two paths
                   (a big First and Middle passed, a short Last steered), whose reordering
                   would lose the message */
};

enum steer_stat { STEER_REDIRECTED, STEER_PASSED, STEER_TOO_BIG, STEER_STAT_COUNT };

#endif /* INAGG_FABRIC_XDP_STEER_CONF_H */
