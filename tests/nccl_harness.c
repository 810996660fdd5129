/*
 * nccl_harness.c - drives libnccl-net-inagg.so as NCCL would, without NCCL or a GPU: loads it
 * with dlopen, looks up ncclNetPlugin_v8 and ncclCollNetPlugin_v8, and runs ranks as processes
 * that exchange their listen handles through shared memory (NCCL's bootstrap) and call the
 * tables. Every result is checked element by element against a reference computed here.
 *
 *   nccl-harness PLUGIN.so SWITCH PART [MAX_ELEMS]
 *
 * PART is one of
 *   matrix  4 ranks join one job; every (dtype, op) reduceSupport claims, from 1 element to
 *           1 Mi + 3, and float32 sums up to MAX_ELEMS (default 16777216: 64 MiB), each result
 *           checked; 8
 *           allreduces in flight at once; a burst past the plugin's limit of requests in flight
 *           (iallreduce answers "not now"); iflush; a reduction not claimed refused with a
 *           logged reason while the job goes on. Lost packets: set INAGG_FAULTS.
 *   net     the point-to-point table: 4 ranks in a ring, messages of 0 bytes to 16 MiB, 4 in
 *           flight, each checked; a message longer than its receive refused with a reason.
 *   errors  one process: no switch configured (no CollNet device), a damaged handle, rank 0
 *           naming no switch, a switch that does not answer (INAGG_NCCL_TIMEOUT_MS bounds it),
 *           a net peer that is not there, a damaged net handle, a net message of another tag
 *           than its receive's: each a clear error code and log line, no hang.
 *   cuda    CUDA buffers staged through pinned host memory; skipped, saying why, without a
 *           CUDA device or a plugin built without the CUDA runtime.
 * Prints "ok PART ...", "FAIL ...: why" or "skip PART: why" lines and "N passed, N failed,
 * N skipped"; exits 0 when nothing failed.
 */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "apps/nccl/nccl_abi.h"

#ifdef INAGG_NCCL_CUDA
#include <cuda_runtime_api.h>
#endif

#define RANKS 4
#define PHASES 16
#define WAIT_S 120.0

typedef struct {
    atomic_int arrived[PHASES];
    unsigned char cn_handle[RANKS][NCCL_NET_HANDLE_MAXSIZE];
    unsigned char net_handle[RANKS][NCCL_NET_HANDLE_MAXSIZE];
    char detail[RANKS][256];
} shared_t;

static shared_t *g_sh;
static int g_rank;
static char g_last_warn[1024];
static char g_leave_line[1024]; /* the plugin's counters when it leaves its job */
static const ncclNet_v8_t *g_net;
static const ncclCollNet_v8_t *g_cn;
static int g_failed;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
    char text[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    printf("FAIL rank %d: %s\n", g_rank, text);
    fflush(stdout);
    g_last_warn[0] = '\0';
    g_failed++;
}

/* NCCL's logger: warnings kept (the error cases check their reasons) and shown. */
static void logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                   const char *fmt, ...)
{
    (void)flags;
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (level == NCCL_LOG_WARN) {
        if (!g_last_warn[0]) /* the first since the check cleared it: the cause */
            snprintf(g_last_warn, sizeof(g_last_warn), "%s", text);
        fprintf(stderr, "log rank %d: WARN %s:%d %s\n", g_rank, file, line, text);
    } else if (strstr(text, " leaves job ")) {
        snprintf(g_leave_line, sizeof(g_leave_line), "%s", text);
    }
    if (level != NCCL_LOG_WARN && getenv("NCCL_HARNESS_VERBOSE")) {
        fprintf(stderr, "log rank %d: %s\n", g_rank, text);
    }
}

static int load(const char *path)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fail("dlopen %s: %s", path, dlerror());
        return -1;
    }
    g_net = dlsym(lib, "ncclNetPlugin_v8");
    g_cn = dlsym(lib, "ncclCollNetPlugin_v8");
    if (!g_net || !g_cn) {
        fail("%s lacks %s", path, g_net ? "ncclCollNetPlugin_v8" : "ncclNetPlugin_v8");
        return -1;
    }
    if (g_net->init(logger) != ncclSuccess || g_cn->init(logger) != ncclSuccess) {
        fail("init: %s", g_last_warn);
        return -1;
    }
    return 0;
}

