/*
 * textlist.c - names written as an English list for messages (see textlist.h).
 */
#include "lib/base/textlist.h"

#include <stdio.h>

size_t textlist_add(char *buf, size_t cap, size_t len, size_t i, size_t n, const char *name)
{
    if (len >= cap)
        return len;
    const char *sep = i == 0 ? "" : i + 1 == n ? " and " : ", ";
    return len + (size_t)snprintf(buf + len, cap - len, "%s%s", sep, name);
}
