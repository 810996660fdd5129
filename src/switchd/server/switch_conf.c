/* switch_conf.c - see switch_conf.h. */
#include "switchd/server/switch_conf.h"

#include "lib/base/errmsg.h"
#include "lib/base/log.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LINE_MAX_LEN 1024

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = 0;
    return s;
}

static const struct option *find_opt(const struct option *opts, const char *key)
{
    for (; opts->name; opts++)
        if (strcmp(opts->name, key) == 0)
            return opts;
    return NULL;
}

void switch_conf_free(switch_conf_t *conf)
{
    for (int i = 0; i < conf->n; i++) {
        free(conf->key[i]);
        free(conf->value[i]);
    }
    conf->n = 0;
}

/* What reading a file keeps between its lines: the options, and the line each option was
 * first set on (0: not yet), so that a key set twice is refused naming both lines. */
typedef struct conf_parse {
    const struct option *opts;
    const char *const *refused;
    switch_conf_t *conf;
    int *set_on; /* per option of opts */
    int lineno;
} conf_parse_t;

/* One line's entry into conf; 0, or a negative errno (-EINVAL, -E2BIG, -ENOMEM) with the
 * reason (no file or line) in why. */
static int take_line(char *text, conf_parse_t *p, char *why, size_t cap)
{
    switch_conf_t *conf = p->conf;
    char *hash = strchr(text, '#');
    if (hash)
        *hash = 0;
    char *s = trim(text);
    if (!*s)
        return 0;
    char *eq = strchr(s, '=');
    if (!eq) {
        snprintf(why, cap, "expected 'key = value', got '%s'", s);
        return -EINVAL;
    }
    *eq = 0;
    char *key = trim(s), *value = trim(eq + 1);
    if (key[0] == '-') {
        snprintf(why, cap, "keys are written without dashes: '%s'", key + strspn(key, "-"));
        return -EINVAL;
    }
    const struct option *o = find_opt(p->opts, key);
    for (int i = 0; o && p->refused && p->refused[i]; i++)
        if (strcmp(p->refused[i], key) == 0) {
            snprintf(why, cap, "'%s' is not a setting of the daemon", key);
            return -EINVAL;
        }
    if (!o) {
        snprintf(why, cap,
                 "unknown key '%s' (the keys are the long options of "
                 "`inagg switch`, see inagg switch --help)",
                 key);
        return -EINVAL;
    }
    int *first = &p->set_on[o - p->opts];
    if (*first) {
        snprintf(why, cap, "'%s' is set again (first on line %d): one line per key", key, *first);
        return -EINVAL;
    }
    *first = p->lineno;
    int is_flag = o->has_arg == no_argument;
    if (is_flag && strcmp(value, "true") != 0 && strcmp(value, "false") != 0) {
        snprintf(why, cap, "'%s' is true or false, got '%s'", key, value);
        return -EINVAL;
    }
    if (!is_flag && !*value) {
        snprintf(why, cap, "'%s' needs a value", key);
        return -EINVAL;
    }
    if (is_flag && strcmp(value, "false") == 0)
        return 0;
    if (conf->n == SWITCH_CONF_MAX_ENTRIES) {
        snprintf(why, cap, "more than %d settings", SWITCH_CONF_MAX_ENTRIES);
        return -E2BIG;
    }
    conf->key[conf->n] = malloc(strlen(key) + 3);
    if (conf->key[conf->n])
        sprintf(conf->key[conf->n], "--%s", key);
    conf->value[conf->n] = is_flag ? NULL : strdup(value);
    if (!conf->key[conf->n] || (!is_flag && !conf->value[conf->n])) {
        snprintf(why, cap, "out of memory");
        return -ENOMEM;
    }
    conf->line[conf->n] = p->lineno;
    conf->n++;
    return 0;
}

/* The whole of path into *text (malloc'd, NUL-terminated; *len bytes before the NUL). Opened
 * without blocking and refused unless it is a regular file (a FIFO would block the caller, a
 * device such as /dev/zero would never end), and at most SWITCH_CONF_MAX_BYTES. 0, or a
 * negative errno with "FILE: why" in err. */
