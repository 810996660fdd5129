/*
 * json.h - a small JSON writer for the `--json` outputs of the commands, and a lookup that
 * reads one value (number, boolean, string) out of a flat JSON object: enough to read a
 * baseline's report or a trainer's report line.
 *
 * Usage: json_writer_t w; json_init(&w); json_begin_object(&w, NULL);
 *        json_int(&w, "workers", 4); ...; json_end_object(&w); puts(json_text(&w));
 * A NULL key writes a bare value (inside arrays or at top level).
 */
#ifndef INAGG_JSON_H
#define INAGG_JSON_H

#include <stddef.h>
#include <stdint.h>

#define JSON_MAX_DEPTH 16

typedef struct json_writer {
    char *buf;
    size_t len, cap;
    int depth;
    int count[JSON_MAX_DEPTH]; /* values written at each depth, to place commas */
    int failed; /* out of memory or nesting too deep */
} json_writer_t;

void json_init(json_writer_t *w);
void json_free(json_writer_t *w);
void json_begin_object(json_writer_t *w, const char *key);
void json_end_object(json_writer_t *w);
void json_begin_array(json_writer_t *w, const char *key);
void json_end_array(json_writer_t *w);
void json_string(json_writer_t *w, const char *key, const char *value);
void json_number(json_writer_t *w, const char *key, double value); /* non-finite -> null */
/* A number with 17 significant digits: it reads back as the same double (non-finite -> null). */
void json_number_exact(json_writer_t *w, const char *key, double value);
void json_int(json_writer_t *w, const char *key, int64_t value);
void json_bool(json_writer_t *w, const char *key, int value);
/* A line break between values (valid JSON whitespace): keeps long reports within the
 * control protocol's line length. */
void json_newline(json_writer_t *w);
/* The text so far (NUL-terminated), or NULL if the writer failed. */
const char *json_text(const json_writer_t *w);

/* Find "key": <number> anywhere in `text` (first match) and store it. 0 on success, -ENOENT if
 * absent, -EINVAL if not a number. Only for flat, trusted reports such as the baseline's. */
int json_find_number(const char *text, const char *key, double *out);

/* The same for "key": true|false (*out 1 or 0). 0, -ENOENT if absent,
 * -EINVAL if not a boolean. */
int json_find_bool(const char *text, const char *key, int *out);

/* The same for "key": "string", its escapes undone (\uXXXX beyond ASCII becomes '?'), cut to
 * fit len. 0, -ENOENT if absent, -EINVAL if
 * not a string (or len is 0). */
int json_find_string(const char *text, const char *key, char *out, size_t len);

#endif /* INAGG_JSON_H */
