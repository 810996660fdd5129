/*
 * salvage.c - requests of inagg_iallreduce* in flight when no switch answers, finished over
 * another channel the ranks share (inagg_salvage_requests; failover.c does the same for a
 * blocking allreduce). A communicator that can salvage (switchml over udp, no codec, no
 * in-switch optimizer) records every request as it starts: its call and, per chunk, the
 * result as the switch sent it (worker_oprec_t, written by the engines). A request that ends
 * in a failure keeps its record here; one that finishes keeps it as the last finished op's
 * (another rank may still miss a chunk of it).
 *
 * Requests finish in start order on every rank, and a rank can have finished op k only when
 * every rank sent all of op k, and op k + 1 only when every rank finished op k: the ranks'
 * finished counts are at most one apart. The salvage agrees over the channel on the ops some
 * rank may hold a result of - from the lowest finished count up to the first op some rank
 * never started - and recovers each with the fail-over's plan (comm_recover_op): a chunk some
 * rank holds is handed on by the lowest holder, a chunk nobody holds is reduced again from the
 * inputs, which a rank's buffer still holds for every chunk it got no result of. The later
 * requests hold their inputs untouched: the caller runs them over the channel.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/errmsg.h"
#include "lib/worker/comm.h"

int comm_request_record(inagg_comm_t *c, worker_call_t *call, uint64_t *seq)
{
    worker_oprec_t *r = NULL;
    for (uint32_t i = 0; i < c->req_nspare && !r; i++) /* the first spare large enough */
        if (c->req_spare[i]->cap_words >= call->count || i + 1 == c->req_nspare) {
            r = c->req_spare[i];
            c->req_spare[i] = c->req_spare[--c->req_nspare];
        }
    if (!r && !(r = calloc(1, sizeof(*r))))
        return -ENOMEM;
    size_t elems = c->opts.packet_elems;
    if (comm_oprec_prepare(r, call->count, (call->count + elems - 1) / elems) != 0) {
        comm_oprec_free(r);
        free(r);
        return -ENOMEM;
    }
    r->op_tag = c->req_started + 1;
    *seq = c->req_started++;
    call->rec = r;
    return 0;
}

/* A record no longer needed: kept as a spare (its buffers reused by a later request: as many
 * as were in flight at once, up to COMM_REQ_SPARES), or freed. */
static void release(inagg_comm_t *c, worker_oprec_t *r)
{
    if (!r)
        return;
    if (c->req_nspare < COMM_REQ_SPARES) {
        c->req_spare[c->req_nspare++] = r;
        return;
    }
    comm_oprec_free(r);
    free(r);
}

void comm_request_ended(inagg_comm_t *c, const worker_call_t *call, uint64_t seq, int ok)
{
    if (ok < 0) { /* never started */
        release(c, call->rec);
        return;
    }
    if (ok) {
        release(c, c->req_last);
        c->req_last = call->rec;
        if (seq + 1 > c->req_done)
            c->req_done = seq + 1;
        return;
    }
    if (c->req_nfailed == c->req_capfailed) {
        size_t cap = c->req_capfailed ? 2 * c->req_capfailed : 8;
        worker_salv_t *f = realloc(c->req_failed, cap * sizeof(*f));
        if (!f) { /* the salvage then finds the gap and refuses */
            release(c, call->rec);
            return;
        }
        c->req_failed = f;
        c->req_capfailed = cap;
    }
    c->req_failed[c->req_nfailed++] = (worker_salv_t){.call = *call, .seq = seq};
}

static void drop_failed(inagg_comm_t *c)
{
    for (size_t i = 0; i < c->req_nfailed; i++)
        release(c, c->req_failed[i].call.rec);
    c->req_nfailed = 0;
}

void comm_requests_free(inagg_comm_t *c)
{
    drop_failed(c);
    free(c->req_failed);
    c->req_failed = NULL;
    c->req_capfailed = 0;
    release(c, c->req_last);
    c->req_last = NULL;
    for (uint32_t i = 0; i < c->req_nspare; i++) {
        comm_oprec_free(c->req_spare[i]);
        free(c->req_spare[i]);
    }
    c->req_nspare = 0;
}

/* a - b modulo 2^31, as a signed distance */
static int64_t distance(uint32_t a, uint32_t b)
{
    uint32_t d = (a - b) & RECOVERY_MASK;
    return d & 0x40000000u ? (int64_t)d - (int64_t)0x80000000u : (int64_t)d;
}

/* The ops to recover, as offsets from this rank's finished count: [*from, *to). Agreed over
 * the channel from every rank's finished count and the first op it never started. */
