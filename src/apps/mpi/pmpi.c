/*
 * pmpi.c - libinagg-pmpi.so, a PMPI interposer: under LD_PRELOAD, an unmodified MPI program's
 * sum-allreduces of 32-bit integers and floats on MPI_COMM_WORLD (and on communicators congruent
 * with it that the program creates by MPI_Comm_dup, _dup_with_info, _split or _create) go
 * through the inagg switch named by $INAGG_SWITCH; every other call goes to MPI unchanged.
 *
 *   INAGG_SWITCH=HOST:PORT    the switch; unset or empty: pure pass-through, no output
 *   INAGG_VERBOSE=1           rank 0 prints its settings when the job joins ("inagg-pmpi:
 *                             job J on switch S: N ranks, float fixed ...") and "inagg-pmpi: N
 *                             allreduce accelerated, M passed through" at MPI_Finalize (2:
 *                             also every rank a line per allreduce: its route, inagg or MPI,
 *                             and why, with the threshold and where it came from)
 *   INAGG_FLOAT_MODE=fixed|native   how float32 is added in the switch (default fixed, the
 *                             library's: SwitchML's block fixed point, bit-identical sums run
 *                             to run; native: float adds in arrival order, whose last bits may
 *                             differ from run to run). Another value: a warning, and fixed
 *   INAGG_PMPI_MIN_COUNT=N    allreduces of fewer than N elements stay with MPI (default 1)
 *   INAGG_MIN_BYTES=N[K|M|G]  allreduces of fewer bytes stay with MPI (default: the
 *                             calibration's, else 1M, route.h)
 *   INAGG_CALIBRATION=FILE    the file `inagg model calibrate` wrote: its route_min_bytes is
 *                             the threshold when INAGG_MIN_BYTES is not set
 *   INAGG_ONE_HOST=mpi|switch a communicator whose ranks all share one host stays with MPI's
 *                             shared memory (mpi, the default) or goes through the switch too
 *   INAGG_PMPI_DTYPES=int,float   which element types go through the switch (default both)
 *   INAGG_TIMEOUT_MS=MS       the job's timeout (inagg_options_t.timeout_ms, default 30000)
 *   INAGG_PMPI_CONNECT_MS=MS  how long each rank tries to reach the switch in MPI_Init (3000):
 *                             its control port must accept and answer a STATS request
 *   INAGG_PMPI_VERIFY=1       MPI redoes every accelerated blocking allreduce and differences
 *                             are reported (debugging)
 *   INAGG_PMPI_FALLBACK=0     a lost switch fails the allreduce (default 1: fall back to MPI)
 *   INAGG_PMPI_RETRY_MS=MS    fallen back, how often the ranks probe the switch (5000; 0: never)
 *
 * Joining (MPI_Init, MPI_Init_thread, and their Fortran bindings): rank 0 makes a job name from
 * its pid, the time and its host and broadcasts it (PMPI_Bcast); every rank checks that the
 * switch's control port answers, the ranks agree (PMPI_Allreduce of a flag), then each joins
 * with inagg_comm_create and they agree again. If any rank failed, every rank leaves and the
 * whole job stays with MPI; rank 0 prints one warning with the first failing rank's reason.
 * A communicator congruent with MPI_COMM_WORLD gets its own inagg job when it is created (a
 * collective call over all ranks), named after the base job and a counter every rank agrees on,
 * so nonblocking allreduces on different communicators keep each communicator's order.
 *
 * MPI_Iallreduce returns an MPI generalized request. Under Open MPI a progress callback
 * (opal_progress_register) completes it once the switch's result is in, so MPI_Wait, MPI_Test
 * and their relatives - C, Fortran or f08 - work unchanged and overlap is kept. Without that
 * hook (another MPI) the allreduce completes inside MPI_Iallreduce.
 *
 * Fortran: Open MPI's Fortran bindings call PMPI_* directly, so the Fortran entry points are
 * wrapped too (all four manglings, and Open MPI's ompi_*_f back ends that `use mpi_f08` calls);
 * handles are converted with PMPI_*_f2c, MPI_INTEGER and MPI_REAL of 4 bytes are accelerated
 * like MPI_INT and MPI_FLOAT, and anything else goes to the original binding.
 *
 * A switch lost in a blocking allreduce (the library's fail-over off or spent) is a fall-back:
 * the ranks finish the call over MPI (inagg_allreduce_salvage with PMPI_Allreduce as its
 * channel), leave the job, log one line each, and the communicator's allreduces go to MPI;
 * every INAGG_PMPI_RETRY_MS they agree at the start of a call (PMPI_Allreduce) to probe the
 * switch, and when it answers on every rank they join a new job and return to it, at that call
 * on every rank. Any other failed allreduce through the switch (a rank died) is reported on
 * stderr and raised through the communicator's error handler (MPI_ERR_OTHER), as MPI would
 * report a failure; an int32 sum that wraps is delivered wrapped, as MPI does.
 */