static int read_whole(const char *path, char **text, size_t *len, char *err, size_t errlen)
{
    *text = NULL;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return set_err(err, errlen, -errno, "%s: %s", path, strerror(errno));
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0)
        rc = set_err(err, errlen, -errno, "%s: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = set_err(err, errlen, -EINVAL, "%s: not a regular file (%s)", path,
                     S_ISFIFO(st.st_mode)  ? "a FIFO"
                     : S_ISCHR(st.st_mode) ? "a character device"
                     : S_ISDIR(st.st_mode) ? "a directory"
                                           : "a special file");
    else if (st.st_size > SWITCH_CONF_MAX_BYTES)
        rc = set_err(err, errlen, -EFBIG, "%s: %lld bytes, more than a config file's %d", path,
                     (long long)st.st_size, SWITCH_CONF_MAX_BYTES);
    char *buf = rc == 0 ? malloc(SWITCH_CONF_MAX_BYTES + 2) : NULL;
    if (rc == 0 && !buf)
        rc = set_err(err, errlen, -ENOMEM, "%s: out of memory", path);
    size_t got = 0;
    while (rc == 0 && got <= SWITCH_CONF_MAX_BYTES) { /* one byte past the bound: grown since */
        ssize_t n = read(fd, buf + got, SWITCH_CONF_MAX_BYTES + 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            rc = set_err(err, errlen, -errno, "%s: %s", path, strerror(errno));
        else if (n == 0)
            break;
        else
            got += (size_t)n;
    }
    close(fd);
    if (rc == 0 && got > SWITCH_CONF_MAX_BYTES)
        rc = set_err(err, errlen, -EFBIG, "%s: more than a config file's %d bytes", path,
                     SWITCH_CONF_MAX_BYTES);
    if (rc != 0) {
        free(buf);
        return rc;
    }
    buf[got] = 0;
    *text = buf;
    *len = got;
    return 0;
}

/* Every line of text (len bytes) into p->conf. 0, or -1 with "FILE:LINE: why" in err. */
static int take_lines(const char *path, const char *text, size_t len, conf_parse_t *p, char *err,
                      size_t errlen)
{
    char line[LINE_MAX_LEN + 1], why[256];
    for (size_t at = 0; at < len;) {
        const char *start = text + at, *nl = memchr(start, '\n', len - at);
        size_t n = nl ? (size_t)(nl - start) : len - at;
        at += n + (nl != NULL);
        p->lineno++;
        if (n > LINE_MAX_LEN) {
            snprintf(err, errlen, "%s:%d: line longer than %d bytes", path, p->lineno,
                     LINE_MAX_LEN);
            return -1;
        }
        if (memchr(start, 0, n)) {
            snprintf(err, errlen, "%s:%d: a NUL byte (a config file is text)", path, p->lineno);
            return -1;
        }
        memcpy(line, start, n);
        line[n] = 0;
        if (take_line(line, p, why, sizeof(why)) != 0) {
            snprintf(err, errlen, "%s:%d: %s", path, p->lineno, why);
            return -1;
        }
    }
    return 0;
}

int switch_conf_read(const char *path, const struct option *opts, const char *const *refused,
                     switch_conf_t *conf, char *err, size_t errlen)
{
    memset(conf, 0, sizeof(*conf));
    char *text;
    size_t len = 0;
    if (read_whole(path, &text, &len, err, errlen) != 0)
        return -1;
    int nopts = 0;
    while (opts[nopts].name)
        nopts++;
    conf_parse_t p = {opts, refused, conf, calloc((size_t)nopts + 1, sizeof(int)), 0};
    int rc = 0;
    if (!p.set_on) {
        snprintf(err, errlen, "%s: out of memory", path);
        rc = -1;
    } else {
        rc = take_lines(path, text, len, &p, err, errlen);
    }
    free(p.set_on);
    free(text);
    if (rc != 0)
        switch_conf_free(conf);
    return rc;
}