/* All ranks reach `phase` (bounded): 0, or -1. */
static int barrier(int phase)
{
    atomic_fetch_add(&g_sh->arrived[phase], 1);
    double end = now_s() + WAIT_S;
    while (atomic_load(&g_sh->arrived[phase]) < RANKS)
        if (now_s() > end) {
            fail("barrier %d: the other ranks did not arrive in %.0f s", phase, WAIT_S);
            return -1;
        } else {
            usleep(1000);
        }
    return 0;
}

/* ---- references --------------------------------------------------------------------- */

static uint32_t mix(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    return x ^ (x >> 16);
}

/* Element i of rank r's input of `dt`: full-range integers (sums wrap), floats on a 1/8 grid
 * whose sums are exact in any order. `seed` tells calls apart. */
static void fill(void *buf, size_t n, int dt, int r, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t h = mix((uint32_t)i * 2654435761U ^ mix(seed * 97u + (uint32_t)r));
        if (dt == ncclFloat32)
            ((float *)buf)[i] = (float)((int)(h % 2001u) - 1000) / 8.0f;
        else
            ((uint32_t *)buf)[i] = h;
    }
}

static int supported_by_reference(int dt, int op)
{
    return (dt == ncclInt32 || dt == ncclUint32 || dt == ncclFloat32) && op >= 0 && op < ncclNumOps;
}

/* What NCCL computes for element i: C semantics, integer sums wrapping, averages of integers
 * the wrapped sum divided (toward zero), of floats the exact sum over the ranks. */
static uint32_t reference_bits(int dt, int op, size_t i, uint32_t seed)
{
    uint32_t v[RANKS];
    float f[RANKS];
    for (int r = 0; r < RANKS; r++) {
        uint32_t h = mix((uint32_t)i * 2654435761U ^ mix(seed * 97u + (uint32_t)r));
        v[r] = h;
        f[r] = (float)((int)(h % 2001u) - 1000) / 8.0f;
    }
    uint32_t acc = v[0], out;
    float facc = f[0];
    for (int r = 1; r < RANKS; r++) {
        switch (op) {
            case ncclSum:
            case ncclAvg: acc += v[r], facc += f[r]; break;
            case ncclProd: acc *= v[r], facc *= f[r]; break;
            case ncclMax:
                acc = dt == ncclInt32 ? ((int32_t)v[r] > (int32_t)acc ? v[r] : acc)
                                      : (v[r] > acc ? v[r] : acc);
                facc = f[r] > facc ? f[r] : facc;
                break;
            default:
                acc = dt == ncclInt32 ? ((int32_t)v[r] < (int32_t)acc ? v[r] : acc)
                                      : (v[r] < acc ? v[r] : acc);
                facc = f[r] < facc ? f[r] : facc;
        }
    }
    if (op == ncclAvg) {
        acc = dt == ncclInt32 ? (uint32_t)((int32_t)acc / RANKS) : acc / RANKS;
        facc /= RANKS;
    }
    if (dt == ncclFloat32)
        memcpy(&out, &facc, 4);
    else
        out = acc;
    return out;
}

static size_t check_result(const void *got, size_t n, int dt, int op, uint32_t seed,
                           size_t *first_bad)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t g;
        memcpy(&g, (const char *)got + 4 * i, 4);
        if (g != reference_bits(dt, op, i, seed) && bad++ == 0)
            *first_bad = i;
    }
    return bad;
}

/* ---- the CollNet table, as NCCL's proxy drives it -------------------------------------- */

/* Test `req` until done (bounded): 0, or -1. */
static int wait_req(void *req, int want_bytes, const char *what)
{
    double end = now_s() + WAIT_S;
    int done = 0, size = -1;
    while (!done) {
        ncclResult_t rc = g_cn->test(req, &done, &size);
        if (rc != ncclSuccess) {
            fail("%s: test returned %d: %s", what, rc, g_last_warn);
            return -1;
        }
        if (!done && now_s() > end) {
            fail("%s: not done after %.0f s", what, WAIT_S);
            return -1;
        }
    }
    if (size != want_bytes) {
        fail("%s: test reported %d bytes, not %d", what, size, want_bytes);
        return -1;
    }
    return 0;
}

