/*
 * bench_allreduce_args.c - `inagg bench allreduce`'s flags: the help text, parsing with
 * messages that name the flag and what it allows.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/bench_allreduce_cli.h"
#include "codec/codec.h"
#include "bench/harness.h"
#include "cli/flags.h"
#include "wire/wire.h"

#define TESTBED_ITERS 5u
#define TESTBED_WARMUP 1u

/* The default --sizes sweep: 4 KiB .. 256 MiB per rank, powers of 4. */
static const uint64_t default_sizes[] = {4ull << 10, 16ull << 10, 64ull << 10, 256ull << 10,
                                         1ull << 20,  4ull << 20,  16ull << 20, 64ull << 20,
                                         256ull << 20};

static void usage(FILE *out)
{
    const inagg_options_t def = INAGG_OPTIONS_INIT;
    fprintf(out,
            "usage: inagg bench allreduce [options]\n"
            "       inagg bench allreduce --testbed N [--link-rate R] [--mtu M] [--loss P]\n"
            "                             [--baseline mpi,mpi-ring,gloo] [--sizes[=LIST]] ...\n"
            "       inagg bench allreduce --switch HOST:PORT --rank R --world W --job NAME ...\n"
            "\n"
            "Measures allreduce through the aggregation switch and verifies every result:\n"
            "each rank fills its tensor with known values (src/bench/benchdata.h), runs\n"
            "warmups and timed allreduces, each after a barrier, and checks each result\n"
            "(int32 exactly, float32 within the fixed-point bound). An iteration's tensor\n"
            "aggregation time (TAT) is the slowest rank's. Baselines reduce the same tensor\n"
            "in the same invocation; speedup = baseline median TAT / inagg median TAT.\n"
            "\n"
            "Where it runs:\n"
            "  (default)            an embedded switch and --workers local processes on loopback\n"
            "  --switch HOST:PORT   a running switch instead of the embedded one (A,B,...: a\n"
            "                       job sharded over several)\n"
            "  --leaves L --hosts-per-leaf H\n"
            "                       two levels: L leaf switches of H ranks each under a spine\n"
            "                       switch (each leaf sends its partial sum up; loopback: L*H\n"
            "                       local ranks; with --testbed L*H: a two-level testbed)\n"
            "  --shards K           spread the job's slots over K switch processes (slot s on\n"
            "                       switch s %% K), so one switch's CPU does not bound it\n"
            "  --pin-switches       loopback: pin switch process k to CPU k (mod the CPUs)\n"
            "  --no-dataplane-auth  the ranks' packets go without MACs (JOIN still proves the\n"
            "                       job secret): to measure what the MACs cost\n"
            "  --switch-cpu-share PCT\n"
            "                       loopback: cap each switch process at PCT%% of one CPU (a\n"
            "                       CPU cgroup of its own, needs root): a switch of fixed\n"
            "                       capacity, to measure what --shards adds where the switch\n"
            "                       is the bottleneck on a machine with few cores\n"
            "  --testbed N          builds a testbed of N host namespaces behind a switch\n"
            "                       namespace (tools/testbed, needs root), runs `inagg switch`\n"
            "                       in the switch namespace and one rank per host, the\n"
            "                       baselines across the same hosts, then takes it down (also\n"
            "                       on error and SIGINT/SIGTERM). Exit 3: testbeds cannot be\n"
            "                       built here (not root, no network namespaces)\n"
            "  --link-rate R        with --testbed: every link's rate each way (100mbit, 1gbit,\n"
            "                       a number of Mbit/s, or none) (default 100mbit)\n"
            "  --mtu M              with --testbed: 576..65000 (default 9000)\n"
            "  --fabric F           with --testbed: inagg (the default: inagg switch --l2\n"
            "                       forwards every frame and aggregates in the fabric;\n"
            "                       docs/FABRIC.md) or bridge (a Linux bridge)\n"
            "  --link-delay D       with --testbed --fabric inagg: one-way delay per link,\n"
            "                       each way (25us, 1ms)\n"
            "  --xdp auto|on|off    with --testbed --fabric inagg: its ports receive RoCE and\n"
            "                       aggregation UDP through AF_XDP (inagg switch --xdp)\n"
            "  --rank R --world W   run one rank of a job on a running switch (--switch, --job)\n"
            "                       and print its report as one JSON line: times_s, t_start,\n"
            "                       t_end, cpu_s, verified, checksum, counters\n"
            "  --job NAME           the job's name on the switch (with --rank)\n"
            "\n"
            "What it measures:\n"
            "  --workers N          worker processes on loopback (default 4)\n"
            "  --elems E            elements per tensor (default 4000000)\n"
            "  --sizes[=LIST]       sweep tensor sizes instead: bytes per rank with K/M/G\n"
            "                       (powers of 1024), e.g. --sizes=64K,1M,16M; alone: 4K to\n"
            "                       256M in powers of 4. Large sizes get fewer iterations\n"
            "  --plot FILE.png      with --sizes: bus bandwidth against size for inagg and each\n"
            "                       baseline (gnuplot) (default allreduce-sizes.png)\n"
            "  --dtype T            int32 or float32 (default float32)\n"
            "  --float-mode M       fixed (block fixed point, SwitchML) or native (float add\n"
            "                       in the switch) (default fixed)\n"
            "  --compress MODE      float32 through a codec: zfp:rate=R, zfp:precision=P,\n"
            "                       zfp:accuracy=A, zfp:reversible or fp16 (switchml; results\n"
            "                       checked against an offline round trip of the same data)\n"
            "  --iters K            timed iterations (default 10, on a testbed 5; at most %u)\n"
            "  --warmup W           untimed iterations first (default 2, on a testbed 1)\n"
            "  --seed S             tensor contents (default 1)\n"
            "  --baseline LIST      none, or any of mpi (Open MPI's own algorithm choice),\n"
            "                       mpi-ring (the ring forced), gloo (torch.distributed, needs\n"
            "                       python3-torch), comma-separated; speedup is against the\n"
            "                       first (default none)\n"
            "\n"
            "How inagg runs (on a testbed, defaults follow the link; flags override):\n"
            "  --protocol P         switchml (default) or p4sgd (one packet per slot, acked)\n"
            "  --packet-elems K     elements per packet, up to %u (default %u on loopback;\n"
            "                       testbed: the largest power of two whose datagram fits one\n"
            "                       frame: 2048 at MTU 9000, 256 at 1500)\n"
            "  --window S           slots in flight per worker (default %u; testbed: 3 ms of\n"
            "                       the link rate in packets, %u..%u)\n"
            "  --threads N          engine threads per worker (default 1)\n"
            "  --switch-threads N   dataplane threads of the switch it starts (default 1,\n"
            "                       testbed %u)\n"
            "  --rto-min-us U       retransmission timeout floor (default the library's %u;\n"
            "                       testbed %u: a window queued behind the link delays results)\n"
            "  --rto-max-us U       retransmission timeout cap (default %u; testbed %u)\n"
            "  --loss P             loopback: drop each packet with probability P both ways,\n"
            "                       injected in the workers (seeded); testbed: random loss on\n"
            "                       every link both ways (nftables)\n"
            "  --faults SPEC        fault spec for the workers, e.g. drop=0.01,dup=0.01,seed=3\n"
            "  --transport T        udp (default) or roce: every packet as a RoCE v1 RDMA Write\n"
            "                       message of 1024-byte frames with ICRC (docs/PROTOCOL.md);\n"
            "                       needs an Ethernet segment to the switch: --testbed with\n"
            "                       --fabric inagg, or --switch in rank mode\n"
            "  --roce-psn N         with --transport roce: every QP's first PSN (0..16777215;\n"
            "                       default random), e.g. 16777200 to cross the 24-bit wrap\n"
            "  --pcap FILE          with --testbed --fabric inagg: write every frame on the\n"
            "                       fabric's ports, both ways, as a pcap file (Wireshark)\n"
            "  --timeout-ms MS      per-call progress timeout (default 30000)\n"
            "  --json FILE|-        also write one JSON object (- for stdout; the table then\n"
            "                       goes to stderr). Per size: tat_s, alg_bw_gbps, bus_bw_gbps\n"
            "                       (nccl-tests: busBw = algBw * 2(n-1)/n), goodput_fraction\n"
            "                       (algBw over the link rate), cpu {switch, workers} (%% of a\n"
            "                       core), speedup, theory_ratio = 2(n-1)/n, and each system\n"
            "  -h, --help           this text\n"
            "Test only: INAGG_BENCH_CORRUPT=I alters element I of rank 0's last result before\n"
            "it is verified (the run must then report verified=false and exit 1);\n"
            "INAGG_BENCH_STALL=R makes rank R silent before its first allreduce for longer\n"
            "than --timeout-ms (the summary must then name rank R as where the failure began).\n",
            AR_MAX_ITERS, INAGG_MAX_PACKET_ELEMS, def.packet_elems, def.slots, AR_TESTBED_WINDOW_MIN,
            AR_TESTBED_WINDOW_MAX, AR_TESTBED_SWITCH_THREADS, def.rto_min_us, AR_TESTBED_RTO_MIN_US,
            def.rto_max_us, AR_TESTBED_RTO_MAX_US);
}