char **switch_conf_argv(const switch_conf_t *conf, int argc, char **argv, int *new_argc,
                        int **argv_line)
{
    int cap = 1 + 2 * conf->n + argc;
    char **out = calloc((size_t)cap + 1, sizeof(*out));
    int *lines = calloc((size_t)cap + 1, sizeof(*lines));
    if (!out || !lines) {
        free(out);
        free(lines);
        return NULL;
    }
    int n = 0;
    out[n++] = argv[0];
    for (int i = 0; i < conf->n; i++) {
        lines[n] = conf->line[i];
        out[n++] = conf->key[i];
        if (conf->value[i]) {
            lines[n] = conf->line[i];
            out[n++] = conf->value[i];
        }
    }
    for (int i = 1; i < argc; i++)
        out[n++] = argv[i];
    out[n] = NULL;
    *new_argc = n;
    *argv_line = lines;
    return out;
}

static const char *const limit_keys[SWITCH_LIMIT_COUNT] = {
    "request-timeout", "idle-timeout", "max-conns-per-addr", "max-job-slots", "max-addr-slots",
};

static uint32_t *limit_field(switch_limits_t *l, int k)
{
    uint32_t *f[SWITCH_LIMIT_COUNT] = {&l->request_ms, &l->idle_ms, &l->max_conns_per_addr,
                                       &l->max_job_slots, &l->max_addr_slots};
    return f[k];
}

static int parse_limit(const char *v, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long x = strtoul(v, &end, 10);
    if (end == v || *end || errno || x > UINT32_MAX || v[0] == '-')
        return -EINVAL;
    *out = (uint32_t)x;
    return 0;
}

int switch_conf_limits(const char *path, const switch_conf_t *conf, int argc, char **argv,
                       switch_limits_t *l, char *err, size_t errlen)
{
    memset(l, 0, sizeof(*l));
    for (int i = 0; i < conf->n; i++)
        for (int k = 0; k < SWITCH_LIMIT_COUNT; k++)
            if (strcmp(conf->key[i] + 2, limit_keys[k]) == 0 &&
                parse_limit(conf->value[i], limit_field(l, k)) != 0) {
                snprintf(err, errlen, "%s:%d: '%s' needs a non-negative integer, got '%s'", path,
                         conf->line[i], limit_keys[k], conf->value[i]);
                return -EINVAL;
            }
    /* The command line was checked when the switch started: "--key V" or "--key=V". */
    for (int i = 1; i < argc; i++)
        for (int k = 0; k < SWITCH_LIMIT_COUNT; k++) {
            size_t n = strlen(limit_keys[k]);
            const char *a = argv[i];
            if (strncmp(a, "--", 2) != 0 || strncmp(a + 2, limit_keys[k], n) != 0)
                continue;
            if (a[2 + n] == '=')
                parse_limit(a + 3 + n, limit_field(l, k));
            else if (a[2 + n] == 0 && i + 1 < argc)
                parse_limit(argv[i + 1], limit_field(l, k));
        }
    return 0;
}

int switch_conf_reload(inagg_switch_t *sw, const char *path, const struct option *opts,
                       const char *const *refused, int argc, char **argv)
{
    switch_conf_t conf;
    switch_limits_t l;
    char err[512];
    if (!path) {
        LOG_W("SIGHUP: no --config file to reload; limits unchanged");
        return -ENOENT;
    }
    if (switch_conf_read(path, opts, refused, &conf, err, sizeof(err)) != 0) {
        LOG_E("reload: %s; limits unchanged", err);
        return -EINVAL;
    }
    int rc = switch_conf_limits(path, &conf, argc, argv, &l, err, sizeof(err));
    switch_conf_free(&conf);
    if (rc != 0) {
        LOG_E("reload: %s; limits unchanged", err);
        return -EINVAL;
    }
    LOG_I("reload: read %s", path);
    switch_set_limits(sw, &l);
    return 0;
}
