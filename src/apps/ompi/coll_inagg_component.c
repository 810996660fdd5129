/*
 * coll_inagg_component.c - the `coll/inagg` component as Open MPI sees it: its name and
 * version, its query functions (coll_inagg_module.c), and its MCA parameters, which
 * `ompi_info --param coll inagg --level 9` lists:
 *
 *   coll_inagg_switch      HOST:PORT of the switch (default $INAGG_SWITCH); empty: the
 *                          component stays out of every communicator
 *   coll_inagg_priority    40: above Open MPI's tuned (30), so a configured switch is used
 *   coll_inagg_min_bytes   calls of fewer bytes stay with MPI (default $INAGG_MIN_BYTES; empty:
 *                          the calibration's route_min_bytes, else 1M, route.h)
 *   coll_inagg_calibration the file `inagg model calibrate` wrote (default $INAGG_CALIBRATION)
 *   coll_inagg_one_host    mpi (default, or $INAGG_ONE_HOST): a communicator whose ranks share
 *                          one host keeps MPI's shared memory; switch: it goes through the switch
 *   coll_inagg_float_mode  native (default) or fixed (inagg.h), as $INAGG_FLOAT_MODE
 *   coll_inagg_verbose     1: a line per communicator (its job, its count of calls each way);
 *                          2: a line per allreduce, its route and why (default $INAGG_VERBOSE)
 *   coll_inagg_connect_ms  how long the switch has to answer before a communicator is joined
 *   coll_inagg_timeout_ms  the job's timeout (inagg_options_t.timeout_ms)
 */
#include "apps/ompi/coll_inagg.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int coll_inagg_register(void);
static int coll_inagg_close(void);

coll_inagg_component_t mca_coll_inagg_component = {
    .super =
        {
            .collm_version =
                {
                    MCA_COLL_BASE_VERSION_2_0_0,
                    .mca_component_name = "inagg",
                    MCA_BASE_MAKE_VERSION(component, INAGG_VERSION_MAJOR, INAGG_VERSION_MINOR,
                                          INAGG_VERSION_PATCH),
                    .mca_close_component = coll_inagg_close,
                    .mca_register_component_params = coll_inagg_register,
                },
            .collm_data = {MCA_BASE_METADATA_PARAM_NONE},
            .collm_init_query = coll_inagg_init_query,
            .collm_comm_query = coll_inagg_comm_query,
        },
};