static int one_allreduce(void *cc, char *send, char *recv, void *mh, size_t n, int dt, int op,
                         uint32_t seed)
{
    char what[96];
    snprintf(what, sizeof(what), "allreduce of %zu x dtype %d op %d", n, dt, op);
    fill(send, n, dt, g_rank, seed);
    memset(recv, 0xa5, n * 4);
    void *req = NULL;
    ncclResult_t rc = g_cn->iallreduce(cc, send, recv, (int)n, dt, op, mh, mh, &req);
    if (rc != ncclSuccess || !req) {
        fail("%s: iallreduce returned %d, request %p: %s", what, rc, req, g_last_warn);
        return -1;
    }
    if (wait_req(req, (int)(n * 4), what) < 0)
        return -1;
    size_t first = 0, bad = check_result(recv, n, dt, op, seed, &first);
    if (bad) {
        uint32_t g;
        memcpy(&g, recv + 4 * first, 4);
        fail("%s: %zu elements wrong, first [%zu] = 0x%08x, expected 0x%08x", what, bad, first, g,
             reference_bits(dt, op, first, seed));
        return -1;
    }
    return 0;
}

/* 8 allreduces in flight on parts of one buffer, then tested in order, as NCCL's steps; then
 * a burst of small ones past the plugin's limit, posting again when it says "not now". */
static int in_flight(void *cc, char *send, char *recv, void *mh, int *not_now)
{
    enum { K = 8, SMALL = 200 };
    void *req[SMALL];
    size_t n[K] = {1, 7, 1000, 4096, 333, 65537, 12, 20000}, off = 0, offs[K];
    for (int k = 0; k < K; k++, off += n[k - 1] * 4) {
        offs[k] = off;
        fill(send + off, n[k], ncclFloat32, g_rank, 1000u + (uint32_t)k);
        if (g_cn->iallreduce(cc, send + off, recv + off, (int)n[k], ncclFloat32, ncclSum, mh, mh,
                             &req[k]) != ncclSuccess ||
            !req[k]) {
            fail("in flight: iallreduce %d refused: %s", k, g_last_warn);
            return -1;
        }
    }
    for (int k = 0; k < K; k++) {
        size_t first = 0;
        if (wait_req(req[k], (int)(n[k] * 4), "in flight") < 0 ||
            check_result(recv + offs[k], n[k], ncclFloat32, ncclSum, 1000u + (uint32_t)k, &first)) {
            fail("in flight: allreduce %d of %zu wrong at [%zu]", k, n[k], first);
            return -1;
        }
    }
    int posted = 0, tested = 0;
    double end = now_s() + WAIT_S;
    while (tested < SMALL && now_s() < end) {
        if (posted < SMALL) {
            char *s = send + 64 * posted, *r = recv + 64 * posted;
            fill(s, 16, ncclInt32, g_rank, 2000u + (uint32_t)posted);
            if (g_cn->iallreduce(cc, s, r, 16, ncclInt32, ncclSum, mh, mh, &req[posted]) !=
                ncclSuccess) {
                fail("burst: iallreduce %d: %s", posted, g_last_warn);
                return -1;
            }
            if (req[posted]) {
                posted++;
                continue;
            }
            (*not_now)++;
        }
        size_t first = 0;
        if (wait_req(req[tested], 64, "burst") < 0 ||
            check_result(recv + 64 * tested, 16, ncclInt32, ncclSum, 2000u + (uint32_t)tested,
                         &first)) {
            fail("burst: allreduce %d wrong at [%zu]", tested, first);
            return -1;
        }
        tested++;
    }
    if (tested == SMALL && *not_now == 0)
        fail("burst: %d allreduces in flight and iallreduce never answered 'not now'", SMALL);
    return tested == SMALL ? 0 : -1;
}

