/*
 * test_roce.c - the RoCE transport's receive rules and its switch-side endpoint: messages sent
 * through a channel that drops, duplicates, reorders and corrupts frames arrive bit-identical
 * and never twice when the sender resends what was not answered (the slot protocols' timer);
 * every bad frame is counted by its reason; a linked endpoint reassembles a message from the
 * fabric's queue, answers on the sender's QP with a PSN sequence that starts where the
 * sender's did (across the 24-bit wrap), counts a bad ICRC, and still carries UDP frames.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "harness.h"
#include "inagg/version.h"
#include "lib/base/util.h"
#include "lib/netio/ethframe.h"
#include "lib/netio/pktsock.h"
#include "lib/netio/roce_flow.h"
#include "lib/netio/roce_frame.h"
#include "lib/transport/afpacket.h"
#include "lib/transport/roce.h"
#include "lib/transport/roce_replay.h"
#include "lib/transport/transport.h"
#include "lib/wire/wire.h"
#include "switchd/fabric/port.h"
#include "switchd/fabric/roce_resbuf.h"

#define TEST_MTU ROCE_MTU_DEFAULT /* the path MTU most cases here send in */

static const uint8_t MAC_W[6] = {0x02, 0, 0, 0, 0, 0x11}, MAC_S[6] = {0x02, 0, 0, 0, 0, 0x22};

#define NMSG 60
#define MAXF 8
#define CHAN 4096

typedef struct {
    uint8_t data[ROCE_MAX_FRAME];
    uint32_t len;
} cframe_t;

static uint32_t frames_for(uint32_t len, uint32_t i, uint32_t nf, roce_hdr_t *h)
{
    h->opcode = nf == 1       ? ROCE_WRITE_ONLY
                : i == 0      ? ROCE_WRITE_FIRST
                : i + 1 == nf ? ROCE_WRITE_LAST
                              : ROCE_WRITE_MIDDLE;
    uint32_t off = i * TEST_MTU;
    return len - off < TEST_MTU ? len - off : TEST_MTU;
}

TEST(roce_messages_survive_loss_duplication_reordering_corruption, 30)
{
    static uint8_t msg[NMSG][MAXF * TEST_MTU];
    static uint32_t mlen[NMSG];
    static int delivered[NMSG];
    static cframe_t chan[CHAN];
    static uint8_t rbuf[MAXF * TEST_MTU];
    uint64_t rng = 77;
    for (int m = 0; m < NMSG; m++) {
        uint32_t nf = 1 + (uint32_t)(util_splitmix64(&rng) % MAXF);
        mlen[m] = nf == 1 ? 4 + (uint32_t)(util_splitmix64(&rng) % (TEST_MTU - 3))
                          : (nf - 1) * TEST_MTU + 1 + (uint32_t)(util_splitmix64(&rng) % TEST_MTU);
        for (uint32_t i = 0; i < mlen[m]; i++)
            msg[m][i] = (uint8_t)util_splitmix64(&rng);
        memcpy(msg[m], &m, sizeof(m)); /* the message's id in its first bytes */
    }
    roce_rx_flow_t fl;
    memset(&fl, 0, sizeof(fl));
    fl.buf = rbuf;
    fl.cap = sizeof(rbuf);
    uint32_t psn = 0xffff00; /* crosses the wrap */
    uint64_t verdicts[ROCE_RX_VERDICT_COUNT] = {0}, bad_icrc = 0;
    int left = NMSG;
    for (int round = 0; round < 200 && left > 0; round++) {
        uint32_t n = 0;
        /* the sender: every message not answered yet, as a new message on the QP's PSNs */
        for (int m = 0; m < NMSG; m++) {
            if (delivered[m])
                continue;
            uint32_t nf = mlen[m] <= TEST_MTU ? 1 : (mlen[m] + TEST_MTU - 1) / TEST_MTU;
            for (uint32_t i = 0; i < nf && n + 2 < CHAN; i++) {
                roce_hdr_t h;
                memset(&h, 0, sizeof(h));
                memcpy(h.dst_mac, MAC_S, 6);
                memcpy(h.src_mac, MAC_W, 6);
                uint32_t pay = frames_for(mlen[m], i, nf, &h);
                h.qp = 0x4242;
                h.psn = psn;
                h.dma_len = mlen[m];
                psn = roce_psn_add(psn, 1);
                uint64_t d = util_splitmix64(&rng) % 100;
                if (d < 5)
                    continue; /* lost */
                chan[n].len =
                    roce_write_frame(chan[n].data, &h, msg[m] + i * TEST_MTU, pay, NULL, 0);
                if (d < 7) /* corrupted in flight */
                    chan[n].data[20 + util_splitmix64(&rng) % (chan[n].len - 24)] ^= 0x10;
                n++;
                if (d >= 7 && d < 12) { /* duplicated */
                    chan[n] = chan[n - 1];
                    n++;
                }
            }
        }
        for (uint32_t i = 0; i + 1 < n; i++) /* reordered: neighbours swapped */
            if (util_splitmix64(&rng) % 100 < 5) {
                static cframe_t t;
                t = chan[i];
                chan[i] = chan[i + 1];
                chan[i + 1] = t;
            }
        /* the receiver */
        for (uint32_t i = 0; i < n; i++) {
            roce_frame_t f;
            enum roce_reason r = roce_parse(chan[i].data, chan[i].len, 1, &f);
            if (r != ROCE_OK) {
                bad_icrc += r == ROCE_BAD_ICRC;
                continue;
            }
            enum roce_rx_verdict v = roce_rx_frame(&fl, &f);
            verdicts[v]++;
            if (v != ROCE_RX_DONE)
                continue;
            int id;
            memcpy(&id, rbuf, sizeof(id));
            CHECK_MSG(id >= 0 && id < NMSG, "delivered an unknown message (id %d)", id);
            CHECK_MSG(!delivered[id], "message %d delivered twice", id);
            CHECK_EQ_INT(fl.want, mlen[id]);
            CHECK_MSG(memcmp(rbuf, msg[id], mlen[id]) == 0, "message %d not bit-identical", id);
            delivered[id] = 1;
            left--;
        }
    }
    CHECK_MSG(left == 0, "%d messages never arrived", left);
    CHECK(verdicts[ROCE_RX_DUP] > 0 && verdicts[ROCE_RX_GAP] > 0 && bad_icrc > 0);
    CHECK(fl.abandoned > 0);
    CHECK(strcmp(roce_rx_verdict_name(ROCE_RX_GAP), "psn_gap") == 0);
}

