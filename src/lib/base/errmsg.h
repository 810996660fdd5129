/*
 * errmsg.h - the one error convention below the API: a function that can fail returns 0 (or a
 * count) on success and a negative errno on failure, and where the reason matters it writes a
 * sentence into the caller's buffer (`char *err, size_t errlen`). `set_err` does both at once:
 *
 *     return set_err(err, errlen, -EINVAL, "--elems must be positive, not %ld", n);
 *
 * so the code and the message cannot drift apart. Safe with a NULL or empty buffer.
 * Header-only, so programs that link only a few modules (the MPI baselines) need nothing more.
 */
#ifndef INAGG_ERRMSG_H
#define INAGG_ERRMSG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

static inline void errmsg_vformat(char *err, size_t errlen, const char *fmt, va_list ap)
{
    if (!err || errlen == 0)
        return;
    vsnprintf(err, errlen, fmt, ap);
}

/* Writes the message and returns `code` (a negative errno). */
static inline int set_err(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static inline int set_err(char *err, size_t errlen, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    errmsg_vformat(err, errlen, fmt, ap);
    va_end(ap);
    return code;
}

#endif /* INAGG_ERRMSG_H */
