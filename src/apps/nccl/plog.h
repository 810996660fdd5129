/*
 * plog.h - the plugin's log lines and settings: the logger NCCL hands over at init (both
 * tables' init store it), every failure logged with its reason through it, and the
 * environment variables the plugin reads.
 */
#ifndef INAGG_NCCL_PLOG_H
#define INAGG_NCCL_PLOG_H

#include <stddef.h>

#include "nccl_abi.h"

/* Keep NCCL's logger (NULL: lines go to stderr, prefixed "inagg-nccl: "). */
void plog_set_logger(ncclDebugLogger_t logger);

/* One log line of `level` (NCCL_LOG_WARN, NCCL_LOG_INFO, NCCL_LOG_TRACE) at file:line. */
void plog_line(ncclDebugLogLevel level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define PLOG_WARN(...) plog_line(NCCL_LOG_WARN, __FILE__, __LINE__, __VA_ARGS__)
#define PLOG_INFO(...) plog_line(NCCL_LOG_INFO, __FILE__, __LINE__, __VA_ARGS__)

/* Log a failure's reason and return its code: `return PFAIL(ncclInvalidArgument, "...")`. */
#define PFAIL(code, ...) (PLOG_WARN(__VA_ARGS__), (code))

/* $NAME as a positive integer, or `dflt` when unset; a malformed or non-positive value is
 * logged and `dflt` used. */
unsigned plog_env_uint(const char *name, unsigned dflt);

/* The name both tables give their one device: the topology joins them by it. */
#define PLOG_DEVICE_NAME "inagg"

/* Fill the properties both tables report for their one device. */
void plog_device_props(ncclNetProperties_v8_t *p, int ptr_support);

#endif /* INAGG_NCCL_PLOG_H */
