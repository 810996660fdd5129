/*
 * testbed_rank.c - one worker rank of an allreduce benchmark, for runs where every rank lives
 * on its own host (a testbed namespace, or a real machine). It joins a job on a running
 * `inagg switch`, runs warmup + timed inagg_allreduce calls of one tensor, verifies every
 * result against a sum it computes itself, and prints one line of JSON with its own times;
 * the launcher takes, per iteration, the slowest rank's time (bench/testbed_sweep.sh).
 *
 * Build (bench/testbed_run.py does this when the source or the library is newer):
 *   cc -O2 -Iinclude tools/testbed_rank.c build/libinagg.a -lpthread -lm -o build/testbed/rank
 *
 * It uses only the public API (include/inagg.h), so it keeps working while the library's
 * insides change. Exit: 0 verified, 1 a call failed or a result was wrong, 2 bad usage.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "inagg.h"

#define MAX_ITERS 1000u

typedef struct opts {
    const char *switch_addr, *job;
    uint32_t rank, world;
    uint64_t elems, seed;
    int dtype_float;
    unsigned iters, warmup;
    inagg_options_t io;
} opts_t;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: testbed_rank --switch HOST:PORT --rank R --world W [options]\n"
            "\n"
            "One rank of an allreduce benchmark through a running inagg switch. Every rank\n"
            "of a job must be started with the same options (and its own --rank).\n"
            "\n"
            "  --switch HOST:PORT   the switch's control address (required)\n"
            "  --rank R --world W   this rank and the number of ranks (required)\n"
            "  --job NAME           job name on the switch (default testbed)\n"
            "  --elems E            elements per tensor (default 4000000)\n"
            "  --dtype T            int32 or float32 (default int32)\n"
            "  --float-mode M       fixed or native (default fixed)\n"
            "  --iters K            timed iterations, 1..%u (default 5)\n"
            "  --warmup W           untimed iterations first (default 1)\n"
            "  --packet-elems K     elements per packet (default 2048: 8 KiB + header,\n"
            "                       one frame at MTU 9000; 256 fits MTU 1500)\n"
            "  --window S           slots in flight (default 16)\n"
            "  --threads N          engine threads (default 1)\n"
            "  --rto-min-us U       retransmission timeout floor (default: the library's)\n"
            "  --rto-max-us U       retransmission timeout cap (default 500000)\n"
            "  --timeout-ms MS      job timeout (default 30000)\n"
            "  --seed S             tensor contents (default 1)\n"
            "\n"
            "Prints one JSON line: rank, times_s (per timed iteration, this rank's),\n"
            "t_start/t_end (CLOCK_REALTIME around the timed iterations), cpu_s (this\n"
            "process's CPU time over them), verified, checksum (FNV-1a of the last result's\n"
            "bytes), and the communicator's counters.\n",
            MAX_ITERS);
}

static int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    if (!s || !*s || *s == '-' || *s == '+')
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int parse_args(int argc, char **argv, opts_t *o)
{
    static const struct option lo[] = {
        {"switch", 1, 0, 'S'},      {"rank", 1, 0, 'r'},       {"world", 1, 0, 'w'},
        {"job", 1, 0, 'j'},         {"elems", 1, 0, 'e'},      {"dtype", 1, 0, 'd'},
        {"float-mode", 1, 0, 'f'},  {"iters", 1, 0, 'k'},      {"warmup", 1, 0, 'W'},
        {"packet-elems", 1, 0, 'p'}, {"window", 1, 0, 's'},    {"threads", 1, 0, 't'},
        {"rto-max-us", 1, 0, 'R'},  {"rto-min-us", 1, 0, 'm'}, {"timeout-ms", 1, 0, 'T'},
        {"seed", 1, 0, 'x'},        {"help", 0, 0, 'h'},       {0, 0, 0, 0}};
    inagg_options_t def = INAGG_OPTIONS_INIT;
    *o = (opts_t){.job = "testbed", .elems = 4000000, .seed = 1, .iters = 5, .warmup = 1,
                  .rank = UINT32_MAX, .io = def};
    o->io.packet_elems = 2048;
    o->io.rto_max_us = 500000;
    int c;
    uint64_t v;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'S': o->switch_addr = optarg; break;
        case 'j': o->job = optarg; break;
        case 'r': bad = parse_u64(optarg, 0, INAGG_MAX_WORLD - 1, &v); o->rank = (uint32_t)v; break;
        case 'w': bad = parse_u64(optarg, 1, INAGG_MAX_WORLD, &v); o->world = (uint32_t)v; break;
        case 'e': bad = parse_u64(optarg, 1, 1ull << 30, &o->elems); break;
        case 'd':
            if (!strcmp(optarg, "int32")) o->dtype_float = 0;
            else if (!strcmp(optarg, "float32")) o->dtype_float = 1;
            else bad = -1;
            break;
        case 'f':
            if (!strcmp(optarg, "fixed")) o->io.float_mode = INAGG_FLOAT_FIXED;
            else if (!strcmp(optarg, "native")) o->io.float_mode = INAGG_FLOAT_NATIVE;
            else bad = -1;
            break;
        case 'k': bad = parse_u64(optarg, 1, MAX_ITERS, &v); o->iters = (unsigned)v; break;
        case 'W': bad = parse_u64(optarg, 0, MAX_ITERS, &v); o->warmup = (unsigned)v; break;
        case 'p': bad = parse_u64(optarg, 1, INAGG_MAX_PACKET_ELEMS, &v); o->io.packet_elems = (uint32_t)v; break;
        case 's': bad = parse_u64(optarg, 1, 65536, &v); o->io.slots = (uint32_t)v; break;
        case 't': bad = parse_u64(optarg, 1, 64, &v); o->io.threads = (uint32_t)v; break;
        case 'm': bad = parse_u64(optarg, 100, 60000000, &v); o->io.rto_min_us = (uint32_t)v; break;
        case 'R': bad = parse_u64(optarg, 1000, 60000000, &v); o->io.rto_max_us = (uint32_t)v; break;
        case 'T': bad = parse_u64(optarg, 100, 3600000, &v); o->io.timeout_ms = (uint32_t)v; break;
        case 'x': bad = parse_u64(optarg, 0, UINT64_MAX, &o->seed); break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); return -1;
        }
        if (bad) {
            fprintf(stderr, "testbed_rank: invalid value '%s' (see --help)\n", optarg);
            return -1;
        }
    }
    if (optind < argc || !o->switch_addr || o->world == 0 || o->rank >= o->world) {
        fprintf(stderr, "testbed_rank: --switch, --world and --rank < world are required\n");
        return -1;
    }
    if (o->io.rto_min_us > o->io.rto_max_us)
        o->io.rto_min_us = o->io.rto_max_us;
    if (o->io.rto_us > o->io.rto_max_us)
        o->io.rto_us = o->io.rto_max_us;
    if (o->io.rto_us < o->io.rto_min_us)
        o->io.rto_us = o->io.rto_min_us;
    return 0;
}

/* Tensor contents: a stateless hash of (seed, rank, index), so every rank can compute the
 * exact sum of all ranks' tensors without talking to them. */
