/*
 * test_textlist.c - names as an English list (base/textlist): one name alone, two joined by
 * "and", more with commas before the last "and", and a list longer than its buffer cut
 * NUL-terminated, with the names after the cut adding nothing.
 */
#include <string.h>

#include "harness.h"
#include "lib/base/textlist.h"

static void join(char *buf, size_t cap, const char *const *names, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++)
        len = textlist_add(buf, cap, len, i, n, names[i]);
}

TEST(textlist_joins_names_as_an_english_list, 5)
{
    const char *names[] = {"switchml", "p4sgd", "ring"};
    char buf[64];
    join(buf, sizeof(buf), names, 1);
    CHECK(strcmp(buf, "switchml") == 0);
    join(buf, sizeof(buf), names, 2);
    CHECK(strcmp(buf, "switchml and p4sgd") == 0);
    join(buf, sizeof(buf), names, 3);
    CHECK(strcmp(buf, "switchml, p4sgd and ring") == 0);
    /* a list cut at 12 bytes, with the bytes past them watched: nothing is written there */
    memset(buf, 'x', sizeof(buf));
    join(buf, 12, names, 3);
    CHECK(strcmp(buf, "switchml, p") == 0);
    for (size_t i = 12; i < sizeof(buf); i++)
        CHECK_MSG(buf[i] == 'x', "byte %zu past the list's 12 written", i);
    join(buf, 9, names, 3);
    CHECK(strcmp(buf, "switchml") == 0);
}
