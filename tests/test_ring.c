/*
 * test_ring.c - base/ring.h on its own: a reserved record is invisible until committed,
 * records come back in order with their lengths, a record never wraps (the gap before the
 * buffer's end is stepped over), and one that does not fit is refused, now or ever. The
 * fabric's users of the ring (frame queue, stage queue, delay lines) are tested in
 * test_fabric.c.
 */
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "lib/base/ring.h"

TEST(ring_records_commit_order_gap_full, 5)
{
    ring_t r;
    CHECK_EQ_INT(ring_init(&r, 250), 0); /* rounded to 256 */
    CHECK_EQ_INT(r.pos.cap, 256);
    uint32_t len = 99;
    CHECK(ring_peek(&r, &len) == NULL);
    /* 100 bytes take 16 + 100 -> 128 */
    uint8_t *a = ring_reserve(&r, 100);
    CHECK(a != NULL && ((uintptr_t)a % RING_ALIGN) == 0);
    if (!a)
        return;
    memset(a, 0xa1, 100);
    CHECK(ring_peek(&r, NULL) == NULL); /* not committed yet */
    ring_commit(&r);
    uint8_t *b = ring_reserve(&r, 80); /* 96: at 128, up to 224 */
    CHECK(b != NULL);
    if (!b)
        return;
    memset(b, 0xb2, 80);
    ring_commit(&r);
    CHECK(ring_reserve(&r, 20) == NULL); /* 48 does not fit in the 32 left */
    CHECK(ring_reserve(&r, 300) == NULL); /* never fits */
    CHECK_EQ_INT(ring_used(&r), 224);
    uint8_t *p = ring_peek(&r, &len);
    CHECK(p == a && len == 100 && p[99] == 0xa1);
    ring_pop(&r);
    /* 160 bytes are free, but not in one piece: 32 before the end, 128 at the start */
    CHECK(ring_reserve(&r, 140) == NULL);
    /* 48 bytes: the 32 before the end are a gap, the record starts at 0 */
    uint8_t *c = ring_reserve(&r, 20);
    CHECK(c == r.buf + RING_ALIGN);
    if (!c)
        return;
    memset(c, 0xc3, 20);
    ring_commit(&r);
    p = ring_peek(&r, &len);
    CHECK(p == b && len == 80 && p[0] == 0xb2);
    ring_pop(&r);
    p = ring_peek(&r, &len); /* steps over the gap */
    CHECK(p == c && len == 20 && p[19] == 0xc3);
    ring_pop(&r);
    CHECK(ring_peek(&r, NULL) == NULL);
    CHECK_EQ_INT(ring_used(&r), 0);
    ring_free(&r);
}

TEST(ring_positions_count_units, 5)
{
    ring_pos_t p;
    memset(&p, 0, sizeof(p));
    p.cap = 4;
    CHECK_EQ_INT(ring_pos_room(&p), 4);
    ring_pos_publish(&p, 3);
    CHECK_EQ_INT(ring_pos_ready(&p), 3);
    CHECK_EQ_INT(ring_pos_room(&p), 1);
    ring_pos_release(&p, 2);
    CHECK_EQ_INT(ring_pos_ready(&p), 1);
    CHECK_EQ_INT(ring_pos_tail(&p), 2);
    CHECK_EQ_INT(ring_pos_head(&p), 3);
    CHECK_EQ_INT(ring_pos_room(&p), 3);
}
