/*
 * route.c - which way one MPI allreduce goes (route.h): the checks in order, each with the
 * sentence INAGG_VERBOSE=2 prints when it keeps the call with MPI, and the byte counts the
 * threshold is spelled in.
 */
#include "apps/mpi/route.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "lib/base/errmsg.h"

const char *route_decide(const route_policy_t *p, const route_call_t *c, char *why, size_t len)
{
    if (c->hosts == ROUTE_ONE_HOST && !p->one_host_switch)
        return "every rank is on one host: MPI's shared memory is faster";
    if (!c->has_job)
        return "the communicator has no switch job";
    if (!c->op_is_sum)
        return "the op is not MPI_SUM";
    if (!c->dtype_ok)
        return "the datatype is not a 4-byte int or float the switch adds";
    if (!c->has_recv)
        return "no receive buffer";
    if (c->buffers_overlap)
        return "the send and receive buffers overlap";
    if (c->count < 1 || c->count < p->min_count) {
        snprintf(why, len, "count %ld is below the minimum of %ld elements", c->count,
                 p->min_count > 1 ? p->min_count : 1);
        return why;
    }
    size_t bytes = (size_t)c->count * c->elem_bytes;
    if (bytes < p->min_bytes) {
        snprintf(why, len, "%zu bytes are below the threshold of %zu bytes", bytes, p->min_bytes);
        return why;
    }
    return NULL;
}

int route_parse_bytes(const char *text, const char *what, size_t *out, char *err, size_t errlen)
{
    if (!text || !*text)
        return set_err(err, errlen, -EINVAL, "%s is empty: give a byte count such as 65536 or 64K",
                       what);
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text || text[0] == '-' || errno)
        return set_err(err, errlen, -EINVAL, "%s='%s' is not a byte count such as 65536 or 64K",
                       what, text);
    unsigned shift = 0;
    switch (*end) {
        case 'k':
        case 'K':
            shift = 10;
            end++;
            break;
        case 'm':
        case 'M':
            shift = 20;
            end++;
            break;
        case 'g':
        case 'G':
            shift = 30;
            end++;
            break;
        default: break;
    }
    if (*end)
        return set_err(err, errlen, -EINVAL,
                       "%s='%s' is not a byte count: only K, M or G may follow the number", what,
                       text);
    if (v > (SIZE_MAX >> shift))
        return set_err(err, errlen, -EINVAL, "%s='%s' is too large", what, text);
    *out = (size_t)(v << shift);
    return 0;
}
