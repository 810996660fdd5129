/*
 * steer.bpf.c - the XDP program of an AF_XDP fabric port (docs/FABRIC.md, "AF_XDP ports"):
 * redirects to the port's XSK the frames the fabric handles on its fast path, and passes
 * every other frame to the kernel, where the port's AF_PACKET socket takes it as before.
 *
 * Fast path: a frame to the switch's MAC that is RoCE v1 (ethertype 0x8915), or IPv4/UDP
 * (no fragment) to the switch's IP and a UDP port of the aggregation queues. A frame larger
 * than one UMEM chunk can hold (multi-buffer, at MTU 9000) is passed, so the AF_PACKET path
 * takes it: the program is frags-aware only so that it attaches at any MTU.
 *
 * Built by the Makefile with clang -O2 -target bpf and embedded in the inagg binary
 * (src/switchd/fabric/xdpload.c opens it from memory); the loader fills the one-entry config map.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "switchd/fabric/xdp/steer_conf.h"

struct {
    __uint(type, BPF_MAP_TYPE_XSKMAP);
    __uint(max_entries, STEER_MAX_QUEUES);
    __type(key, __u32);
    __type(value, __u32);
} xsks SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct steer_conf);
} conf SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, STEER_STAT_COUNT);
    __type(key, __u32);
    __type(value, __u64);
} stats SEC(".maps");

static __always_inline void count(__u32 which)
{
    __u64 *c = bpf_map_lookup_elem(&stats, &which);
    if (c)
        *c += 1;
}

static __always_inline int mac_eq(const unsigned char *a, const unsigned char *b)
{
    return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3] && a[4] == b[4] &&
           a[5] == b[5];
}

/* 1 when the frame between data and end is on the fabric's fast path. */
static __always_inline int fast_path(const struct steer_conf *c, void *data, void *end)
{
    struct ethhdr *eth = data;
    if ((void *)(eth + 1) > end)
        return 0;
    if (!mac_eq(eth->h_dest, c->mac))
        return 0;
    if (eth->h_proto == bpf_htons(STEER_ETH_P_ROCE))
        return c->roce;
    if (eth->h_proto != bpf_htons(ETH_P_IP))
        return 0;
    struct iphdr *ip = (void *)(eth + 1);
    if ((void *)(ip + 1) > end || ip->ihl != 5 || ip->protocol != IPPROTO_UDP ||
        ip->daddr != c->ip || (ip->frag_off & bpf_htons(0x3fff)))
        return 0;
    struct udphdr *udp = (void *)(ip + 1);
    if ((void *)(udp + 1) > end)
        return 0;
    __u16 port = bpf_ntohs(udp->dest);
    return port >= c->port_lo && port < c->port_hi;
}

SEC("xdp.frags")
int inagg_steer(struct xdp_md *ctx)
{
    __u32 zero = 0;
    const struct steer_conf *c = bpf_map_lookup_elem(&conf, &zero);
    void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
    if (!c || !fast_path(c, data, end)) {
        count(STEER_PASSED);
        return XDP_PASS;
    }
    if (bpf_xdp_get_buff_len(ctx) > c->max_frame) {
        count(STEER_TOO_BIG);
        return XDP_PASS;
    }
    count(STEER_REDIRECTED);
    /* a queue without a socket: passed to the kernel (the flags are the default action) */
    return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
}

char LICENSE[] SEC("license") = "GPL";