/* An empty flow reassembling into buf (cap bytes), and a frame whose payload is pay. */
static void new_flow(roce_rx_flow_t *fl, uint8_t *buf, uint32_t cap, roce_frame_t *f, uint8_t *pay)
{
    memset(fl, 0, sizeof(*fl));
    fl->buf = buf;
    fl->cap = cap;
    memset(f, 0, sizeof(*f));
    f->payload = pay;
}

TEST(roce_flow_window_and_length_rules, 10)
{
    static uint8_t buf[4 * TEST_MTU];
    static uint8_t pay[TEST_MTU];
    roce_rx_flow_t fl;
    roce_frame_t f;
    new_flow(&fl, buf, sizeof(buf), &f, pay);
    /* a Middle before any First */
    f.h.opcode = ROCE_WRITE_MIDDLE;
    f.h.psn = 5;
    f.payload_len = TEST_MTU;
    CHECK_EQ_INT(roce_rx_frame(&fl, &f), ROCE_RX_NO_FIRST);
    /* a First larger than the capacity */
    f.h.opcode = ROCE_WRITE_FIRST;
    f.h.dma_len = 5 * TEST_MTU;
    CHECK_EQ_INT(roce_rx_frame(&fl, &f), ROCE_RX_TOO_BIG);
    CHECK_EQ_INT(fl.epsn, 6);
    f.h.psn = 6;
    f.h.dma_len = 2 * TEST_MTU - 10;
    CHECK_EQ_INT(roce_rx_frame(&fl, &f), ROCE_RX_MORE);
    /* a Last that ends short of the DMA length */
    f.h.opcode = ROCE_WRITE_LAST;
    f.h.psn = 7;
    f.payload_len = 100;
    CHECK_EQ_INT(roce_rx_frame(&fl, &f), ROCE_RX_LENGTH);
    /* far ahead or behind: outside the window */
    f.h.opcode = ROCE_WRITE_ONLY;
    f.h.psn = roce_psn_add(8, ROCE_PSN_WINDOW + 1);
    CHECK_EQ_INT(roce_rx_frame(&fl, &f), ROCE_RX_WINDOW);
    f.h.psn = 8;
    f.h.dma_len = 100;
    CHECK_EQ_INT(roce_rx_frame(&fl, &f), ROCE_RX_DONE);
    /* the same message at its old PSN: a repeat of a delivered message; a Middle behind
     * epsn that continues nothing: a duplicate */
    CHECK_EQ_INT(roce_rx_frame(&fl, &f), ROCE_RX_REPEAT);
    CHECK_EQ_INT(fl.repeat_psn, 8);
    f.h.opcode = ROCE_WRITE_MIDDLE;
    f.h.psn = 7;
    f.payload_len = TEST_MTU;
    CHECK_EQ_INT(roce_rx_frame(&fl, &f), ROCE_RX_DUP);
    CHECK_EQ_INT(fl.epsn, 9);
    /* ... and just behind epsn (the frame before the expected one, again) */
    f.h.psn = 8;
    CHECK_EQ_INT(roce_rx_frame(&fl, &f), ROCE_RX_DUP);
    CHECK_EQ_INT(fl.epsn, 9);
}

/* The path MTU is the sender's: a message's First sets it, its other frames keep to it, and
 * what the flow learns of it is what the switch answers in. */
