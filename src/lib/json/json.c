/* json.c - see json.h. Strings are escaped per RFC 8259; numbers use %.17g or %lld. */
#include "lib/json/json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void json_init(json_writer_t *w) { memset(w, 0, sizeof(*w)); }

void json_free(json_writer_t *w)
{
    free(w->buf);
    memset(w, 0, sizeof(*w));
}

static void put(json_writer_t *w, const char *s, size_t n)
{
    if (w->failed)
        return;
    if (w->len + n + 1 > w->cap) {
        size_t cap = w->cap ? w->cap : 256;
        while (cap < w->len + n + 1)
            cap *= 2;
        char *nb = realloc(w->buf, cap);
        if (!nb) {
            w->failed = 1;
            return;
        }
        w->buf = nb;
        w->cap = cap;
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    w->buf[w->len] = '\0';
}

static void puts_(json_writer_t *w, const char *s) { put(w, s, strlen(s)); }

static void put_escaped(json_writer_t *w, const char *s)
{
    put(w, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            put(w, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof(esc), "\\u%04x", c);
            put(w, esc, 6);
        } else {
            put(w, (const char *)&c, 1);
        }
    }
    put(w, "\"", 1);
}

static void begin_value(json_writer_t *w, const char *key)
{
    if (w->count[w->depth]++ > 0)
        put(w, ",", 1);
    if (key) {
        put_escaped(w, key);
        put(w, ":", 1);
    }
}

static void open_(json_writer_t *w, const char *key, const char *bracket)
{
    begin_value(w, key);
    puts_(w, bracket);
    if (w->depth + 1 >= JSON_MAX_DEPTH) {
        w->failed = 1;
        return;
    }
    w->count[++w->depth] = 0;
}

static void close_(json_writer_t *w, const char *bracket)
{
    if (w->depth > 0)
        w->depth--;
    puts_(w, bracket);
}

void json_begin_object(json_writer_t *w, const char *key) { open_(w, key, "{"); }
void json_end_object(json_writer_t *w) { close_(w, "}"); }
void json_begin_array(json_writer_t *w, const char *key) { open_(w, key, "["); }
void json_end_array(json_writer_t *w) { close_(w, "]"); }

void json_string(json_writer_t *w, const char *key, const char *value)
{
    begin_value(w, key);
    put_escaped(w, value ? value : "");
}

/* A number in fmt, or null when it is not finite. */
static void number(json_writer_t *w, const char *key, double value, const char *fmt)
{
    begin_value(w, key);
    char b[40];
    if (!isfinite(value))
        snprintf(b, sizeof(b), "null");
    else
        snprintf(b, sizeof(b), fmt, value);
    puts_(w, b);
}

void json_number(json_writer_t *w, const char *key, double value)
{
    number(w, key, value, "%.10g");
}

void json_number_exact(json_writer_t *w, const char *key, double value)
{
    number(w, key, value, "%.17g");
}

void json_int(json_writer_t *w, const char *key, int64_t value)
{
    begin_value(w, key);
    char b[32];
    snprintf(b, sizeof(b), "%lld", (long long)value);
    puts_(w, b);
}

void json_bool(json_writer_t *w, const char *key, int value)
{
    begin_value(w, key);
    puts_(w, value ? "true" : "false");
}

void json_newline(json_writer_t *w) { puts_(w, "\n"); }

const char *json_text(const json_writer_t *w) { return w->failed ? NULL : (w->buf ? w->buf : ""); }

/* Where the value of "key" starts in text (after the colon and blanks), or NULL. */
static const char *find_value(const char *text, const char *key)
{
    size_t klen = strlen(key);
    for (const char *p = text; (p = strchr(p, '"')) != NULL; p++) {
        if (strncmp(p + 1, key, klen) != 0 || p[1 + klen] != '"')
            continue;
        const char *q = p + 2 + klen;
        while (*q == ' ' || *q == '\t' || *q == '\n')
            q++;
        if (*q != ':')
            continue;
        q++;
        while (*q == ' ' || *q == '\t' || *q == '\n')
            q++;
        return q;
    }
    return NULL;
}

int json_find_number(const char *text, const char *key, double *out)
{
    const char *q = find_value(text, key);
    if (!q)
        return -ENOENT;
    char *end;
    double v = strtod(q, &end);
    if (end == q)
        return -EINVAL;
    *out = v;
    return 0;
}

int json_find_bool(const char *text, const char *key, int *out)
{
    const char *q = find_value(text, key);
    if (q && strncmp(q, "true", 4) == 0)
        *out = 1;
    else if (q && strncmp(q, "false", 5) == 0)
        *out = 0;
    else
        return q ? -EINVAL : -ENOENT;
    return 0;
}

int json_find_string(const char *text, const char *key, char *out, size_t len)
{
    const char *p = find_value(text, key);
    if (!p)
        return -ENOENT;
    if (*p != '"' || len == 0)
        return -EINVAL;
    p++;
    size_t n = 0;
    while (*p && *p != '"') {
        char c = *p++;
        if (c == '\\' && *p) {
            char e = *p++;
            if (e == 'n')
                c = '\n';
            else if (e == 't')
                c = '\t';
            else if (e == 'r')
                c = '\r';
            else if (e == 'u' && strlen(p) >= 4) {
                char hex[5] = {p[0], p[1], p[2], p[3], 0};
                long v = strtol(hex, NULL, 16);
                c = v > 0 && v < 0x80 ? (char)v : '?';
                p += 4;
            } else
                c = e;
        }
        if (n + 1 < len)
            out[n++] = c;
    }
    out[n] = '\0';
    return 0;
}
