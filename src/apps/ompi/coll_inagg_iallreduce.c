/*
 * coll_inagg_iallreduce.c - MPI_Iallreduce through the switch: the route (route.h) as for the
 * blocking call; a call it sends to the switch starts an inagg request and returns an MPI
 * generalized request, which a callback in Open MPI's progress engine completes once the
 * switch's result is in, so MPI_Wait, MPI_Test and their relatives work unchanged and the
 * caller's computation overlaps the allreduce. Requests of one communicator complete in the
 * order they were started, as the switch serves them. Any other call goes to the displaced
 * module's MPI_Iallreduce.
 */
#include "apps/ompi/coll_inagg.h"

#include <opal/runtime/opal_progress.h>

#include <stdatomic.h>
#include <stdlib.h>

/* One MPI_Iallreduce in flight: an inagg request behind an MPI generalized request. */
typedef struct pend {
    coll_inagg_module_t *m;
    inagg_request_t *ir;
    MPI_Request greq;
    int mpi_rc;
    struct pend *next;
} pend_t;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* the pending list */
static pend_t *g_pending;
static atomic_int g_npending;
static int g_hooked; /* the progress callback is registered (under g_mu) */

static int greq_query(void *extra, MPI_Status *status)
{
    pend_t *p = extra;
    PMPI_Status_set_elements(status, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_ANY_SOURCE; /* the empty status, as for any collective */
    status->MPI_TAG = MPI_ANY_TAG;
    status->MPI_ERROR = p->mpi_rc;
    return p->mpi_rc;
}

static int greq_free(void *extra)
{
    free(extra);
    return MPI_SUCCESS;
}

static int greq_cancel(void *extra, int complete)
{
    (void)extra;
    (void)complete;
    return MPI_SUCCESS; /* an allreduce under way cannot be cancelled; it completes normally */
}

/* Take the requests that are done (with `wait`: every request of `only`) out of the list,
 * finish them through inagg, then complete their MPI requests; how many were completed. */
static int complete_pending(int wait, coll_inagg_module_t *only)
{
    pend_t *done = NULL, **done_tail = &done;
    if (wait)
        pthread_mutex_lock(&g_mu);
    else if (pthread_mutex_trylock(&g_mu) != 0)
        return 0;
    for (pend_t **pp = &g_pending; *pp;) {
        pend_t *p = *pp;
        int finished = 0;
        if (wait && p->m == only) {
            pthread_mutex_lock(&p->m->mu);
            finished = 1;
        } else if (!wait && pthread_mutex_trylock(&p->m->mu) == 0) {
            if (inagg_test(p->ir, &finished) != INAGG_OK)
                finished = 1;
            if (!finished)
                pthread_mutex_unlock(&p->m->mu);
        }
        if (!finished) {
            pp = &p->next;
            continue;
        }
        p->mpi_rc = coll_inagg_finish_code(p->m, inagg_wait(p->ir));
        pthread_mutex_unlock(&p->m->mu);
        *pp = p->next;
        p->next = NULL;
        *done_tail = p;
        done_tail = &p->next;
        atomic_fetch_sub(&g_npending, 1);
    }
    pthread_mutex_unlock(&g_mu);
    int n = 0;
    while (done) { /* outside the lock: completing may free the request (greq_free) */
        pend_t *p = done;
        done = p->next;
        PMPI_Grequest_complete(p->greq);
        n++;
    }
    return n;
}

/* Called from Open MPI's progress loop (every MPI_Wait/Test spin, every blocking call). */
static int progress(void)
{
    if (atomic_load_explicit(&g_npending, memory_order_relaxed) == 0)
        return 0;
    return complete_pending(0, NULL);
}

void coll_inagg_complete_all(coll_inagg_module_t *m) { complete_pending(1, m); }

void coll_inagg_progress_off(void)
{
    pthread_mutex_lock(&g_mu);
    if (g_hooked)
        opal_progress_unregister(progress);
    g_hooked = 0;
    pthread_mutex_unlock(&g_mu);
}

/* Append p to the pending list, registering the progress callback at the first. */
static int add_pending(pend_t *p)
{
    pthread_mutex_lock(&g_mu);
    if (!g_hooked && opal_progress_register(progress) == OPAL_SUCCESS)
        g_hooked = 1;
    int hooked = g_hooked;
    if (hooked) {
        pend_t **pp = &g_pending;
        while (*pp)
            pp = &(*pp)->next;
        *pp = p;
        atomic_fetch_add(&g_npending, 1);
    }
    pthread_mutex_unlock(&g_mu);
    return hooked;
}

int coll_inagg_iallreduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                          struct ompi_op_t *op, struct ompi_communicator_t *comm,
                          ompi_request_t **request, mca_coll_base_module_t *module)
{
    coll_inagg_module_t *m = (coll_inagg_module_t *)module;
    inagg_dtype_t idt = INAGG_INT32;
    char why[160];
    if (coll_inagg_route(m, "iallreduce", sbuf, rbuf, count, dtype, op, comm, &idt, why,
                         sizeof(why)))
        return m->prev_iallreduce(sbuf, rbuf, count, dtype, op, comm, request,
                                  m->prev_iallreduce_module);
    pend_t *p = calloc(1, sizeof(*p));
    if (!p)
        return MPI_ERR_NO_MEM;
    p->m = m;
    int rc = PMPI_Grequest_start(greq_query, greq_free, greq_cancel, p, request);
    if (rc != MPI_SUCCESS) {
        free(p);
        return rc;
    }
    p->greq = *request;
    const void *send = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
    pthread_mutex_lock(&m->mu);
    inagg_result_t irc = inagg_iallreduce(m->ic, send, rbuf, (size_t)count, idt, INAGG_SUM, &p->ir);
    int in_flight = irc == INAGG_OK && p->ir; /* then the progress callback completes it */
    if (in_flight && !add_pending(p)) { /* no progress callback: finish it now */
        irc = inagg_wait(p->ir);
        in_flight = 0;
    }
    if (!in_flight)
        p->mpi_rc = coll_inagg_finish_code(m, irc);
    pthread_mutex_unlock(&m->mu); /* from here on p may be completed and freed if in flight */
    if (!in_flight) /* finished or failed here: its error comes out of MPI_Wait / MPI_Test */
        PMPI_Grequest_complete(p->greq);
    return MPI_SUCCESS;
}