TEST(roce_flow_holds_a_message_to_its_first_frames_mtu, 10)
{
    static uint8_t buf[4 * ROCE_MTU_MAX];
    static uint8_t pay[ROCE_MTU_MAX];
    roce_rx_flow_t fl;
    roce_frame_t f;
    new_flow(&fl, buf, sizeof(buf), &f, pay);
    /* a one-frame message bounds the MTU from below: 300 bytes need at least 512 */
    f.h.opcode = ROCE_WRITE_ONLY;
    f.h.psn = 1;
    f.h.dma_len = f.payload_len = 300;
    CHECK_EQ_INT(roce_rx_frame(&fl, &f), ROCE_RX_DONE);
    CHECK_EQ_INT(fl.path_mtu, 512);
    /* 4096-byte frames: First, Middle, Last of 10000 bytes */
    uint32_t sizes[] = {4096, 4096, 10000 - 8192};
    uint8_t ops[] = {ROCE_WRITE_FIRST, ROCE_WRITE_MIDDLE, ROCE_WRITE_LAST};
    f.h.dma_len = 10000;
    for (int i = 0; i < 3; i++) {
        f.h.opcode = ops[i];
        f.h.psn = 2 + (uint32_t)i;
        f.payload_len = sizes[i];
        CHECK_EQ_INT(roce_rx_frame(&fl, &f), i == 2 ? ROCE_RX_DONE : ROCE_RX_MORE);
    }
    CHECK_EQ_INT(fl.path_mtu, 4096);
    /* a Middle of another MTU than its First's: the message cannot be reassembled */
    f.h.opcode = ROCE_WRITE_FIRST;
    f.h.psn = 5;
    f.h.dma_len = 3 * 2048;
    f.payload_len = 2048;
    CHECK_EQ_INT(roce_rx_frame(&fl, &f), ROCE_RX_MORE);
    f.h.opcode = ROCE_WRITE_MIDDLE;
    f.h.psn = 6;
    f.payload_len = 1024;
    CHECK_EQ_INT(roce_rx_frame(&fl, &f), ROCE_RX_LENGTH);
    CHECK_EQ_INT(fl.abandoned, 1);
    /* a Last longer than its First's MTU, though within the DMA length */
    f.h.opcode = ROCE_WRITE_FIRST;
    f.h.psn = 7;
    f.h.dma_len = 1024 + 2048;
    f.payload_len = 1024;
    CHECK_EQ_INT(roce_rx_frame(&fl, &f), ROCE_RX_MORE);
    f.h.opcode = ROCE_WRITE_LAST;
    f.h.psn = 8;
    f.payload_len = 2048;
    CHECK_EQ_INT(roce_rx_frame(&fl, &f), ROCE_RX_LENGTH);
    /* a smaller one-frame message does not lower an MTU seen in a First */
    f.h.opcode = ROCE_WRITE_ONLY;
    f.h.psn = 9;
    f.h.dma_len = f.payload_len = 100;
    CHECK_EQ_INT(roce_rx_frame(&fl, &f), ROCE_RX_DONE);
    CHECK_EQ_INT(fl.path_mtu, 4096);
}

/* A retransmission that reuses the PSNs of a message lost on its way (go-back-N): taken as
 * that message, behind epsn, which stays; once delivered, the next repeat is a repeat. */
TEST(roce_flow_takes_a_lost_message_resent_at_its_psns, 10)
{
    static uint8_t buf[4 * TEST_MTU];
    static uint8_t pay[TEST_MTU];
    roce_rx_flow_t fl;
    roce_frame_t f;
    new_flow(&fl, buf, sizeof(buf), &f, pay);
    /* message A at 100..101 loses its Last; message B at 102..103 arrives whole */
    f.h.opcode = ROCE_WRITE_FIRST;
    f.h.psn = 100;
    f.h.dma_len = 2 * TEST_MTU;
    f.payload_len = TEST_MTU;
    CHECK_EQ_INT(roce_rx_frame(&fl, &f), ROCE_RX_MORE);
    f.h.psn = 102;
    CHECK_EQ_INT(roce_rx_frame(&fl, &f), ROCE_RX_MORE); /* A abandoned */
    CHECK_EQ_INT(fl.abandoned, 1);
    f.h.opcode = ROCE_WRITE_LAST;
    f.h.psn = 103;
    CHECK_EQ_INT(roce_rx_frame(&fl, &f), ROCE_RX_DONE);
    /* A again at 100..101 */
    memset(pay, 0xA5, sizeof(pay));
    f.h.opcode = ROCE_WRITE_FIRST;
    f.h.psn = 100;
    CHECK_EQ_INT(roce_rx_frame(&fl, &f), ROCE_RX_MORE);
    CHECK(fl.resent);
    f.h.opcode = ROCE_WRITE_LAST;
    f.h.psn = 101;
    CHECK_EQ_INT(roce_rx_frame(&fl, &f), ROCE_RX_DONE);
    CHECK_EQ_INT(fl.epsn, 104);
    CHECK_EQ_INT(buf[2 * TEST_MTU - 1], 0xA5);
    /* and a third sending of A, or of B, at the same PSNs is a repeat */
    f.h.opcode = ROCE_WRITE_FIRST;
    f.h.psn = 100;
    CHECK_EQ_INT(roce_rx_frame(&fl, &f), ROCE_RX_REPEAT);
    f.h.psn = 102;
    CHECK_EQ_INT(roce_rx_frame(&fl, &f), ROCE_RX_REPEAT);
    /* the flow goes on at epsn */
    f.h.opcode = ROCE_WRITE_ONLY;
    f.h.psn = 104;
    f.h.dma_len = 8;
    f.payload_len = 8;
    CHECK_EQ_INT(roce_rx_frame(&fl, &f), ROCE_RX_DONE);
}

/* A frame of a message from the worker into queue q's slot, as the fabric queues it. */
static void push(frameq_t *q, const roce_hdr_t *h, const uint8_t *pay, uint32_t n, uint16_t port)
{
    frameq_slot_t *s = frameq_reserve(q);
    if (!s)
        return;
    s->len = roce_write_frame(s->data, h, pay, n, NULL, 0);
    s->port = port;
    s->t_ns = 1;
    frameq_publish(q);
}

/* A fabric link of nqueues frame queues with the switch's MAC and IP, and the aggregation
 * port's RoCE endpoint on queue `queue` (a result buffer of rows x depth frames; 0 x 0: the
 * default): NULL when it does not open (a failed check). */
static transport_t *open_linked_endpoint(fabric_link_t *link, uint32_t nqueues, uint32_t queue,
                                         uint32_t rows, uint32_t depth)
{
    memset(link, 0, sizeof(*link));
    link->nqueues = nqueues;
    for (uint32_t q = 0; q < nqueues; q++) {
        CHECK_EQ_INT(frameq_init(&link->rx[q], 64), 0);
        CHECK_EQ_INT(frameq_init(&link->tx[q], 64), 0);
    }
    link->tx_efd = link->tx[0].efd;
    memcpy(link->mac, MAC_S, 6);
    link->ip = inet_addr("10.9.0.254");
    link->port0 = 7000;
    fabric_port_config_t pc;
    fabric_port_config_init(&pc, link, rows, depth);
    transport_config_t cfg = {
        .kind = "roce", .opener = &pc.opener, .queue = queue, .max_packet = 16384};
    transport_t *t = NULL;
    char err[160] = "";
    CHECK_MSG(transport_open(&cfg, &t, err, sizeof(err)) == 0, "%s", err);
    return t;
}

