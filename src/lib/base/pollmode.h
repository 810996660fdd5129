/*
 * pollmode.h - how a thread waiting for packets waits (a switch dataplane thread, or a
 * worker waiting for a result): it sleeps in the kernel until one comes (sleep), owns its core
 * and asks again at once (busy, as a hardware switch's pipeline does), or spins for a bounded
 * time after the last traffic and then sleeps (adaptive). A spinning thread yields the CPU
 * after each empty look (switch_poll_idle), as Open MPI's ranks do with mpi_yield_when_idle:
 * on a machine with more spinners than cores, a spinner that keeps its core can hold up the
 * very process it waits for for a whole time slice. Also the CPU list the switch's threads
 * are pinned to (`inagg switch --cpu LIST`).
 */
#ifndef INAGG_SWITCH_POLLMODE_H
#define INAGG_SWITCH_POLLMODE_H

#include <stddef.h>
#include <stdint.h>

/* The zero value is the default: adaptive, spinning SWITCH_POLL_SPIN_US_DEFAULT (a spin_us of
 * 0 means that). Chosen by measurement (docs/PERFORMANCE.md "Polling and the medium's
 * floor"): on a virtual machine whose idle cores halt, waking a sleeping thread costs tens of
 * microseconds, more than a whole round trip between spinning ones; a spin bounded by the
 * last traffic gives the core back when a job pauses, and the yield (switch_poll_idle) keeps
 * spinners from holding up each other when they outnumber the cores. */
typedef enum switch_poll {
    SWITCH_POLL_ADAPTIVE = 0, /* never block within spin_us of the last packet, else sleep */
    SWITCH_POLL_SLEEP, /* block in the receive until a packet comes */
    SWITCH_POLL_BUSY, /* never block: receive without waiting, again and again */
} switch_poll_t;

#define SWITCH_POLL_SPIN_US_DEFAULT 200u /* adaptive without :US, and the default mode's */
#define SWITCH_POLL_SPIN_US_MAX 1000000u
#define SWITCH_MAX_CPUS 64u

/* "busy", "sleep" or "adaptive[:US]" into *mode and *spin_us (US 1..SWITCH_POLL_SPIN_US_MAX,
 * default SWITCH_POLL_SPIN_US_DEFAULT; 0 for the other modes). 0, or -EINVAL with the reason in
 * err. */
int switch_poll_parse(const char *text, switch_poll_t *mode, uint32_t *spin_us, char *err,
                      size_t errlen);

/* spin_us as a mode uses it: 0 (the zero-initialised default) is SWITCH_POLL_SPIN_US_DEFAULT. */
static inline uint32_t switch_poll_spin_us(uint32_t spin_us)
{
    return spin_us ? spin_us : SWITCH_POLL_SPIN_US_DEFAULT;
}

/* How long a thread waiting in mode spins after its last traffic before it sleeps:
 * UINT64_MAX for busy (never sleeps), 0 for sleep, the adaptive spin (0: the default). */
static inline uint64_t switch_poll_spin_ns(switch_poll_t mode, uint32_t spin_us)
{
    if (mode == SWITCH_POLL_BUSY)
        return UINT64_MAX;
    return mode == SWITCH_POLL_SLEEP ? 0 : (uint64_t)switch_poll_spin_us(spin_us) * 1000u;
}

/* The worker's form of a mode (inagg_options_t.poll_us): INAGG_POLL_SLEEP (0xfffffffe) for
 * sleep, INAGG_POLL_BUSY (UINT32_MAX) for busy, spin_us for adaptive. */
#define SWITCH_POLL_WORKER_SLEEP 0xfffffffeu
static inline uint32_t switch_poll_worker_us(switch_poll_t mode, uint32_t spin_us)
{
    if (mode == SWITCH_POLL_SLEEP)
        return SWITCH_POLL_WORKER_SLEEP;
    return mode == SWITCH_POLL_BUSY ? UINT32_MAX : switch_poll_spin_us(spin_us);
}

/* What a spinning thread does after a look that found nothing: give the CPU to any other
 * runnable thread (returns at once when there is none). A yield that kept the CPU away for
 * longer than SWITCH_POLL_YIELD_LONG_US means a CPU-bound thread shares this core: it would
 * take a whole time slice at every yield, while a sleeping thread woken by its packet
 * preempts it at once; so the calling thread does not spin for SWITCH_POLL_SPIN_BAN_MS
 * (switch_poll_may_spin), and sleeps instead. */
#define SWITCH_POLL_YIELD_LONG_US 500u
#define SWITCH_POLL_SPIN_BAN_MS 100u
/* 1 when this yield was long and the thread stops spinning for a while, else 0. */
int switch_poll_idle(void);

/* Whether the calling thread may spin now (no long yield in the last SWITCH_POLL_SPIN_BAN_MS). */
int switch_poll_may_spin(uint64_t now_ns);

/* The mode's name ("sleep", "busy", "adaptive"). */
const char *switch_poll_name(switch_poll_t mode);

/* A CPU list ("0", "0,2", "1-3", "0,2-3") into cpus[SWITCH_MAX_CPUS] (each below
 * SWITCH_MAX_CPUS, no repeats), their number into *n. 0, or -EINVAL with the reason in err. */
int switch_cpu_list_parse(const char *text, uint32_t *cpus, uint32_t *n, char *err, size_t errlen);

/* Pin the calling thread to one CPU. 0, or -errno. */
int switch_pin_self(uint32_t cpu);

/* Pin the calling thread to the index-th CPU (modulo their number) of those it may run on:
 * spreading processes 0, 1, 2, ... round-robin over the machine. The CPU, or -errno. */
int switch_pin_self_spread(uint32_t index);

/* The timeout for the next receive of a dataplane thread in mode (spin_us for adaptive, 0:
 * the default):
 * 0 (do not wait) while busy-polling, else sleep_ms. now_ns and last_traffic_ns: the clock
 * now and when the thread last received something. */
static inline int switch_poll_timeout(switch_poll_t mode, uint32_t spin_us, uint64_t now_ns,
                                      uint64_t last_traffic_ns, int sleep_ms)
{
    if (mode == SWITCH_POLL_SLEEP || !switch_poll_may_spin(now_ns))
        return sleep_ms;
    return now_ns - last_traffic_ns < switch_poll_spin_ns(mode, spin_us) ? 0 : sleep_ms;
}

#endif /* INAGG_SWITCH_POLLMODE_H */