/* A reduction reduceSupport does not claim: refused with a reason, the job unharmed. */
static int refused_cleanly(void *cc, char *send, char *recv, void *mh, int dt, int op)
{
    void *req = (void *)1;
    g_last_warn[0] = '\0';
    ncclResult_t rc = g_cn->iallreduce(cc, send, recv, 10, dt, op, mh, mh, &req);
    if (rc == ncclSuccess || req != NULL || !strstr(g_last_warn, "not offered")) {
        fail("dtype %d op %d, not claimed: iallreduce returned %d, request %p, log '%s'", dt, op,
             rc, req, g_last_warn);
        return -1;
    }
    g_last_warn[0] = '\0';
    return 0;
}

static void *join(int phase)
{
    void *lc = NULL, *cc = NULL, *handles[RANKS];
    int ndev = 0;
    if (g_cn->devices(&ndev) != ncclSuccess || ndev != 1) {
        fail("CollNet devices: %d, not 1 ($INAGG_SWITCH set): %s", ndev, g_last_warn);
        return NULL;
    }
    ncclNetProperties_v8_t p;
    if (g_cn->getProperties(0, &p) != ncclSuccess || !(p.ptrSupport & NCCL_PTR_HOST) ||
        p.maxRecvs != 1 || strcmp(p.name, "inagg") != 0) {
        fail("CollNet getProperties: %s", g_last_warn);
        return NULL;
    }
    if (g_cn->listen(0, g_sh->cn_handle[g_rank], &lc) != ncclSuccess || barrier(phase) < 0)
        return NULL;
    for (int r = 0; r < RANKS; r++)
        handles[r] = g_sh->cn_handle[r];
    if (g_cn->connect(handles, RANKS, g_rank, lc, &cc) != ncclSuccess || !cc) {
        fail("CollNet connect: %s", g_last_warn);
        return NULL;
    }
    g_cn->closeListen(lc);
    return cc;
}

static int part_matrix(size_t max_elems)
{
    void *cc = join(0), *mh = NULL;
    size_t bytes = max_elems * 4 + 64;
    char *send = malloc(bytes), *recv = malloc(bytes);
    if (!cc || !send || !recv)
        return -1;
    if (g_cn->regMr(cc, send, bytes, NCCL_PTR_HOST, &mh) != ncclSuccess) {
        fail("regMr host: %s", g_last_warn);
        return -1;
    }
    size_t sizes[] = {1, 3, 1000, 65543, 1048579, max_elems};
    int claims = 0, checked = 0, not_now = 0;
    double t0 = now_s();
    for (int dt = 0; dt < ncclNumTypes; dt++)
        for (int op = 0; op < ncclNumOps; op++) {
            int sup = -1;
            if (g_cn->reduceSupport(dt, op, &sup) != ncclSuccess || (sup != 0 && sup != 1)) {
                fail("reduceSupport(%d, %d): %d", dt, op, sup);
                continue;
            }
            if (!sup) {
                if ((dt + op) % 5 == 0) /* a few of them: each costs a warning */
                    refused_cleanly(cc, send, recv, mh, dt, op);
                continue;
            }
            claims++;
            if (!supported_by_reference(dt, op)) {
                fail("reduceSupport claims dtype %d op %d: no reference here to check it", dt, op);
                continue;
            }
            for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
                if (sizes[s] <= max_elems && (s + 1 < sizeof(sizes) / sizeof(sizes[0]) ||
                                              (dt == ncclFloat32 && op == ncclSum)))
                    checked += one_allreduce(cc, send, recv, mh, sizes[s], dt, op,
                                             (uint32_t)(dt * 10 + op) * 100u + (uint32_t)s) == 0;
        }
    int have_core = 0;
    g_cn->reduceSupport(ncclFloat32, ncclSum, &have_core);
    if (!have_core || claims == 0)
        fail("reduceSupport claims no float32 sum (%d claims)", claims);
    in_flight(cc, send, recv, mh, &not_now);
    void *freq = (void *)1;
    if (g_cn->iflush(cc, recv, 64, mh, &freq) != ncclSuccess ||
        (freq && wait_req(freq, 0, "iflush") < 0))
        fail("iflush: %s", g_last_warn);
    if (g_cn->deregMr(cc, mh) != ncclSuccess || g_cn->closeColl(cc) != ncclSuccess)
        fail("deregMr/closeColl: %s", g_last_warn);
    unsigned long long sent = 0, resent = 0, lost = 0;
    const char *counts = strstr(g_leave_line, " leaves job ");
    counts = counts ? strchr(counts, ':') : NULL;
    if (!counts || sscanf(counts, ": %llu packets sent, %llu retransmitted, %llu dropped", &sent,
                          &resent, &lost) != 3)
        fail("closeColl logged no counters: '%s'", g_leave_line);
    snprintf(g_sh->detail[g_rank], sizeof(g_sh->detail[0]),
             "%d reductions claimed, %d allreduces checked up to %zu elements, 208 in flight "
             "(%d times 'not now'), %.1f s; rank %d: %llu packets lost (INAGG_FAULTS), %llu "
             "retransmitted",
             claims, checked, max_elems, not_now, now_s() - t0, g_rank, lost, resent);
    free(send);
    free(recv);
    return g_failed ? -1 : 0;
}

