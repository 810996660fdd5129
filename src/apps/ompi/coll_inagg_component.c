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

static void add_string(const char *name, const char *help, char **storage, const char *dflt)
{
    coll_inagg_component_t *c = &mca_coll_inagg_component;
    *storage = (char *)dflt; /* Open MPI copies it, and owns the value from here on */
    (void)mca_base_component_var_register(&c->super.collm_version, name, help,
                                          MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0, OPAL_INFO_LVL_9,
                                          MCA_BASE_VAR_SCOPE_READONLY, storage);
}

static void add_int(const char *name, const char *help, int *storage, int dflt)
{
    coll_inagg_component_t *c = &mca_coll_inagg_component;
    *storage = dflt;
    (void)mca_base_component_var_register(&c->super.collm_version, name, help,
                                          MCA_BASE_VAR_TYPE_INT, NULL, 0, 0, OPAL_INFO_LVL_9,
                                          MCA_BASE_VAR_SCOPE_READONLY, storage);
}

static int coll_inagg_register(void)
{
    coll_inagg_component_t *c = &mca_coll_inagg_component;
    add_int("priority",
            "Priority of the inagg coll component (40: above tuned; the component takes part only "
            "when coll_inagg_switch names a switch)",
            &c->priority, COLL_INAGG_PRIORITY_DEFAULT);
    add_string("switch",
               "The inagg switch, HOST:PORT (default $INAGG_SWITCH); empty: the component is not "
               "used",
               &c->switch_addr, env_or("INAGG_SWITCH", ""));
    add_string("min_bytes",
               "Allreduces of fewer bytes stay with MPI: a count, or with K, M or G (default "
               "$INAGG_MIN_BYTES; empty: coll_inagg_calibration's route_min_bytes, else 1M)",
               &c->min_bytes, env_or("INAGG_MIN_BYTES", ""));
    add_string("calibration",
               "The file `inagg model calibrate` wrote on this network: its route_min_bytes is "
               "the threshold when coll_inagg_min_bytes is empty (default $INAGG_CALIBRATION)",
               &c->calibration, env_or("INAGG_CALIBRATION", ""));
    add_string("one_host",
               "A communicator whose ranks all share one host: mpi (stay with MPI's shared "
               "memory) or switch (through the switch anyway); default $INAGG_ONE_HOST, else mpi",
               &c->one_host, env_or("INAGG_ONE_HOST", "mpi"));
    add_string("float_mode",
               "How the switch adds float32: native (float adds, as MPI) or fixed (block fixed "
               "point, reproducible); default $INAGG_FLOAT_MODE, else native",
               &c->float_mode, env_or("INAGG_FLOAT_MODE", "native"));
    add_int("verbose",
            "1: one line per communicator (its switch job, calls each way); 2: also one line per "
            "allreduce with its route and why (default $INAGG_VERBOSE, else 0)",
            &c->verbose, atoi(env_or("INAGG_VERBOSE", "0")));
    add_int("connect_ms",
            "Milliseconds the switch has to answer before a communicator joins it; else the "
            "communicator stays with MPI",
            &c->connect_ms, 3000);
    add_int("timeout_ms", "The switch job's timeout in milliseconds (inagg_options_t.timeout_ms)",
            &c->timeout_ms, 30000);
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
