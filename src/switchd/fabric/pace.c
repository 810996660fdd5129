/*
 * pace.c - an idle pipeline thread's sleep (pace.h).
 */
#include "switchd/fabric/pace.h"

#include "lib/base/pollmode.h"
#include "lib/base/util.h"

#define SPIN_NS 150000ull /* closer than this to a release: spin, do not sleep */

uint64_t pace_idle_ns(uint64_t idle_spin_ns, uint64_t next_release, uint64_t last_work)
{
    uint64_t now = util_now_ns();
    if (next_release != UINT64_MAX && next_release <= now + SPIN_NS)
        return 0; /* spin: a frame is due within microseconds */
    if ((idle_spin_ns == UINT64_MAX || now - last_work < idle_spin_ns) && switch_poll_may_spin(now))
        return 0; /* --poll: spin after work (results and the next frames follow closely) */
    uint64_t wait_ns = (uint64_t)IDLE_SLEEP_MS * 1000000ull;
    if (next_release != UINT64_MAX && next_release - now - SPIN_NS < wait_ns)
        wait_ns = next_release - now - SPIN_NS;
    return wait_ns;
}
