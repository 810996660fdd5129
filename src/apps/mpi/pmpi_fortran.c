/*
 * pmpi_fortran.c - the interposer's Fortran bindings: each mangling of the wrapped MPI calls
 * (and Open MPI's shared Fortran back ends that `use mpi_f08` reaches) converts handles and
 * MPI_IN_PLACE, hands accelerable sum-allreduces to pmpi.c, and passes everything else to the
 * binding below the interposer.
 */
#include <mpi.h>

#include <dlfcn.h>
#include <stdio.h>

#include "apps/mpi/pmpi_int.h"

/* ------------------------------------- Fortran bindings ----------------------------------- */

/* The binding the program would have called: Open MPI's shared back end when present, else
 * the next definition of the same name. */
static void *next_fortran(const char *backend, const char *name)
{
    void *f = dlsym(RTLD_NEXT, backend);
    return f ? f : dlsym(RTLD_NEXT, name);
}

#define NEXT(var, backend, name)                                                                   \
    do {                                                                                           \
        if (!(var))                                                                                \
            *(void **)&(var) = next_fortran(backend, name);                                        \
    } while (0)

static void missing(const char *name, MPI_Fint *ierr)
{
    fprintf(stderr, TAG "no Fortran binding %s below the interposer\n", name);
    if (ierr)
        *ierr = MPI_ERR_INTERN;
}

/* Fortran MPI_IN_PLACE is the address of a common block; Open MPI's is mpi_fortran_in_place. */
static int fortran_in_place(const void *p)
{
    static const char *const names[] = {"mpi_fortran_in_place_", "mpi_fortran_in_place",
                                        "mpi_fortran_in_place__", "MPI_FORTRAN_IN_PLACE"};
    static void *addr[4];
    static int looked;
    if (!looked) { /* the addresses are fixed once the program is loaded */
        for (size_t i = 0; i < 4; i++)
            addr[i] = dlsym(RTLD_DEFAULT, names[i]);
        looked = 1;
    }
    for (size_t i = 0; i < 4; i++)
        if (addr[i] && addr[i] == p)
            return 1;
    return 0;
}

/* Each binding's type: the entry points are declared with it and the binding below is
 * called through it, so the two cannot disagree. */