static int agree_range(inagg_comm_t *c, const inagg_channel_t *ch, int64_t *from, int64_t *to,
                       char *detail, size_t dlen)
{
    uint32_t *state = calloc((size_t)c->world * 2u, sizeof(uint32_t));
    if (!state)
        return set_err(detail, dlen, -ENOMEM, "out of memory for the salvage");
    uint32_t mine = (uint32_t)(c->req_done & RECOVERY_MASK);
    state[2u * c->rank] = mine;
    state[2u * c->rank + 1] = (uint32_t)((c->req_done + c->req_nfailed) & RECOVERY_MASK);
    if (ch->allreduce(ch->ctx, state, state, (size_t)c->world * 2u, INAGG_INT32, INAGG_SUM)) {
        free(state);
        return set_err(detail, dlen, -EIO, "the salvage channel failed");
    }
    int64_t low = 0, high = 0, end = INT64_MAX;
    for (uint32_t r = 0; r < c->world; r++) {
        int64_t done = distance(state[2u * r], mine), started = distance(state[2u * r + 1], mine);
        low = done < low ? done : low;
        high = done > high ? done : high;
        end = started < end ? started : end;
    }
    free(state);
    if (high - low > 1)
        return set_err(detail, dlen, -EPROTO,
                       "the ranks' finished requests are %lld apart (at most one can be)",
                       (long long)(high - low));
    *from = low;
    *to = end > low ? end : low;
    return 0;
}

/* Recover the ops [from, to) (offsets from this rank's finished count), in order. */
static int recover_range(inagg_comm_t *c, int64_t from, int64_t to, recovery_counts_t *sum,
                         char *detail, size_t dlen)
{
    for (int64_t j = from; j < to; j++) {
        worker_call_t *call = j >= 0 ? &c->req_failed[j].call : NULL;
        worker_oprec_t *rec = call ? call->rec : c->req_last;
        if (!rec || (!call && rec->op_tag != c->req_done))
            return set_err(detail, dlen, -EPROTO,
                           "request %llu's record is gone (its result cannot be handed on)",
                           (unsigned long long)(c->req_done + (uint64_t)j));
        recovery_counts_t n;
        int rc = comm_recover_op(c, call, rec, call == NULL, &n, detail, dlen);
        if (rc != 0 && rc != -EOVERFLOW && rc != -EDOM)
            return rc;
        sum->deliver += n.deliver;
        sum->reduce += n.reduce;
    }
    return 0;
}

/* Whether this rank's failed requests can be salvaged: 0 or -EINVAL/-EPROTO with the reason. */
static int check_failed(inagg_comm_t *c, char *detail, size_t dlen)
{
    for (size_t i = 0; i < c->req_nfailed; i++) {
        const worker_salv_t *f = &c->req_failed[i];
        if (f->seq != c->req_done + i || !f->call.rec)
            return set_err(detail, dlen, -EPROTO,
                           "request %llu failed after a later one finished, or lost its record",
                           (unsigned long long)f->seq);
        if (f->call.op != INAGG_SUM && f->call.op != INAGG_AVG)
            return set_err(detail, dlen, -EINVAL, "request %llu: op %d", (unsigned long long)f->seq,
                           (int)f->call.op);
    }
    return 0;
}

inagg_result_t inagg_salvage_requests(inagg_comm_t *comm, const inagg_channel_t *ch,
                                      inagg_salvage_t *out)
{
    if (!comm)
        return INAGG_ERR_INVALID;
    char detail[COMM_DETAIL_MAX] = "";
    if (comm_salvage_check(comm, ch, out, INAGG_SUM, detail, sizeof(detail)) != 0 ||
        check_failed(comm, detail, sizeof(detail)) != 0)
        return comm_set_error(comm, INAGG_ERR_INVALID, "%s", detail);
    comm_teardown(comm); /* the engines are stopped and joined: the records are settled */
    inagg_salvage_t s = {.chunk_elems = comm->opts.packet_elems};
    for (size_t i = 0; i < comm->req_nfailed; i++) {
        const worker_oprec_t *r = comm->req_failed[i].call.rec;
        s.nchunks += r->nchunks;
        for (size_t k = 0; k < r->nchunks; k++)
            s.chunks_held += r->held[k] != 0;
    }
    int64_t from = 0, to = 0;
    recovery_counts_t n = {0};
    comm->channel = ch;
    int rc = agree_range(comm, ch, &from, &to, detail, sizeof(detail));
    if (rc == 0)
        rc = recover_range(comm, from, to, &n, detail, sizeof(detail));
    comm->channel = NULL;
    if (rc != 0)
        return comm_set_error(comm, INAGG_ERR_CONNECTION, "salvage: %s", detail);
    s.completed = to > 0 ? (uint32_t)to : 0;
    s.chunks_delivered = n.deliver;
    s.chunks_reduced = n.reduce;
    drop_failed(comm);
    uint32_t fill = out->struct_size < sizeof(s) ? out->struct_size : (uint32_t)sizeof(s);
    s.struct_size = fill;
    memcpy(out, &s, fill);
    return INAGG_OK;
}