static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t h64(uint64_t seed, uint32_t rank, uint64_t i)
{
    return mix(seed ^ mix((uint64_t)rank + 0x51ed2701ull) ^ (i * 0xd1b54a32d192ed03ull));
}

/* int32 in [-2^24, 2^24): a sum over 64 ranks cannot wrap. */
static int32_t val_i32(uint64_t seed, uint32_t rank, uint64_t i)
{
    return (int32_t)(h64(seed, rank, i) >> 39) - (1 << 24);
}

/* float32: magnitude 2^e with e in [-12, 12] per block of 1024 elements (like a layer's
 * gradients), uniform mantissa and sign. */
static float val_f32(uint64_t seed, uint32_t rank, uint64_t i)
{
    int e = (int)(mix(seed ^ 0x7a11ull ^ (i / 1024)) % 25u) - 12;
    uint64_t h = h64(seed, rank, i);
    double u = (double)(h >> 40) / (double)(1ull << 24) * 2.0 - 1.0; /* [-1, 1) */
    return (float)ldexp(u, e);
}

static double now_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double now_real(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu_self(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    opts_t o;
    if (parse_args(argc, argv, &o) != 0)
        return 2;
    size_t n = (size_t)o.elems;
    void *send = malloc(n * 4), *recv = malloc(n * 4), *expect = malloc(n * 4);
    float *allowed = o.dtype_float ? malloc(n * sizeof(float)) : NULL;
    double *times = calloc(o.iters, sizeof(double));
    if (!send || !recv || !expect || !times || (o.dtype_float && !allowed)) {
        fprintf(stderr, "testbed_rank %u: out of memory for %zu elements\n", o.rank, n);
        return 1;
    }
    /* This rank's tensor and the expected sum (exact for int32; for float32 the sum in double
     * and the error the transport may add: block fixed point loses at most about W/f per
     * element with f = (2^31-1) / (W * 2^m), m the packet's largest binade over all ranks;
     * twice that is allowed, plus rounding of the result). */
    if (!o.dtype_float) {
        int32_t *s = send, *x = expect;
        for (size_t i = 0; i < n; i++) {
            s[i] = val_i32(o.seed, o.rank, i);
            int64_t sum = 0;
            for (uint32_t r = 0; r < o.world; r++)
                sum += val_i32(o.seed, r, i);
            x[i] = (int32_t)sum;
        }
    } else {
        float *s = send, *x = expect;
        size_t pe = o.io.packet_elems;
        for (size_t off = 0; off < n; off += pe) {
            size_t len = n - off < pe ? n - off : pe;
            double maxabs = 0;
            for (size_t i = off; i < off + len; i++) {
                s[i] = val_f32(o.seed, o.rank, i);
                double sum = 0, mag = 0;
                for (uint32_t r = 0; r < o.world; r++) {
                    double v = val_f32(o.seed, r, i);
                    sum += v;
                    mag += fabs(v);
                    if (fabs(v) > maxabs)
                        maxabs = fabs(v);
                }
                x[i] = (float)sum;
                allowed[i] = (float)(o.world * ldexp(mag, -24)); /* native: reordering */
            }
            int m;
            frexp(maxabs, &m);
            double f = 2147483647.0 / ((double)o.world * ldexp(1.0, m));
            for (size_t i = off; i < off + len; i++) {
                double a = o.io.float_mode == INAGG_FLOAT_FIXED ? 2.0 * o.world / f : 0.0;
                allowed[i] += (float)(a + ldexp(fabs((double)x[i]), -23) + 1e-30);
            }
        }
    }

    char why[512] = "";
    inagg_comm_t *comm = NULL;
    inagg_result_t rc = inagg_comm_create(&comm, o.switch_addr, o.job, o.rank, o.world, &o.io,
                                          why, sizeof why);
    if (rc != INAGG_OK) {
        fprintf(stderr, "testbed_rank %u: join %s at %s failed: %s: %s\n", o.rank, o.job,
                o.switch_addr, inagg_strerror(rc), why);
        return 1;
    }
    inagg_dtype_t dt = o.dtype_float ? INAGG_FLOAT32 : INAGG_INT32;
    uint64_t wrong = 0;
    double worst = 0, t_start = 0, t_end = 0, cpu0 = 0, cpu1 = 0;
    for (unsigned it = 0; it < o.warmup + o.iters; it++) {
        memset(recv, 0xA5, n * 4);
        rc = inagg_barrier(comm);
        if (rc != INAGG_OK)
            break;
        if (it == o.warmup) {
            t_start = now_real();
            cpu0 = cpu_self();
        }
        double t0 = now_mono();
        rc = inagg_allreduce(comm, send, recv, n, dt, INAGG_SUM);
        double t1 = now_mono();
        if (rc != INAGG_OK)
            break;
        if (it >= o.warmup)
            times[it - o.warmup] = t1 - t0;
        if (it + 1 == o.warmup + o.iters) {
            t_end = now_real();
            cpu1 = cpu_self();
        }
        /* verify every result (outside the timed region) */
        if (!o.dtype_float) {
            const int32_t *g = recv, *x = expect;
            for (size_t i = 0; i < n; i++)
                wrong += g[i] != x[i];
        } else {
            const float *g = recv, *x = expect;
            for (size_t i = 0; i < n; i++) {
                double err = fabs((double)g[i] - (double)x[i]);
                if (!(err <= allowed[i]))
                    wrong++;
                else if (err / allowed[i] > worst)
                    worst = err / allowed[i];
            }
        }
    }
    if (rc != INAGG_OK) {
        fprintf(stderr, "testbed_rank %u: %s: %s\n", o.rank, inagg_strerror(rc),
                inagg_last_error(comm));
        inagg_comm_destroy(comm);
        return 1;
    }
    inagg_stats_t st;
    memset(&st, 0, sizeof st);
    inagg_get_stats(comm, &st);
    inagg_comm_destroy(comm);

    uint64_t fnv = 0xcbf29ce484222325ull;
    const unsigned char *b = recv;
    for (size_t i = 0; i < n * 4; i++)
        fnv = (fnv ^ b[i]) * 0x100000001b3ull;

    printf("{\"name\":\"inagg\",\"rank\":%u,\"world\":%u,\"elems\":%zu,\"dtype\":\"%s\","
           "\"packet_elems\":%u,\"window\":%u,\"verified\":%s,\"wrong\":%llu,"
           "\"max_err_ratio\":%.3g,\"checksum\":\"%016llx\",\"t_start\":%.6f,\"t_end\":%.6f,"
           "\"cpu_s\":%.4f,\"times_s\":[",
           o.rank, o.world, n, o.dtype_float ? "float32" : "int32", o.io.packet_elems,
           o.io.slots, wrong ? "false" : "true", (unsigned long long)wrong, worst,
           (unsigned long long)fnv, t_start, t_end, cpu1 - cpu0);
    for (unsigned i = 0; i < o.iters; i++)
        printf("%s%.6f", i ? "," : "", times[i]);
    printf("],\"packets_sent\":%llu,\"retransmissions\":%llu,\"bytes_sent\":%llu,"
           "\"bytes_received\":%llu,\"srtt_us\":%u}\n",
           (unsigned long long)st.packets_sent, (unsigned long long)st.retransmissions,
           (unsigned long long)st.bytes_sent, (unsigned long long)st.bytes_received, st.srtt_us);
    free(send);
    free(recv);
    free(expect);
    free(allowed);
    free(times);
    return wrong ? 1 : 0;
}
