/*
 * limits.c - the control plane's admission limits: their defaults, putting them in force,
 * and replacing them while the switch runs (`inagg switch --config` re-read on SIGHUP).
 * switch_set_limits hands new limits over under a lock; the control thread, their only
 * reader, takes them at the head of its loop, so no limit changes in the middle of a request.
 */
#include "lib/base/log.h"
#include "switchd/server/control_int.h"

const char *const switch_limit_names[SWITCH_LIMIT_COUNT] = {
    "request_timeout_ms", "idle_timeout_ms", "max_conns_per_addr",
    "max_job_slots",      "max_addr_slots",
};

static uint32_t or_default(uint32_t v, uint32_t def) { return v ? v : def; }

void control_use_limits(control_t *ctl, const switch_limits_t *l, const char *why)
{
    struct inagg_switch *sw = ctl->sw;
    uint32_t total = sw->cfg.total_slots;
    uint32_t half = total / 2 ? total / 2 : 1;
    uint32_t three_quarters = (uint32_t)((uint64_t)total * 3 / 4);
    ctl->request_ms = or_default(l->request_ms, 10000);
    ctl->idle_ms = or_default(l->idle_ms, 60000);
    ctl->max_conns_per_addr = or_default(l->max_conns_per_addr, 128);
    ctl->max_job_slots = or_default(l->max_job_slots, half);
    ctl->max_addr_slots = or_default(l->max_addr_slots, three_quarters ? three_quarters : 1);
    const uint32_t now[SWITCH_LIMIT_COUNT] = {ctl->request_ms, ctl->idle_ms,
                                              ctl->max_conns_per_addr, ctl->max_job_slots,
                                              ctl->max_addr_slots};
    for (int i = 0; i < SWITCH_LIMIT_COUNT; i++)
        atomic_store(&sw->limits_now[i], now[i]);
    if (why)
        LOG_I("limits %s: request_timeout_ms=%u idle_timeout_ms=%u max_conns_per_addr=%u "
              "max_job_slots=%u max_addr_slots=%u",
              why, now[0], now[1], now[2], now[3], now[4]);
}

int control_take_limits(control_t *ctl)
{
    struct inagg_switch *sw = ctl->sw;
    if (!atomic_load(&sw->limits_changed))
        return 0;
    pthread_mutex_lock(&sw->limits_lock);
    switch_limits_t l = sw->limits_pending;
    atomic_store(&sw->limits_changed, 0);
    pthread_mutex_unlock(&sw->limits_lock);
    control_use_limits(ctl, &l, "reloaded");
    return 1;
}

void switch_set_limits(inagg_switch_t *sw, const switch_limits_t *l)
{
    pthread_mutex_lock(&sw->limits_lock);
    sw->limits_pending = *l;
    atomic_store(&sw->limits_changed, 1);
    pthread_mutex_unlock(&sw->limits_lock);
}

void switch_get_limits(inagg_switch_t *sw, switch_limits_t *l)
{
    *l = (switch_limits_t){atomic_load(&sw->limits_now[0]), atomic_load(&sw->limits_now[1]),
                           atomic_load(&sw->limits_now[2]), atomic_load(&sw->limits_now[3]),
                           atomic_load(&sw->limits_now[4])};
}
