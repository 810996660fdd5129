/*
 * greq.h - nonblocking allreduces through the switch as MPI generalized requests: each inagg
 * request stands behind an MPI_Request that MPI_Wait, MPI_Test and their relatives handle
 * unchanged, and a callback in MPI's progress engine (greq_progress, registered by the caller
 * with opal_progress_register) completes it once the switch's result is in. Shared by the PMPI
 * interposer (pmpi.c) and the Open MPI component (src/apps/ompi/); uses only PMPI_ calls.
 *
 * An owner is what serialises its inagg calls (a tracked communicator, a component module):
 * greq takes owner_mu around inagg_test and inagg_wait of its requests, and finish(owner, rc)
 * turns a finished call's result into the MPI error code its request reports.
 */
#ifndef INAGG_MPI_GREQ_H
#define INAGG_MPI_GREQ_H

#include <mpi.h>
#include <pthread.h>

#include "inagg.h"

typedef int (*greq_finish_fn)(void *owner, inagg_result_t rc);
typedef struct greq greq_t;

/* Start the MPI generalized request of one allreduce of owner's; *request is its handle.
 * MPI_SUCCESS and *out, or an MPI error code (nothing started). */
int greq_begin(void *owner, pthread_mutex_t *owner_mu, greq_finish_fn finish, MPI_Request *request,
               greq_t **out);

/* ir (started with owner_mu held) is in flight: the progress callback completes it. */
void greq_queue(greq_t *g, inagg_request_t *ir);

/* Nothing in flight (finished here, or failed to start): complete g now with mpi_rc, which
 * MPI_Wait / MPI_Test report. g is freed by MPI once its request is. */
void greq_done(greq_t *g, int mpi_rc);

/* Complete the queued requests that are done; with wait, every request of `only` (NULL: of
 * every owner), waiting for each. The number completed. */
int greq_complete(int wait, const void *only);

/* The progress callback: greq_complete(0, NULL) when anything is queued. */
int greq_progress(void);

#endif /* INAGG_MPI_GREQ_H */
