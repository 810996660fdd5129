/*
 * pmpi_int.h - what the interposer's core (pmpi.c: joining, tracking communicators, the
 * accelerated allreduces) offers its C and Fortran bindings (pmpi_c.c, pmpi_fortran.c).
 * Internal: the version script (pmpi.map) keeps these symbols out of libinagg-pmpi.so's
 * exports.
 */
#ifndef INAGG_PMPI_INT_H
#define INAGG_PMPI_INT_H

#include <mpi.h>

#include "inagg.h"

#define TAG "inagg-pmpi: "

/* One MPI communicator whose allreduces go through the switch (defined in pmpi.c). */
typedef struct tracked tracked_t;

/* Whether the base job exists (allreduces may be accelerated). */
int pmpi_joined(void);
/* One call passed to MPI unchanged (the count rank 0 prints at MPI_Finalize). */
void count_passed(void);
/* After MPI_Init / MPI_Init_thread succeeded: join MPI_COMM_WORLD's job (collective). */
void after_init(void);
/* After a communicator was created from a tracked one: track it too when congruent. */
void after_new_comm(MPI_Comm newcomm);
/* Before MPI_Comm_free: leave the communicator's job. */
void before_free(MPI_Comm comm);
/* Before MPI_Finalize: complete what is pending, leave every job, print the summary. */
void before_finalize(void);
/* The tracked communicator an allreduce (call: "allreduce" or "iallreduce", for the log) with
 * these arguments may go through (and its inagg element type), or NULL: MPI does it. */
tracked_t *accelerable(const char *call, const void *sb, const void *rb, int count, MPI_Datatype dt,
                       MPI_Op op, MPI_Comm comm, inagg_dtype_t *idt);
/* The allreduce through the switch; an MPI error code. */
int accel_allreduce(tracked_t *t, const void *sb, void *rb, int count, inagg_dtype_t idt,
                    MPI_Comm comm);
/* The same, non-blocking, behind an MPI generalized request. */
int accel_iallreduce(tracked_t *t, const void *sb, void *rb, int count, inagg_dtype_t idt,
                     MPI_Comm comm, MPI_Request *request);

#endif
