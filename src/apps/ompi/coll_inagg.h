/*
 * coll_inagg.h - Open MPI's `coll/inagg` component (mca_coll_inagg.so): what the component
 * (coll_inagg_component.c: its parameters) and the module (coll_inagg_module.c: one per
 * communicator, its switch job, the allreduce) share. Built out of tree against Open MPI's
 * development headers; docs/INTEGRATIONS.md says how it is selected and configured.
 */
#ifndef INAGG_COLL_INAGG_H
#define INAGG_COLL_INAGG_H

#include <ompi_config.h> /* Open MPI's headers first, as its own components include them */

#include <mpi.h>
#include <ompi/mca/coll/coll.h>

#include <pthread.h>

#include "apps/mpi/route.h"
#include "inagg.h"

#define COLL_INAGG_TAG "coll/inagg: "
#define COLL_INAGG_PRIORITY_DEFAULT 40

/* The component: Open MPI's description and the parameters' values (strings as given). */
typedef struct coll_inagg_component {
    mca_coll_base_component_2_0_0_t super;
    int priority; /* coll_inagg_priority */
    char *switch_addr; /* coll_inagg_switch: HOST:PORT; empty: the component stays out */
    char *min_bytes; /* coll_inagg_min_bytes, route_parse_bytes' spelling; empty: not set */
    char *calibration; /* coll_inagg_calibration: a file of `inagg model calibrate` */
    char *one_host; /* coll_inagg_one_host: mpi or switch */
    char *float_mode; /* coll_inagg_float_mode: native or fixed */
    int verbose; /* coll_inagg_verbose: 0, 1 (a line per communicator), 2 (per call) */
    int connect_ms; /* coll_inagg_connect_ms: how long the switch has to answer */
    int timeout_ms; /* coll_inagg_timeout_ms: the job's timeout */
    route_policy_t policy; /* min_bytes and one_host, parsed once */
    int policy_ready;
} coll_inagg_component_t;

extern coll_inagg_component_t mca_coll_inagg_component;

/* One communicator's module: its switch job (or none) and the module it displaced. */
typedef struct coll_inagg_module {
    mca_coll_base_module_t super;
    inagg_comm_t *ic; /* NULL: every call goes to the previous module */
    int join_pending; /* the job is joined at the first call the switch would take */
    int failed; /* a call through the switch failed: the rest go to the previous module */
    pthread_mutex_t mu; /* ic is used by one thread at a time (the caller, or progress) */
    route_locality_t hosts;
    struct ompi_communicator_t *comm; /* the communicator it was enabled on */
    mca_coll_base_module_allreduce_fn_t prev_allreduce;
    mca_coll_base_module_t *prev_allreduce_module;
    mca_coll_base_module_iallreduce_fn_t prev_iallreduce;
    mca_coll_base_module_t *prev_iallreduce_module;
    unsigned long n_switch, n_mpi; /* calls each way, for coll_inagg_verbose >= 1 */
    char name[MPI_MAX_OBJECT_NAME]; /* the communicator's name at enable time */
    int rank;
} coll_inagg_module_t;

OBJ_CLASS_DECLARATION(coll_inagg_module_t);

/* The module's entry points (coll_inagg_module.c). */
int coll_inagg_init_query(bool enable_progress_threads, bool enable_mpi_threads);
mca_coll_base_module_t *coll_inagg_comm_query(struct ompi_communicator_t *comm, int *priority);

/* The routing policy from the parameters, parsed at the first use (rank `rank` warns). */
const route_policy_t *coll_inagg_policy(int rank);

/* The route of one call on module m (route.h), its line for coll_inagg_verbose=2, and the
 * inagg element type when it goes through the switch: NULL, or why MPI keeps it. `what`
 * names the call in that line (allreduce, iallreduce). */
const char *coll_inagg_route(coll_inagg_module_t *m, const char *what, const void *sbuf, void *rbuf,
                             int count, struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                             struct ompi_communicator_t *comm, inagg_dtype_t *idt, char *why,
                             size_t len);
/* An inagg result as an MPI code; a failure is reported on stderr and marks the module failed. */
int coll_inagg_finish_code(coll_inagg_module_t *m, inagg_result_t rc);

/* MPI_Iallreduce (coll_inagg_iallreduce.c): through the switch behind an MPI generalized
 * request that Open MPI's progress engine completes, or the displaced module's. */
int coll_inagg_iallreduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                          struct ompi_op_t *op, struct ompi_communicator_t *comm,
                          ompi_request_t **request, mca_coll_base_module_t *module);
/* Finish every request of module m still in flight (before its job is left). */
void coll_inagg_complete_all(coll_inagg_module_t *m);
/* The progress callback's end, when the component closes. */
void coll_inagg_progress_off(void);

#endif
