/*
 * pace.h - how long an idle thread of the fabric's pipeline may sleep: not at all when a
 * delayed frame is due within SPIN_NS (timer wake-ups are tens of microseconds late under
 * load) or while it spins after its last work (--poll), else until the next release minus
 * that margin, at most IDLE_SLEEP_MS.
 */
#ifndef INAGG_FABRIC_PACE_H
#define INAGG_FABRIC_PACE_H

#include <stdint.h>

#define IDLE_SLEEP_MS 20

/* The sleep in ns (0: spin) given the next delayed release (UINT64_MAX: none), the time of
 * the thread's last work and how long it spins after work (UINT64_MAX: never sleeps). */
uint64_t pace_idle_ns(uint64_t idle_spin_ns, uint64_t next_release, uint64_t last_work);

#endif /* INAGG_FABRIC_PACE_H */
