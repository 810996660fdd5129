/* job.c - job allocation, drop-reason names and counter sums (see job.h). */
#include "switch/job.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const extra_names[] = {
    [DROP_UNKNOWN_JOB - WIRE_STATUS_COUNT] = "unknown_job",
    [DROP_BAD_TOKEN - WIRE_STATUS_COUNT] = "bad_token",
    [DROP_NOT_RESULT_PATH - WIRE_STATUS_COUNT] = "result_to_switch",
    [DROP_JOB_NOT_ACTIVE - WIRE_STATUS_COUNT] = "job_not_active",
    [DROP_BAD_RANK - WIRE_STATUS_COUNT] = "bad_rank",
    [DROP_BAD_SLOT - WIRE_STATUS_COUNT] = "bad_slot",
    [DROP_WRONG_THREAD - WIRE_STATUS_COUNT] = "wrong_thread",
    [DROP_BAD_COUNT - WIRE_STATUS_COUNT] = "bad_count",
    [DROP_DTYPE_NOT_ALLOWED - WIRE_STATUS_COUNT] = "dtype_not_allowed",
    [DROP_DUP_OPEN - WIRE_STATUS_COUNT] = "dup_open_round",
    [DROP_STALE - WIRE_STATUS_COUNT] = "stale_round",
    [DROP_AHEAD - WIRE_STATUS_COUNT] = "round_ahead",
    [DROP_MISMATCH - WIRE_STATUS_COUNT] = "round_mismatch",
    [DROP_WRONG_PROTOCOL - WIRE_STATUS_COUNT] = "wrong_protocol",
    [DROP_DUP_ACK - WIRE_STATUS_COUNT] = "dup_ack",
    [DROP_BAD_CHUNK - WIRE_STATUS_COUNT] = "bad_chunk",
};

const char *drop_reason_name(int reason)
{
    if (reason < 0 || reason >= DROP_REASON_COUNT)
        return "unknown";
    if (reason < WIRE_STATUS_COUNT)
        return wire_status_name((enum wire_status)reason);
    return extra_names[reason - WIRE_STATUS_COUNT];
}

static uint64_t arena_words(uint32_t protocol, uint32_t world, uint32_t nslots, uint32_t elems)
{
    uint64_t per_slot = protocol == INAGG_PROTO_P4SGD ? (uint64_t)world + 1u : 2u;
    return (uint64_t)nslots * per_slot * elems;
}

uint64_t job_pool_bytes(uint32_t protocol, uint32_t world, uint32_t nslots, uint32_t elems,
                        uint32_t nthreads)
{
    uint64_t bytes = arena_words(protocol, world, nslots, elems) * 4u +
                     (uint64_t)nslots * (sizeof(slot_t) + (uint64_t)world * sizeof(struct sockaddr_in));
    if (protocol == INAGG_PROTO_P4SGD) /* acknowledgement addresses and confirmation rings */
        bytes += (uint64_t)nslots * world *
                 (sizeof(struct sockaddr_in) + (uint64_t)nthreads * sizeof(p4_confirm_t));
    return bytes;
}

job_t *job_create(uint16_t id, const char *name, uint32_t protocol, uint32_t world,
                  uint32_t nslots, uint32_t elems, uint32_t nthreads, uint32_t base)
{
    job_t *j = calloc(1, sizeof(*j));
    if (!j)
        return NULL;
    j->id = id;
    snprintf(j->name, sizeof(j->name), "%s", name);
    j->world = world;
    j->nslots = nslots;
    j->elems = elems;
    j->nthreads = nthreads;
    j->base = base;
    j->protocol = protocol;
    if (protocol == INAGG_PROTO_P4SGD)
        j->p4slots = calloc(nslots, sizeof(p4slot_t));
    else
        j->slots = calloc(nslots, sizeof(slot_t));
    j->arena = calloc((size_t)arena_words(protocol, world, nslots, elems), sizeof(uint32_t));
    j->addrs = calloc((size_t)nslots * world, sizeof(struct sockaddr_in));
    if (protocol == INAGG_PROTO_P4SGD) {
        j->ack_addrs = calloc((size_t)nslots * world, sizeof(struct sockaddr_in));
        j->confirm_rings = calloc((size_t)nthreads * world, sizeof(p4_confirm_ring_t));
        j->confirm_items = calloc((size_t)nthreads * world * nslots, sizeof(p4_confirm_t));
    }
    if (posix_memalign((void **)&j->threads, INAGG_CACHELINE, nthreads * sizeof(job_thread_t)))
        j->threads = NULL;
    if ((!j->slots && !j->p4slots) || !j->arena || !j->addrs || !j->threads ||
        (protocol == INAGG_PROTO_P4SGD &&
         (!j->ack_addrs || !j->confirm_rings || !j->confirm_items))) {
        job_free(j);
        return NULL;
    }
    memset(j->threads, 0, nthreads * sizeof(job_thread_t));
    for (uint32_t i = 0; i < nslots; i++) {
        if (protocol == INAGG_PROTO_P4SGD) {
            uint32_t *d = j->arena + (size_t)i * (world + 1u) * elems;
            p4slot_init(&j->p4slots[i], d, d + (size_t)world * elems);
        } else {
            uint32_t *d = j->arena + (size_t)i * 2u * elems;
            slot_init(&j->slots[i], world, d, d + elems);
        }
    }
    for (uint32_t r = 0; r < INAGG_MAX_WORLD; r++)
        j->member_fd[r] = -1;
    return j;
}

void job_free(job_t *j)
{
    if (!j)
        return;
    free(j->slots);
    free(j->p4slots);
    free(j->arena);
    free(j->addrs);
    free(j->ack_addrs);
    free(j->confirm_rings);
    optjob_free(j->opt);
    free(j->opt_scratch);
    free(j->confirm_items);
    free(j->threads);
    free(j);
}

uint64_t job_sum(const job_t *j, size_t field_offset)
{
    uint64_t s = 0;
    for (uint32_t t = 0; t < j->nthreads; t++) {
        const char *base = (const char *)&j->threads[t].c;
        s += atomic_load_explicit((_Atomic uint64_t *)(uintptr_t)(base + field_offset),
                                  memory_order_relaxed);
    }
    return s;
}

uint64_t job_sum_drop(const job_t *j, int reason)
{
    return job_sum(j, offsetof(job_counters_t, drops) + (size_t)reason * sizeof(uint64_t));
}
