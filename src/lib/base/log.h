/*
 * log.h - leveled logging to stderr for the daemon, the CLI and (when INAGG_LOG asks) the
 * library. Never used on a per-packet path. Level from INAGG_LOG=error|warn|info|debug;
 * the daemon and CLI default to info, the library to warn (inside a user's process it says only
 * what its user must know: a fail-over to another switch, the kernel refusing GSO; read from
 * INAGG_LOG at its first message).
 * One line per message, in one of three formats (INAGG_LOG_FORMAT or `--log-format`):
 *   text  inagg[PID] info: MESSAGE                          (the default)
 *   kv    ts=ISO8601 level=info program=inagg pid=PID msg="MESSAGE"   (logfmt)
 *   json  {"ts":"...","level":"info","program":"inagg","pid":PID,"msg":"MESSAGE"}
 * Debug messages add where they come from (text: "(file:line)", kv/json: src).
 */
#ifndef INAGG_LOG_H
#define INAGG_LOG_H

enum log_level { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };

/* Set the default level; INAGG_LOG in the environment overrides it. */
void log_init(enum log_level default_level, const char *program);
int log_enabled(enum log_level level);
/* "text", "kv" or "json": 0, or -EINVAL (unchanged) for another name. */
int log_set_format(const char *name);
void log_write(enum log_level level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define LOG_E(...) log_write(LOG_ERROR, __FILE__, __LINE__, __VA_ARGS__)
#define LOG_W(...) log_write(LOG_WARN, __FILE__, __LINE__, __VA_ARGS__)
#define LOG_I(...) log_write(LOG_INFO, __FILE__, __LINE__, __VA_ARGS__)
#define LOG_D(...) log_write(LOG_DEBUG, __FILE__, __LINE__, __VA_ARGS__)

#endif /* INAGG_LOG_H */
