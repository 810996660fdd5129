/*
 * roce_worker.c - the worker's end of the RoCE transport (see roce.h): a packet socket on the
 * interface towards the switch; packets go out as RDMA Write messages batched into one
 * sendmmsg, a contribution's first retransmission at its first sending's PSNs (13.4);
 * results come back through the socket's ring, reassembled per QP.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "lib/base/errmsg.h"
#include "lib/base/util.h"
#include "lib/transport/pkt_wait.h"
#include "lib/transport/roce_int.h"
#include "lib/wire/wire.h"

/* The worker's queued frames in one sendmmsg (a system call per batch, not per frame).
 * Frames the device refused are dropped: their PSNs are spent, so the receiver sees a gap
 * and abandons that message; the protocols resend. 0 or -errno. */
int roce_worker_flush(roce_endpoint_t *e)
{
    static const struct virtio_net_hdr none;
    struct iovec iov[ROCE_TX_BATCH][2];
    struct mmsghdr mm[ROCE_TX_BATCH];
    for (uint32_t i = 0; i < e->txn; i++) {
        iov[i][0] = (struct iovec){(void *)(uintptr_t)&none, sizeof(none)};
        iov[i][1] = (struct iovec){e->txq + (size_t)i * ROCE_TX_SLOT, e->txlen[i]};
        memset(&mm[i], 0, sizeof(mm[i]));
        mm[i].msg_hdr.msg_iov = iov[i];
        mm[i].msg_hdr.msg_iovlen = 2;
    }
    uint32_t done = 0;
    for (int tries = 0; done < e->txn && tries < 4; tries++) {
        int r = sendmmsg(e->ps.fd, mm + done, e->txn - done, MSG_DONTWAIT);
        if (r > 0) {
            done += (uint32_t)r;
            tries = -1; /* progress: keep going */
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && errno != EAGAIN && errno != ENOBUFS && errno != EMSGSIZE) {
            int rc = -errno;
            e->txn = 0;
            return rc;
        }
        break;
    }
    for (uint32_t i = 0; i < done; i++)
        stat(e, RS_FRAMES_OUT);
    if (done < e->txn)
        stat(e, RS_TX_DROPPED);
    e->txn = 0;
    return 0;
}

int roce_worker_send(roce_endpoint_t *e, const transport_tx_t *p)
{
    const roce_addr_t *to = cra(&p->to);
    uint32_t len = p->head_len + p->body_len, nf = roce_frames_for(len, e->mtu);
    if (to->queue >= ROCE_MAX_QUEUES || len > e->cap)
        return -EINVAL;
    /* a contribution's first retransmission goes out at the PSNs of its first sending, as
     * an RC requester's go-back-N would (the switch answers it from its result buffer) */
    uint32_t psn = e->tx_psn[to->queue];
    int replay = 0;
    roce_msg_key_t key;
    if (e->replay_on && roce_tx_key(p, len, &key) == 0 && key.type == WIRE_CONTRIB)
        psn = roce_replay_psn(&e->replay[to->queue], &key, len, psn, &replay);
    for (uint32_t i = 0; i < nf; i++) {
        if (e->txn == ROCE_TX_BATCH) {
            int rc = roce_worker_flush(e);
            if (rc < 0)
                return rc;
        }
        e->txlen[e->txn] = roce_build_frame(e->txq + (size_t)e->txn * ROCE_TX_SLOT, p, len, e->mtu,
                                            nf, i, e->mac, to->mac, to->qp, psn, to->queue);
        e->txn++;
        psn = roce_psn_add(psn, 1);
    }
    if (replay)
        stat(e, RS_REPLAYED);
    else
        e->tx_psn[to->queue] = psn;
    stat(e, RS_MESSAGES_OUT);
    return 1;
}

int roce_worker_recv(roce_endpoint_t *e, transport_rx_t *out, int max, int timeout_ms)
{
    int want = max < (int)e->batch ? max : (int)e->batch, got = 0;
    uint64_t spin_until = 0;
    /* bounded: a pass consumes a frame, or spins until spin_until, or sleeps once */
    for (uint32_t pass = 0; got < want && pass < 4 * e->ps.nframes + 100000; pass++) {
        const uint8_t *fr;
        uint32_t len;
        const struct virtio_net_hdr *vh;
        if (!pktsock_peek(&e->ps, &fr, &len, &vh)) {
            if (got == 0 && e->partial && spin_until == 0)
                spin_until = util_now_ns() + ROCE_SPIN_NS;
            if (got == 0 && util_now_ns() < spin_until) {
                /* the rest of a message follows within microseconds: look again rather than
                 * sleep, which costs a wake-up per frame */
                __builtin_ia32_pause();
                continue;
            }
            int rc = transport_pkt_wait(&e->ps, got, &timeout_ms);
            if (rc <= 0)
                return rc < 0 ? rc : got;
            continue;
        }
        /* only RoCE frames to this MAC and one of this endpoint's QPs are ours (the socket
         * also sees the other ranks' frames on this host) */
        if (len >= ROCE_ETH_LEN + ROCE_GRH_LEN + ROCE_BTH_LEN && fr[12] == 0x89 && fr[13] == 0x15 &&
            memcmp(fr, e->mac, 6) == 0) {
            uint32_t qp = (uint32_t)fr[59] << 16 | (uint32_t)fr[60] << 8 | fr[61];
            if (qp - e->qp_base < ROCE_MAX_QUEUES) {
                stat(e, RS_FRAMES_IN);
                roce_frame_t f;
                enum roce_reason r = roce_parse(fr, len, 1, &f);
                uint32_t mlen;
                enum roce_rx_verdict v;
                e->partial = r == ROCE_OK && !roce_op_is_last(f.h.opcode);
                if (r != ROCE_OK) {
                    roce_count_reason(e->st, r);
                } else if (roce_take_frame(e->st, &e->wrx[qp - e->qp_base], &f, &e->spare[got],
                                           &mlen, &v)) {
                    e->partial = 0;
                    out[got].data = e->spare[got];
                    out[got].len = mlen;
                    uint16_t qn = (uint16_t)(qp - e->qp_base);
                    roce_make_addr(&out[got].from, f.h.src_mac, 0, e->ip, qp,
                                   (uint16_t)(e->port + qn), qn);
                    got++;
                }
            }
        }
        pktsock_done(&e->ps);
    }
    return got;
}

