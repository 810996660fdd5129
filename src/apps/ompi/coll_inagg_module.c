/*
 * coll_inagg_module.c - one `coll/inagg` module per communicator. comm_query offers a module
 * for every intra-communicator of two or more ranks while a switch is configured; enabling it
 * keeps the allreduce it displaces (and a reference to that module) and, unless the route
 * keeps the communicator with MPI (all ranks on one host), marks the communicator's own switch
 * job to be joined at the first call the switch would take. Not at enable: Open MPI may enable
 * a module inside its progress engine (MPI_Comm_dup under MPI_THREAD_MULTIPLE activates the
 * new communicator from a request's completion), where a blocking collective never returns.
 * Every rank routes a call alike (same count, type and op), so all of them join at the same
 * call, collectively: rank 0 names the job and broadcasts the name with the communicator's
 * broadcast, every rank asks whether the switch answers, and the ranks agree (with the
 * displaced allreduce) before and after joining. A failure anywhere leaves the communicator
 * with MPI and rank 0 says why in one line. The job is left when the communicator is freed
 * (the module's destructor).
 *
 * Each allreduce asks the shared route (apps/mpi/route.h): a sum of 4-byte ints or floats of at
 * least coll_inagg_min_bytes, on a communicator with a job, goes through the switch; anything
 * else goes to the displaced module. MPI_Iallreduce the same way (coll_inagg_iallreduce.c).
 */
#include "apps/ompi/coll_inagg.h"

#include <ompi/communicator/communicator.h>
#include <ompi/datatype/ompi_datatype.h>
#include <ompi/group/group.h>
#include <opal/runtime/opal_progress.h>

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "apps/mpi/probe.h"

/* Set once this process found the switch unusable: later communicators do not ask again, and
 * the warning is printed once. Every rank of a communicator agrees before it joins, so a rank
 * that gave up only makes its communicators stay with MPI. */
static int g_switch_gave_up, g_warned;
static unsigned g_jobs; /* jobs this process named (as a rank 0), for unique names */

static void module_construct(coll_inagg_module_t *m)
{
    m->ic = NULL;
    m->join_pending = 0;
    m->failed = 0;
    pthread_mutex_init(&m->mu, NULL);
    m->hosts = ROUTE_HOSTS_UNKNOWN;
    m->prev_allreduce = NULL;
    m->prev_allreduce_module = NULL;
    m->prev_iallreduce = NULL;
    m->prev_iallreduce_module = NULL;
    m->comm = NULL;
    m->n_switch = m->n_mpi = 0;
    m->rank = 0;
}

static void module_destruct(coll_inagg_module_t *m)
{
    if (mca_coll_inagg_component.verbose >= 1 && m->rank == 0 && m->comm)
        fprintf(stderr, COLL_INAGG_TAG "%s: %lu allreduce through the switch, %lu with MPI\n",
                m->name, m->n_switch, m->n_mpi);
    if (m->ic) {
        coll_inagg_complete_all(m);
        inagg_comm_destroy(m->ic);
    }
    m->ic = NULL;
    if (m->prev_allreduce_module)
        OBJ_RELEASE(m->prev_allreduce_module);
    m->prev_allreduce_module = NULL;
    if (m->prev_iallreduce_module)
        OBJ_RELEASE(m->prev_iallreduce_module);
    m->prev_iallreduce_module = NULL;
    pthread_mutex_destroy(&m->mu);
}

OBJ_CLASS_INSTANCE(coll_inagg_module_t, mca_coll_base_module_t, module_construct, module_destruct);

int coll_inagg_init_query(bool enable_progress_threads, bool enable_mpi_threads)
{
    (void)enable_progress_threads;
    (void)enable_mpi_threads;
    return OMPI_SUCCESS;
}

/* The inagg element type of an MPI datatype the switch adds: 1, or 0 when it adds none. */
static int switch_dtype(struct ompi_datatype_t *dt, inagg_dtype_t *idt)
{
    size_t size = 0;
    if (ompi_datatype_type_size(dt, &size) != OMPI_SUCCESS || size != 4)
        return 0;
    if (dt == MPI_INT || dt == MPI_INT32_T || dt == MPI_INTEGER || dt == MPI_INTEGER4) {
        *idt = INAGG_INT32;
        return 1;
    }
    if (dt == MPI_FLOAT || dt == MPI_REAL || dt == MPI_REAL4) {
        *idt = INAGG_FLOAT32;
        return 1;
    }
    return 0;
}

static inagg_comm_t *join_job(coll_inagg_module_t *m, struct ompi_communicator_t *comm);