/* A usage error: the message after the command's name. Returns 2. */
static int bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, AR_CMD ": ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

/* tc's rate syntax (100mbit, 1gbit, 500kbit, 2.5g) or a bare number of Mbit/s; none/0:
 * unlimited. bits per second into *bps. 0, or -1. */
static int parse_rate(const char *text, uint64_t *bps)
{
    if (!strcasecmp(text, "none") || !strcasecmp(text, "unlimited") || !strcmp(text, "0")) {
        *bps = 0;
        return 0;
    }
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || errno || !(v > 0) || text[0] == '-' || text[0] == '+' || isinf(v))
        return -1;
    static const struct { const char *unit; double mul; } units[] = {
        {"", 1e6},       {"bit", 1},   {"kbit", 1e3}, {"mbit", 1e6}, {"gbit", 1e9},
        {"k", 1e3},      {"m", 1e6},   {"g", 1e9}};
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcasecmp(end, units[i].unit) == 0) {
            double b = v * units[i].mul;
            if (b < 1000 || b > 1e12) /* tbf's useful range; 1 kbit/s .. 1 Tbit/s */
                return -1;
            *bps = (uint64_t)b;
            return 0;
        }
    }
    return -1;
}

/* A size with an optional K/M/G suffix (powers of 1024), a multiple of 4 bytes. 0, or -1. */
static int parse_size(const char *text, size_t len, uint64_t *bytes)
{
    char buf[32];
    if (len == 0 || len >= sizeof(buf))
        return -1;
    memcpy(buf, text, len);
    buf[len] = '\0';
    char *end;
    errno = 0;
    unsigned long long v = strtoull(buf, &end, 10);
    if (end == buf || errno || buf[0] == '-')
        return -1;
    uint64_t mul = 1;
    if (*end == 'K' || *end == 'k')
        mul = 1ull << 10;
    else if (*end == 'M' || *end == 'm')
        mul = 1ull << 20;
    else if (*end == 'G' || *end == 'g')
        mul = 1ull << 30;
    if (mul != 1)
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end || v == 0 || v > (16ull << 30) / mul)
        return -1;
    *bytes = v * mul;
    return *bytes % 4 == 0 ? 0 : -1;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static int parse_sizes(const char *text, ar_opts_t *o)
{
    if (!text) {
        o->nsizes = (int)(sizeof(default_sizes) / sizeof(default_sizes[0]));
        memcpy(o->sizes, default_sizes, sizeof(default_sizes));
        return 0;
    }
    o->nsizes = 0;
    for (const char *p = text;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        uint64_t b;
        if (o->nsizes == AR_MAX_SIZES || parse_size(p, len, &b) != 0) {
            fprintf(stderr, AR_CMD ": --sizes takes up to %d sizes in bytes per rank, each a "
                    "multiple of 4 with an optional K/M/G, e.g. --sizes=64K,1M,16M; got '%s'\n",
                    AR_MAX_SIZES, text);
            return -1;
        }
        o->sizes[o->nsizes++] = b;
        if (!comma)
            break;
        p = comma + 1;
    }
    qsort(o->sizes, (size_t)o->nsizes, sizeof(uint64_t), cmp_u64);
    return 0;
}

