/*
 * fuzz_ctl.c - the control lines: the line reader (ctl_take_line, src/lib/client/ctl.c), the key
 * lookups (ctlline_get*) and the message decoders (wire_join_parse, wire_joined_parse,
 * wire_err_parse, src/lib/wire/ctlmsg.c). libFuzzer entry point; also builds under AFL++.
 *
 * Input: byte 0 picks a small line capacity (1..64) for a second pass of the reader; the rest
 * is what arrives on a control connection (at most one reader buffer). Checked: every line
 * taken is the bytes before its newline, cut to the capacity, one trailing '\r' removed, and
 * the reader keeps exactly what follows; a value found by ctlline_get fits and holds no space; an
 * accepted JOIN, JOINED or ERR formats and parses back to the same message, and the JOIN's
 * fields are in their documented ranges.
 *
 * It also formats every accepted JOIN into heap buffers of every capacity from 1 byte to one
 * past its length, and checks that a numeric value is accepted only as plain decimal digits
 * (two bugs this harness found, now fixed: tests/fuzz/crashes/README.md).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inagg.h"
#include "inagg/version.h"
#include "lib/client/ctl.h"
#include "lib/wire/ctlmsg.h"
#include "lib/wire/wire.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: invariant violated: %s\n", __FILE__, __LINE__, #cond);         \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static const char *const keys[] = {"version", "job",   "rank",    "world",     "slots",
                                   "elems",   "float", "timeout", "optimizer", "params",
                                   "lr",      "seed",  "id",      "token",     "threads"};

static void check_lookups(const char *line)
{
    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
        char v[16];
        int rc = ctlline_get(line, keys[k], v, sizeof(v));
        CHECK(rc == 0 || rc == -ENOENT || rc == -ENOSPC);
        if (rc == 0) {
            CHECK(strlen(v) < sizeof(v) && !strchr(v, ' '));
            char pat[32];
            snprintf(pat, sizeof(pat), " %s=%s", keys[k], v);
            CHECK(strstr(line, pat) != NULL);
        }
        uint64_t x64;
        int rc64 = ctl_get_u64(line, keys[k], &x64);
        CHECK(rc64 == 0 || rc64 == -ENOENT || rc64 == -EINVAL);
        uint32_t x32;
        int rc32 = ctl_get_u32(line, keys[k], &x32);
        CHECK(rc32 == 0 || rc32 == -ENOENT || rc32 == -EINVAL || rc32 == -ERANGE);
        if (rc64 == 0) {
            CHECK(rc32 == (x64 > UINT32_MAX ? -ERANGE : 0));
            if (rc32 == 0)
                CHECK(x32 == x64);
            /* "not a number" is refused (PROTOCOL.md 5.2): the value is its decimal digits */
            char raw[32], dec[32];
            CHECK(ctlline_get(line, keys[k], raw, sizeof(raw)) == 0);
            const char *digits = raw;
            while (*digits == '0' && digits[1])
                digits++;
            snprintf(dec, sizeof(dec), "%" PRIu64, x64);
            CHECK(strcmp(digits, dec) == 0);
        }
    }
}

static int join_equal(const wire_join_t *a, const wire_join_t *b)
{
    return a->version == b->version && strcmp(a->job, b->job) == 0 && a->rank == b->rank &&
           a->world == b->world && a->slots == b->slots && a->elems == b->elems &&
           a->float_mode == b->float_mode && a->protocol == b->protocol &&
           a->timeout_ms == b->timeout_ms && wire_optimizer_equal(&a->opt, &b->opt);
}