/* The endpoint of open_linked_endpoint closed and its link's queues freed. */
static void close_linked_endpoint(fabric_link_t *link, transport_t *t)
{
    transport_close(t);
    for (uint32_t q = 0; q < link->nqueues; q++) {
        frameq_free(&link->rx[q]);
        frameq_free(&link->tx[q]);
    }
}

/* The header of a frame from the worker (MAC_W) to the switch (MAC_S) on QP qp. */
static roce_hdr_t worker_hdr(uint32_t qp)
{
    roce_hdr_t h;
    memset(&h, 0, sizeof(h));
    memcpy(h.dst_mac, MAC_S, 6);
    memcpy(h.src_mac, MAC_W, 6);
    h.qp = qp;
    return h;
}

TEST(roce_linked_endpoint_answers_on_the_senders_qp, 10)
{
    static fabric_link_t link;
    transport_t *t = open_linked_endpoint(&link, 2, 1, 0, 0);
    if (!t)
        return;
    static uint8_t msg[2500];
    for (uint32_t i = 0; i < sizeof(msg); i++)
        msg[i] = (uint8_t)(i * 13 + 1);
    roce_hdr_t h = worker_hdr(0x1231);
    h.rkey = 1;
    h.dma_len = sizeof(msg);
    uint32_t psn0 = 0xfffffe;
    const uint8_t ops[3] = {ROCE_WRITE_FIRST, ROCE_WRITE_MIDDLE, ROCE_WRITE_LAST};
    for (uint32_t i = 0; i < 3; i++) {
        h.opcode = ops[i];
        h.psn = roce_psn_add(psn0, i);
        push(&link.rx[1], &h, msg + i * TEST_MTU, i < 2 ? TEST_MTU : sizeof(msg) - 2048, 3);
    }
    /* a corrupted frame and a UDP datagram behind it */
    h.opcode = ROCE_WRITE_ONLY;
    h.psn = roce_psn_add(psn0, 3);
    h.dma_len = 8;
    push(&link.rx[1], &h, msg, 8, 3);
    frameq_at(&link.rx[1], 3)->data[70] ^= 1;
    frameq_slot_t *s = frameq_reserve(&link.rx[1]);
    CHECK(s != NULL);
    if (!s)
        return;
    ethf_write_udp(s->data, MAC_W, MAC_S, inet_addr("10.9.0.1"), link.ip, 41000, 7001, 4);
    memcpy(s->data + ETHF_UDP_HDR_LEN, "udp!", 4);
    s->len = ETHF_UDP_HDR_LEN + 4;
    s->port = 3;
    frameq_publish(&link.rx[1]);

    transport_rx_t rx[8];
    CHECK_EQ_INT(transport_recv(t, rx, 8, 100), 2);
    CHECK_EQ_INT(rx[0].len, sizeof(msg));
    CHECK(memcmp(rx[0].data, msg, sizeof(msg)) == 0);
    CHECK_EQ_INT(rx[0].from.kind, ROCE_ADDR_KIND);
    CHECK(rx[1].len == 4 && memcmp(rx[1].data, "udp!", 4) == 0);
    CHECK_EQ_INT(rx[1].from.kind, AFP_ADDR_KIND);
    CHECK_EQ_INT(atomic_load(&link.roce.c[RS_BAD_ICRC]), 1);
    CHECK_EQ_INT(atomic_load(&link.roce.c[RS_MESSAGES_IN]), 1);

    /* the answer: three frames to the worker's MAC and QP, out of port 3, PSNs from psn0 */
    transport_tx_t p = {.head = msg,
                        .head_len = 36,
                        .body = msg + 36,
                        .body_len = sizeof(msg) - 36,
                        .to = rx[0].from};
    CHECK_EQ_INT(transport_send(t, &p, 1, 0), 1);
    CHECK_EQ_INT(frameq_ready(&link.tx[1]), 3);
    static uint8_t back[sizeof(msg)];
    uint32_t got = 0;
    for (uint32_t i = 0; i < 3; i++) {
        frameq_slot_t *o = frameq_at(&link.tx[1], i);
        roce_frame_t f;
        CHECK_EQ_INT(roce_parse(o->data, o->len, 1, &f), ROCE_OK);
        CHECK_EQ_INT(o->port, 3);
        CHECK_EQ_INT(f.h.opcode, ops[i]);
        CHECK_EQ_INT(f.h.qp, 0x1231);
        CHECK_EQ_INT(f.h.psn, roce_psn_add(psn0, i));
        CHECK_EQ_INT(f.h.ack_req, i == 2);
        CHECK(memcmp(f.h.dst_mac, MAC_W, 6) == 0 && memcmp(f.h.src_mac, MAC_S, 6) == 0);
        memcpy(back + got, f.payload, f.payload_len);
        got += f.payload_len;
    }
    CHECK_EQ_INT(got, sizeof(msg));
    CHECK(memcmp(back, msg, sizeof(msg)) == 0);
    char text[128];
    transport_addr_format(&rx[0].from, text, sizeof(text));
    CHECK_MSG(strstr(text, "qp 0x001231") != NULL, "%s", text);
    /* an answer to a flow the endpoint never heard from is counted, not sent */
    transport_addr_t stranger = rx[0].from;
    ((roce_addr_t *)(void *)stranger.u.bytes)->qp = 0x999;
    p.to = stranger;
    CHECK_EQ_INT(transport_send(t, &p, 1, 0), 0);
    CHECK_EQ_INT(atomic_load(&link.roce.c[RS_TX_DROPPED]), 1);
    close_linked_endpoint(&link, t);
}