/* --baseline: none, or a comma list of mpi, mpi-ring, gloo. */
static int parse_baselines(const char *text, ar_opts_t *o)
{
    o->nbase = 0;
    if (strcmp(text, "none") == 0)
        return 0;
    for (const char *p = text;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        int found = -1;
        for (int s = AR_MPI; s < AR_NSYS; s++) {
            if (strlen(ar_system_name[s]) == len && strncmp(p, ar_system_name[s], len) == 0)
                found = s;
        }
        if (len == 7 && strncmp(p, "mpi_ring", 7) == 0)
            found = AR_MPI_RING;
        for (int k = 0; k < o->nbase && found >= 0; k++) {
            if (o->base[k] == (ar_system_t)found)
                found = -2; /* named twice */
        }
        if (found < 0) {
            fprintf(stderr, AR_CMD ": --baseline is none or a comma-separated list of mpi, "
                    "mpi-ring and gloo (each once), got '%s'\n", text);
            return -1;
        }
        o->base[o->nbase++] = (ar_system_t)found;
        if (!comma)
            break;
        p = comma + 1;
    }
    return 0;
}

/* Flags whose presence matters after parsing: which combinations go together. */
typedef struct ar_seen {
    int world, rate, mtu, plot, elems;
} ar_seen_t;

