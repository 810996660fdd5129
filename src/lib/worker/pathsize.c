/*
 * pathsize.c - a communicator's packet size from the path to its switches, settled before
 * JOIN (which carries it): options.packet_elems 0 becomes the most elements whose datagram
 * (header, dataplane MAC and payload, coded or not) fits one IPv4 frame of the smallest path
 * MTU toward the shards; a packet_elems the caller set wins, but one whose datagram the path
 * would cut into IP fragments is refused, naming the MTU. A fragment lost costs the whole
 * datagram, and an L2 fabric's aggregation path takes only whole frames (it drops fragments,
 * counting them as agg_fragment). Loopback's MTU, 65536, keeps the datagram maximum.
 *
 * A call that timed out asks what the path did (comm_note_path): the fabric's count of the
 * fragments it dropped, over a STATS exchange of its own, and whether the kernel's path MTU
 * fell below the packets since they were sized.
 *
 * RoCE is not sized here: a RoCE message is cut into frames of its own path MTU
 * (INAGG_ROCE_MTU) by the transport, so its default stays the datagram maximum.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/base/errmsg.h"
#include "lib/base/netaddr.h"
#include "lib/base/util.h"
#include "lib/client/ctl.h"
#include "lib/netio/pathmtu.h"
#include "lib/wire/wire.h"
#include "lib/worker/comm.h"

/* The most elements one datagram of payload_bytes (after the header and MAC) carries in the
 * communicator's encoding, at most INAGG_MAX_PACKET_ELEMS. */
static uint32_t elems_fitting(const inagg_comm_t *c, uint32_t payload_bytes)
{
    size_t n = c->codec.mode == CODEC_NONE ? payload_bytes / 4u
                                           : codec_max_elems(&c->codec, payload_bytes);
    return n > INAGG_MAX_PACKET_ELEMS ? INAGG_MAX_PACKET_ELEMS : (uint32_t)n;
}

/* Bytes a datagram of n elements may take: header, MAC and payload. */
static size_t datagram_bytes(const inagg_comm_t *c, uint32_t n)
{
    return WIRE_HEADER_MAX +
           (c->codec.mode == CODEC_NONE ? (size_t)n * 4u : codec_max_bytes(&c->codec, n));
}

int comm_size_packets(inagg_comm_t *c, const transport_addr_t *sw, const char (*shard_text)[64],
                      char *detail, size_t dlen)
{
    inagg_options_t *o = &c->opts;
    if (o->transport && strcmp(o->transport, "roce") == 0) {
        if (!o->packet_elems)
            o->packet_elems = elems_fitting(c, WIRE_MAX_DATAGRAM - WIRE_HEADER_MAX);
        return 0;
    }
    uint32_t narrow = 0; /* the shard whose path is narrowest */
    for (uint32_t k = 0; k < c->nshards; k++) {
        struct sockaddr_in to;
        memcpy(&to, sw[k].u.bytes, sizeof(to));
        char ifname[32], why[160];
        int mtu = pathmtu_of(&to, ifname, sizeof(ifname), why, sizeof(why));
        if (mtu < 0)
            return set_err(detail, dlen, mtu, "cannot size packets to the switch at %s: %s",
                           shard_text[k], why);
        if (k == 0 || (uint32_t)mtu < c->path_mtu) {
            c->path_mtu = (uint32_t)mtu;
            snprintf(c->path_if, sizeof(c->path_if), "%s", ifname);
            narrow = k;
        }
    }
    uint32_t payload = pathmtu_udp_payload(c->path_mtu);
    uint32_t fit = payload > WIRE_HEADER_MAX ? elems_fitting(c, payload - WIRE_HEADER_MAX) : 0;
    if (fit == 0)
        return set_err(detail, dlen, -EINVAL,
                       "the path MTU to the switch at %s is %u bytes: too small for one "
                       "element after the IPv4, UDP and inagg headers",
                       shard_text[narrow], c->path_mtu);
    if (!o->packet_elems) {
        o->packet_elems = fit;
        return 0;
    }
    if (o->packet_elems > fit)
        return set_err(detail, dlen, -EINVAL,
                       "packet_elems %u makes datagrams of up to %zu bytes, more than the path "
                       "MTU %u to the switch at %s%s%s carries in one frame (%u bytes after "
                       "the IPv4 and UDP headers): the network would cut each into IP "
                       "fragments; use at most %u, or 0 to size packets to the path",
                       o->packet_elems, datagram_bytes(c, o->packet_elems), c->path_mtu,
                       shard_text[narrow], c->path_if[0] ? " through " : "", c->path_if, payload,
                       fit);
    return 0;
}

