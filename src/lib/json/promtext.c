/* promtext.c - see promtext.h. */
#include "lib/json/promtext.h"

#include <inttypes.h>
#include <stdarg.h>

/* HELP text escapes backslash and newline. */
void prom_family(FILE *out, const char *name, const char *type, const char *help)
{
    fprintf(out, "# HELP %s ", name);
    for (const char *p = help; *p; p++) {
        if (*p == '\\')
            fputs("\\\\", out);
        else if (*p == '\n')
            fputs("\\n", out);
        else
            fputc(*p, out);
    }
    fprintf(out, "\n# TYPE %s %s\n", name, type);
}

void prom_labels(char *buf, size_t cap, ...)
{
    size_t off = 0;
    va_list ap;
    va_start(ap, cap);
    const char *key;
    if (cap)
        buf[0] = 0;
    while ((key = va_arg(ap, const char *)) != NULL) {
        const char *val = va_arg(ap, const char *);
        int n = snprintf(buf + off, off < cap ? cap - off : 0, "%s%s=\"", off ? "," : "", key);
        off += n > 0 ? (size_t)n : 0;
        for (const char *p = val; *p && off + 3 < cap; p++) {
            if (*p == '\\' || *p == '"' || *p == '\n')
                buf[off++] = '\\';
            buf[off++] = *p == '\n' ? 'n' : *p;
        }
        if (off + 1 < cap)
            buf[off++] = '"';
        if (off < cap)
            buf[off] = 0;
    }
    va_end(ap);
    if (cap && off >= cap)
        buf[cap - 1] = 0; /* cut short: still a string, never an overrun */
}

static void open_sample(FILE *out, const char *name, const char *labels)
{
    if (labels && *labels)
        fprintf(out, "%s{%s} ", name, labels);
    else
        fprintf(out, "%s ", name);
}

void prom_u64(FILE *out, const char *name, const char *labels, uint64_t v)
{
    open_sample(out, name, labels);
    fprintf(out, "%" PRIu64 "\n", v);
}

void prom_double(FILE *out, const char *name, const char *labels, double v)
{
    open_sample(out, name, labels);
    fprintf(out, "%.9g\n", v);
}
