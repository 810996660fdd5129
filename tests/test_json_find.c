/*
 * test_json_find.c - the small JSON reader of reports: a key found, a key absent (-ENOENT)
 * and a key of another type (-EINVAL) are told apart, and escapes are undone.
 */
#include <errno.h>
#include <string.h>

#include "harness.h"
#include "lib/json/json.h"

TEST(json_find_found_absent_and_mistyped, 5)
{
    const char *text = "{\"n\": 2.5, \"b\": true, \"f\": false, \"s\": \"a\\tb\\u0041\", "
                       "\"word\": nope}";
    double v = 0;
    int b = -1;
    char s[16];
    CHECK(json_find_number(text, "n", &v) == 0 && v == 2.5);
    CHECK_EQ_INT(json_find_number(text, "missing", &v), -ENOENT);
    CHECK_EQ_INT(json_find_number(text, "s", &v), -EINVAL);
    CHECK(json_find_bool(text, "b", &b) == 0 && b == 1);
    CHECK(json_find_bool(text, "f", &b) == 0 && b == 0);
    CHECK_EQ_INT(json_find_bool(text, "missing", &b), -ENOENT);
    CHECK_EQ_INT(json_find_bool(text, "word", &b), -EINVAL);
    CHECK(json_find_string(text, "s", s, sizeof(s)) == 0 && strcmp(s, "a\tbA") == 0);
    CHECK_EQ_INT(json_find_string(text, "missing", s, sizeof(s)), -ENOENT);
    CHECK_EQ_INT(json_find_string(text, "n", s, sizeof(s)), -EINVAL);
    CHECK_EQ_INT(json_find_string(text, "s", s, 0), -EINVAL);
}
