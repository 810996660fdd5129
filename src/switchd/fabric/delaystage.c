/*
 * delaystage.c - the delay stage's walk over the ports' delay lines (delaystage.h).
 */
#include "switchd/fabric/delaystage.h"

#include "lib/base/util.h"

void delaystage_begin(delaystage_t *d, int egress, uint64_t now, delay_iter_t *it)
{
    *it = (delay_iter_t){.d = d, .egress = egress, .now = now, .next = UINT64_MAX};
}

const delay_rec_t *delaystage_next(delay_iter_t *it, uint32_t *port, uint64_t *t)
{
    fport_t *ports = it->d->ports;
    if (it->cur) {
        delayline_pop(it->egress ? &ports[it->p].out : &ports[it->p].in);
        it->cur = NULL;
    }
    for (; it->p < it->d->nports; it->p++, it->k = 0) {
        if (!fport_delayed(&ports[it->p]))
            continue;
        delayline_t *line = it->egress ? &ports[it->p].out : &ports[it->p].in;
        const delay_rec_t *r;
        if (it->k < DELAY_BURST && (r = delayline_due(line, it->now))) {
            it->k++;
            *t = util_now_ns();
            lathist_add(&it->d->late, *t - r->release_ns);
            *port = it->p;
            it->cur = r;
            return r;
        }
        uint64_t due = delayline_next(line);
        if (due < it->next)
            it->next = due;
    }
    return NULL;
}

void delaystage_stats(const delaystage_t *d, delaystage_stats_t *out)
{
    out->late_n = lathist_summary(&d->late, &out->late_p50_ns, &out->late_p99_ns);
}