/* A flag of the job itself (size, iterations, protocol, windows, timeouts, loss, rank,
 * outputs). 0 taken, 2 refused (said), -1 not one of these. */
static int parse_job_flag(ar_opts_t *o, ar_seen_t *seen, int c)
{
    uint64_t v;
    switch (c) {
    case 'n':
        if (cli_parse_u64(AR_CMD, "--workers", optarg, 1, INAGG_MAX_WORLD, &v)) return 2;
        o->workers = (uint32_t)v;
        o->given |= AR_GIVEN_WORKERS;
        break;
    case 'w':
        if (cli_parse_u64(AR_CMD, "--world", optarg, 1, INAGG_MAX_WORLD, &v)) return 2;
        o->workers = (uint32_t)v;
        seen->world = 1;
        break;
    case 'e':
        if (cli_parse_u64(AR_CMD, "--elems", optarg, 1, 1ull << 32, &v)) return 2;
        o->elems = v;
        seen->elems = 1;
        break;
    case 'k':
        if (cli_parse_u64(AR_CMD, "--iters", optarg, 1, AR_MAX_ITERS, &v)) return 2;
        o->iters = (uint32_t)v;
        o->given |= AR_GIVEN_ITERS;
        break;
    case 'W':
        if (cli_parse_u64(AR_CMD, "--warmup", optarg, 0, 1000, &v)) return 2;
        o->warmup = (uint32_t)v;
        o->given |= AR_GIVEN_WARMUP;
        break;
    case 'p':
        if (cli_parse_u64(AR_CMD, "--packet-elems", optarg, 1, INAGG_MAX_PACKET_ELEMS, &v))
            return 2;
        o->packet_elems = (uint32_t)v;
        o->given |= AR_GIVEN_PACKET;
        break;
    case 's':
        if (cli_parse_u64(AR_CMD, "--window", optarg, 1, 1u << 20, &v)) return 2;
        o->window = (uint32_t)v;
        o->given |= AR_GIVEN_WINDOW;
        break;
    case 't':
        if (cli_parse_u64(AR_CMD, "--threads", optarg, 1, 64, &v)) return 2;
        o->threads = (uint32_t)v;
        break;
    case 'T':
        if (cli_parse_u64(AR_CMD, "--switch-threads", optarg, 1, 64, &v)) return 2;
        o->switch_threads = (uint32_t)v;
        o->given |= AR_GIVEN_SWITCH_THREADS;
        break;
    case 'o':
        if (cli_parse_u64(AR_CMD, "--timeout-ms", optarg, 100, 3600000, &v)) return 2;
        o->timeout_ms = (uint32_t)v;
        break;
    case 'm':
        if (cli_parse_u64(AR_CMD, "--rto-min-us", optarg, 100, 60000000, &v)) return 2;
        o->rto_min_us = (uint32_t)v;
        o->given |= AR_GIVEN_RTO_MIN;
        break;
    case 'M':
        if (cli_parse_u64(AR_CMD, "--rto-max-us", optarg, 1000, 60000000, &v)) return 2;
        o->rto_max_us = (uint32_t)v;
        o->given |= AR_GIVEN_RTO_MAX;
        break;
    case 'r':
        if (cli_parse_u64(AR_CMD, "--seed", optarg, 0, UINT64_MAX, &v)) return 2;
        o->seed = v;
        break;
    case 'R':
        if (cli_parse_u64(AR_CMD, "--rank", optarg, 0, INAGG_MAX_WORLD - 1, &v)) return 2;
        o->rank = (uint32_t)v;
        o->single = 1;
        break;
    case 'C': {
        codec_spec_t cs;
        char why[256];
        if (codec_parse(optarg, &cs, why, sizeof why) != 0)
            return bad("--compress: %s", why);
        o->compress = cs.mode == CODEC_NONE ? NULL : optarg;
        break;
    }
    case 'd':
        if (strcmp(optarg, "int32") == 0) o->dtype_float = 0;
        else if (strcmp(optarg, "float32") == 0) o->dtype_float = 1;
        else return bad("--dtype must be int32 or float32, got '%s'", optarg);
        o->given |= AR_GIVEN_DTYPE;
        break;
    case 'F':
        if (strcmp(optarg, "fixed") == 0) o->float_mode = INAGG_FLOAT_FIXED;
        else if (strcmp(optarg, "native") == 0) o->float_mode = INAGG_FLOAT_NATIVE;
        else return bad("--float-mode must be fixed or native, got '%s'", optarg);
        break;
    case 'P': if (cli_parse_protocol(AR_CMD, optarg, &o->protocol)) return 2; break;
    case 'l': if (cli_parse_loss(AR_CMD, optarg, &o->loss)) return 2; break;
    case 'f': o->faults = optarg; break;
    case 'b': if (parse_baselines(optarg, o)) return 2; break;
    case 'S': o->switch_addr = optarg; break;
    case 'J': o->job = optarg; break;
    case 'j': o->json_path = optarg; break;
    default: return -1;
    }
    return 0;
}