/* ---- the net table: a ring ------------------------------------------------------------ */

static int net_wait(void *req, int want, const char *what)
{
    double end = now_s() + WAIT_S;
    int done = 0, size = -1;
    while (!done) {
        if (g_net->test(req, &done, &size) != ncclSuccess) {
            fail("net %s: test failed: %s", what, g_last_warn);
            return -1;
        }
        if (!done && now_s() > end) {
            fail("net %s: not done after %.0f s", what, WAIT_S);
            return -1;
        }
    }
    if (size != want) {
        fail("net %s: %d bytes, not %d", what, size, want);
        return -1;
    }
    return 0;
}

static int ring_connect(void **sc, void **rc)
{
    void *lc = NULL;
    ncclNetDeviceHandle_v8_t *dh = NULL;
    if (g_net->listen(0, g_sh->net_handle[g_rank], &lc) != ncclSuccess || barrier(1) < 0)
        return -1;
    *sc = *rc = NULL;
    double end = now_s() + WAIT_S;
    while ((!*sc || !*rc) && now_s() < end) {
        if (!*sc &&
            g_net->connect(0, g_sh->net_handle[(g_rank + 1) % RANKS], sc, &dh) != ncclSuccess)
            break;
        if (!*rc && g_net->accept(lc, rc, &dh) != ncclSuccess)
            break;
    }
    g_net->closeListen(lc);
    if (!*sc || !*rc) {
        fail("net: ring not connected: %s", g_last_warn);
        return -1;
    }
    return 0;
}