int coll_inagg_finish_code(coll_inagg_module_t *m, inagg_result_t rc)
{
    if (rc == INAGG_OK || rc == INAGG_ERR_OVERFLOW || rc == INAGG_ERR_NONFINITE)
        return MPI_SUCCESS; /* a wrapped int sum, a NaN: delivered as MPI delivers them */
    if (!m->failed)
        fprintf(stderr,
                COLL_INAGG_TAG "rank %d: allreduce through the switch failed: %s: %s; later "
                               "calls on %s stay with MPI\n",
                m->rank, inagg_strerror(rc), inagg_last_error(m->ic), m->name);
    m->failed = 1; /* the job is left with the communicator, when nothing is in flight */
    return MPI_ERR_OTHER;
}

const char *coll_inagg_route(coll_inagg_module_t *m, const char *what, const void *sbuf, void *rbuf,
                             int count, struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                             struct ompi_communicator_t *comm, inagg_dtype_t *idt, char *why,
                             size_t len)
{
    route_call_t c = {.has_job =
                          (m->ic != NULL || m->join_pending) && !m->failed && comm == m->comm,
                      .op_is_sum = op == MPI_SUM,
                      .dtype_ok = switch_dtype(dtype, idt),
                      .count = count,
                      .elem_bytes = 4,
                      .has_recv = rbuf != NULL,
                      .hosts = m->hosts};
    if (sbuf != MPI_IN_PLACE && rbuf && count > 0) {
        const char *s = sbuf, *r = rbuf;
        size_t bytes = (size_t)count * 4;
        c.buffers_overlap = !sbuf || (s < r + bytes && r < s + bytes);
    }
    const char *no = route_decide(coll_inagg_policy(m->rank), &c, why, len);
    if (!no && m->join_pending) { /* the first call for the switch: every rank joins here */
        m->join_pending = 0;
        m->ic = join_job(m, comm);
        c.has_job = m->ic != NULL;
        no = route_decide(coll_inagg_policy(m->rank), &c, why, len);
    }
    if (mca_coll_inagg_component.verbose >= 2)
        fprintf(stderr, COLL_INAGG_TAG "rank %d: %s of %d %s (%s) on %s -> %s (%s)\n", m->rank,
                what, count, dtype->name[0] ? dtype->name : "(unnamed type)",
                c.op_is_sum ? "sum" : "not sum", comm->c_name, no ? "MPI" : "inagg", no ? no : why);
    if (no)
        m->n_mpi++;
    else
        m->n_switch++;
    return no;
}

/* The salvage's channel (inagg_channel_t): the displaced module's allreduce on comm. */
typedef struct prev_channel {
    coll_inagg_module_t *m;
    struct ompi_communicator_t *comm;
} prev_channel_t;

static int prev_allreduce_channel(void *ctx, const void *send, void *recv, size_t count,
                                  inagg_dtype_t dtype, inagg_op_t op)
{
    prev_channel_t *x = ctx;
    if (count > (size_t)INT32_MAX || op != INAGG_SUM)
        return 1;
    return x->m->prev_allreduce(send == recv ? MPI_IN_PLACE : send, recv, (int)count,
                                dtype == INAGG_FLOAT32 ? MPI_FLOAT : MPI_INT, MPI_SUM, x->comm,
                                x->m->prev_allreduce_module) != MPI_SUCCESS;
}

/* The switch was lost in this call (rc): the ranks finish it with the displaced module's
 * allreduce (inagg_allreduce_salvage) and the later calls stay with MPI (m->failed). */
static int fall_back(coll_inagg_module_t *m, inagg_result_t rc, const void *sbuf, void *rbuf,
                     int count, struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                     inagg_dtype_t idt, struct ompi_communicator_t *comm)
{
    const void *send = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
    char cause[320];
    snprintf(cause, sizeof(cause), "%s: %s", inagg_strerror(rc), inagg_last_error(m->ic));
    prev_channel_t x = {.m = m, .comm = comm};
    inagg_channel_t ch = {
        .struct_size = sizeof(ch), .allreduce = prev_allreduce_channel, .ctx = &x};
    inagg_salvage_t sv = {.struct_size = sizeof(sv)};
    m->failed = 1; /* the job is left with the communicator, when nothing is in flight */
    if (inagg_allreduce_salvage(m->ic, send, rbuf, (size_t)count, idt, INAGG_SUM, &ch, &sv) !=
        INAGG_OK) {
        fprintf(stderr,
                COLL_INAGG_TAG "rank %d: allreduce through the switch failed (%s) and was not "
                               "finished over MPI: %s; later calls on %s stay with MPI\n",
                m->rank, cause, inagg_last_error(m->ic), m->name);
        return MPI_ERR_OTHER;
    }
    fprintf(stderr,
            COLL_INAGG_TAG "rank %d: fall-back to MPI: %s lost the switch (%s); %llu chunks "
                           "handed on, %llu reduced again over MPI; later calls stay with MPI\n",
            m->rank, m->name, cause, (unsigned long long)sv.chunks_delivered,
            (unsigned long long)sv.chunks_reduced);
    if (sv.completed)
        return MPI_SUCCESS;
    /* one allreduce ahead of another rank: this call itself runs on MPI */
    return m->prev_allreduce(sbuf, rbuf, count, dtype, op, comm, m->prev_allreduce_module);
}