static void check_join(const char *line)
{
    wire_join_t j, again;
    enum wire_refusal why_kind;
    char why[256];
    if (wire_join_parse(line, &j, &why_kind, why, sizeof(why)) != 0) {
        CHECK(why_kind == WIRE_REFUSED_VERSION || why_kind == WIRE_REFUSED_INVALID ||
              why_kind == WIRE_REFUSED_UNSUPPORTED);
        CHECK(why[0] != '\0');
        return;
    }
    CHECK(j.version == INAGG_PROTOCOL_VERSION);
    size_t nlen = strlen(j.job);
    CHECK(nlen >= 1 && nlen < WIRE_JOB_NAME_MAX && !strpbrk(j.job, " \t\r\n="));
    CHECK(j.world >= 1 && j.world <= INAGG_MAX_WORLD && j.rank < j.world);
    CHECK(j.slots >= 1 && j.elems >= 1 && j.elems <= WIRE_MAX_ELEMS);
    CHECK(j.float_mode == INAGG_FLOAT_FIXED || j.float_mode == INAGG_FLOAT_NATIVE);
    CHECK(j.protocol == INAGG_PROTO_SWITCHML || j.protocol == INAGG_PROTO_P4SGD);
    CHECK(!j.opt.present || (j.opt.params >= 1 && j.opt.params <= (1ull << 32)));

    char out[2 * CTL_LINE_MAX];
    CHECK(wire_join_format(&j, out, sizeof(out)) == 0);
    size_t len = strlen(out);
    CHECK(len < CTL_LINE_MAX && wire_verb_of(out) == WIRE_VERB_JOIN);
    CHECK(wire_join_parse(out, &again, &why_kind, why, sizeof(why)) == 0);
    CHECK(join_equal(&j, &again));

    /* "-ENOSPC if it does not fit in cap": into heap buffers of exactly 1 .. len + 1 bytes. */
    for (size_t cap = 1; cap <= len + 1; cap++) {
        char *b = malloc(cap);
        CHECK(b != NULL);
        int rc = wire_join_format(&j, b, cap);
        CHECK(rc == (cap > len ? 0 : -ENOSPC));
        if (rc == 0)
            CHECK(strcmp(b, out) == 0);
        free(b);
    }
}

static void check_joined(const char *line)
{
    wire_joined_t j, again;
    char why[256], out[CTL_LINE_MAX];
    if (wire_joined_parse(line, &j, why, sizeof(why)) != 0)
        return;
    CHECK(j.threads >= 1 && j.base < j.threads && j.id <= UINT16_MAX && j.port <= UINT16_MAX);
    CHECK(wire_joined_format(&j, out, sizeof(out)) == 0);
    CHECK(wire_joined_parse(out, &again, why, sizeof(why)) == 0);
    CHECK(memcmp(&j, &again, sizeof(j)) == 0);
}

static void check_err(const char *line)
{
    const char *text = NULL, *text2 = NULL;
    enum wire_refusal r = wire_err_parse(line, &text);
    CHECK((unsigned)r < WIRE_REFUSAL_COUNT && text != NULL);
    CHECK(*text == '\0' || (text >= line && text <= line + strlen(line)));
    char out[CTL_LINE_MAX + 64];
    wire_err_format(r, text, out, sizeof(out));
    CHECK(wire_err_parse(out, &text2) == r);
    CHECK(strcmp(text, text2) == 0);
}

static void check_line(const char *line)
{
    CHECK((unsigned)wire_verb_of(line) < WIRE_VERB_COUNT);
    check_lookups(line);
    check_join(line);
    check_joined(line);
    check_err(line);
}

/* Take every line out of r with capacity cap, checking each against the raw bytes. */
static void take_all(ctl_reader_t *r, char *line, size_t cap)
{
    for (;;) {
        ctl_reader_t before = *r;
        const char *nl = memchr(before.buf, '\n', before.len);
        int got = ctl_take_line(r, line, cap);
        CHECK(got == (nl != NULL));
        if (!got) {
            CHECK(r->len == before.len && memcmp(r->buf, before.buf, r->len) == 0);
            return;
        }
        size_t n = (size_t)(nl - before.buf);
        size_t copy = n < cap - 1 ? n : cap - 1;
        if (copy > 0 && before.buf[copy - 1] == '\r')
            copy--;
        CHECK(memcmp(line, before.buf, copy) == 0 && line[copy] == '\0');
        CHECK(r->len == before.len - n - 1);
        CHECK(memcmp(r->buf, before.buf + n + 1, r->len) == 0);
        if (cap == CTL_LINE_MAX)
            check_line(line);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t small = 1 + data[0] % 64;
    data++;
    size--;
    static ctl_reader_t r, r2;
    r.len = size < sizeof(r.buf) ? size : sizeof(r.buf);
    memcpy(r.buf, data, r.len);
    r2 = r;
    char *line = malloc(CTL_LINE_MAX);
    CHECK(line != NULL);
    take_all(&r, line, CTL_LINE_MAX);
    CHECK(memchr(r.buf, '\n', r.len) == NULL);
    free(line);
    /* The same bytes through a small line buffer of exactly `small` bytes. */
    char *tiny = malloc(small);
    CHECK(tiny != NULL);
    take_all(&r2, tiny, small);
    free(tiny);
    return 0;
}