static int part_net(void)
{
    void *sc, *rc, *mh;
    if (ring_connect(&sc, &rc) < 0)
        return -1;
    int sizes[] = {0, 1, 4096, 1048581, 16777216}, prev = (g_rank + RANKS - 1) % RANKS;
    enum { K = 4 };
    char *out[K], *in[K];
    if (g_net->regMr(sc, NULL, 0, NCCL_PTR_HOST, &mh) != ncclSuccess)
        fail("net regMr: %s", g_last_warn);
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        void *sreq[K], *rreq[K];
        for (int k = 0; k < K; k++) {
            out[k] = malloc((size_t)sizes[s] + 1);
            in[k] = malloc((size_t)sizes[s] + 64);
            for (int i = 0; i < sizes[s]; i++)
                out[k][i] = (char)mix((uint32_t)(i + 7 * k + 1000 * g_rank));
            int cap = sizes[s] + 64, tag = 100 + k;
            void *buf = in[k];
            if (g_net->isend(sc, out[k], sizes[s], tag, mh, &sreq[k]) != ncclSuccess || !sreq[k] ||
                g_net->irecv(rc, 1, &buf, &cap, &tag, &mh, &rreq[k]) != ncclSuccess || !rreq[k]) {
                fail("net: post of %d bytes: %s", sizes[s], g_last_warn);
                return -1;
            }
        }
        for (int k = 0; k < K; k++) {
            if (net_wait(sreq[k], sizes[s], "send") < 0 || net_wait(rreq[k], sizes[s], "recv") < 0)
                return -1;
            for (int i = 0; i < sizes[s]; i++)
                if (in[k][i] != (char)mix((uint32_t)(i + 7 * k + 1000 * prev))) {
                    fail("net: message %d of %d bytes wrong at byte %d", k, sizes[s], i);
                    return -1;
                }
            free(out[k]);
            free(in[k]);
        }
    }
    /* a message longer than the receive posted for it: refused, with its sizes */
    char big[100] = {0}, small[10];
    void *sreq = NULL, *rreq = NULL, *buf = small;
    int cap = 10, tag = 5;
    g_last_warn[0] = '\0';
    g_net->isend(sc, big, 100, tag, mh, &sreq);
    ncclResult_t r = g_net->irecv(rc, 1, &buf, &cap, &tag, &mh, &rreq);
    int done = 0, size = 0;
    double end = now_s() + 10;
    while (rreq && r == ncclSuccess && !done && now_s() < end)
        r = g_net->test(rreq, &done, &size);
    if (r == ncclSuccess || !strstr(g_last_warn, "a message of 100 bytes for a receive of 10"))
        fail("net: a 100-byte message into a 10-byte receive: test returned %d, log '%s'", r,
             g_last_warn);
    barrier(2); /* every send has been read before the connections close */
    g_net->deregMr(sc, mh);
    g_net->closeSend(sc);
    g_net->closeRecv(rc);
    snprintf(g_sh->detail[g_rank], sizeof(g_sh->detail[0]),
             "4 ranks in a ring, 0 B to 16 MiB, 4 in flight; an oversized message refused");
    return g_failed ? -1 : 0;
}

/* ---- errors: each a code and a reason, in bounded time -------------------------------- */

static void expect(const char *what, ncclResult_t rc, ncclResult_t want, const char *reason,
                   double t0)
{
    if (rc != want || !strstr(g_last_warn, reason))
        fail("%s: returned %d (want %d), log '%s' (want '%s')", what, rc, want, g_last_warn,
             reason);
    else if (now_s() - t0 > 20)
        fail("%s: took %.1f s", what, now_s() - t0);
    else
        printf("ok   %s: %d in %.2f s, '%s'\n", what, rc, now_s() - t0, g_last_warn);
    g_last_warn[0] = '\0';
}