/* A flag of where the job runs (testbed, links, fabric, transport, capture, leaves and
 * shards, switch processes) or of the --sizes sweep. 0 taken, 2 refused (said), -1 not one of
 * these. */
static int parse_place_flag(ar_opts_t *o, ar_seen_t *seen, int c)
{
    uint64_t v;
    switch (c) {
    case 'B':
        if (cli_parse_u64(AR_CMD, "--testbed", optarg, 1, LAUNCH_TESTBED_MAX_HOSTS, &v))
            return 2;
        o->testbed = (uint32_t)v;
        break;
    case 'L':
        if (parse_rate(optarg, &o->link_bps) != 0)
            return bad("--link-rate needs a rate such as 100mbit, 1gbit, 500kbit, a number "
                       "of Mbit/s, or none; got '%s'", optarg);
        o->link_rate = optarg;
        seen->rate = 1;
        break;
    case 'Y':
        if (strcmp(optarg, "bridge") != 0 && strcmp(optarg, "inagg") != 0)
            return bad("--fabric is bridge or inagg, got '%s'", optarg);
        o->fabric = optarg;
        seen->rate = 1;
        break;
    case 'Q': o->link_delay = optarg; seen->rate = 1; break;
    case 1090:
        if (strcmp(optarg, "auto") != 0 && strcmp(optarg, "on") != 0 && strcmp(optarg, "off") != 0)
            return bad("--xdp is auto, on or off, got '%s'", optarg);
        o->xdp = optarg;
        seen->rate = 1;
        break;
    case 'U':
        if (cli_parse_u64(AR_CMD, "--mtu", optarg, 576, 65000, &v)) return 2;
        o->mtu = (uint32_t)v;
        seen->mtu = 1;
        break;
    case 'z':
        if (parse_sizes(optarg, o) != 0) return 2;
        break;
    case 'G': o->plot_path = optarg; seen->plot = 1; break;
    case 'x':
        if (strcmp(optarg, "udp") != 0 && strcmp(optarg, "roce") != 0)
            return bad("--transport is udp or roce, got '%s'", optarg);
        o->transport = optarg;
        break;
    case 'a': o->pcap = optarg; break;
    case 'N':
        if (cli_parse_u64(AR_CMD, "--roce-psn", optarg, 0, 0xffffff, &v)) return 2;
        o->roce_psn = optarg;
        break;
    case 1101:
        if (cli_parse_u64(AR_CMD, "--leaves", optarg, 1, AR_MAX_LEAVES, &v)) return 2;
        o->leaves = (uint32_t)v;
        break;
    case 1102:
        if (cli_parse_u64(AR_CMD, "--hosts-per-leaf", optarg, 1, INAGG_MAX_WORLD, &v))
            return 2;
        o->hosts_per_leaf = (uint32_t)v;
        break;
    case 1103:
        if (cli_parse_u64(AR_CMD, "--shards", optarg, 1, AR_MAX_SHARDS, &v)) return 2;
        o->shards = (uint32_t)v;
        break;
    case 1104: o->pin_switches = 1; break;
    case 1106: o->no_dataplane_auth = 1; break;
    case 1105:
        if (cli_parse_u64(AR_CMD, "--switch-cpu-share", optarg, 1, 100, &v)) return 2;
        o->switch_cpu_share = (uint32_t)v;
        break;
    default: return -1;
    }
    return 0;
}

