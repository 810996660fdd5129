/* switch_conf.c - see switch_conf.h. */
#include "switchd/server/switch_conf.h"

#include "lib/base/errmsg.h"
#include "lib/base/log.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* One line's entry into conf; 0, or a negative errno (-EINVAL, -E2BIG, -ENOMEM) with the
 * reason (no file or line) in why. */
static int take_line(char *text, const struct option *opts, const char *const *refused,
                     switch_conf_t *conf, char *why, size_t cap)
{
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
    const struct option *o = find_opt(opts, key);
    for (int i = 0; o && refused && refused[i]; i++)
        if (strcmp(refused[i], key) == 0) {
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
    conf->n++;
    return 0;
}

int switch_conf_read(const char *path, const struct option *opts, const char *const *refused,
                     switch_conf_t *conf, char *err, size_t errlen)
{
    memset(conf, 0, sizeof(*conf));
    FILE *f = fopen(path, "r");
    if (!f) {
        return set_err(err, errlen, -errno, "%s: %s", path, strerror(errno));
    }
    char text[LINE_MAX_LEN + 2], why[256];
    int lineno = 0, rc = 0;
    while (rc == 0 && fgets(text, sizeof(text), f)) {
        lineno++;
        size_t len = strlen(text);
        if (len > LINE_MAX_LEN && text[len - 1] != '\n') {
            snprintf(err, errlen, "%s:%d: line longer than %d bytes", path, lineno, LINE_MAX_LEN);
            rc = -1;
            break;
        }
        int before = conf->n;
        if (take_line(text, opts, refused, conf, why, sizeof(why)) != 0) {
            snprintf(err, errlen, "%s:%d: %s", path, lineno, why);
            rc = -1;
        } else if (conf->n > before) {
            conf->line[before] = lineno;
        }
    }
    if (rc == 0 && ferror(f)) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        rc = -1;
    }
    fclose(f);
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
