/* job.c - job allocation and counter sums (see job.h). */
#include "switchd/server/job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "switchd/server/codecjob.h"

uint64_t job_pool_bytes(const switch_proto_ops_t *proto, uint32_t world, uint32_t nslots,
                        uint32_t elems, uint32_t nthreads)
{
    return proto->pool_bytes(world, nslots, elems, nthreads) +
           (uint64_t)nslots * world * sizeof(transport_addr_t);
}

job_t *job_create(uint16_t id, const char *name, const switch_proto_ops_t *proto, uint32_t world,
                  uint32_t nslots, uint32_t elems, uint32_t nthreads, uint32_t base)
{
    job_t *j = calloc(1, sizeof(*j));
    if (!j)
        return NULL;
    *j = (job_t){.id = id,
                 .world = world,
                 .nslots = nslots,
                 .elems = elems,
                 .nthreads = nthreads,
                 .base = base,
                 .proto = proto};
    snprintf(j->name, sizeof(j->name), "%s", name);
    j->addrs = calloc((size_t)nslots * world, sizeof(transport_addr_t));
    if (posix_memalign((void **)&j->threads, INAGG_CACHELINE, nthreads * sizeof(job_thread_t)))
        j->threads = NULL;
    if (j->addrs && j->threads)
        j->proto_state = proto->create(j);
    if (!j->proto_state) {
        job_free(j);
        return NULL;
    }
    memset(j->threads, 0, nthreads * sizeof(job_thread_t));
    for (uint32_t r = 0; r < INAGG_MAX_WORLD; r++)
        j->member_fd[r] = -1;
    return j;
}

void job_free(job_t *j)
{
    if (!j)
        return;
    if (j->proto_state)
        j->proto->destroy(j->proto_state);
    free(j->addrs);
    optjob_free(j->opt);
    free(j->opt_scratch);
    codecjob_free(j->codec_state);
    free(j->threads);
    free(j);
}

uint64_t job_sum(const job_t *j, int stat)
{
    uint64_t s = 0;
    for (uint32_t t = 0; t < j->nthreads; t++)
        s += STAT_GET(j->threads[t].c.v[stat]);
    return s;
}

uint32_t job_contributors(const job_t *j)
{
    uint64_t sum = 0;
    for (uint32_t r = 0; r < j->world; r++)
        sum += j->contrib[r] ? j->contrib[r] : 1;
    return sum > WIRE_MAX_CONTRIBUTORS ? WIRE_MAX_CONTRIBUTORS : (uint32_t)sum;
}
