/*
 * errmsg.h - the one way modules report why something failed: a printf-style message into a
 * caller's buffer (`char *err, size_t errlen`), with the function returning -1. Safe with a
 * NULL or empty buffer. Header-only, so programs that link only a few modules (the MPI
 * baselines) need nothing more.
 */
#ifndef INAGG_ERRMSG_H
#define INAGG_ERRMSG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

static inline void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static inline void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

#endif /* INAGG_ERRMSG_H */