static int part_errors(const char *switch_addr, const char *dead_addr)
{
    void *lc = NULL, *cc = NULL, *h[1];
    unsigned char raw[NCCL_NET_HANDLE_MAXSIZE];
    int ndev = -1;
    unsetenv("INAGG_SWITCH");
    if (g_cn->init(logger) != ncclSuccess || g_cn->devices(&ndev) != ncclSuccess || ndev != 0)
        fail("no $INAGG_SWITCH: %d CollNet devices, not 0", ndev);
    else
        printf("ok   no $INAGG_SWITCH: no CollNet device (NCCL leaves CollNet off)\n");
    /* a handle listen() made here names no switch: rank 0's, it leaves the job nowhere */
    g_cn->listen(0, raw, &lc);
    h[0] = raw;
    double t0 = now_s();
    expect("rank 0 names no switch", g_cn->connect(h, 1, 0, lc, &cc), ncclInvalidUsage,
           "names no switch", t0);
    g_cn->closeListen(lc);
    setenv("INAGG_SWITCH", switch_addr, 1);
    g_cn->init(logger);
    g_cn->listen(0, raw, &lc);
    raw[3] ^= 0x40; /* the magic */
    t0 = now_s();
    expect("a damaged handle", g_cn->connect(h, 1, 0, lc, &cc), ncclInvalidArgument,
           "not an inagg CollNet handle", t0);
    g_cn->closeListen(lc);
    setenv("INAGG_SWITCH", dead_addr, 1);
    setenv("INAGG_NCCL_TIMEOUT_MS", "2000", 1);
    g_cn->init(logger);
    g_cn->listen(0, raw, &lc);
    t0 = now_s();
    expect("a switch that does not answer", g_cn->connect(h, 1, 0, lc, &cc), ncclRemoteError,
           "could not join job", t0);
    g_cn->closeListen(lc);
    if (cc)
        fail("a failed connect left a comm");
    /* the net table: a listen handle whose listener is gone */
    void *nl = NULL, *sc = NULL;
    ncclNetDeviceHandle_v8_t *dh = NULL;
    g_net->init(logger);
    g_net->listen(0, raw, &nl);
    g_net->closeListen(nl);
    t0 = now_s();
    expect("a net peer that is not there", g_net->connect(0, raw, &sc, &dh), ncclSystemError,
           "net: connect to", t0);
    raw[0] ^= 1;
    t0 = now_s();
    expect("a damaged net handle", g_net->connect(0, raw, &sc, &dh), ncclInvalidArgument,
           "not a listen handle of this plugin", t0);
    /* a message whose tag is not the one its receive was posted with: the streams are out of
     * step, refused */
    void *rc = NULL, *sreq = NULL, *rreq = NULL, *mh = NULL, *buf;
    char msg[8] = "tagged", in[8];
    int cap = 8, tag = 2, done = 0;
    g_net->listen(0, raw, &nl);
    g_net->connect(0, raw, &sc, &dh);
    for (int i = 0; i < 1000 && !rc; i++)
        g_net->accept(nl, &rc, &dh);
    buf = in;
    ncclResult_t r = ncclInternalError;
    t0 = now_s();
    if (sc && rc && g_net->isend(sc, msg, 8, 1, mh, &sreq) == ncclSuccess)
        for (r = g_net->irecv(rc, 1, &buf, &cap, &tag, &mh, &rreq);
             r == ncclSuccess && rreq && !done && now_s() < t0 + 10;)
            r = g_net->test(rreq, &done, NULL);
    expect("a net message of another tag", r, ncclSystemError,
           "a message with tag 1 for a receive of tag 2", t0);
    g_net->closeSend(sc);
    g_net->closeRecv(rc);
    g_net->closeListen(nl);
    snprintf(g_sh->detail[0], sizeof(g_sh->detail[0]), "7 cases");
    return g_failed ? -1 : 0;
}

/* ---- CUDA buffers staged through pinned host memory ----------------------------------- */

static int part_cuda(const char *switch_addr)
{
#ifdef INAGG_NCCL_CUDA
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        snprintf(g_sh->detail[0], sizeof(g_sh->detail[0]),
                 "skip: no CUDA device (cudaGetDeviceCount: %s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 0;
    }
    setenv("INAGG_SWITCH", switch_addr, 1);
    g_cn->init(logger);
    ncclNetProperties_v8_t p;
    void *lc = NULL, *cc = NULL, *h[1], *mh = NULL, *req = NULL;
    unsigned char raw[NCCL_NET_HANDLE_MAXSIZE];
    if (g_cn->getProperties(0, &p) != ncclSuccess || !(p.ptrSupport & NCCL_PTR_CUDA)) {
        fail("cuda: a device is present but ptrSupport lacks NCCL_PTR_CUDA: %s", g_last_warn);
        return -1;
    }
    g_cn->listen(0, raw, &lc);
    h[0] = raw;
    if (g_cn->connect(h, 1, 0, lc, &cc) != ncclSuccess) {
        fail("cuda: connect: %s", g_last_warn);
        return -1;
    }
    enum { N = 1 << 20 };
    float *host = malloc(N * 8), *dev = NULL;
    cudaMalloc((void **)&dev, N * 8);
    fill(host, N, ncclFloat32, 0, 77);
    cudaMemcpy(dev, host, N * 4, cudaMemcpyHostToDevice);
    cudaMemset(dev + N, 0, N * 4);
    if (g_cn->regMr(cc, dev, N * 8, NCCL_PTR_CUDA, &mh) != ncclSuccess ||
        g_cn->iallreduce(cc, dev, dev + N, N, ncclFloat32, ncclSum, mh, mh, &req) != ncclSuccess ||
        !req || wait_req(req, N * 4, "cuda allreduce") < 0) {
        fail("cuda: %s", g_last_warn);
        return -1;
    }
    memset(host + N, 0, N * 4);
    cudaMemcpy(host + N, dev + N, N * 4, cudaMemcpyDeviceToHost);
    if (memcmp(host, host + N, N * 4) != 0) /* one rank: the sum is its own input */
        fail("cuda: the result in device memory differs from the input");
    g_cn->deregMr(cc, mh);
    g_cn->closeColl(cc);
    g_cn->closeListen(lc);
    cudaFree(dev);
    free(host);
    snprintf(g_sh->detail[0], sizeof(g_sh->detail[0]), "1 Mi float32 from device memory");
    return g_failed ? -1 : 0;
#else
    (void)switch_addr;
    snprintf(g_sh->detail[0], sizeof(g_sh->detail[0]),
             "skip: this harness was built without the CUDA runtime");
    return 0;
#endif
}

