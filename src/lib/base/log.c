/* log.c - see log.h. One write(2) per message so lines from several processes do not mix. */
#include "lib/base/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "lib/base/env.h"
enum log_format { LOG_FORMAT_TEXT, LOG_FORMAT_KV, LOG_FORMAT_JSON };

static int g_level = LOG_ERROR;
static enum log_format g_format = LOG_FORMAT_TEXT;
static char g_program[32] = "inagg";

int log_set_format(const char *name)
{
    static const char *names[] = {"text", "kv", "json"};
    for (int i = 0; i < 3; i++)
        if (name && strcasecmp(name, names[i]) == 0) {
            g_format = (enum log_format)i;
            return 0;
        }
    return -EINVAL;
}

/* The level and format: default_level unless INAGG_LOG names one, INAGG_LOG_FORMAT's format
 * (a wrong one said on stderr when say_bad_format). */
static void apply_env(enum log_level default_level, int say_bad_format)
{
    g_level = (int)default_level;
    const char *fmt = env_get(ENV_LOG_FORMAT);
    if (fmt && *fmt && log_set_format(fmt) != 0 && say_bad_format)
        fprintf(stderr, "%s: INAGG_LOG_FORMAT is text, kv or json, got '%s'; using text\n",
                g_program, fmt);
    const char *env = env_get(ENV_LOG);
    if (!env || !*env)
        return;
    static const char *names[] = {"error", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++)
        if (strcasecmp(env, names[i]) == 0)
            g_level = i;
}

/* A process that never calls log_init (a program linked with libinagg, the MPI interposer,
 * the torch backend): warnings and errors, or what INAGG_LOG says, read at the first message. */
static pthread_once_t g_env_once = PTHREAD_ONCE_INIT;
static void library_default(void) { apply_env(LOG_WARN, 0); }

void log_init(enum log_level default_level, const char *program)
{
    pthread_once(&g_env_once, library_default);
    if (program)
        snprintf(g_program, sizeof(g_program), "%s", program);
    apply_env(default_level, 1);
}

int log_enabled(enum log_level level)
{
    pthread_once(&g_env_once, library_default);
    return (int)level <= g_level;
}

/* s into buf at *off as a quoted string with JSON escapes (which kv values use too), cut
 * short rather than overrun. */
static void put_quoted(char *buf, size_t cap, size_t *off, const char *s)
{
    size_t o = *off;
    if (o + 1 < cap)
        buf[o++] = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p && o + 8 < cap; p++) {
        if (*p == '"' || *p == '\\') {
            buf[o++] = '\\';
            buf[o++] = (char)*p;
        } else if (*p == '\n') {
            buf[o++] = '\\', buf[o++] = 'n';
        } else if (*p < 0x20) {
            o += (size_t)snprintf(buf + o, cap - o, "\\u%04x", *p);
        } else {
            buf[o++] = (char)*p;
        }
    }
    if (o + 1 < cap)
        buf[o++] = '"';
    *off = o;
}

/* "2026-01-31T12:00:00.123Z" */
static void timestamp(char *out, size_t cap)
{
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    size_t n = strftime(out, cap, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, cap - n, ".%03dZ", (int)(tv.tv_usec / 1000));
}

void log_write(enum log_level level, const char *file, int line, const char *fmt, ...)
{
    if (!log_enabled(level))
        return;
    static const char *tags[] = {"error", "warn", "info", "debug"};
    char msg[1024], buf[2048], ts[40], where[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(where, sizeof(where), "%s:%d", file, line);
    size_t n = 0, cap = sizeof(buf) - 2;
    if (g_format == LOG_FORMAT_TEXT) {
        n = (size_t)snprintf(buf, cap, "%s[%d] %s: %s%s%s%s", g_program, (int)getpid(), tags[level],
                             msg, level == LOG_DEBUG ? " (" : "", level == LOG_DEBUG ? where : "",
                             level == LOG_DEBUG ? ")" : "");
    } else if (g_format == LOG_FORMAT_KV) {
        timestamp(ts, sizeof(ts));
        n = (size_t)snprintf(buf, cap, "ts=%s level=%s program=%s pid=%d msg=", ts, tags[level],
                             g_program, (int)getpid());
        put_quoted(buf, cap, &n, msg);
        if (level == LOG_DEBUG && n < cap)
            n += (size_t)snprintf(buf + n, cap - n, " src=%s", where);
    } else {
        timestamp(ts, sizeof(ts));
        n = (size_t)snprintf(buf, cap, "{\"ts\":\"%s\",\"level\":\"%s\",\"program\":", ts,
                             tags[level]);
        put_quoted(buf, cap, &n, g_program);
        if (n < cap)
            n += (size_t)snprintf(buf + n, cap - n, ",\"pid\":%d,\"msg\":", (int)getpid());
        put_quoted(buf, cap, &n, msg);
        if (level == LOG_DEBUG && n < cap) {
            n += (size_t)snprintf(buf + n, cap - n, ",\"src\":");
            put_quoted(buf, cap, &n, where);
        }
        if (n < cap)
            buf[n++] = '}';
    }
    if (n > cap)
        n = cap;
    buf[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, buf, n);
    (void)w;
}