/* Each flow is answered in the path MTU its contributions came in: 4096-byte frames to one
 * worker, 512-byte frames to another, on the same endpoint. */
TEST(roce_linked_endpoint_answers_in_each_senders_path_mtu, 10)
{
    static fabric_link_t link;
    transport_t *t = open_linked_endpoint(&link, 1, 0, 0, 0);
    if (!t)
        return;
    static uint8_t msg[10000];
    for (uint32_t i = 0; i < sizeof(msg); i++)
        msg[i] = (uint8_t)(i * 29 + 3);
    static const struct {
        uint32_t qp, mtu, len;
    } flows[2] = {{0x4440, 4096, 10000}, {0x5550, 512, 2500}};
    roce_hdr_t h = worker_hdr(0);
    for (int k = 0; k < 2; k++) {
        uint32_t mtu = flows[k].mtu, len = flows[k].len, nf = roce_frames_for(len, mtu);
        h.qp = flows[k].qp;
        h.dma_len = len;
        for (uint32_t i = 0; i < nf; i++) {
            h.opcode = i == 0        ? ROCE_WRITE_FIRST
                       : i + 1 == nf ? ROCE_WRITE_LAST
                                     : ROCE_WRITE_MIDDLE;
            h.psn = 100 + i;
            push(&link.rx[0], &h, msg + i * mtu, i + 1 < nf ? mtu : len - i * mtu, 2);
        }
    }
    transport_rx_t rx[4];
    CHECK_EQ_INT(transport_recv(t, rx, 4, 100), 2);
    for (int k = 0; k < 2; k++) {
        CHECK_EQ_INT(rx[k].len, flows[k].len);
        CHECK(memcmp(rx[k].data, msg, flows[k].len) == 0);
        transport_tx_t p = {.head = msg,
                            .head_len = 36,
                            .body = msg + 36,
                            .body_len = flows[k].len - 36,
                            .to = rx[k].from};
        frameq_t *q = &link.tx[0];
        uint32_t before = frameq_ready(q), nf = roce_frames_for(flows[k].len, flows[k].mtu);
        CHECK_EQ_INT(transport_send(t, &p, 1, 0), 1);
        CHECK_EQ_INT(frameq_ready(q) - before, nf);
        for (uint32_t i = 0; i < nf && i + before < frameq_ready(q); i++) {
            roce_frame_t f;
            frameq_slot_t *o = frameq_at(q, before + i);
            CHECK_EQ_INT(roce_parse(o->data, o->len, 1, &f), ROCE_OK);
            CHECK_EQ_INT(f.h.qp, flows[k].qp);
            if (i + 1 < nf)
                CHECK_EQ_INT(f.payload_len, flows[k].mtu);
        }
    }
    close_linked_endpoint(&link, t);
}

/* Completed messages are handed out in buffers the flows trade for spare ones, not copied:
 * two messages of one flow completed in one receive, and a third in the next while the
 * first two are still held, all arrive whole. */
TEST(roce_linked_endpoint_messages_of_one_flow_do_not_share_a_buffer, 10)
{
    static fabric_link_t link;
    transport_t *t = open_linked_endpoint(&link, 1, 0, 0, 0);
    if (!t)
        return;
    enum { LEN = 2500, MSGS = 3 };
    static uint8_t msg[MSGS][LEN];
    for (uint32_t m = 0; m < MSGS; m++)
        for (uint32_t i = 0; i < LEN; i++)
            msg[m][i] = (uint8_t)(i * 7 + m * 101 + 1);
    roce_hdr_t h = worker_hdr(0x6660);
    h.dma_len = LEN;
    uint32_t psn = 40, nf = roce_frames_for(LEN, TEST_MTU);
    transport_rx_t rx[4], first[2];
    memset(first, 0, sizeof(first));
    for (uint32_t m = 0; m < MSGS; m++) {
        for (uint32_t i = 0; i < nf; i++, psn++) {
            h.opcode = i == 0        ? ROCE_WRITE_FIRST
                       : i + 1 == nf ? ROCE_WRITE_LAST
                                     : ROCE_WRITE_MIDDLE;
            h.psn = psn;
            push(&link.rx[0], &h, msg[m] + i * TEST_MTU, i + 1 < nf ? TEST_MTU : LEN - i * TEST_MTU,
                 2);
        }
        if (m == 1) {
            CHECK_EQ_INT(transport_recv(t, rx, 4, 100), 2);
            memcpy(first, rx, sizeof(first));
            CHECK(first[0].data != first[1].data);
        }
    }
    /* the two first messages are still the caller's until it receives again */
    for (uint32_t m = 0; m < 2; m++)
        CHECK_MSG(first[m].len == LEN && memcmp(first[m].data, msg[m], LEN) == 0,
                  "message %u was overwritten", m);
    CHECK_EQ_INT(transport_recv(t, rx, 4, 100), 1);
    CHECK(rx[0].len == LEN && memcmp(rx[0].data, msg[2], LEN) == 0);
    close_linked_endpoint(&link, t);
}

/* Flows are never told to go (a job's ranks just stop sending), so a long-lived switch sees
 * more flows than its table holds: 600 flows (one message each, from new QPs) are all
 * delivered, the later ones in the entries of those heard from least recently; a flow whose
 * entry was recycled is taken again as a new flow. */
