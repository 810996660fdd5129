/*
 * resultgso.c - the transmit stage's result coalescing: consecutive UDP result frames that
 * leave one port by one send socket (one flow, payloads of one length: a rank's results of a
 * pass) go as one UDP GSO super-frame (netio/udpgso.h) instead of one send each. The
 * worker's socket takes it whole (UDP_GRO, transport/udp.c) or its kernel cuts it back into
 * the datagrams, so what a worker reads is unchanged; the fabric makes one system call and
 * one veth crossing per run, the worker one receive and one wake-up. A port counts the frames
 * (tx) and the super-frames (tx_gso) it sent. A kernel that refuses a super-frame gets its
 * frames one by one, and no more super-frames (said once in the log).
 */
#include <errno.h>
#include <string.h>

#include "lib/base/log.h"
#include "lib/netio/ethframe.h"
#include "switchd/fabric/resultgso.h"
#include "switchd/fabric/stagestat.h"

/* The run's frames one by one (the kernel refused the super-frame): how many went. */
static uint32_t send_each(result_gso_t *r, uint32_t nseg)
{
    uint8_t one[ETHF_UDP_HDR_LEN + 65536];
    uint32_t sent = 0;
    for (uint32_t k = 0; k < nseg; k++) {
        uint32_t len = udpgso_segment(&r->b, k, one);
        if (pktsock_send_fd(r->fd, NULL, one, len, NULL, 0) == 0)
            sent++;
    }
    return sent;
}

void resultgso_flush(result_gso_t *r, fport_t *ports)
{
    if (r->b.nseg == 0)
        return;
    fport_t *p = &ports[r->port];
    struct virtio_net_hdr vh;
    uint32_t nseg = r->b.nseg, len = udpgso_finish(&r->b, &vh), sent = 0;
    int rc = pktsock_send_fd(r->fd, &vh, r->b.buf, len, NULL, 0);
    if (rc == 0) {
        sent = nseg;
        if (nseg > 1)
            fstat_add(&p->c[FP_TX_GSO], 1);
    } else if (nseg > 1 && (rc == -EINVAL || rc == -EOPNOTSUPP || rc == -EPROTONOSUPPORT)) {
        LOG_W("fabric: port %s refused a UDP GSO frame of results (%s): sending them one by one",
              p->name, strerror(-rc));
        r->off = 1;
        sent = send_each(r, nseg);
    }
    fstat_add(&p->c[FP_TX], sent);
    fstat_add(&p->c[FP_TX_BYTES], (uint64_t)sent * (ETHF_UDP_HDR_LEN + r->b.seg));
    if (sent < nseg)
        fstat_add(&p->c[FP_TX_DROPS], nseg - sent);
    udpgso_reset(&r->b);
}

int resultgso_add(result_gso_t *r, fport_t *ports, uint32_t port, int fd, const uint8_t *frame,
                  uint32_t len)
{
    if (r->off)
        return 0;
    if (r->b.nseg && r->port == port && r->fd == fd && udpgso_add(&r->b, frame, len))
        return 1;
    resultgso_flush(r, ports);
    if (!udpgso_add(&r->b, frame, len))
        return 0;
    r->port = port;
    r->fd = fd;
    return 1;
}