static int coll_inagg_allreduce(const void *sbuf, void *rbuf, int count,
                                struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    coll_inagg_module_t *m = (coll_inagg_module_t *)module;
    inagg_dtype_t idt = INAGG_INT32;
    char why[320];
    if (coll_inagg_route(m, "allreduce", sbuf, rbuf, count, dtype, op, comm, &idt, why,
                         sizeof(why)))
        return m->prev_allreduce(sbuf, rbuf, count, dtype, op, comm, m->prev_allreduce_module);
    const void *send = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
    pthread_mutex_lock(&m->mu);
    inagg_result_t rc = inagg_allreduce(m->ic, send, rbuf, (size_t)count, idt, INAGG_SUM);
    int code = rc == INAGG_ERR_CONNECTION || rc == INAGG_ERR_TIMEOUT
                   ? fall_back(m, rc, sbuf, rbuf, count, dtype, op, idt, comm)
                   : coll_inagg_finish_code(m, rc);
    pthread_mutex_unlock(&m->mu);
    opal_progress(); /* an MPI collective also moves the caller's other requests along */
    return code;
}

/* The job's name: rank 0's host, pid, a counter and the time, the same on every rank after
 * the broadcast. */
static void job_name(char *job, size_t len)
{
    char host[32] = "";
    gethostname(host, sizeof(host) - 1);
    for (char *p = host; *p; p++)
        if (*p == ' ' || *p == '=' || *p == '.')
            *p = '\0';
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(job, len, "ompi-%.16s-%ld-%u-%lx", host, (long)getpid(), ++g_jobs,
             (unsigned long)(ts.tv_sec * 1000003L + ts.tv_nsec / 1000) & 0xffffffffUL);
}

/* Every rank's `fine` agreed with the displaced allreduce: -1 when all are fine, else the
 * lowest rank that is not, whose `why` every rank then gets through `bcast`. */
static int agree(coll_inagg_module_t *m, struct ompi_communicator_t *comm, int fine, char *why,
                 size_t len)
{
    int size = ompi_comm_size(comm), mine = fine ? size : m->rank, first = size;
    mca_coll_base_module_t *bm = comm->c_coll->coll_bcast_module;
    if (m->prev_allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm, m->prev_allreduce_module) !=
        OMPI_SUCCESS)
        return 0;
    if (first == size)
        return -1;
    comm->c_coll->coll_bcast(why, (int)len, MPI_CHAR, first, comm, bm);
    return first;
}

static inagg_options_t job_options(void)
{
    coll_inagg_component_t *k = &mca_coll_inagg_component;
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.float_mode = k->float_mode && strcmp(k->float_mode, "fixed") == 0 ? INAGG_FLOAT_FIXED
                                                                        : INAGG_FLOAT_NATIVE;
    if (k->timeout_ms > 0)
        o.timeout_ms = (uint32_t)k->timeout_ms;
    return o;
}