#define STATS_WAIT_MS 1500 /* every shard's STATS exchange together, connects included */
#define STATS_MAX_LINES 100000u /* a switch's text stats: a few lines per job */

/* IP fragments the L2 fabric of the switch whose control connection is fd has dropped (its
 * `agg_fragment`, all senders together), asked over a connection of its own with STATS by
 * deadline (monotonic ns); -1 when it cannot tell (no fabric, no answer in time). */
static long long switch_fragments(int ctl_fd, uint64_t deadline)
{
    struct sockaddr_in sw;
    socklen_t n = sizeof(sw);
    if (getpeername(ctl_fd, (struct sockaddr *)&sw, &n) != 0)
        return -1;
    uint64_t now = util_now_ns();
    if (now >= deadline)
        return -1;
    int fd = ctl_connect(&sw, (int)((deadline - now) / 1000000u) + 1);
    if (fd < 0)
        return -1;
    long long found = -1;
    ctl_reader_t *rd = calloc(1, sizeof(*rd));
    char line[CTL_LINE_MAX];
    if (rd && ctl_write_line(fd, wire_verb_name(WIRE_VERB_STATS),
                             1 + (int)((deadline - now) / 1000000u)) == 0) {
        for (uint32_t i = 0; i < STATS_MAX_LINES; i++) {
            now = util_now_ns();
            if (now >= deadline ||
                ctl_read_line(fd, rd, line, sizeof(line), (int)((deadline - now) / 1000000u) + 1))
                break;
            if (wire_verb_of(line) == WIRE_VERB_END)
                break;
            const char *f =
                strncmp(line, "fabric frames:", 14) == 0 ? strstr(line, " agg_fragment=") : NULL;
            if (f)
                found = strtoll(f + 14, NULL, 10);
        }
    }
    free(rd);
    close(fd);
    return found;
}

/* The path MTU toward shard 0 now (the kernel may know a smaller one than at create), or -1. */
static int path_mtu_now(const inagg_comm_t *c)
{
    struct sockaddr_in to;
    socklen_t n = sizeof(to);
    char ifname[32];
    if (c->ctl_fd[0] < 0 || getpeername(c->ctl_fd[0], (struct sockaddr *)&to, &n) != 0)
        return -1;
    int mtu = pathmtu_of(&to, ifname, sizeof(ifname), NULL, 0);
    return mtu > 0 ? mtu : -1;
}

void comm_note_path(inagg_comm_t *c, char *note, size_t len)
{
    if (len)
        note[0] = '\0';
    if (!c->path_mtu)
        return; /* RoCE: not sized to a path */
    size_t bytes = datagram_bytes(c, c->opts.packet_elems);
    long long frags = -1;
    uint64_t deadline = util_now_ns() + STATS_WAIT_MS * 1000000ull;
    for (uint32_t k = 0; k < c->nshards && frags <= 0; k++)
        if (c->ctl_fd[k] >= 0)
            frags = switch_fragments(c->ctl_fd[k], deadline);
    int mtu = path_mtu_now(c);
    char mine[160];
    if (mtu > 0 && bytes > pathmtu_udp_payload((uint32_t)mtu))
        snprintf(mine, sizeof(mine),
                 "this rank's, up to %zu bytes, now exceed its path MTU %d (%u when they were "
                 "sized)",
                 bytes, mtu, c->path_mtu);
    else if (frags > 0)
        snprintf(mine, sizeof(mine),
                 "this rank's, up to %zu bytes, fit its path MTU %u: another rank's, or a "
                 "narrower link further on, may not",
                 bytes, c->path_mtu);
    else
        return; /* nothing on the path to name */
    if (frags > 0)
        snprintf(note, len,
                 "the switch's L2 fabric has dropped %lld IP fragments sent to it "
                 "(agg_fragment) and aggregates whole datagrams only: %s",
                 frags, mine);
    else
        snprintf(note, len, "datagrams leave as IP fragments, which are lost whole: %s", mine);
}
