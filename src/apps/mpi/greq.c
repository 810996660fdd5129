/*
 * greq.c - inagg requests behind MPI generalized requests (greq.h): one list of the requests
 * in flight, in the order they were queued, completed from MPI's progress engine.
 */
#include "apps/mpi/greq.h"

#include <stdatomic.h>
#include <stdlib.h>

struct greq {
    void *owner;
    pthread_mutex_t *owner_mu;
    greq_finish_fn finish;
    inagg_request_t *ir;
    MPI_Request request;
    int mpi_rc;
    struct greq *next;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* the list */
static greq_t *g_head, **g_tail = &g_head;
static atomic_int g_queued;

static int greq_query(void *extra, MPI_Status *status)
{
    greq_t *g = extra;
    PMPI_Status_set_elements(status, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_ANY_SOURCE; /* the empty status, as for any collective */
    status->MPI_TAG = MPI_ANY_TAG;
    status->MPI_ERROR = g->mpi_rc;
    return g->mpi_rc;
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

int greq_begin(void *owner, pthread_mutex_t *owner_mu, greq_finish_fn finish, MPI_Request *request,
               greq_t **out)
{
    greq_t *g = calloc(1, sizeof(*g));
    if (!g)
        return MPI_ERR_NO_MEM;
    g->owner = owner;
    g->owner_mu = owner_mu;
    g->finish = finish;
    int rc = PMPI_Grequest_start(greq_query, greq_free, greq_cancel, g, request);
    if (rc != MPI_SUCCESS) {
        free(g);
        return rc;
    }
    g->request = *request;
    *out = g;
    return MPI_SUCCESS;
}

void greq_queue(greq_t *g, inagg_request_t *ir)
{
    g->ir = ir;
    pthread_mutex_lock(&g_mu);
    *g_tail = g;
    g_tail = &g->next;
    atomic_fetch_add(&g_queued, 1);
    pthread_mutex_unlock(&g_mu);
}

void greq_done(greq_t *g, int mpi_rc)
{
    g->mpi_rc = mpi_rc;
    PMPI_Grequest_complete(g->request);
}

/* Whether g's call is finished (with wait: waited for), its owner's lock then held. */
static int take_if_finished(greq_t *g, int wait, const void *only)
{
    int finished = 0;
    if (wait && (!only || g->owner == only)) {
        pthread_mutex_lock(g->owner_mu);
        finished = 1;
    } else if (!wait && pthread_mutex_trylock(g->owner_mu) == 0) {
        if (inagg_test(g->ir, &finished) != INAGG_OK)
            finished = 1;
        if (!finished)
            pthread_mutex_unlock(g->owner_mu);
    }
    return finished;
}

int greq_complete(int wait, const void *only)
{
    greq_t *done = NULL, **done_tail = &done;
    if (wait)
        pthread_mutex_lock(&g_mu);
    else if (pthread_mutex_trylock(&g_mu) != 0)
        return 0;
    for (greq_t **gp = &g_head; *gp;) {
        greq_t *g = *gp;
        if (!take_if_finished(g, wait, only)) {
            gp = &g->next;
            continue;
        }
        g->mpi_rc = g->finish(g->owner, inagg_wait(g->ir));
        pthread_mutex_unlock(g->owner_mu);
        *gp = g->next;
        g->next = NULL;
        *done_tail = g;
        done_tail = &g->next;
        atomic_fetch_sub(&g_queued, 1);
    }
    g_tail = &g_head;
    while (*g_tail)
        g_tail = &(*g_tail)->next;
    pthread_mutex_unlock(&g_mu);
    int n = 0;
    while (done) { /* outside the lock: completing may free the request (greq_free) */
        greq_t *g = done;
        done = g->next;
        PMPI_Grequest_complete(g->request);
        n++;
    }
    return n;
}

int greq_progress(void)
{
    if (atomic_load_explicit(&g_queued, memory_order_relaxed) == 0)
        return 0;
    return greq_complete(0, NULL);
}
