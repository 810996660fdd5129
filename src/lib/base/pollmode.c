/*
 * pollmode.c - see pollmode.h: parsing the poll mode and the CPU list, pinning a thread.
 */
#include "lib/base/pollmode.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/errmsg.h"
#include "lib/base/util.h"

int switch_poll_parse(const char *text, switch_poll_t *mode, uint32_t *spin_us, char *err,
                      size_t errlen)
{
    *spin_us = 0;
    if (strcmp(text, "sleep") == 0) {
        *mode = SWITCH_POLL_SLEEP;
        return 0;
    }
    if (strcmp(text, "busy") == 0) {
        *mode = SWITCH_POLL_BUSY;
        return 0;
    }
    if (strncmp(text, "adaptive", 8) == 0 && (text[8] == '\0' || text[8] == ':')) {
        *mode = SWITCH_POLL_ADAPTIVE;
        *spin_us = SWITCH_POLL_SPIN_US_DEFAULT;
        if (text[8] == '\0')
            return 0;
        char *end;
        errno = 0;
        unsigned long v = strtoul(text + 9, &end, 10);
        if (text[9] >= '0' && text[9] <= '9' && *end == '\0' && errno == 0 && v >= 1 &&
            v <= SWITCH_POLL_SPIN_US_MAX) {
            *spin_us = (uint32_t)v;
            return 0;
        }
        return set_err(err, errlen, -EINVAL, "adaptive:US needs microseconds in 1..%u, got '%s'",
                       SWITCH_POLL_SPIN_US_MAX, text + 9);
    }
    return set_err(err, errlen, -EINVAL, "the poll mode is busy, sleep or adaptive[:US], got '%s'",
                   text);
}

static __thread uint64_t spin_banned_until_ns; /* this thread sleeps, not spins, until then */

int switch_poll_idle(void)
{
    uint64_t before = util_now_ns();
    (void)sched_yield();
    uint64_t after = util_now_ns();
    if (after - before > (uint64_t)SWITCH_POLL_YIELD_LONG_US * 1000u) {
        spin_banned_until_ns = after + (uint64_t)SWITCH_POLL_SPIN_BAN_MS * 1000000u;
        return 1;
    }
    return 0;
}

int switch_poll_may_spin(uint64_t now_ns) { return now_ns >= spin_banned_until_ns; }

const char *switch_poll_name(switch_poll_t mode)
{
    return mode == SWITCH_POLL_BUSY ? "busy" : mode == SWITCH_POLL_ADAPTIVE ? "adaptive" : "sleep";
}

/* A CPU number at *p (advanced past it). 0, or -EINVAL. */
static int cpu_number(const char **p, uint32_t *out)
{
    if (**p < '0' || **p > '9')
        return -EINVAL;
    char *end;
    unsigned long v = strtoul(*p, &end, 10);
    if (v >= SWITCH_MAX_CPUS)
        return -EINVAL;
    *out = (uint32_t)v;
    *p = end;
    return 0;
}

int switch_cpu_list_parse(const char *text, uint32_t *cpus, uint32_t *n, char *err, size_t errlen)
{
    uint64_t seen = 0;
    const char *p = text;
    *n = 0;
    for (;;) {
        uint32_t lo, hi;
        if (cpu_number(&p, &lo) != 0)
            goto bad;
        hi = lo;
        if (*p == '-') {
            p++;
            if (cpu_number(&p, &hi) != 0 || hi < lo)
                goto bad;
        }
        for (uint32_t c = lo; c <= hi; c++) {
            if (seen & (1ull << c))
                goto bad;
            seen |= 1ull << c;
            cpus[(*n)++] = c;
        }
        if (*p == '\0')
            return 0;
        if (*p++ != ',')
            goto bad;
    }
bad:
    return set_err(err, errlen, -EINVAL,
                   "a CPU list is numbers 0..%u and ranges A-B, comma-separated, each "
                   "CPU once (e.g. 0,2-3), got '%s'",
                   SWITCH_MAX_CPUS - 1, text);
}

int switch_pin_self(uint32_t cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return -pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

int switch_pin_self_spread(uint32_t index)
{
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0)
        return -errno;
    int n = CPU_COUNT(&allowed);
    if (n <= 0)
        return -EINVAL;
    uint32_t want = index % (uint32_t)n;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &allowed) || want-- > 0)
            continue;
        int rc = switch_pin_self((uint32_t)cpu);
        return rc < 0 ? rc : cpu;
    }
    return -EINVAL;
}