/* What goes with --rank (one rank of a job), --leaves, --shards and the switch processes'
 * flags. 0, or 2 after a message. */
static int check_rank_and_switches(ar_opts_t *o, const ar_seen_t *seen)
{
    if (o->single) {
        if (!o->switch_addr || !seen->world || !o->job)
            return bad("--rank runs one rank of a job: it needs --switch HOST:PORT, "
                       "--world W and --job NAME");
        if (o->rank >= o->workers)
            return bad("--rank must be below --world");
        if (o->testbed || o->nbase || o->nsizes || (o->given & AR_GIVEN_WORKERS))
            return bad("--rank runs one rank: --testbed, --baseline, --sizes and --workers "
                       "do not apply");
    } else if (seen->world || o->job) {
        return bad("--world and --job go with --rank (one rank of a job)");
    }
    if (!o->leaves != !o->hosts_per_leaf)
        return bad("--leaves L and --hosts-per-leaf H go together (L leaf switches of H hosts "
                   "each, under a spine)");
    if (o->leaves && !o->single) {
        uint64_t n = (uint64_t)o->leaves * o->hosts_per_leaf;
        if (n > INAGG_MAX_WORLD)
            return bad("--leaves %u x --hosts-per-leaf %u is more than %u ranks", o->leaves,
                       o->hosts_per_leaf, INAGG_MAX_WORLD);
        if (o->testbed && o->testbed != n)
            return bad("--testbed %u hosts, but --leaves %u x --hosts-per-leaf %u = %llu",
                       o->testbed, o->leaves, o->hosts_per_leaf, (unsigned long long)n);
        if (!o->testbed && (o->given & AR_GIVEN_WORKERS) && o->workers != n)
            return bad("--workers %u, but --leaves %u x --hosts-per-leaf %u = %llu", o->workers,
                       o->leaves, o->hosts_per_leaf, (unsigned long long)n);
        if (o->switch_addr)
            return bad("--leaves starts its own spine and leaf switches; --switch does not "
                       "apply");
        if (o->shards > 1)
            return bad("--leaves and --shards do not go together (yet)");
        if (o->compress)
            return bad("--leaves: leaf switches forward plain int32 and float32 only, not "
                       "--compress");
        o->workers = (uint32_t)n;
    }
    if (o->single && o->leaves && o->workers % o->hosts_per_leaf != 0)
        return bad("--rank with --leaves: --world must be --leaves x --hosts-per-leaf");
    if (o->shards > 1 && o->switch_addr && !o->single)
        return bad("--shards starts its own switches; --switch does not apply (a rank of a "
                   "sharded job takes --switch A,B,...)");
    if (o->pin_switches && o->testbed)
        return bad("--pin-switches pins the loopback run's switch processes");
    if (o->switch_cpu_share && (o->testbed || o->switch_addr || o->single))
        return bad("--switch-cpu-share caps the switch processes a loopback run starts itself");
    return 0;
}

