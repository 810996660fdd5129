/* plog.c - see plog.h. */
#include "plog.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ncclDebugLogger_t g_logger;

void plog_set_logger(ncclDebugLogger_t logger) { g_logger = logger; }

void plog_line(ncclDebugLogLevel level, const char *file, int line, const char *fmt, ...)
{
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (g_logger)
        g_logger(level, NCCL_NET | NCCL_COLL, file, line, "inagg: %s", text);
    else if (level == NCCL_LOG_WARN)
        fprintf(stderr, "inagg-nccl: %s\n", text);
}

unsigned plog_env_uint(const char *name, unsigned dflt)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return dflt;
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (*end || s[0] == '-' || v == 0 || v > 3600000ul) {
        PLOG_WARN("$%s=%s is not a positive number of milliseconds up to 3600000; using %u", name,
                  s, dflt);
        return dflt;
    }
    return (unsigned)v;
}

void plog_device_props(ncclNetProperties_v8_t *p, int ptr_support)
{
    memset(p, 0, sizeof(*p));
    p->name = (char *)PLOG_DEVICE_NAME;
    p->pciPath = NULL; /* no PCI device of its own: NCCL places it at the CPU */
    p->guid = 0x696e616767ull; /* "inagg" */
    p->ptrSupport = ptr_support;
    p->regIsGlobal = 0;
    p->speed = 10000;
    p->port = 0;
    p->latency = 0;
    p->maxComms = 65536;
    p->maxRecvs = 1;
    p->netDeviceType = NCCL_NET_DEVICE_HOST;
    p->netDeviceVersion = 0;
}