#include <mpi.h>

#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "apps/mpi/greq.h"
#include "apps/mpi/pmpi_int.h"
#include "apps/mpi/probe.h"
#include "apps/mpi/route.h"
#include "inagg.h"

/* One MPI communicator whose allreduces go through the switch, with its own inagg job. */
struct tracked {
    MPI_Comm comm;
    inagg_comm_t *ic;
    pthread_mutex_t mu; /* an inagg communicator is used by one thread at a time */
    route_locality_t hosts; /* whether its ranks share one host (route.h) */
    char job[64]; /* its job's name (a return to the switch joins "<job>-rN") */
    /* Fall-back: the switch was lost, ic is NULL and the allreduces go to MPI until every
     * rank's probe finds the switch answering again (see fallback_call). */
    int fallen;
    uint64_t fell_ns; /* when it fell back */
    uint64_t next_probe_ns; /* this rank's next probe is due */
    unsigned fallbacks, returns; /* counted on every rank */
    unsigned long calls_on_mpi; /* accelerable allreduces MPI did while fallen back */
    struct tracked *next;
};

typedef int (*progress_cb_t)(void);
typedef int (*progress_reg_t)(progress_cb_t);

static struct {
    int joined; /* the base job exists: accelerate */
    int verbose;
    int rank, world;
    int min_count;
    char sw[256];
    char job[64];
    unsigned derived; /* communicators tracked after the base job, the same on every rank */
    inagg_options_t opts;
    progress_reg_t unregister;
    int hooked;
    int nonfinite_warned;
    int verify;
    int fallback; /* INAGG_PMPI_FALLBACK: a lost switch's allreduces go to MPI (default 1) */
    long retry_ms; /* INAGG_PMPI_RETRY_MS: fallen back, probe the switch this often (0: never) */
} G;

static atomic_ulong n_accel, n_passed;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* the tracked list */
static tracked_t *g_tracked;

/* Accelerated datatypes: 4-byte signed integers and 4-byte floats (C and Fortran names). */
#define MAX_TYPES 8
static MPI_Datatype g_types[MAX_TYPES];
static inagg_dtype_t g_idt[MAX_TYPES];
static int g_ntypes;

/* ------------------------------------------------------------------------------------------ */

static long env_long(const char *name, long dflt)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return dflt;
    char *end;
    long v = strtol(s, &end, 10);
    return *end ? dflt : v;
}

static void add_type(MPI_Datatype t, inagg_dtype_t idt)
{
    int size = 0;
    if (t == MPI_DATATYPE_NULL || g_ntypes >= MAX_TYPES)
        return;
    if (PMPI_Type_size(t, &size) != MPI_SUCCESS || size != 4)
        return;
    g_types[g_ntypes] = t;
    g_idt[g_ntypes] = idt;
    g_ntypes++;
}

/* Does the switch answer on its control port within `ms` (probe.h)? */
static int probe_switch(const char *addr, int ms, char *why, size_t len)
{
    return switch_probe(addr, ms, "INAGG_PMPI_CONNECT_MS", why, len);
}

/*
 * Collective over `comm` (every rank of MPI_COMM_WORLD). When `try_join` (every rank passed the
 * checks before), each rank joins job `job` with its rank in `comm`; then all agree. Returns
 * the inagg communicator when every rank joined, NULL (and each rank's communicator destroyed)
 * otherwise. Then `why` gets, on every rank, the first failing rank's reason: its join error,
 * or, without `try_join`, its own `why` if `my_ok` is 0.
 */