typedef void f_init_fn(MPI_Fint *);
typedef void f_init_thread_fn(MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void f_allreduce_fn(void *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                            MPI_Fint *);
typedef void f_iallreduce_fn(void *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                             MPI_Fint *, MPI_Fint *);
typedef void f_dup_fn(MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void f_split_fn(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void f_create_fn(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void f_free_fn(MPI_Fint *, MPI_Fint *);

static void f_init(const char *name, MPI_Fint *ierr)
{
    static f_init_fn *next;
    NEXT(next, "ompi_init_f", name);
    if (!next)
        return missing(name, ierr);
    next(ierr);
    if (*ierr == MPI_SUCCESS)
        after_init();
}

static void f_init_thread(const char *name, MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr)
{
    static f_init_thread_fn *next;
    NEXT(next, "ompi_init_thread_f", name);
    if (!next)
        return missing(name, ierr);
    next(required, provided, ierr);
    if (*ierr == MPI_SUCCESS)
        after_init();
}

static void f_finalize(const char *name, MPI_Fint *ierr)
{
    static f_init_fn *next;
    NEXT(next, "ompi_finalize_f", name);
    if (!next)
        return missing(name, ierr);
    before_finalize();
    next(ierr);
}

/* A Fortran allreduce's arguments in C terms, when inagg takes it. */
struct f_accel {
    tracked_t *t; /* the communicator's inagg state */
    void *s; /* the send buffer, MPI_IN_PLACE for Fortran's */
    MPI_Comm c;
    inagg_dtype_t idt;
};

/* Does inagg take this Fortran allreduce (joined, and accelerable())? 1 with *a filled, or 0. */
static int f_accelerable(const char *call, void *sb, void *rb, MPI_Fint *count, MPI_Fint *dt,
                         MPI_Fint *op, MPI_Fint *comm, struct f_accel *a)
{
    if (!pmpi_joined())
        return 0;
    a->c = PMPI_Comm_f2c(*comm);
    a->s = fortran_in_place(sb) ? MPI_IN_PLACE : sb;
    a->t = accelerable(call, a->s, rb, *count, PMPI_Type_f2c(*dt), PMPI_Op_f2c(*op), a->c, &a->idt);
    return a->t != NULL;
}

static void f_allreduce(const char *name, void *sb, void *rb, MPI_Fint *count, MPI_Fint *dt,
                        MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierr)
{
    static f_allreduce_fn *next;
    struct f_accel a;
    if (f_accelerable("allreduce", sb, rb, count, dt, op, comm, &a)) {
        int rc = accel_allreduce(a.t, a.s, rb, *count, a.idt, a.c);
        if (ierr)
            *ierr = rc;
        return;
    }
    NEXT(next, "ompi_allreduce_f", name);
    if (!next)
        return missing(name, ierr);
    count_passed();
    next(sb, rb, count, dt, op, comm, ierr);
}

static void f_iallreduce(const char *name, void *sb, void *rb, MPI_Fint *count, MPI_Fint *dt,
                         MPI_Fint *op, MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr)
{
    static f_iallreduce_fn *next;
    struct f_accel a;
    if (f_accelerable("iallreduce", sb, rb, count, dt, op, comm, &a)) {
        MPI_Request r = MPI_REQUEST_NULL;
        int rc = accel_iallreduce(a.t, a.s, rb, *count, a.idt, a.c, &r);
        if (rc == MPI_SUCCESS)
            *request = PMPI_Request_c2f(r);
        if (ierr)
            *ierr = rc;
        return;
    }
    NEXT(next, "ompi_iallreduce_f", name);
    if (!next)
        return missing(name, ierr);
    count_passed();
    next(sb, rb, count, dt, op, comm, request, ierr);
}

static void f_comm_dup(const char *name, MPI_Fint *comm, MPI_Fint *newcomm, MPI_Fint *ierr)
{
    static f_dup_fn *next;
    NEXT(next, "ompi_comm_dup_f", name);
    if (!next)
        return missing(name, ierr);
    next(comm, newcomm, ierr);
    if (*ierr == MPI_SUCCESS)
        after_new_comm(PMPI_Comm_f2c(*newcomm));
}

static void f_comm_split(const char *name, MPI_Fint *comm, MPI_Fint *color, MPI_Fint *key,
                         MPI_Fint *newcomm, MPI_Fint *ierr)
{
    static f_split_fn *next;
    NEXT(next, "ompi_comm_split_f", name);
    if (!next)
        return missing(name, ierr);
    next(comm, color, key, newcomm, ierr);
    if (*ierr == MPI_SUCCESS)
        after_new_comm(PMPI_Comm_f2c(*newcomm));
}

static void f_comm_create(const char *name, MPI_Fint *comm, MPI_Fint *group, MPI_Fint *newcomm,
                          MPI_Fint *ierr)
{
    static f_create_fn *next;
    NEXT(next, "ompi_comm_create_f", name);
    if (!next)
        return missing(name, ierr);
    next(comm, group, newcomm, ierr);
    if (*ierr == MPI_SUCCESS)
        after_new_comm(PMPI_Comm_f2c(*newcomm));
}

static void f_comm_free(const char *name, MPI_Fint *comm, MPI_Fint *ierr)
{
    static f_free_fn *next;
    NEXT(next, "ompi_comm_free_f", name);
    if (!next)
        return missing(name, ierr);
    before_free(PMPI_Comm_f2c(*comm));
    next(comm, ierr);
}

/* One Fortran entry point `name` of type `type`, taking the parameters after `args` and
 * handing `args` with its own name to `body`. */
#define FORTRAN_ENTRY(name, type, body, args, ...)                                                 \
    type name;                                                                                     \
    void name(__VA_ARGS__) { body(#name, UNPAREN args); }
#define UNPAREN(...) __VA_ARGS__

/* That entry point under every Fortran name a compiler may use, plus Open MPI's back end. */
#define FORTRAN_NAMES(lower, upper, backend, ...)                                                  \
    FORTRAN_ENTRY(lower, __VA_ARGS__)                                                              \
    FORTRAN_ENTRY(lower##_, __VA_ARGS__)                                                           \
    FORTRAN_ENTRY(lower##__, __VA_ARGS__)                                                          \
    FORTRAN_ENTRY(upper, __VA_ARGS__)                                                              \
    FORTRAN_ENTRY(backend, __VA_ARGS__)

FORTRAN_NAMES(mpi_init, MPI_INIT, ompi_init_f, f_init_fn, f_init, (ierr), MPI_Fint *ierr)
FORTRAN_NAMES(mpi_init_thread, MPI_INIT_THREAD, ompi_init_thread_f, f_init_thread_fn, f_init_thread,
              (required, provided, ierr), MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr)
FORTRAN_NAMES(mpi_finalize, MPI_FINALIZE, ompi_finalize_f, f_init_fn, f_finalize, (ierr),
              MPI_Fint *ierr)
FORTRAN_NAMES(mpi_allreduce, MPI_ALLREDUCE, ompi_allreduce_f, f_allreduce_fn, f_allreduce,
              (sb, rb, count, dt, op, comm, ierr), void *sb, void *rb, MPI_Fint *count,
              MPI_Fint *dt, MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierr)
FORTRAN_NAMES(mpi_iallreduce, MPI_IALLREDUCE, ompi_iallreduce_f, f_iallreduce_fn, f_iallreduce,
              (sb, rb, count, dt, op, comm, request, ierr), void *sb, void *rb, MPI_Fint *count,
              MPI_Fint *dt, MPI_Fint *op, MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr)
FORTRAN_NAMES(mpi_comm_dup, MPI_COMM_DUP, ompi_comm_dup_f, f_dup_fn, f_comm_dup,
              (comm, newcomm, ierr), MPI_Fint *comm, MPI_Fint *newcomm, MPI_Fint *ierr)
FORTRAN_NAMES(mpi_comm_split, MPI_COMM_SPLIT, ompi_comm_split_f, f_split_fn, f_comm_split,
              (comm, color, key, newcomm, ierr), MPI_Fint *comm, MPI_Fint *color, MPI_Fint *key,
              MPI_Fint *newcomm, MPI_Fint *ierr)
FORTRAN_NAMES(mpi_comm_create, MPI_COMM_CREATE, ompi_comm_create_f, f_create_fn, f_comm_create,
              (comm, group, newcomm, ierr), MPI_Fint *comm, MPI_Fint *group, MPI_Fint *newcomm,
              MPI_Fint *ierr)
FORTRAN_NAMES(mpi_comm_free, MPI_COMM_FREE, ompi_comm_free_f, f_free_fn, f_comm_free, (comm, ierr),
              MPI_Fint *comm, MPI_Fint *ierr)
