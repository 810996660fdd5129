/*
 * fuzz_codec.c - the chunk decoder (src/lib/codec/codec.c) on hostile chunks. libFuzzer entry
 * point; also builds under AFL++ (afl-clang-fast -fsanitize=fuzzer).
 *
 * Input: byte 0 picks the job's mode and parameter, bytes 1-2 the values expected (1..4096,
 * little-endian); the rest is the chunk, decoded from a heap buffer of exactly its length
 * into exactly that many values (ASan sees any access past either; libzfp's reads of the
 * codec's scratch end at a guard page). Checked: the result is 0, 1 (clamped) or -EBADMSG
 * with a reason; an accepted chunk decodes to finite values, and in a lossless mode they
 * re-encode and decode to the same bits.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/codec/codec.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: invariant violated: %s\n", __FILE__, __LINE__, #cond);         \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#define MAX_N 4096u

static const codec_spec_t k_specs[] = {
    {CODEC_ZFP_RATE, 1},        {CODEC_ZFP_RATE, 8},       {CODEC_ZFP_RATE, 32},
    {CODEC_ZFP_PRECISION, 4},   {CODEC_ZFP_PRECISION, 32}, {CODEC_ZFP_ACCURACY, 1e-3},
    {CODEC_ZFP_ACCURACY, 1e-9}, {CODEC_ZFP_REVERSIBLE, 0}, {CODEC_FP16, 0},
};
#define N_SPECS (sizeof k_specs / sizeof *k_specs)

static codec_ctx_t *g_ctx[N_SPECS];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    size_t m = data[0] % N_SPECS;
    size_t n = 1u + (((size_t)data[1] | (size_t)data[2] << 8) % MAX_N);
    if (!g_ctx[m])
        CHECK(codec_ctx_open(&k_specs[m], MAX_N, &g_ctx[m], NULL, 0) == 0);
    codec_ctx_t *c = g_ctx[m];
    size_t len = size - 3;
    uint8_t *in = malloc(len ? len : 1);
    float *out = malloc(n * sizeof(float));
    CHECK(in && out);
    memcpy(in, data + 3, len);
    char err[256] = "";
    int rc = codec_decode(c, in, len, out, n, err, sizeof err);
    CHECK(rc == 0 || rc == 1 || (rc == -EBADMSG && err[0] != '\0'));
    if (rc >= 0) {
        for (size_t i = 0; i < n; i++)
            CHECK(isfinite(out[i]));
        if (!codec_is_lossy(&k_specs[m])) {
            size_t cap = codec_max_bytes(&k_specs[m], n);
            uint8_t *again = malloc(cap);
            float *back = malloc(n * sizeof(float));
            CHECK(again && back);
            long l2 = codec_encode(c, out, n, again, cap);
            CHECK(l2 > 0);
            CHECK(codec_decode(c, again, (size_t)l2, back, n, err, sizeof err) >= 0);
            CHECK(memcmp(out, back, n * sizeof(float)) == 0);
            free(again);
            free(back);
        }
    }
    free(in);
    free(out);
    return 0;
}