static inagg_comm_t *agree_join(MPI_Comm comm, const char *job, int try_join, int my_ok, char *why,
                                size_t len, int *bad_rank)
{
    int rank = 0, size = 1;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &size);
    inagg_comm_t *ic = NULL;
    char detail[256] = "";
    if (try_join) {
        char d[200] = "";
        inagg_result_t rc = inagg_comm_create(&ic, G.sw, job, (uint32_t)rank, (uint32_t)size,
                                              &G.opts, d, sizeof(d));
        if (rc != INAGG_OK) {
            ic = NULL;
            snprintf(detail, sizeof(detail), "%s: %s", inagg_strerror(rc), d);
        }
    } else {
        snprintf(detail, sizeof(detail), "%s", why);
    }
    int fine = try_join ? ic != NULL : my_ok;
    int mine = fine ? size : rank, first = size;
    PMPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm);
    if (first == size)
        return ic;
    if (ic)
        inagg_comm_destroy(ic);
    PMPI_Bcast(detail, (int)sizeof(detail), MPI_CHAR, first, comm);
    snprintf(why, len, "%s", detail);
    *bad_rank = first;
    return NULL;
}

/* Collective over comm: whether its ranks all share this host (MPI_COMM_TYPE_SHARED). */
static route_locality_t comm_locality(MPI_Comm comm)
{
    MPI_Comm local = MPI_COMM_NULL;
    int size = 0, local_size = 0;
    if (PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local) != MPI_SUCCESS)
        return ROUTE_HOSTS_UNKNOWN;
    PMPI_Comm_size(comm, &size);
    PMPI_Comm_size(local, &local_size);
    PMPI_Comm_free(&local);
    return local_size == size ? ROUTE_ONE_HOST : ROUTE_MANY_HOSTS;
}

static tracked_t *track(MPI_Comm comm, inagg_comm_t *ic, const char *job)
{
    route_locality_t hosts = comm_locality(comm); /* every rank tracks it: collective */
    tracked_t *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->comm = comm;
    t->ic = ic;
    t->hosts = hosts;
    snprintf(t->job, sizeof(t->job), "%s", job);
    pthread_mutex_init(&t->mu, NULL);
    pthread_mutex_lock(&g_mu);
    t->next = g_tracked;
    g_tracked = t;
    pthread_mutex_unlock(&g_mu);
    return t;
}

static tracked_t *lookup(MPI_Comm comm)
{
    pthread_mutex_lock(&g_mu);
    tracked_t *t = g_tracked;
    while (t && t->comm != comm)
        t = t->next;
    pthread_mutex_unlock(&g_mu);
    return t;
}

/* The result of a finished inagg allreduce as an MPI code; reports failures on stderr. */
static int finish_code(tracked_t *t, inagg_result_t rc)
{
    if (rc == INAGG_OK || rc == INAGG_ERR_OVERFLOW) /* MPI delivers a wrapped int sum too */
        return MPI_SUCCESS;
    if (rc == INAGG_ERR_NONFINITE) {
        if (!G.nonfinite_warned++)
            fprintf(stderr,
                    TAG "rank %d: a float input held NaN or Inf; its chunk is NaN in "
                        "the result (INAGG_FLOAT_MODE=native adds them as MPI does)\n",
                    G.rank);
        return MPI_SUCCESS;
    }
    fprintf(stderr, TAG "rank %d: allreduce through the switch failed: %s: %s\n", G.rank,
            inagg_strerror(rc), inagg_last_error(t->ic));
    return MPI_ERR_OTHER;
}

/* ---------------------------------- asynchronous requests --------------------------------- */

/* finish_code for greq: the owner is a tracked communicator. */
static int finish_of(void *t, inagg_result_t rc) { return finish_code(t, rc); }

/* ----------------------------------------- joining ---------------------------------------- */

