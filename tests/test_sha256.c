/*
 * test_sha256.c - SHA-256 and HMAC-SHA256 against the published vectors (FIPS 180-4
 * examples, RFC 4231 test cases 1, 2 and 6), the constant-time compare, and hex.
 */
#include <errno.h>
#include <string.h>

#include "harness.h"
#include "lib/base/sha256.h"

static void check_hex(const uint8_t d[SHA256_BYTES], const char *want)
{
    char got[2 * SHA256_BYTES + 1];
    hex_encode(d, SHA256_BYTES, got);
    CHECK_MSG(strcmp(got, want) == 0, "got %s want %s", got, want);
}

TEST(sha256_known_vectors, 5)
{
    uint8_t d[SHA256_BYTES];
    sha256("abc", 3, d);
    check_hex(d, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    sha256("", 0, d);
    check_hex(d, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha256(two, strlen(two), d);
    check_hex(d, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* RFC 4231 case 1: key 20 x 0x0b, "Hi There". */
    uint8_t key[131];
    memset(key, 0x0b, 20);
    hmac_sha256(key, 20, "Hi There", 8, d);
    check_hex(d, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    /* Case 2: key "Jefe". */
    const char *m2 = "what do ya want for nothing?";
    hmac_sha256("Jefe", 4, m2, strlen(m2), d);
    check_hex(d, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    /* Case 6: a 131-byte key (hashed first). */
    memset(key, 0xaa, sizeof(key));
    const char *m6 = "Test Using Larger Than Block-Size Key - Hash Key First";
    hmac_sha256(key, sizeof(key), m6, strlen(m6), d);
    check_hex(d, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    uint8_t back[SHA256_BYTES];
    char hex[2 * SHA256_BYTES + 1];
    hex_encode(d, sizeof(d), hex);
    CHECK(hex_decode(hex, back, sizeof(back)) == 0 && memcmp(back, d, sizeof(d)) == 0);
    CHECK(hex_decode("abc", back, 2) == -EINVAL);
    CHECK(hex_decode("zz", back, 1) == -EINVAL);
    CHECK(mem_equal_ct(back, d, sizeof(d)));
    back[31] ^= 1;
    CHECK(!mem_equal_ct(back, d, sizeof(d)));
}

/* The constant-time comparison sees a difference in any byte, the first and the last too. */
TEST(mem_equal_ct_every_byte, 5)
{
    uint8_t a[32], b[32];
    for (int i = 0; i < 32; i++)
        a[i] = (uint8_t)(i * 37 + 1);
    memcpy(b, a, sizeof(b));
    CHECK(mem_equal_ct(a, b, sizeof(a)));
    for (size_t i = 0; i < sizeof(a); i++) {
        memcpy(b, a, sizeof(b));
        b[i] ^= 0x80;
        CHECK_MSG(!mem_equal_ct(a, b, sizeof(a)), "a difference in byte %zu not seen", i);
    }
}
