/*
 * pmpi_c.c - the C bindings of libinagg-pmpi.so: each wrapped MPI entry point calls the
 * interposer's hooks (pmpi_int.h: joining at MPI_Init, tracking communicators, leaving at
 * MPI_Comm_free and MPI_Finalize) around its PMPI_ twin, and sends the allreduces the switch
 * can serve through it. The Fortran bindings are in pmpi_fortran.c.
 */
#include <mpi.h>

#include "apps/mpi/pmpi_int.h"

int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS)
        after_init();
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS)
        after_init();
    return rc;
}

int MPI_Finalize(void)
{
    before_finalize();
    return PMPI_Finalize();
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm)
{
    inagg_dtype_t idt;
    tracked_t *t = accelerable("allreduce", sendbuf, recvbuf, count, datatype, op, comm, &idt);
    if (t)
        return accel_allreduce(t, sendbuf, recvbuf, count, idt, comm);
    count_passed();
    return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}

int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                   MPI_Comm comm, MPI_Request *request)
{
    inagg_dtype_t idt;
    tracked_t *t =
        request ? accelerable("iallreduce", sendbuf, recvbuf, count, datatype, op, comm, &idt)
                : NULL;
    if (t)
        return accel_iallreduce(t, sendbuf, recvbuf, count, idt, comm, request);
    count_passed();
    return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
}

/* After a call that made *newcomm: track it when the call succeeded; the call's code. */
static int tracked_new(int rc, MPI_Comm *newcomm)
{
    if (rc == MPI_SUCCESS)
        after_new_comm(*newcomm);
    return rc;
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
    return tracked_new(PMPI_Comm_dup(comm, newcomm), newcomm);
}

int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm)
{
    return tracked_new(PMPI_Comm_dup_with_info(comm, info, newcomm), newcomm);
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
    return tracked_new(PMPI_Comm_split(comm, color, key, newcomm), newcomm);
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm)
{
    return tracked_new(PMPI_Comm_create(comm, group, newcomm), newcomm);
}

int MPI_Comm_free(MPI_Comm *comm)
{
    if (comm)
        before_free(*comm);
    return PMPI_Comm_free(comm);
}