/* What goes with --testbed and the --sizes sweep; the testbed's own defaults. 0, or 2 after a
 * message. */
static int check_testbed(ar_opts_t *o, const ar_seen_t *seen)
{
    if (o->testbed) {
        if (o->switch_addr)
            return bad("--testbed starts its own switch in the switch namespace; --switch "
                       "does not apply");
        if (o->given & AR_GIVEN_WORKERS)
            return bad("--testbed runs one worker per host; --workers does not apply");
        if ((o->leaves || o->shards > 1) && o->fabric && strcmp(o->fabric, "inagg") == 0)
            return bad("--leaves and --shards run `inagg switch` daemons: use --fabric bridge");
        if (o->leaves || o->shards > 1)
            o->fabric = "bridge"; /* the inagg fabric would aggregate in its own switch */
        o->workers = o->testbed;
        if (!(o->given & AR_GIVEN_ITERS))
            o->iters = TESTBED_ITERS;
        if (!(o->given & AR_GIVEN_WARMUP))
            o->warmup = TESTBED_WARMUP;
    } else if (seen->rate || seen->mtu) {
        return bad("--link-rate, --mtu, --fabric, --link-delay and --xdp describe the testbed: they "
                   "go with --testbed N");
    }
    if (seen->plot && !o->nsizes)
        return bad("--plot draws the --sizes sweep: give --sizes too");
    if (o->nsizes && seen->elems)
        return bad("--sizes sweeps the tensor size; --elems does not apply");
    if (o->threads > o->window)
        return bad("--threads cannot exceed --window");
    return 0;
}

/* What goes with the protocol, --compress and --transport roce; the environment the ranks
 * inherit; the workers' fault spec. 0, or 2 after a message. */
static int check_data_path(ar_opts_t *o)
{
    if (o->protocol == INAGG_PROTO_P4SGD)
        o->float_mode = INAGG_FLOAT_NATIVE; /* p4sgd carries float32 natively */
    if (o->compress) {
        codec_spec_t cs;
        (void)codec_parse(o->compress, &cs, NULL, 0);
        if (o->protocol != INAGG_PROTO_SWITCHML)
            return bad("--compress works with --protocol switchml only");
        if (!o->dtype_float && codec_is_lossy(&cs))
            return bad("--compress %s may change values: int32 jobs refuse lossy compression "
                       "(use zfp:reversible, or --dtype float32)", o->compress);
        if (o->dtype_float)
            o->float_mode = INAGG_FLOAT_NATIVE; /* coded chunks are summed in float */
        size_t fit = codec_max_elems(&cs, WIRE_MAX_DATAGRAM - WIRE_HEADER_MAX);
        if (o->packet_elems > fit) {
            if (o->given & AR_GIVEN_PACKET)
                return bad("--compress %s: a packet of %u values may not fit a datagram "
                           "(at most %zu)", o->compress, o->packet_elems, fit);
            o->packet_elems = (uint32_t)fit;
        }
    }
    int roce = o->transport && strcmp(o->transport, "roce") == 0;
    int inagg_fabric = o->testbed && (!o->fabric || strcmp(o->fabric, "inagg") == 0);
    if (roce && !inagg_fabric && !o->switch_addr)
        return bad("--transport roce needs an Ethernet segment to an inagg switch that speaks "
                   "it: --testbed N (with --fabric inagg), or --switch with --rank");
    if (o->roce_psn && !roce)
        return bad("--roce-psn applies to --transport roce");
    if (o->pcap && !inagg_fabric)
        return bad("--pcap captures the fabric's ports: give --testbed N (--fabric inagg)");
    if (o->roce_psn)
        setenv("INAGG_ROCE_PSN", o->roce_psn, 1);
    if (o->no_dataplane_auth) /* every rank this run starts inherits it */
        setenv("INAGG_NO_DATAPLANE_AUTH", "1", 1);
    if (o->rto_min_us && o->rto_max_us && o->rto_min_us > o->rto_max_us)
        return bad("--rto-min-us cannot exceed --rto-max-us");
    if (!o->testbed)
        o->faults = bench_worker_faults(o->faults, o->loss, o->seed, o->faults_buf,
                                        sizeof(o->faults_buf));
    return 0;
}