/* An environment variable's value, or `dflt` when it is unset or empty. */
static const char *env_or(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

/* One MCA parameter: coll_inagg_<name>, its help, where its value lives in the component, and
 * its default: the environment variable `env` when set and not empty, else `dflt`. */
typedef struct coll_inagg_param {
    const char *name, *help;
    int is_int;
    size_t offset; /* of the char * or int in coll_inagg_component_t */
    const char *env, *dflt;
} coll_inagg_param_t;

#define COLL_INAGG_STR(x) #x
#define COLL_INAGG_XSTR(x) COLL_INAGG_STR(x)

static const coll_inagg_param_t coll_inagg_params[] = {
    {"priority",
     "Priority of the inagg coll component (40: above tuned; the component takes part only when "
     "coll_inagg_switch names a switch)",
     1, offsetof(coll_inagg_component_t, priority), NULL,
     COLL_INAGG_XSTR(COLL_INAGG_PRIORITY_DEFAULT)},
    {"switch",
     "The inagg switch, HOST:PORT (default $INAGG_SWITCH); empty: the component is not used", 0,
     offsetof(coll_inagg_component_t, switch_addr), "INAGG_SWITCH", ""},
    {"min_bytes",
     "Allreduces of fewer bytes stay with MPI: a count, or with K, M or G (default "
     "$INAGG_MIN_BYTES; empty: coll_inagg_calibration's route_min_bytes, else 1M)",
     0, offsetof(coll_inagg_component_t, min_bytes), "INAGG_MIN_BYTES", ""},
    {"calibration",
     "The file `inagg model calibrate` wrote on this network: its route_min_bytes is the "
     "threshold when coll_inagg_min_bytes is empty (default $INAGG_CALIBRATION)",
     0, offsetof(coll_inagg_component_t, calibration), "INAGG_CALIBRATION", ""},
    {"one_host",
     "A communicator whose ranks all share one host: mpi (stay with MPI's shared memory) or "
     "switch (through the switch anyway); default $INAGG_ONE_HOST, else mpi",
     0, offsetof(coll_inagg_component_t, one_host), "INAGG_ONE_HOST", "mpi"},
    {"float_mode",
     "How the switch adds float32: native (float adds, as MPI) or fixed (block fixed point, "
     "reproducible); default $INAGG_FLOAT_MODE, else native",
     0, offsetof(coll_inagg_component_t, float_mode), "INAGG_FLOAT_MODE", "native"},
    {"verbose",
     "1: one line per communicator (its switch job, calls each way); 2: also one line per "
     "allreduce with its route and why (default $INAGG_VERBOSE, else 0)",
     1, offsetof(coll_inagg_component_t, verbose), "INAGG_VERBOSE", "0"},
    {"connect_ms",
     "Milliseconds the switch has to answer before a communicator joins it; else the "
     "communicator stays with MPI",
     1, offsetof(coll_inagg_component_t, connect_ms), NULL, "3000"},
    {"timeout_ms", "The switch job's timeout in milliseconds (inagg_options_t.timeout_ms)", 1,
     offsetof(coll_inagg_component_t, timeout_ms), NULL, "30000"},
};

/* Every parameter registered with Open MPI, which sets each value from its default, the
 * environment (OMPI_MCA_coll_inagg_*), or the command line (--mca coll_inagg_*). */
static int coll_inagg_register(void)
{
    coll_inagg_component_t *c = &mca_coll_inagg_component;
    for (size_t i = 0; i < sizeof(coll_inagg_params) / sizeof(coll_inagg_params[0]); i++) {
        const coll_inagg_param_t *p = &coll_inagg_params[i];
        const char *dflt = p->env ? env_or(p->env, p->dflt) : p->dflt;
        void *storage = (char *)c + p->offset;
        if (p->is_int)
            *(int *)storage = atoi(dflt);
        else
            *(char **)storage = (char *)dflt; /* Open MPI copies it and owns the value */
        (void)mca_base_component_var_register(
            &c->super.collm_version, p->name, p->help,
            p->is_int ? MCA_BASE_VAR_TYPE_INT : MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0,
            OPAL_INFO_LVL_9, MCA_BASE_VAR_SCOPE_READONLY, storage);
    }
    return OMPI_SUCCESS;
}

/* Before Open MPI unloads the component: its progress callback must not outlive it. */
static int coll_inagg_close(void)
{
    coll_inagg_progress_off();
    return OMPI_SUCCESS;
}

const route_policy_t *coll_inagg_policy(int rank)
{
    coll_inagg_component_t *c = &mca_coll_inagg_component;
    if (c->policy_ready)
        return &c->policy;
    route_policy_t p = ROUTE_POLICY_INIT;
    char err[1200];
    if (route_set_min_bytes(&p, c->min_bytes, "coll_inagg_min_bytes", c->calibration,
                            "coll_inagg_calibration", err, sizeof(err)) < 0 &&
        rank == 0)
        fprintf(stderr, COLL_INAGG_TAG "%s\n", err);
    const char *oh = c->one_host ? c->one_host : "";
    if (*oh && strcmp(oh, "mpi") != 0 && strcmp(oh, "switch") != 0 && rank == 0)
        fprintf(stderr,
                COLL_INAGG_TAG "coll_inagg_one_host='%.40s' is neither mpi nor switch; mpi "
                               "it is\n",
                oh);
    p.one_host_switch = strcmp(oh, "switch") == 0;
    c->policy = p;
    c->policy_ready = 1;
    return &c->policy;
}