TEST(roce_linked_endpoint_recycles_its_oldest_flows, 10)
{
    static fabric_link_t link;
    transport_t *t = open_linked_endpoint(&link, 1, 0, 0, 0);
    if (!t)
        return;
    roce_hdr_t h = worker_hdr(0);
    h.opcode = ROCE_WRITE_ONLY;
    h.dma_len = 8;
    enum { FLOWS = 600, BATCH = 32 };
    uint32_t delivered = 0;
    transport_rx_t rx[BATCH];
    for (uint32_t f = 0; f <= FLOWS; f += BATCH) {
        uint32_t n = 0;
        for (uint32_t k = f; k < f + BATCH && k <= FLOWS; k++, n++) {
            h.qp = k < FLOWS ? 0x100 + k : 0x100; /* the last: the first flow again */
            h.psn = k < FLOWS ? 1000 + k : 5000;
            push(&link.rx[0], &h, (const uint8_t *)"12345678", 8, 2);
        }
        int got = transport_recv(t, rx, BATCH, 100);
        CHECK_EQ_INT(got, (int)n);
        delivered += got > 0 ? (uint32_t)got : 0;
    }
    CHECK_EQ_INT(delivered, FLOWS + 1);
    CHECK_EQ_INT(atomic_load(&link.roce.c[RS_FLOW_TABLE_FULL]), 0);
    CHECK_EQ_INT(atomic_load(&link.roce.c[RS_FLOWS_RECYCLED]), FLOWS + 1 - 256);
    close_linked_endpoint(&link, t);
}

/* An inagg packet of type `type` for (job 3, slot, round), count int32 elements of value v. */
static uint32_t inagg_packet(uint8_t *buf, uint8_t type, uint32_t slot, uint32_t round,
                             uint16_t count, uint8_t v)
{
    wire_header_t w;
    memset(&w, 0, sizeof(w));
    w.version = INAGG_PROTOCOL_VERSION;
    w.type = type;
    w.job = 3;
    w.slot = slot;
    w.round = round;
    w.count = count;
    w.flags = wire_ver_of_round(round) ? WIRE_FLAG_VER : 0;
    wire_encode_header(&w, buf);
    memset(buf + WIRE_HEADER_SIZE, v, (size_t)count * 4);
    return WIRE_HEADER_SIZE + (uint32_t)count * 4;
}

/* Keep frame idx of message seq, as the switch does when nothing sends it from the buffer. */
static void keep_frame(roce_resbuf_t *b, uint32_t flow, const roce_msg_key_t *key, uint32_t seq,
                       uint32_t idx, uint32_t nf, const uint8_t *frame, uint32_t len)
{
    roce_resbuf_ent_t *e = roce_resbuf_claim(b, flow, key, seq, idx, nf, 0, 0);
    CHECK(e != NULL);
    if (!e)
        return;
    memcpy(e->frame, frame, len);
    e->len = (uint16_t)len;
}

TEST(roce_result_buffer_keeps_rows_cyclically_and_evicts, 10)
{
    roce_resbuf_t b;
    CHECK_EQ_INT(roce_resbuf_init(&b, 2, 10), 0);
    static uint8_t pkt[64];
    roce_msg_key_t k[5];
    for (uint32_t m = 0; m < 5; m++) {
        uint32_t n = inagg_packet(pkt, WIRE_RESULT, 7, m, 2, (uint8_t)m);
        CHECK_EQ_INT(roce_msg_key(pkt, n, &k[m]), 0);
    }
    CHECK_EQ_INT(roce_msg_key(pkt, 20, &k[0]), -EPROTO); /* not a whole header */
    uint8_t fr[3][100];
    /* flow 0 (row 0): message 0 of 3 frames; flow 1 (row 1): message 1 of 3 frames */
    for (uint32_t f = 0; f < 2; f++) {
        uint32_t seq = roce_resbuf_begin(&b, 3);
        CHECK(seq != 0);
        for (uint32_t i = 0; i < 3; i++) {
            memset(fr[i], (int)(10 * f + i), sizeof(fr[i]));
            keep_frame(&b, f, &k[f], seq, i, 3, fr[i], sizeof(fr[i]));
        }
    }
    const roce_resbuf_ent_t *out[8];
    CHECK_EQ_INT(roce_resbuf_find(&b, 0, &k[0], out, 8), 3);
    CHECK(out[0]->frame[0] == 0 && out[2]->frame[99] == 2 && out[1]->len == 100);
    CHECK_EQ_INT(roce_resbuf_find(&b, 1, &k[1], out, 8), 3);
    CHECK_EQ_INT(roce_resbuf_find(&b, 1, &k[0], out, 8), 0); /* another flow's */
    CHECK_EQ_INT(roce_resbuf_find(&b, 0, &k[0], out, 2), 0); /* no room to answer */
    /* flow 0 writes three more messages: 12 frames in a row of 10 overwrite message 0's
     * first two frames; message 2 (frames 3..5) is still whole; flow 1 is untouched */
    for (uint32_t m = 2; m < 5; m++) {
        uint32_t seq = roce_resbuf_begin(&b, 3);
        for (uint32_t i = 0; i < 3; i++)
            keep_frame(&b, 0, &k[m], seq, i, 3, fr[i], sizeof(fr[i]));
    }
    CHECK_EQ_INT(roce_resbuf_find(&b, 0, &k[0], out, 8), 0);
    CHECK_EQ_INT(roce_resbuf_find(&b, 0, &k[2], out, 8), 3);
    CHECK_EQ_INT(roce_resbuf_find(&b, 0, &k[4], out, 8), 3);
    CHECK_EQ_INT(roce_resbuf_find(&b, 1, &k[1], out, 8), 3);
    CHECK_EQ_INT(roce_resbuf_begin(&b, 11), 0); /* longer than a row: not kept */
    roce_resbuf_free(&b);
    CHECK_EQ_INT(roce_resbuf_init(&b, 0, 1), 0); /* off */
    CHECK_EQ_INT(roce_resbuf_begin(&b, 1), 0);
    CHECK_EQ_INT(roce_resbuf_init(&b, 1024, 1024), -EINVAL);
}