/* Collective: the communicator's switch job, or NULL (rank 0 has said why). */
static inagg_comm_t *join_job(coll_inagg_module_t *m, struct ompi_communicator_t *comm)
{
    coll_inagg_component_t *k = &mca_coll_inagg_component;
    int size = ompi_comm_size(comm);
    char job[64] = "", why[256] = "";
    if (m->rank == 0)
        job_name(job, sizeof(job));
    if (comm->c_coll->coll_bcast(job, (int)sizeof(job), MPI_CHAR, 0, comm,
                                 comm->c_coll->coll_bcast_module) != OMPI_SUCCESS)
        return NULL;
    int reach = 0;
    if (g_switch_gave_up)
        snprintf(why, sizeof(why), "this process found the switch unusable before");
    else if ((unsigned)size > INAGG_MAX_WORLD)
        snprintf(why, sizeof(why), "%d ranks: a job holds at most %u", size, INAGG_MAX_WORLD);
    else
        reach =
            switch_probe(k->switch_addr, k->connect_ms, "coll_inagg_connect_ms", why, sizeof(why));
    int bad = agree(m, comm, reach, why, sizeof(why));
    inagg_comm_t *ic = NULL;
    if (bad < 0) {
        inagg_options_t o = job_options();
        char d[200] = "";
        inagg_result_t rc = inagg_comm_create(&ic, k->switch_addr, job, (uint32_t)m->rank,
                                              (uint32_t)size, &o, d, sizeof(d));
        if (rc != INAGG_OK) {
            ic = NULL;
            snprintf(why, sizeof(why), "%s: %s", inagg_strerror(rc), d);
        }
        bad = agree(m, comm, ic != NULL, why, sizeof(why));
    }
    if (bad < 0) {
        if (k->verbose >= 1 && m->rank == 0)
            fprintf(stderr, COLL_INAGG_TAG "%s: job %s on switch %s, %d ranks\n", m->name, job,
                    k->switch_addr, size);
        return ic;
    }
    if (ic)
        inagg_comm_destroy(ic);
    g_switch_gave_up = 1;
    int warn = m->rank == 0 && !g_warned;
    g_warned = 1; /* on every rank: the failure was agreed, one line per job is enough */
    if (warn)
        fprintf(stderr,
                COLL_INAGG_TAG "switch %s not usable (rank %d: %s); allreduce stays with "
                               "MPI\n",
                k->switch_addr, bad, why);
    return NULL;
}

static int coll_inagg_module_enable(mca_coll_base_module_t *module,
                                    struct ompi_communicator_t *comm)
{
    coll_inagg_module_t *m = (coll_inagg_module_t *)module;
    if (!comm->c_coll->coll_allreduce || !comm->c_coll->coll_allreduce_module ||
        !comm->c_coll->coll_bcast) {
        fprintf(stderr,
                COLL_INAGG_TAG "%s: no allreduce or broadcast to fall back on; the "
                               "component stays out of it\n",
                comm->c_name);
        return OMPI_ERR_NOT_FOUND;
    }
    m->prev_allreduce = comm->c_coll->coll_allreduce;
    m->prev_allreduce_module = comm->c_coll->coll_allreduce_module;
    OBJ_RETAIN(m->prev_allreduce_module);
    m->prev_iallreduce = comm->c_coll->coll_iallreduce;
    m->prev_iallreduce_module = comm->c_coll->coll_iallreduce_module;
    if (m->prev_iallreduce && m->prev_iallreduce_module) {
        OBJ_RETAIN(m->prev_iallreduce_module);
    } else { /* nothing below serves MPI_Iallreduce: this module does not either */
        m->prev_iallreduce = NULL;
        m->prev_iallreduce_module = NULL;
        m->super.coll_iallreduce = NULL; /* Open MPI installs the functions after enable */
    }
    m->comm = comm;
    m->rank = ompi_comm_rank(comm);
    snprintf(m->name, sizeof(m->name), "%s", comm->c_name);
    m->hosts =
        ompi_group_have_remote_peers(comm->c_local_group) ? ROUTE_MANY_HOSTS : ROUTE_ONE_HOST;
    const route_policy_t *p = coll_inagg_policy(m->rank);
    if (m->hosts == ROUTE_ONE_HOST && !p->one_host_switch) {
        if (mca_coll_inagg_component.verbose >= 1 && m->rank == 0)
            fprintf(stderr,
                    COLL_INAGG_TAG
                    "%s: every rank is on one host: no switch job, "
                    "allreduce stays with MPI (coll_inagg_one_host=switch to join)\n",
                    m->name);
        return OMPI_SUCCESS;
    }
    m->join_pending = 1;
    return OMPI_SUCCESS;
}

mca_coll_base_module_t *coll_inagg_comm_query(struct ompi_communicator_t *comm, int *priority)
{
    coll_inagg_component_t *k = &mca_coll_inagg_component;
    if (!k->switch_addr || !*k->switch_addr || k->priority < 0 || OMPI_COMM_IS_INTER(comm) ||
        ompi_comm_size(comm) < 2)
        return NULL;
    coll_inagg_module_t *m = OBJ_NEW(coll_inagg_module_t);
    if (!m)
        return NULL;
    *priority = k->priority;
    m->super.coll_module_enable = coll_inagg_module_enable;
    m->super.coll_allreduce = coll_inagg_allreduce;
    m->super.coll_iallreduce = coll_inagg_iallreduce;
    return &m->super;
}