void after_init(void)
{
    static int done;
    if (done++)
        return;
    PMPI_Comm_rank(MPI_COMM_WORLD, &G.rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &G.world);
    G.verbose = (int)env_long("INAGG_VERBOSE", 0);
    const char *sw = getenv("INAGG_SWITCH");
    if (!sw || !*sw)
        return; /* pure pass-through */
    snprintf(G.sw, sizeof(G.sw), "%s", sw);

    const char *which = getenv("INAGG_PMPI_DTYPES");
    int ints = !which || strstr(which, "int"), floats = !which || strstr(which, "float");
    if (ints) {
        add_type(MPI_INT, INAGG_INT32);
        add_type(MPI_INT32_T, INAGG_INT32);
        add_type(MPI_INTEGER, INAGG_INT32);
        add_type(MPI_INTEGER4, INAGG_INT32);
    }
    if (floats) {
        add_type(MPI_FLOAT, INAGG_FLOAT32);
        add_type(MPI_REAL, INAGG_FLOAT32);
        add_type(MPI_REAL4, INAGG_FLOAT32);
    }

    inagg_options_t o = INAGG_OPTIONS_INIT; /* float_mode: the library's default, fixed */
    const char *fm = getenv("INAGG_FLOAT_MODE");
    if (fm && strcmp(fm, "native") == 0)
        o.float_mode = INAGG_FLOAT_NATIVE;
    else if (fm && *fm && strcmp(fm, "fixed") != 0 && G.rank == 0)
        fprintf(stderr, TAG "INAGG_FLOAT_MODE is fixed or native, got '%s': using fixed\n", fm);
    long tmo = env_long("INAGG_TIMEOUT_MS", 0);
    if (tmo > 0)
        o.timeout_ms = (uint32_t)tmo;
    G.opts = o;
    G.min_count = (int)env_long("INAGG_PMPI_MIN_COUNT", 1);
    G.verify = (int)env_long("INAGG_PMPI_VERIFY", 0);
    G.fallback = env_long("INAGG_PMPI_FALLBACK", 1) != 0;
    G.retry_ms = env_long("INAGG_PMPI_RETRY_MS", 5000);
    if (G.retry_ms < 0)
        G.retry_ms = 0;
    if (G.min_count < 1)
        G.min_count = 1;

    if (G.rank == 0) {
        char host[32] = "";
        gethostname(host, sizeof(host) - 1);
        for (char *c = host; *c; c++)
            if (*c == ' ' || *c == '=' || *c == '.')
                *c = '\0';
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(G.job, sizeof(G.job), "pmpi-%.16s-%ld-%lx", host, (long)getpid(),
                 (unsigned long)(ts.tv_sec * 1000003L + ts.tv_nsec / 1000) & 0xffffffffUL);
    }
    PMPI_Bcast(G.job, (int)sizeof(G.job), MPI_CHAR, 0, MPI_COMM_WORLD);

    char why[256] = "";
    int reach = 1, bad = -1;
    if ((unsigned)G.world > INAGG_MAX_WORLD) {
        snprintf(why, sizeof(why), "%d ranks: a job holds at most %u", G.world, INAGG_MAX_WORLD);
        reach = 0;
    } else {
        reach = probe_switch(G.sw, (int)env_long("INAGG_PMPI_CONNECT_MS", 3000), why, sizeof(why));
    }
    /* First agree that every rank reaches the switch, so nobody waits for a join that cannot
     * happen; then join and agree that every join succeeded. */
    int all = 0;
    PMPI_Allreduce(&reach, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    inagg_comm_t *ic = agree_join(MPI_COMM_WORLD, G.job, all, reach, why, sizeof(why), &bad);
    if (!ic) {
        if (G.rank == 0)
            fprintf(stderr, TAG "switch %s not usable (rank %d: %s); allreduce stays with MPI\n",
                    G.sw, bad, why);
        return;
    }
    track(MPI_COMM_WORLD, ic, G.job);
    progress_reg_t reg = NULL;
    *(void **)&reg = dlsym(RTLD_DEFAULT, "opal_progress_register");
    *(void **)&G.unregister = dlsym(RTLD_DEFAULT, "opal_progress_unregister");
    if (reg && G.unregister && reg(greq_progress) == 0)
        G.hooked = 1;
    G.joined = 1;
    if (G.verbose >= 1 && G.rank == 0)
        fprintf(stderr,
                TAG "job %s on switch %s: %d ranks, float %s, types %s%s%s, at least %d "
                    "element%s%s%s\n",
                G.job, G.sw, G.world,
                o.float_mode == INAGG_FLOAT_NATIVE
                    ? "native (float adds in arrival order)"
                    : "fixed (block fixed point: bit-identical sums run to run)",
                ints ? "int" : "", ints && floats ? "," : "", floats ? "float" : "", G.min_count,
                G.min_count == 1 ? "" : "s", G.verify ? ", every result checked by MPI" : "",
                G.hooked ? "" : ", nonblocking allreduces complete at once");
}

/* A new communicator: if it holds every rank of MPI_COMM_WORLD, give it its own job. */
void after_new_comm(MPI_Comm newcomm)
{
    if (!G.joined || newcomm == MPI_COMM_NULL)
        return;
    int inter = 0, res = MPI_UNEQUAL;
    PMPI_Comm_test_inter(newcomm, &inter);
    if (inter || PMPI_Comm_compare(newcomm, MPI_COMM_WORLD, &res) != MPI_SUCCESS ||
        (res != MPI_CONGRUENT && res != MPI_SIMILAR && res != MPI_IDENT))
        return;
    /* Every rank is here (the creation was collective over all of them): the counter and the
     * name agree everywhere. */
    char job[64], why[256] = "";
    int bad = -1;
    unsigned n = ++G.derived;
    snprintf(job, sizeof(job), "%.50s-c%u", G.job, n);
    inagg_comm_t *ic = agree_join(newcomm, job, 1, 1, why, sizeof(why), &bad);
    if (!ic) {
        int r = 0;
        PMPI_Comm_rank(newcomm, &r);
        if (r == 0)
            fprintf(stderr, TAG "communicator %u stays with MPI (rank %d: %s)\n", n, bad, why);
        return;
    }
    track(newcomm, ic, job);
}

/* Before a tracked communicator is freed: finish its requests and leave its job. */
void before_free(MPI_Comm comm)
{
    if (!G.joined || comm == MPI_COMM_NULL || comm == MPI_COMM_WORLD)
        return;
    pthread_mutex_lock(&g_mu);
    tracked_t **pp = &g_tracked;
    while (*pp && (*pp)->comm != comm)
        pp = &(*pp)->next;
    tracked_t *t = *pp;
    if (t)
        *pp = t->next;
    pthread_mutex_unlock(&g_mu);
    if (!t)
        return;
    greq_complete(1, t);
    if (t->ic)
        inagg_comm_destroy(t->ic);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

void before_finalize(void)
{
    static int done;
    if (done++)
        return;
    if (G.joined) {
        greq_complete(1, NULL);
        if (G.hooked)
            G.unregister(greq_progress);
        G.hooked = 0;
        G.joined = 0;
        pthread_mutex_lock(&g_mu);
        tracked_t *t = g_tracked;
        g_tracked = NULL;
        pthread_mutex_unlock(&g_mu);
        while (t) {
            tracked_t *next = t->next;
            if (t->ic)
                inagg_comm_destroy(t->ic);
            if (t->fallbacks && G.rank == 0)
                fprintf(stderr,
                        TAG "%u fall-backs to MPI, %u returns to the switch, %lu allreduce "
                            "done by MPI meanwhile\n",
                        t->fallbacks, t->returns, t->calls_on_mpi);
            pthread_mutex_destroy(&t->mu);
            free(t);
            t = next;
        }
    }
    if (G.verbose && G.rank == 0)
        fprintf(stderr, TAG "%lu allreduce accelerated, %lu passed through\n",
                atomic_load(&n_accel), atomic_load(&n_passed));
}

/* ------------------------------- for the Fortran bindings -------------------------------- */

int pmpi_joined(void) { return G.joined; }

void count_passed(void) { atomic_fetch_add(&n_passed, 1); }

/* ------------------------------------- the allreduces ------------------------------------- */

/* INAGG_VERBOSE=2: one line per allreduce (call: "allreduce" or "iallreduce") saying where it
 * went (no: NULL through the switch, else to MPI) and why. */
static void log_route(const char *call, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                      const char *no, const char *why)
{
    if (G.verbose < 2 || !G.sw[0])
        return;
    char tname[MPI_MAX_OBJECT_NAME] = "?", cname[MPI_MAX_OBJECT_NAME] = "";
    int len = 0;
    if (dt != MPI_DATATYPE_NULL)
        PMPI_Type_get_name(dt, tname, &len);
    if (comm != MPI_COMM_NULL)
        PMPI_Comm_get_name(comm, cname, &len);
    fprintf(stderr, TAG "rank %d: %s of %d %s (%s) on %s -> %s (%s)\n", G.rank, call, count,
            tname[0] ? tname : "(unnamed type)", op == MPI_SUM ? "sum" : "not sum",
            cname[0] ? cname : "a derived communicator", no ? "MPI" : "inagg", why);
}

static route_policy_t g_route = ROUTE_POLICY_INIT;
static pthread_once_t g_route_once = PTHREAD_ONCE_INIT;

/* The routing policy from the environment, once (rank 0 warns of a value passed over). */
static void route_from_env(void)
{
    char err[1200];
    const char *oh = getenv("INAGG_ONE_HOST");
    if (route_set_min_bytes(&g_route, getenv("INAGG_MIN_BYTES"), "INAGG_MIN_BYTES",
                            getenv("INAGG_CALIBRATION"), "INAGG_CALIBRATION", err,
                            sizeof(err)) < 0 &&
        G.rank == 0)
        fprintf(stderr, TAG "%s\n", err);
    if (oh && *oh && strcmp(oh, "mpi") != 0 && strcmp(oh, "switch") != 0 && G.rank == 0)
        fprintf(stderr, TAG "INAGG_ONE_HOST='%.40s' is neither mpi nor switch; mpi it is\n", oh);
    g_route.one_host_switch = oh && strcmp(oh, "switch") == 0;
    g_route.min_count = G.min_count;
}

/* The tracked communicator when this allreduce goes through the switch, else NULL: route.c
 * decides, from this call's facts. */
tracked_t *accelerable(const char *call, const void *sb, const void *rb, int count, MPI_Datatype dt,
                       MPI_Op op, MPI_Comm comm, inagg_dtype_t *idt)
{
    char why[320];
    int k = 0;
    while (k < g_ntypes && g_types[k] != dt)
        k++;
    if (G.joined)
        pthread_once(&g_route_once, route_from_env);
    tracked_t *t = G.joined ? lookup(comm) : NULL;
    route_call_t c = {.has_job = t != NULL,
                      .op_is_sum = op == MPI_SUM,
                      .dtype_ok = k < g_ntypes,
                      .count = count,
                      .elem_bytes = 4,
                      .has_recv = rb != NULL,
                      .hosts = t ? t->hosts : ROUTE_HOSTS_UNKNOWN};
    if (sb != MPI_IN_PLACE && rb) { /* aliased buffers are MPI's to refuse, as it would */
        const char *s = sb, *r = rb;
        size_t bytes = count > 0 ? (size_t)count * 4 : 0;
        c.buffers_overlap = !sb || (s < r + bytes && r < s + bytes);
    }
    const char *no = route_decide(&g_route, &c, why, sizeof(why));
    if (no && !G.joined)
        no = "no switch job: the join in MPI_Init failed, or MPI_Finalize ran";
    else if (no && !t)
        no = "the communicator does not hold every rank of MPI_COMM_WORLD";
    log_route(call, count, dt, op, comm, no, no ? no : why);
    if (no)
        return NULL;
    *idt = g_idt[k];
    return t;
}

static int raise_error(MPI_Comm comm, int code)
{
    PMPI_Comm_call_errhandler(comm, code);
    return code;
}

/* INAGG_PMPI_VERIFY=1: MPI computes every accelerated allreduce again; differences (beyond
 * float rounding) are reported on stderr. A debugging aid: it costs an MPI allreduce each. */
static void verify(const void *input, const void *result, int count, inagg_dtype_t idt,
                   MPI_Comm comm)
{
    size_t bytes = (size_t)count * 4;
    void *want = malloc(bytes);
    float *mag = idt == INAGG_FLOAT32 ? malloc(bytes) : NULL;
    if (!want || (idt == INAGG_FLOAT32 && !mag)) {
        free(want);
        free(mag);
        return;
    }
    PMPI_Allreduce(input, want, count, idt == INAGG_INT32 ? MPI_INT : MPI_FLOAT, MPI_SUM, comm);
    if (mag) { /* sum of magnitudes: any summation order is within W * 2^-23 of it */
        for (int i = 0; i < count; i++) {
            float v = ((const float *)input)[i];
            mag[i] = v < 0 ? -v : v;
        }
        PMPI_Allreduce(MPI_IN_PLACE, mag, count, MPI_FLOAT, MPI_SUM, comm);
    }
    int world = 1;
    PMPI_Comm_size(comm, &world);
    long bad = 0, first = -1;
    for (int i = 0; i < count; i++) {
        int diff;
        if (idt == INAGG_INT32) {
            diff = ((const int32_t *)want)[i] != ((const int32_t *)result)[i];
        } else {
            float w = ((const float *)want)[i], g = ((const float *)result)[i];
            float tol = (float)world * 0x1p-22f * mag[i] + 1e-38f;
            diff = !(g - w <= tol && w - g <= tol) && !(w != w && g != g);
        }
        if (diff && bad++ == 0)
            first = i;
    }
    if (bad) {
        char buf[96] = "";
        if (idt == INAGG_INT32)
            snprintf(buf, sizeof(buf), "%d, MPI %d", ((const int32_t *)result)[first],
                     ((const int32_t *)want)[first]);
        else
            snprintf(buf, sizeof(buf), "%.9g, MPI %.9g", (double)((const float *)result)[first],
                     (double)((const float *)want)[first]);
        fprintf(stderr,
                TAG "rank %d: VERIFY: %ld of %d %s elements differ from MPI's; first [%ld]: "
                    "switch %s\n",
                G.rank, bad, count, idt == INAGG_INT32 ? "int" : "float", first, buf);
    }
    free(want);
    free(mag);
}

/* ------------------------------ fall-back to MPI and return ------------------------------ */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t retry_ns(void) { return (uint64_t)G.retry_ms * 1000000ull; }

/* The salvage's channel (inagg_channel_t): an MPI allreduce over the tracked communicator. */
static int mpi_channel(void *ctx, const void *send, void *recv, size_t count, inagg_dtype_t dtype,
                       inagg_op_t op)
{
    MPI_Comm comm = *(const MPI_Comm *)ctx;
    if (count > (size_t)INT32_MAX || op != INAGG_SUM)
        return 1;
    return PMPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, (int)count,
                          dtype == INAGG_FLOAT32 ? MPI_FLOAT : MPI_INT, MPI_SUM,
                          comm) != MPI_SUCCESS;
}

/* The switch was lost in this call (rc; t->mu held): the ranks finish it over MPI
 * (inagg_allreduce_salvage), leave the job and fall back. MPI_SUCCESS and *done (0: this rank
 * was one allreduce ahead, its call must still run on MPI), or MPI_ERR_OTHER. */
static int fall_back(tracked_t *t, inagg_result_t rc, const void *send, void *rb, int count,
                     inagg_dtype_t idt, MPI_Comm comm, uint64_t t0, int *done)
{
    char cause[320];
    snprintf(cause, sizeof(cause), "%s: %s", inagg_strerror(rc), inagg_last_error(t->ic));
    inagg_channel_t ch = {.struct_size = sizeof(ch), .allreduce = mpi_channel, .ctx = &comm};
    inagg_salvage_t sv = {.struct_size = sizeof(sv)};
    inagg_result_t src =
        inagg_allreduce_salvage(t->ic, send, rb, (size_t)count, idt, INAGG_SUM, &ch, &sv);
    if (src != INAGG_OK) {
        fprintf(stderr,
                TAG "rank %d: allreduce through the switch failed (%s) and was not finished "
                    "over MPI: %s\n",
                G.rank, cause, inagg_last_error(t->ic));
        return MPI_ERR_OTHER;
    }
    inagg_comm_destroy(t->ic);
    t->ic = NULL;
    t->fallen = 1;
    t->fallbacks++;
    t->fell_ns = now_ns();
    t->next_probe_ns = t->fell_ns + retry_ns();
    fprintf(stderr,
            TAG "rank %d: fall-back to MPI: job %s lost the switch %s (%s); %llu chunks handed "
                "on, %llu reduced again over MPI, stall %llu ms\n",
            G.rank, t->job, G.sw, cause, (unsigned long long)sv.chunks_delivered,
            (unsigned long long)sv.chunks_reduced,
            (unsigned long long)((t->fell_ns - t0) / 1000000ull));
    *done = (int)sv.completed;
    return MPI_SUCCESS;
}

/* Collective: every rank probes the switch; when all find it answering they join a new job
 * ("<job>-rN") and agree on that too. 1: back on the switch (t->ic set). */
static int try_return(tracked_t *t, MPI_Comm comm)
{
    char why[256] = "";
    int ok = probe_switch(G.sw, (int)env_long("INAGG_PMPI_CONNECT_MS", 3000), why, sizeof(why));
    int all = 0, bad = -1;
    t->next_probe_ns = now_ns() + retry_ns();
    PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
    if (!all)
        return 0;
    char job[64];
    snprintf(job, sizeof(job), "%.50s-r%u", t->job, t->returns + 1);
    inagg_comm_t *ic = agree_join(comm, job, 1, 1, why, sizeof(why), &bad);
    if (!ic) {
        if (G.rank == 0)
            fprintf(stderr,
                    TAG "the switch %s answers but rank %d could not join it (%s): "
                        "allreduce stays with MPI\n",
                    G.sw, bad, why);
        return 0;
    }
    t->ic = ic;
    t->fallen = 0;
    t->returns++;
    fprintf(stderr,
            TAG "rank %d: return to the switch %s: job %s after %llu ms on MPI (%lu allreduce "
                "done by MPI)\n",
            G.rank, G.sw, job, (unsigned long long)((now_ns() - t->fell_ns) / 1000000ull),
            t->calls_on_mpi);
    return 1;
}

/* An accelerable allreduce while fallen back (t->mu held). At its start the ranks agree
 * (MPI_MAX of "my probe is due", every INAGG_PMPI_RETRY_MS) whether to try the switch: the
 * return happens at this call on every rank or on none. 1: back on the switch, the caller
 * runs the call there; 0: MPI did it, its code in *code. */
static int fallback_call(tracked_t *t, const void *sb, void *rb, int count, inagg_dtype_t idt,
                         MPI_Comm comm, int *code)
{
    int due = G.retry_ms > 0 && now_ns() >= t->next_probe_ns, any = 0;
    PMPI_Allreduce(&due, &any, 1, MPI_INT, MPI_MAX, comm);
    if (any && try_return(t, comm))
        return 1;
    t->calls_on_mpi++;
    *code =
        PMPI_Allreduce(sb, rb, count, idt == INAGG_FLOAT32 ? MPI_FLOAT : MPI_INT, MPI_SUM, comm);
    return 0;
}

/* The call on the switch (t->mu held, t->ic set); a lost switch falls back (G.fallback). */
static int switch_call(tracked_t *t, const void *sb, void *rb, int count, inagg_dtype_t idt,
                       MPI_Comm comm)
{
    const void *send = sb == MPI_IN_PLACE ? rb : sb;
    uint64_t t0 = now_ns();
    inagg_result_t rc = inagg_allreduce(t->ic, send, rb, (size_t)count, idt, INAGG_SUM);
    if (!G.fallback || (rc != INAGG_ERR_CONNECTION && rc != INAGG_ERR_TIMEOUT))
        return finish_code(t, rc);
    int done = 0, code = fall_back(t, rc, send, rb, count, idt, comm, t0, &done);
    if (code != MPI_SUCCESS || done)
        return code;
    if (fallback_call(t, sb, rb, count, idt, comm, &code)) /* back already (a tiny retry) */
        code = finish_code(t, inagg_allreduce(t->ic, send, rb, (size_t)count, idt, INAGG_SUM));
    return code;
}

int accel_allreduce(tracked_t *t, const void *sb, void *rb, int count, inagg_dtype_t idt,
                    MPI_Comm comm)
{
    const void *send = sb == MPI_IN_PLACE ? rb : sb;
    void *copy = NULL;
    if (G.verify && (copy = malloc((size_t)count * 4)))
        memcpy(copy, send, (size_t)count * 4);
    pthread_mutex_lock(&t->mu);
    int code = MPI_SUCCESS;
    if (!t->fallen || fallback_call(t, sb, rb, count, idt, comm, &code))
        code = switch_call(t, sb, rb, count, idt, comm);
    pthread_mutex_unlock(&t->mu);
    atomic_fetch_add(&n_accel, 1);
    /* An MPI collective also advances the caller's other requests (pending sends above all);
     * one probe gives MPI that chance, so the program's messages move as they would. */
    int flag = 0;
    PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, MPI_STATUS_IGNORE);
    if (copy) {
        if (send != rb && memcmp(copy, send, (size_t)count * 4) != 0)
            fprintf(stderr, TAG "rank %d: VERIFY: the send buffer of %d elements changed\n", G.rank,
                    count);
        if (code == MPI_SUCCESS)
            verify(copy, rb, count, idt, comm);
        free(copy);
    }
    return code == MPI_SUCCESS ? code : raise_error(comm, code);
}

