/*
 * endpoints.c - the fail-over switch list (endpoints.h): "A;B;C", one switch per entry.
 */
#include "lib/worker/endpoints.h"

#include <errno.h>
#include <string.h>

#include "lib/base/errmsg.h"

int endpoints_parse(const char *text, endpoint_list_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (!text || !*text)
        return set_err(err, errlen, -EINVAL, "empty switch address");
    int listed = strchr(text, ';') != NULL;
    for (const char *a = text;;) {
        size_t n = strcspn(a, ";");
        if (n == 0)
            return set_err(err, errlen, -EINVAL,
                           "bad switch list '%s': an empty entry (expected HOST:PORT;HOST:PORT;..."
                           " without a leading, doubled or trailing ';')",
                           text);
        if (out->n == ENDPOINTS_MAX)
            return set_err(err, errlen, -EINVAL, "bad switch list '%s': more than %u switches",
                           text, ENDPOINTS_MAX);
        if (n >= ENDPOINT_TEXT_MAX)
            return set_err(err, errlen, -EINVAL,
                           "bad switch list '%s': entry %u is longer than %u characters", text,
                           out->n + 1, ENDPOINT_TEXT_MAX - 1);
        memcpy(out->text[out->n], a, n);
        out->text[out->n][n] = '\0';
        if (listed && memchr(a, ',', n))
            return set_err(err, errlen, -EINVAL,
                           "bad switch list '%s': entry '%s' names shards (','); a fail-over "
                           "list takes one switch per entry",
                           text, out->text[out->n]);
        out->n++;
        a += n;
        if (*a == '\0')
            break;
        a++; /* the ';': an entry must follow (the empty-entry check above) */
    }
    return 0;
}
