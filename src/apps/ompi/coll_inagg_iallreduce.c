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

#include <pthread.h>

#include "apps/mpi/greq.h"

static pthread_mutex_t g_hook_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_hooked; /* greq_progress is registered (under g_hook_mu) */

/* finish for greq: the owner is a module. */
static int finish_of(void *m, inagg_result_t rc) { return coll_inagg_finish_code(m, rc); }

void coll_inagg_complete_all(coll_inagg_module_t *m) { greq_complete(1, m); }

void coll_inagg_progress_off(void)
{
    pthread_mutex_lock(&g_hook_mu);
    if (g_hooked)
        opal_progress_unregister(greq_progress);
    g_hooked = 0;
    pthread_mutex_unlock(&g_hook_mu);
}

/* Whether greq_progress is registered with Open MPI's progress engine (at the first call). */
static int hooked(void)
{
    pthread_mutex_lock(&g_hook_mu);
    if (!g_hooked && opal_progress_register(greq_progress) == OPAL_SUCCESS)
        g_hooked = 1;
    int h = g_hooked;
    pthread_mutex_unlock(&g_hook_mu);
    return h;
}

int coll_inagg_iallreduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                          struct ompi_op_t *op, struct ompi_communicator_t *comm,
                          ompi_request_t **request, mca_coll_base_module_t *module)
{
    coll_inagg_module_t *m = (coll_inagg_module_t *)module;
    inagg_dtype_t idt = INAGG_INT32;
    char why[320];
    if (coll_inagg_route(m, "iallreduce", sbuf, rbuf, count, dtype, op, comm, &idt, why,
                         sizeof(why)))
        return m->prev_iallreduce(sbuf, rbuf, count, dtype, op, comm, request,
                                  m->prev_iallreduce_module);
    greq_t *g;
    int rc = greq_begin(m, &m->mu, finish_of, request, &g);
    if (rc != MPI_SUCCESS)
        return rc;
    const void *send = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
    inagg_request_t *ir = NULL;
    pthread_mutex_lock(&m->mu);
    inagg_result_t irc = inagg_iallreduce(m->ic, send, rbuf, (size_t)count, idt, INAGG_SUM, &ir);
    int in_flight = irc == INAGG_OK && ir; /* then the progress callback completes it */
    if (in_flight && !hooked()) { /* no progress callback: finish it now */
        irc = inagg_wait(ir);
        in_flight = 0;
    }
    int code = in_flight ? MPI_SUCCESS : coll_inagg_finish_code(m, irc);
    pthread_mutex_unlock(&m->mu);
    if (in_flight)
        greq_queue(g, ir); /* from here on g may be completed and freed */
    else /* finished or failed here: its error comes out of MPI_Wait / MPI_Test */
        greq_done(g, code);
    return MPI_SUCCESS;
}
