/* ctlline.c - see ctlline.h. */
#include "lib/wire/ctlline.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int ctlline_is(const char *line, const char *verb)
{
    size_t n = strlen(verb);
    return strncmp(line, verb, n) == 0 && (line[n] == ' ' || line[n] == '\0');
}

int ctlline_get(const char *line, const char *key, char *out, size_t cap)
{
    size_t klen = strlen(key);
    const char *p = strchr(line, ' ');
    while (p) {
        p++;
        if (strncmp(p, key, klen) == 0 && p[klen] == '=') {
            const char *v = p + klen + 1;
            size_t vlen = strcspn(v, " ");
            if (vlen >= cap)
                return -ENOSPC;
            memcpy(out, v, vlen);
            out[vlen] = '\0';
            return 0;
        }
        p = strchr(p, ' ');
    }
    return -ENOENT;
}

int ctl_get_u64(const char *line, const char *key, uint64_t *out)
{
    char v[32];
    int rc = ctlline_get(line, key, v, sizeof(v));
    if (rc != 0)
        return rc == -ENOSPC ? -EINVAL : rc;
    /* Digits only: strtoull alone would take leading white space, a sign, and wrap a
     * negative number modulo 2^64. */
    if (v[0] < '0' || v[0] > '9')
        return -EINVAL;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (*end != '\0' || errno)
        return -EINVAL;
    *out = x;
    return 0;
}

int ctl_get_u32(const char *line, const char *key, uint32_t *out)
{
    uint64_t x;
    int rc = ctl_get_u64(line, key, &x);
    if (rc)
        return rc;
    if (x > UINT32_MAX)
        return -ERANGE;
    *out = (uint32_t)x;
    return 0;
}

const char *ctlline_rest(const char *line)
{
    const char *p = strchr(line, ' ');
    return p ? p + 1 : "";
}
