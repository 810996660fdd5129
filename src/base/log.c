/* log.c - see log.h. One write(2) per message so lines from several processes do not mix. */
#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "base/env.h"

static int g_level = LOG_ERROR;
static char g_program[32] = "inagg";

void log_init(enum log_level default_level, const char *program)
{
    g_level = (int)default_level;
    if (program)
        snprintf(g_program, sizeof(g_program), "%s", program);
    const char *env = env_get(ENV_LOG);
    if (!env || !*env)
        return;
    static const char *names[] = {"error", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++)
        if (strcasecmp(env, names[i]) == 0)
            g_level = i;
}

int log_enabled(enum log_level level) { return (int)level <= g_level; }

void log_write(enum log_level level, const char *file, int line, const char *fmt, ...)
{
    if (!log_enabled(level))
        return;
    static const char *tags[] = {"error", "warn", "info", "debug"};
    char buf[1024];
    int n = snprintf(buf, sizeof(buf), "%s[%d] %s: ", g_program, (int)getpid(), tags[level]);
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof(buf) - 40)
        n = (int)sizeof(buf) - 40;
    if (level == LOG_DEBUG)
        n += snprintf(buf + n, sizeof(buf) - (size_t)n, " (%s:%d)", file, line);
    buf[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, buf, (size_t)n);
    (void)w;
}