/* Frames built in the buffer leave from it: an entry whose frame a queue has not sent yet
 * is not overwritten; the message that would need it is not kept (and is found evicted). */
TEST(roce_result_buffer_never_overwrites_a_frame_still_queued, 10)
{
    roce_resbuf_t b;
    CHECK_EQ_INT(roce_resbuf_init(&b, 1, 4), 0);
    static uint8_t pkt[64];
    roce_msg_key_t k[3];
    for (uint32_t m = 0; m < 3; m++) {
        uint32_t n = inagg_packet(pkt, WIRE_RESULT, 7, m, 2, (uint8_t)m);
        CHECK_EQ_INT(roce_msg_key(pkt, n, &k[m]), 0);
    }
    /* messages 0 and 1, 2 frames each, sent from queue positions 0..3 (sent_at 1..4) */
    uint64_t pos = 0;
    for (uint32_t m = 0; m < 2; m++) {
        uint32_t seq = roce_resbuf_begin(&b, 2);
        for (uint32_t i = 0; i < 2; i++) {
            roce_resbuf_ent_t *e = roce_resbuf_claim(&b, 0, &k[m], seq, i, 2, ++pos, 0);
            CHECK(e != NULL);
            if (e) {
                memset(e->frame, (int)(m * 2 + i + 1), 64);
                e->len = 64;
            }
        }
    }
    /* message 2 while the queue has released only message 0's first frame: the row's next
     * entry (that frame's) is free, the one after is not */
    uint32_t seq = roce_resbuf_begin(&b, 2);
    roce_resbuf_ent_t *e0 = roce_resbuf_claim(&b, 0, &k[2], seq, 0, 2, ++pos, 1);
    CHECK(e0 != NULL);
    CHECK(roce_resbuf_claim(&b, 0, &k[2], seq, 1, 2, ++pos, 1) == NULL);
    const roce_resbuf_ent_t *out[4];
    CHECK_EQ_INT(roce_resbuf_find(&b, 0, &k[2], out, 4), 0); /* not kept whole */
    CHECK_EQ_INT(roce_resbuf_find(&b, 0, &k[1], out, 4), 2); /* message 1 untouched */
    CHECK(out[0]->frame[0] == 3 && out[1]->frame[63] == 4);
    /* once the queue has released them, the entries are reused */
    seq = roce_resbuf_begin(&b, 2);
    CHECK(roce_resbuf_claim(&b, 0, &k[2], seq, 0, 2, ++pos, 5) != NULL);
    CHECK(roce_resbuf_claim(&b, 0, &k[2], seq, 1, 2, ++pos, 5) != NULL);
    CHECK_EQ_INT(roce_resbuf_find(&b, 0, &k[2], out, 4), 2);
    roce_resbuf_free(&b);
}

TEST(roce_replay_reuses_psns_once, 10)
{
    static roce_replay_t r;
    memset(&r, 0, sizeof(r));
    roce_msg_key_t a = {.slot_round = 5ull << 32 | 2, .job = 1, .type = WIRE_CONTRIB};
    roce_msg_key_t b2 = a;
    b2.slot_round++;
    int rep = -1;
    CHECK_EQ_INT(roce_replay_psn(&r, &a, 100, 40, &rep), 40);
    CHECK_EQ_INT(rep, 0);
    CHECK_EQ_INT(roce_replay_psn(&r, &b2, 100, 41, &rep), 41);
    CHECK_EQ_INT(roce_replay_psn(&r, &a, 100, 42, &rep), 40); /* first retransmission */
    CHECK_EQ_INT(rep, 1);
    CHECK_EQ_INT(roce_replay_psn(&r, &a, 100, 42, &rep), 42); /* second: new PSNs */
    CHECK_EQ_INT(rep, 0);
    CHECK_EQ_INT(roce_replay_psn(&r, &b2, 200, 43, &rep), 43); /* another length: new */
    CHECK_EQ_INT(rep, 0);
}

/* The switch side of 13.4: a contribution delivered, its result sent, the contribution again
 * at its old PSNs -> the kept result again on the flow's next PSNs (ICRC valid), the slot
 * protocol not involved; a contribution lost on its way and resent at its PSNs is taken; a
 * repeat whose round is open, or whose result was evicted, is counted. */