int accel_iallreduce(tracked_t *t, const void *sb, void *rb, int count, inagg_dtype_t idt,
                     MPI_Comm comm, MPI_Request *request)
{
    greq_t *g;
    int rc = greq_begin(t, &t->mu, finish_of, request, &g);
    if (rc != MPI_SUCCESS)
        return raise_error(comm, rc);
    pthread_mutex_lock(&t->mu);
    int fallen = t->fallen;
    pthread_mutex_unlock(&t->mu);
    if (!G.hooked || fallen) { /* no way to be called back from MPI's progress, or MPI does
                                  it for now: finish now */
        greq_done(g, accel_allreduce(t, sb, rb, count, idt, comm));
        return MPI_SUCCESS;
    }
    const void *send = sb == MPI_IN_PLACE ? rb : sb;
    atomic_fetch_add(&n_accel, 1);
    inagg_request_t *ir = NULL;
    pthread_mutex_lock(&t->mu);
    inagg_result_t irc = inagg_iallreduce(t->ic, send, rb, (size_t)count, idt, INAGG_SUM, &ir);
    int code = irc == INAGG_OK ? MPI_SUCCESS : finish_code(t, irc);
    pthread_mutex_unlock(&t->mu);
    if (code != MPI_SUCCESS || !ir) /* nothing in flight: the error comes out of MPI_Wait */
        greq_done(g, code);
    else
        greq_queue(g, ir);
    return MPI_SUCCESS;
}