int roce_neighbour(uint32_t ip, char ifname[16], uint8_t mac[6])
{
    FILE *fp = fopen("/proc/net/arp", "r");
    if (!fp)
        return -EHOSTUNREACH;
    char line[256];
    int rc = -EHOSTUNREACH;
    /* "IP address  HW type  Flags  HW address  Mask  Device"; bounded by the file's lines */
    for (int k = 0; k < 65536 && fgets(line, sizeof(line), fp); k++) {
        char ipt[64], hw[64], dev[64], mask[64];
        unsigned type, flags, m[6];
        if (sscanf(line, "%63s 0x%x 0x%x %63s %63s %63s", ipt, &type, &flags, hw, mask, dev) != 6)
            continue;
        struct in_addr a;
        if (inet_pton(AF_INET, ipt, &a) != 1 || a.s_addr != ip || !(flags & 0x2) ||
            strlen(dev) >= 16 ||
            sscanf(hw, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]) != 6)
            continue;
        for (int i = 0; i < 6; i++)
            mac[i] = (uint8_t)m[i];
        memcpy(ifname, dev, strlen(dev) + 1); /* shorter than 16: checked above */
        rc = 0;
        break;
    }
    fclose(fp);
    return rc;
}

static uint32_t random24(void)
{
    uint32_t v = 0;
    if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v)) {
        uint64_t s = util_now_ns() ^ (uint64_t)getpid() << 32;
        v = (uint32_t)util_splitmix64(&s);
    }
    return v & ROCE_PSN_MASK;
}

int roce_worker_open(roce_endpoint_t *e, const transport_config_t *cfg, char *err, size_t errlen)
{
    uint32_t ip;
    uint16_t port;
    if (!cfg->roce.peer || roce_ip_port_of(cfg->roce.peer, &ip, &port) != 0)
        return set_err(err, errlen, -EINVAL, "roce: a worker endpoint needs the switch's address");
    char ifname[16];
    char ipt[INET_ADDRSTRLEN];
    struct in_addr in = {.s_addr = ip};
    inet_ntop(AF_INET, &in, ipt, sizeof(ipt));
    if (roce_neighbour(ip, ifname, e->peer_mac) != 0)
        return set_err(err, errlen, -EHOSTUNREACH,
                       "roce: the kernel's neighbour table has no MAC for the switch %s (RoCE v1 "
                       "needs the switch on this host's Ethernet segment)",
                       ipt);
    if (cfg->roce.iface && *cfg->roce.iface)
        snprintf(ifname, sizeof(ifname), "%s", cfg->roce.iface);
    int rc = pktsock_open_frames(&e->ps, ifname, 8u << 20, ROCE_MAX_FRAME, err, errlen);
    if (rc != 0)
        return rc;
    memcpy(e->mac, e->ps.mac, 6);
    e->mtu = cfg->roce.mtu ? cfg->roce.mtu : roce_mtu_for_link(e->ps.mtu);
    if (!roce_mtu_valid(e->mtu))
        return set_err(err, errlen, -EINVAL,
                       "roce: a path MTU of %u bytes is not one of InfiniBand's (256, 512, 1024, "
                       "2048 or 4096)",
                       e->mtu);
    if (e->mtu > roce_mtu_for_link(e->ps.mtu))
        return set_err(err, errlen, -EMSGSIZE,
                       "roce: frames of a %u-byte path MTU do not fit %s's MTU of %u bytes (the "
                       "largest that does: %u)",
                       e->mtu, ifname, e->ps.mtu, roce_mtu_for_link(e->ps.mtu));
    e->ip = ip;
    e->port = port;
    /* QPs 0 and 1 are the InfiniBand management QPs: start at 16 */
    e->qp_base = (random24() & ~(ROCE_MAX_QUEUES - 1)) | ROCE_MAX_QUEUES;
    if (e->qp_base + ROCE_MAX_QUEUES > ROCE_QP_MASK)
        e->qp_base -= ROCE_MAX_QUEUES;
    for (uint32_t q = 0; q < ROCE_MAX_QUEUES; q++) {
        e->tx_psn[q] = cfg->roce.psn0_set ? cfg->roce.psn0 & ROCE_PSN_MASK : random24();
        e->wrx[q].buf = e->bufs + (size_t)q * e->cap;
        e->wrx[q].cap = e->cap;
    }
    e->replay_on = !cfg->roce.no_replay;
    e->replay = calloc(ROCE_MAX_QUEUES, sizeof(*e->replay));
    if (!e->replay)
        return set_err(err, errlen, -ENOMEM, "out of memory");
    e->st = &e->stats;
    return 0;
}