TEST(roce_linked_endpoint_answers_repeats_from_its_result_buffer, 10)
{
    static fabric_link_t link;
    /* one flow x 4 frames: room for one 3-frame result */
    transport_t *t = open_linked_endpoint(&link, 1, 0, 1, 4);
    if (!t)
        return;
    static uint8_t c[3][2600], r[3][2600];
    uint32_t clen = 0, rlen = 0;
    for (uint32_t m = 0; m < 3; m++) {
        clen = inagg_packet(c[m], WIRE_CONTRIB, m, 1, 600, (uint8_t)(m + 1));
        rlen = inagg_packet(r[m], WIRE_RESULT, m, 1, 600, (uint8_t)(m + 0x41));
    }
    roce_hdr_t h = worker_hdr(0x40);
    h.dma_len = clen;
    const uint8_t ops[3] = {ROCE_WRITE_FIRST, ROCE_WRITE_MIDDLE, ROCE_WRITE_LAST};
    /* contribution m at PSNs 10 + 3m .. 12 + 3m; `skip` leaves out its Last (lost) */
#define SEND_CONTRIB(m, skip)                                                                      \
    for (uint32_t i = 0; i < ((skip) ? 2u : 3u); i++) {                                            \
        h.opcode = ops[i];                                                                         \
        h.psn = 10 + 3 * (m) + i;                                                                  \
        push(&link.rx[0], &h, c[m] + i * TEST_MTU, i < 2 ? TEST_MTU : clen - 2 * TEST_MTU, 2);     \
    }
    transport_rx_t rx[8];
    SEND_CONTRIB(0, 0);
    SEND_CONTRIB(1, 1); /* its Last is lost */
    SEND_CONTRIB(2, 0);
    CHECK_EQ_INT(transport_recv(t, rx, 8, 100), 2); /* 0 and 2 */
    transport_addr_t w = rx[0].from;
    /* the round of contribution 0 is open: its repeat is counted, not answered */
    SEND_CONTRIB(0, 0);
    CHECK_EQ_INT(transport_recv(t, rx, 8, 10), 0);
    CHECK_EQ_INT(atomic_load(&link.roce.c[RS_REPEATS]), 1);
    CHECK_EQ_INT(atomic_load(&link.roce.c[RS_REPEAT_OPEN]), 1);
    /* results 0 and then 2 go back (2 overwrites 0 in the 4-frame row) */
    transport_tx_t p = {.head = r[0],
                        .head_len = WIRE_HEADER_SIZE,
                        .body = r[0] + WIRE_HEADER_SIZE,
                        .body_len = rlen - WIRE_HEADER_SIZE,
                        .to = w};
    CHECK_EQ_INT(transport_send(t, &p, 1, 0), 1);
    frameq_release(&link.tx[0], frameq_ready(&link.tx[0]));
    /* contribution 0 again: answered from the buffer, on the flow's next PSNs */
    SEND_CONTRIB(0, 0);
    CHECK_EQ_INT(transport_recv(t, rx, 8, 10), 0);
    CHECK_EQ_INT(atomic_load(&link.roce.c[RS_RESBUF_ANSWERED]), 1);
    CHECK_EQ_INT(frameq_ready(&link.tx[0]), 3);
    static uint8_t back[2600];
    uint32_t got = 0;
    for (uint32_t i = 0; i < 3; i++) {
        frameq_slot_t *o = frameq_at(&link.tx[0], i);
        roce_frame_t f;
        CHECK_EQ_INT(roce_parse(o->data, o->len, 1, &f), ROCE_OK);
        CHECK_EQ_INT(f.h.psn, 10 + 3 + i); /* the first answer took 10..12 */
        CHECK_EQ_INT(f.h.qp, 0x40);
        CHECK_EQ_INT(o->port, 2);
        memcpy(back + got, f.payload, f.payload_len);
        got += f.payload_len;
    }
    CHECK(got == rlen && memcmp(back, r[0], rlen) == 0);
    frameq_release(&link.tx[0], 3);
    p.head = r[2];
    p.body = r[2] + WIRE_HEADER_SIZE;
    CHECK_EQ_INT(transport_send(t, &p, 1, 0), 1);
    frameq_release(&link.tx[0], 3);
    SEND_CONTRIB(0, 0); /* result 0 was overwritten by result 2 */
    CHECK_EQ_INT(transport_recv(t, rx, 8, 10), 0);
    CHECK_EQ_INT(atomic_load(&link.roce.c[RS_RESBUF_EVICTED]), 1);
    CHECK_EQ_INT(frameq_ready(&link.tx[0]), 0);
    /* contribution 1, lost on its way, resent at its PSNs: taken */
    SEND_CONTRIB(1, 0);
    CHECK_EQ_INT(transport_recv(t, rx, 8, 10), 1);
    CHECK(rx[0].len == clen && memcmp(rx[0].data, c[1], clen) == 0);
    CHECK_EQ_INT(atomic_load(&link.roce.c[RS_RESENT_TAKEN]), 1);
#undef SEND_CONTRIB
    close_linked_endpoint(&link, t);
}

/* The worker's receive ring is cut into slots that fit its largest frame (a 4096-byte path
 * MTU's) with the ring's headers, many to a block: a slot of a GSO frame's size left an 8 MiB
 * ring 120 slots, which a window of results overran. */
TEST(roce_worker_ring_slots_fit_the_largest_frame, 10)
{
    pktsock_t s;
    char err[160] = "";
    if (pktsock_open_frames(&s, "lo", 8u << 20, ROCE_MAX_FRAME, err, sizeof(err)) != 0)
        SKIP(err);
    CHECK_EQ_INT(s.frame_size, 8192);
    CHECK_EQ_INT(s.nframes, 1024);
    pktsock_close(&s);
    CHECK_EQ_INT(pktsock_open_frames(&s, "lo", 8u << 20, 1100, err, sizeof(err)), 0);
    CHECK_EQ_INT(s.frame_size, 2048);
    CHECK_EQ_INT(s.nframes, 4096);
    pktsock_close(&s);
}

TEST(roce_worker_endpoint_needs_a_neighbour, 10)
{
    transport_addr_t sw;
    CHECK_EQ_INT(transport_parse_addr("udp", "10.255.255.254:7000", &sw), 0);
    transport_config_t cfg = {.kind = "roce", .roce = {.peer = &sw}};
    transport_t *t = NULL;
    char err[256] = "";
    CHECK_EQ_INT(transport_open(&cfg, &t, err, sizeof(err)), -EHOSTUNREACH);
    CHECK_MSG(strstr(err, "neighbour table") != NULL, "%s", err);
    transport_config_t none = {.kind = "roce"};
    CHECK_EQ_INT(transport_open(&none, &t, err, sizeof(err)), -EINVAL);
}