/* ---- ranks as processes --------------------------------------------------------------- */

static int run_rank(int rank, const char *plugin, const char *part, const char *sw,
                    const char *dead, size_t max_elems)
{
    g_rank = rank;
    alarm(600); /* a last bound: every wait above has its own */
    if (load(plugin) < 0)
        return 1;
    int rc;
    if (strcmp(part, "matrix") == 0)
        rc = part_matrix(max_elems);
    else if (strcmp(part, "net") == 0)
        rc = part_net();
    else if (strcmp(part, "errors") == 0)
        rc = part_errors(sw, dead);
    else
        rc = part_cuda(sw);
    fflush(stdout);
    return rc == 0 && !g_failed ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc < 4 || (strcmp(argv[3], "matrix") && strcmp(argv[3], "net") &&
                     strcmp(argv[3], "errors") && strcmp(argv[3], "cuda"))) {
        fprintf(stderr,
                "usage: %s PLUGIN.so SWITCH matrix|net|errors|cuda [MAX_ELEMS]\n"
                "  (errors: SWITCH,DEAD where DEAD is a HOST:PORT nobody answers on)\n",
                argv[0]);
        return 2;
    }
    const char *part = argv[3];
    char sw[256], *dead = NULL;
    snprintf(sw, sizeof(sw), "%s", argv[2]);
    if ((dead = strchr(sw, ';')))
        *dead++ = '\0';
    size_t max_elems = argc > 4 ? strtoul(argv[4], NULL, 10) : 16777216u;
    if (max_elems < 20000) /* the in-flight checks' buffer */
        max_elems = 20000;
    if (strcmp(part, "errors") == 0 && !dead) {
        fprintf(stderr, "errors: SWITCH must be 'HOST:PORT;DEAD_HOST:PORT'\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    g_sh = mmap(NULL, sizeof(*g_sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (g_sh == MAP_FAILED)
        return perror("mmap"), 1;
    setenv("INAGG_SWITCH", sw, 1);
    int ranks = strcmp(part, "matrix") == 0 || strcmp(part, "net") == 0 ? RANKS : 1;
    pid_t pid[RANKS];
    for (int r = 0; r < ranks; r++)
        if ((pid[r] = fork()) == 0)
            exit(run_rank(r, argv[1], part, sw, dead, max_elems)); /* exit: LSan looks */
    int bad = 0;
    double end = now_s() + 540;
    for (int r = 0; r < ranks; r++) {
        int st = 0;
        while (waitpid(pid[r], &st, WNOHANG) == 0)
            if (now_s() > end) {
                for (int k = 0; k < ranks; k++)
                    kill(pid[k], SIGKILL);
                printf("FAIL %s: rank %d still running after 540 s: killed\n", part, r);
            } else {
                usleep(10000);
            }
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            bad++;
            if (!WIFEXITED(st))
                printf("FAIL %s: rank %d ended by signal %d\n", part, r, WTERMSIG(st));
        }
    }
    int skipped = strncmp(g_sh->detail[0], "skip: ", 6) == 0;
    if (bad)
        printf("FAIL %s: %d of %d ranks failed\n", part, bad, ranks);
    else if (skipped)
        printf("skip %s: %s\n", part, g_sh->detail[0] + 6);
    else
        printf("ok   %s (%s)\n", part, g_sh->detail[0]);
    printf("%d passed, %d failed, %d skipped\n", !bad && !skipped, bad != 0, skipped);
    return bad ? 1 : 0;
}