int ar_parse(int argc, char **argv, ar_opts_t *o)
{
    const inagg_options_t def = INAGG_OPTIONS_INIT;
    *o = (ar_opts_t){.workers = 4, .iters = 10, .warmup = 2, .packet_elems = def.packet_elems,
                     .window = def.slots, .threads = 1, .switch_threads = 1,
                     .elems = 4000000, .seed = 1, .dtype_float = 1,
                     .float_mode = INAGG_FLOAT_FIXED, .timeout_ms = 30000,
                     .link_rate = "100mbit", .link_bps = 100000000, .mtu = 9000,
                     .plot_path = "allreduce-sizes.png"};
    static const struct option longopts[] = {
        {"workers", required_argument, 0, 'n'},      {"elems", required_argument, 0, 'e'},
        {"dtype", required_argument, 0, 'd'},        {"float-mode", required_argument, 0, 'F'},
        {"iters", required_argument, 0, 'k'},        {"warmup", required_argument, 0, 'W'},
        {"protocol", required_argument, 0, 'P'},     {"packet-elems", required_argument, 0, 'p'},
        {"window", required_argument, 0, 's'},       {"threads", required_argument, 0, 't'},
        {"switch-threads", required_argument, 0, 'T'}, {"loss", required_argument, 0, 'l'},
        {"faults", required_argument, 0, 'f'},       {"baseline", required_argument, 0, 'b'},
        {"switch", required_argument, 0, 'S'},       {"timeout-ms", required_argument, 0, 'o'},
        {"seed", required_argument, 0, 'r'},         {"json", required_argument, 0, 'j'},
        {"rto-min-us", required_argument, 0, 'm'},   {"rto-max-us", required_argument, 0, 'M'},
        {"rank", required_argument, 0, 'R'},         {"world", required_argument, 0, 'w'},
        {"job", required_argument, 0, 'J'},          {"testbed", required_argument, 0, 'B'},
        {"link-rate", required_argument, 0, 'L'},    {"mtu", required_argument, 0, 'U'},
        {"fabric", required_argument, 0, 'Y'},       {"link-delay", required_argument, 0, 'Q'},
        {"xdp", required_argument, 0, 1090},
        {"sizes", optional_argument, 0, 'z'},        {"plot", required_argument, 0, 'G'},
        {"compress", required_argument, 0, 'C'},
        {"leaves", required_argument, 0, 1101},     {"hosts-per-leaf", required_argument, 0, 1102},
        {"shards", required_argument, 0, 1103},     {"pin-switches", no_argument, 0, 1104},
        {"switch-cpu-share", required_argument, 0, 1105},
        {"transport", required_argument, 0, 'x'},   {"pcap", required_argument, 0, 'a'},
        {"roce-psn", required_argument, 0, 'N'},    {"no-dataplane-auth", no_argument, 0, 1106},
        {"help", no_argument, 0, 'h'},               {0, 0, 0, 0}};
    int c;
    ar_seen_t seen = {0};
    optind = 1;
    opterr = 0; /* cli_bad_option says it, in the one wording */
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        int rc = parse_job_flag(o, &seen, c);
        if (rc < 0)
            rc = parse_place_flag(o, &seen, c);
        if (rc >= 0) {
            if (rc)
                return rc;
            continue;
        }
        switch (c) {
        case 'h': usage(stdout); return 1;
        default: return cli_bad_option(AR_CMD, c, argv);
        }
    }
    if (optind < argc && optind > 1 && strcmp(argv[optind - 1], "--sizes") == 0)
        return bad("--sizes takes its list after '=' (--sizes=64K,1M), got '%s' after it",
                   argv[optind]);
    if (cli_no_extra_args(AR_CMD, argc, argv, optind))
        return 2;
    int rc = check_rank_and_switches(o, &seen);
    if (rc == 0)
        rc = check_testbed(o, &seen);
    if (rc == 0)
        rc = check_data_path(o);
    return rc;
}
