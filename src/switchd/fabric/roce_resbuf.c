/*
 * roce_resbuf.c - the switch's RoCE result buffer (see roce_resbuf.h).
 */
#include "switchd/fabric/roce_resbuf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int roce_resbuf_init(roce_resbuf_t *b, uint32_t rows, uint32_t depth)
{
    memset(b, 0, sizeof(*b));
    if (rows == 0 || depth == 0)
        return 0;
    if ((uint64_t)rows * depth > ROCE_RESBUF_MAX_FRAMES || depth > UINT16_MAX)
        return -EINVAL;
    b->ent = calloc((size_t)rows * depth, sizeof(*b->ent));
    b->head = calloc(rows, sizeof(*b->head));
    if (!b->ent || !b->head) {
        roce_resbuf_free(b);
        return -ENOMEM;
    }
    b->rows = rows;
    b->depth = depth;
    b->next_seq = 1;
    return 0;
}

void roce_resbuf_free(roce_resbuf_t *b)
{
    free(b->ent);
    free(b->head);
    memset(b, 0, sizeof(*b));
}

uint32_t roce_resbuf_begin(roce_resbuf_t *b, uint32_t nf)
{
    if (!b->rows || nf == 0 || nf > b->depth)
        return 0;
    uint32_t seq = b->next_seq++;
    if (b->next_seq == 0)
        b->next_seq = 1;
    return seq;
}

roce_resbuf_ent_t *roce_resbuf_claim(roce_resbuf_t *b, uint32_t flow, const roce_msg_key_t *key,
                                     uint32_t seq, uint32_t idx, uint32_t nf, uint64_t sent_at,
                                     uint64_t released)
{
    if (!seq || !b->rows)
        return NULL;
    uint32_t row = flow % b->rows;
    roce_resbuf_ent_t *e = &b->ent[(size_t)row * b->depth + b->head[row]];
    if (e->sent_at > released)
        return NULL; /* its frame is still waiting to leave from here */
    b->head[row] = b->head[row] + 1 == b->depth ? 0 : b->head[row] + 1;
    e->flow = flow + 1;
    e->seq = seq;
    e->key = *key;
    e->idx = (uint16_t)idx;
    e->nf = (uint16_t)nf;
    e->len = 0;
    e->sent_at = sent_at;
    return e;
}

uint32_t roce_resbuf_find(const roce_resbuf_t *b, uint32_t flow, const roce_msg_key_t *key,
                          const roce_resbuf_ent_t **out, uint32_t max)
{
    if (!b->rows)
        return 0;
    uint32_t row = flow % b->rows, d = b->depth;
    const roce_resbuf_ent_t *base = &b->ent[(size_t)row * d];
    /* newest first: walk back from the row's head */
    for (uint32_t back = 1; back <= d; back++) {
        uint32_t i = (b->head[row] + d - back) % d;
        const roce_resbuf_ent_t *e = &base[i];
        if (e->flow != flow + 1 || e->idx != 0 || !roce_key_eq(&e->key, key))
            continue;
        uint32_t nf = e->nf;
        if (nf > max || nf > d)
            return 0;
        /* its frames follow it in the row, unless newer ones overwrote them */
        for (uint32_t k = 0; k < nf; k++) {
            const roce_resbuf_ent_t *x = &base[(i + k) % d];
            if (x->flow != flow + 1 || x->seq != e->seq || x->idx != k)
                return 0;
            out[k] = x;
        }
        return nf;
    }
    return 0;
}

void roce_restamp_psn(uint8_t *frame, uint32_t len, uint32_t psn)
{
    if (len < ROCE_ETH_LEN + ROCE_GRH_LEN + ROCE_BTH_LEN + ROCE_ICRC_LEN)
        return;
    uint8_t *g = frame + ROCE_ETH_LEN, *t = g + ROCE_GRH_LEN;
    t[9] = (uint8_t)(psn >> 16);
    t[10] = (uint8_t)(psn >> 8);
    t[11] = (uint8_t)psn;
    uint8_t *ic = frame + len - ROCE_ICRC_LEN;
    uint32_t crc = roce_icrc(g, (uint32_t)(ic - g));
    ic[0] = (uint8_t)crc;
    ic[1] = (uint8_t)(crc >> 8);
    ic[2] = (uint8_t)(crc >> 16);
    ic[3] = (uint8_t)(crc >> 24);
}
