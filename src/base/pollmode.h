/*
 * pollmode.h - how a thread waiting for packets waits (a switch dataplane thread, or a
 * worker waiting for a result): it sleeps in the kernel until one comes (sleep), owns its core
 * and asks again at once (busy, as a hardware switch's pipeline does), or spins for a bounded
 * time after the last traffic and then sleeps (adaptive). Also the CPU list the switch's
 * threads are pinned to (`inagg switch --cpu LIST`).
 */
#ifndef INAGG_SWITCH_POLLMODE_H
#define INAGG_SWITCH_POLLMODE_H

#include <stddef.h>
#include <stdint.h>

typedef enum switch_poll {
    SWITCH_POLL_SLEEP = 0, /* block in the receive until a packet comes */
    SWITCH_POLL_BUSY, /* never block: receive without waiting, again and again */
    SWITCH_POLL_ADAPTIVE, /* never block within spin_us of the last packet, else sleep */
} switch_poll_t;

#define SWITCH_POLL_SPIN_US_DEFAULT 50u /* adaptive without :US */
#define SWITCH_POLL_SPIN_US_MAX 1000000u
#define SWITCH_MAX_CPUS 64u

/* "busy", "sleep" or "adaptive[:US]" into *mode and *spin_us (US 1..SWITCH_POLL_SPIN_US_MAX,
 * default SWITCH_POLL_SPIN_US_DEFAULT; 0 for the other modes). 0, or -EINVAL with the reason in
 * err. */
int switch_poll_parse(const char *text, switch_poll_t *mode, uint32_t *spin_us, char *err,
                      size_t errlen);

/* The worker's form of a mode (inagg_options_t.poll_us): 0 for sleep, UINT32_MAX for busy,
 * spin_us for adaptive. */
static inline uint32_t switch_poll_worker_us(switch_poll_t mode, uint32_t spin_us)
{
    return mode == SWITCH_POLL_SLEEP ? 0u : mode == SWITCH_POLL_BUSY ? UINT32_MAX : spin_us;
}

/* The mode's name ("sleep", "busy", "adaptive"). */
const char *switch_poll_name(switch_poll_t mode);

/* A CPU list ("0", "0,2", "1-3", "0,2-3") into cpus[SWITCH_MAX_CPUS] (each below
 * SWITCH_MAX_CPUS, no repeats), their number into *n. 0, or -EINVAL with the reason in err. */
int switch_cpu_list_parse(const char *text, uint32_t *cpus, uint32_t *n, char *err, size_t errlen);

/* Pin the calling thread to one CPU. 0, or -errno. */
int switch_pin_self(uint32_t cpu);

/* The timeout for the next receive of a dataplane thread in mode (spin_us for adaptive):
 * 0 (do not wait) while busy-polling, else sleep_ms. now_ns and last_traffic_ns: the clock
 * now and when the thread last received something. */
static inline int switch_poll_timeout(switch_poll_t mode, uint32_t spin_us, uint64_t now_ns,
                                      uint64_t last_traffic_ns, int sleep_ms)
{
    if (mode == SWITCH_POLL_BUSY)
        return 0;
    if (mode == SWITCH_POLL_ADAPTIVE && now_ns - last_traffic_ns < (uint64_t)spin_us * 1000u)
        return 0;
    return sleep_ms;
}

#endif /* INAGG_SWITCH_POLLMODE_H */
