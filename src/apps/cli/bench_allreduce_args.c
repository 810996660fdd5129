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

#include "apps/bench/harness.h"
#include "apps/cli/bench_allreduce_cli.h"
#include "apps/cli/bench_opts.h"
#include "apps/cli/flags.h"
#include "apps/launch/launch.h"
#include "lib/codec/codec.h"
#include "lib/netio/roce_frame.h"
#include "lib/wire/wire.h"

#define TESTBED_ITERS 5u
#define TESTBED_WARMUP 1u

/* The default --sizes sweep: 4 KiB .. 256 MiB per rank, powers of 4. */
static const uint64_t default_sizes[] = {4ull << 10,   16ull << 10, 64ull << 10,
                                         256ull << 10, 1ull << 20,  4ull << 20,
                                         16ull << 20,  64ull << 20, 256ull << 20};

/* The usage's "Where it runs" part. */
static void usage_where(FILE *out)
{
    fprintf(out,
            "Where it runs:\n"
            "  (default)            an embedded switch and --workers local processes on loopback\n"
            "  --switch HOST:PORT   a running switch instead of the embedded one (A,B,...: a\n"
            "                       job sharded over several; A;B;...: a fail-over list,\n"
            "                       generation g of the job on entry g %% n)\n"
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
            "  --switch-multicast GROUP|off\n"
            "                       with --testbed --fabric bridge: the testbed's `inagg\n"
            "                       switch --multicast GROUP[:PORT]`, so that a round's\n"
            "                       result leaves once, to the job's group, when the ranks\n"
            "                       run one engine thread (default %s; off: once\n"
            "                       per rank)\n"
            "  --rank R --world W   run one rank of a job on a running switch (--switch, --job)\n"
            "                       and print its report as one JSON line: times_s, t_start,\n"
            "                       t_end, cpu_s, verified, checksum, counters\n"
            "  --job NAME           the job's name on the switch (with --rank)\n"
            "\n",
            LAUNCH_TBJOB_MCAST_GROUP);
}

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
            "each rank fills its tensor with known values (src/apps/bench/benchdata.h), runs\n"
            "warmups and timed allreduces, each after a barrier, and checks each result\n"
            "(int32 exactly, float32 within the fixed-point bound). An iteration's tensor\n"
            "aggregation time (TAT) is the slowest rank's. Baselines reduce the same tensor\n"
            "in the same invocation; speedup = baseline median TAT / inagg median TAT.\n"
            "Ended by any signal (SIGKILL too), it takes its switch and workers with it.\n"
            "\n");
    usage_where(out);
    fprintf(out,
            "What it measures:\n"
            "  --workers N          worker processes on loopback (default 4)\n"
            "  --elems E            elements per tensor (default 4000000). Sizes whose ranks\n"
            "                       need more memory than is available (MemAvailable, a\n"
            "                       cgroup's limit) are refused at once, exit 2\n"
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
            "                       frame: 2048 at MTU 9000, 256 at 1500; --transport roce:\n"
            "                       that rounded down to whole path-MTU frames, 2032 at 9000)\n"
            "  --window S           slots in flight per worker (default %u; testbed: 3 ms of\n"
            "                       the link in packets, 1 ms with --transport roce, %u..%u)\n"
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
            "                       message of path-MTU frames with ICRC (docs/PROTOCOL.md);\n"
            "                       needs an Ethernet segment to the switch: --testbed with\n"
            "                       --fabric inagg, or --switch in rank mode\n"
            "  --roce-psn N         with --transport roce: every QP's first PSN (0..16777215;\n"
            "                       default random), e.g. 16777200 to cross the 24-bit wrap\n"
            "  --roce-mtu N         with --transport roce: the path MTU, 256, 512, 1024, 2048\n"
            "                       or 4096 bytes of payload per frame (default: the largest\n"
            "                       the link's MTU carries: 4096 at --mtu 9000, 1024 at 1500)\n"
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
            AR_MAX_ITERS, INAGG_MAX_PACKET_ELEMS, INAGG_MAX_PACKET_ELEMS, def.slots,
            AR_TESTBED_WINDOW_MIN, AR_TESTBED_WINDOW_MAX, AR_TESTBED_SWITCH_THREADS, def.rto_min_us,
            AR_TESTBED_RTO_MIN_US, def.rto_max_us, AR_TESTBED_RTO_MAX_US);
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

/* A size with an optional K/M/G suffix (powers of 1024), a multiple of 4 bytes. 0, or -EINVAL. */
static int parse_size(const char *text, size_t len, uint64_t *bytes)
{
    char buf[32];
    if (len == 0 || len >= sizeof(buf))
        return -EINVAL;
    memcpy(buf, text, len);
    buf[len] = '\0';
    char *end;
    errno = 0;
    unsigned long long v = strtoull(buf, &end, 10);
    if (end == buf || errno || buf[0] == '-')
        return -EINVAL;
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
        return -EINVAL;
    *bytes = v * mul;
    return *bytes % 4 == 0 ? 0 : -EINVAL;
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
            fprintf(stderr,
                    AR_CMD
                    ": --sizes takes up to %d sizes in bytes per rank, each a "
                    "multiple of 4 with an optional K/M/G, e.g. --sizes=64K,1M,16M; got '%s'\n",
                    AR_MAX_SIZES, text);
            return -EINVAL;
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
            fprintf(stderr,
                    AR_CMD ": --baseline is none or a comma-separated list of mpi, "
                           "mpi-ring and gloo (each once), got '%s'\n",
                    text);
            return -EINVAL;
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

/* What the own-flag parser writes to. */
typedef struct ar_parse_ctx {
    ar_opts_t *o;
    ar_seen_t seen;
} ar_parse_ctx_t;

/* Parse optarg as an integer in lo..hi into *out. 0, or 2 after a message. */
static int parse_u32(const char *flag, uint32_t lo, uint32_t hi, uint32_t *out)
{
    return cli_parse_u32(AR_CMD, flag, optarg, lo, hi, out) < 0 ? 2 : 0;
}

/* A flag of the tensor and the data path (size, type, codec, packets, windows, timeouts,
 * baselines). 0 taken, 2 refused (said), -1 not one of these. */
static int parse_data_flag(ar_opts_t *o, ar_seen_t *seen, int c)
{
    switch (c) {
        case 'e':
            if (cli_parse_u64(AR_CMD, "--elems", optarg, 1, 1ull << 32, &o->elems) < 0)
                return 2;
            seen->elems = 1;
            return 0;
        case 'p':
            o->given.packet = 1;
            return parse_u32("--packet-elems", 1, INAGG_MAX_PACKET_ELEMS, &o->packet_elems);
        case 's': o->given.window = 1; return parse_u32("--window", 1, 1u << 20, &o->window);
        case 't': return parse_u32("--threads", 1, 64, &o->threads);
        case 'm':
            o->given.rto_min = 1;
            return parse_u32("--rto-min-us", 100, 60000000, &o->rto_min_us);
        case 'M':
            o->given.rto_max = 1;
            return parse_u32("--rto-max-us", 1000, 60000000, &o->rto_max_us);
        case 'C': {
            codec_spec_t cs;
            char why[256];
            if (codec_parse(optarg, &cs, why, sizeof why) != 0)
                return bad("--compress: %s", why);
            o->compress = cs.mode == CODEC_NONE ? NULL : optarg;
            return 0;
        }
        case 'd':
            if (strcmp(optarg, "int32") != 0 && strcmp(optarg, "float32") != 0)
                return bad("--dtype must be int32 or float32, got '%s'", optarg);
            o->dtype_float = strcmp(optarg, "float32") == 0;
            o->given.dtype = 1;
            return 0;
        case 'F':
            if (strcmp(optarg, "fixed") != 0 && strcmp(optarg, "native") != 0)
                return bad("--float-mode must be fixed or native, got '%s'", optarg);
            o->float_mode = strcmp(optarg, "fixed") == 0 ? INAGG_FLOAT_FIXED : INAGG_FLOAT_NATIVE;
            return 0;
        case 'b': return parse_baselines(optarg, o) < 0 ? 2 : 0;
        case 'z': return parse_sizes(optarg, o) < 0 ? 2 : 0;
        default: return -1;
    }
}

/* A flag of where the job runs (MTU, capture, RoCE, leaves and shards, switch processes).
 * 0 taken, 2 refused (said), -1 not one of these (bench_own_flag_fn). */
static int parse_own_flag(void *ctx, int c)
{
    ar_parse_ctx_t *pc = ctx;
    ar_opts_t *o = pc->o;
    uint64_t v;
    int rc = parse_data_flag(o, &pc->seen, c);
    if (rc >= 0)
        return rc;
    switch (c) {
        case 'U': pc->seen.mtu = 1; return parse_u32("--mtu", 576, 65000, &o->mtu);
        case 'G':
            o->plot_path = optarg;
            pc->seen.plot = 1;
            return 0;
        case 'a': o->pcap = optarg; return 0;
        case 1090:
            if (strcmp(optarg, "auto") != 0 && strcmp(optarg, "on") != 0 &&
                strcmp(optarg, "off") != 0)
                return bad("--xdp is auto, on or off, got '%s'", optarg);
            o->xdp = optarg;
            pc->seen.rate = 1;
            return 0;
        case 'N':
            if (cli_parse_u64(AR_CMD, "--roce-psn", optarg, 0, 0xffffff, &v) < 0)
                return 2;
            o->roce_psn = optarg;
            return 0;
        case 1107:
            if (cli_parse_u64(AR_CMD, "--roce-mtu", optarg, ROCE_MTU_MIN, ROCE_MTU_MAX, &v) < 0)
                return 2;
            if (!roce_mtu_valid((uint32_t)v))
                return bad("--roce-mtu is one of InfiniBand's path MTUs: 256, 512, 1024, 2048 or "
                           "4096, got '%s'",
                           optarg);
            o->roce_mtu = optarg;
            return 0;
        case 1101: return parse_u32("--leaves", 1, AR_MAX_LEAVES, &o->leaves);
        case 1102: return parse_u32("--hosts-per-leaf", 1, INAGG_MAX_WORLD, &o->hosts_per_leaf);
        case 1103: return parse_u32("--shards", 1, AR_MAX_SHARDS, &o->shards);
        case 1104: o->pin_switches = 1; return 0;
        case 1105: return parse_u32("--switch-cpu-share", 1, 100, &o->switch_cpu_share);
        case 1106: o->no_dataplane_auth = 1; return 0;
        case 1108: {
            char why[256];
            if (bench_check_switch_multicast(optarg, why, sizeof(why)) != 0)
                return bad("%s", why);
            o->switch_multicast = optarg;
            return 0;
        }
        default: return -1;
    }
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
        if (o->testbed || o->nbase || o->nsizes || o->given.workers)
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
        if (!o->testbed && o->given.workers && o->workers != n)
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
    int one_bridge_switch =
        o->testbed && o->fabric && strcmp(o->fabric, "bridge") == 0 && !o->leaves && o->shards <= 1;
    if (o->switch_multicast && !one_bridge_switch)
        return bad("--switch-multicast sets the bridge testbed's one `inagg switch`: it goes "
                   "with --testbed N --fabric bridge, without --leaves and --shards");
    /* that switch sends a round's result once, to the job's group, as bench latency's does:
     * where the CPU binds it costs the switch less and the allreduce no more (docs/perf-log/
     * 2026-11-28-second-machine-open-lines.md, "What else was tried against the three open lines") */
    if (!o->switch_multicast && one_bridge_switch)
        o->switch_multicast = LAUNCH_TBJOB_MCAST_GROUP;
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
        if (o->given.workers)
            return bad("--testbed runs one worker per host; --workers does not apply");
        if ((o->leaves || o->shards > 1) && o->fabric && strcmp(o->fabric, "inagg") == 0)
            return bad("--leaves and --shards run `inagg switch` daemons: use --fabric bridge");
        if (o->leaves || o->shards > 1)
            o->fabric = "bridge"; /* the inagg fabric would aggregate in its own switch */
        o->workers = o->testbed;
        if (!o->given.iters)
            o->iters = TESTBED_ITERS;
        if (!o->given.warmup)
            o->warmup = TESTBED_WARMUP;
    } else if (seen->rate || seen->mtu) {
        return bad(
            "--link-rate, --mtu, --fabric, --link-delay and --xdp describe the testbed: they "
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
                       "(use zfp:reversible, or --dtype float32)",
                       o->compress);
        if (o->dtype_float)
            o->float_mode = INAGG_FLOAT_NATIVE; /* coded chunks are summed in float */
        size_t fit = codec_max_elems(&cs, WIRE_MAX_DATAGRAM - WIRE_HEADER_MAX);
        if (o->packet_elems > fit) {
            if (o->given.packet)
                return bad("--compress %s: a packet of %u values may not fit a datagram "
                           "(at most %zu)",
                           o->compress, o->packet_elems, fit);
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
    if (o->roce_mtu && !roce)
        return bad("--roce-mtu applies to --transport roce");
    if (o->pcap && !inagg_fabric)
        return bad("--pcap captures the fabric's ports: give --testbed N (--fabric inagg)");
    if (o->roce_psn)
        setenv("INAGG_ROCE_PSN", o->roce_psn, 1);
    if (o->roce_mtu)
        setenv("INAGG_ROCE_MTU", o->roce_mtu, 1);
    if (o->no_dataplane_auth) /* every rank this run starts inherits it */
        setenv("INAGG_NO_DATAPLANE_AUTH", "1", 1);
    if (o->rto_min_us && o->rto_max_us && o->rto_min_us > o->rto_max_us)
        return bad("--rto-min-us cannot exceed --rto-max-us");
    if (!o->testbed)
        o->faults =
            bench_worker_faults(o->faults, o->loss, o->seed, o->faults_buf, sizeof(o->faults_buf));
    return 0;
}

/* The shared flags' given bits as the checks read them. */
static void note_given(const bench_opts_t *b, ar_opts_t *o, ar_seen_t *seen, uint32_t world)
{
    o->given.workers = bench_opts_given(b, BOPT_WORKERS);
    o->given.iters = bench_opts_given(b, BOPT_ITERS);
    o->given.warmup = bench_opts_given(b, BOPT_WARMUP);
    o->given.switch_threads = bench_opts_given(b, BOPT_SWITCH_THREADS);
    o->single = bench_opts_given(b, BOPT_RANK);
    seen->world = bench_opts_given(b, BOPT_WORLD);
    if (seen->world)
        o->workers = world;
    seen->rate |= (b->given & (BOPT_BIT(BOPT_LINK_RATE) | BOPT_BIT(BOPT_LINK_DELAY) |
                               BOPT_BIT(BOPT_FABRIC))) != 0; /* |=: --xdp is an own flag */
}

int ar_parse(int argc, char **argv, ar_opts_t *o)
{
    const inagg_options_t def = INAGG_OPTIONS_INIT;
    *o = (ar_opts_t){BENCH_OPTS_DEFAULTS,
                     .iters = 10,
                     .warmup = 2,
                     .packet_elems = INAGG_MAX_PACKET_ELEMS, /* loopback's; a testbed's is
                                                                its MTU's (link defaults) */
                     .window = def.slots,
                     .threads = 1,
                     .switch_threads = 1,
                     .elems = 4000000,
                     .dtype_float = 1,
                     .float_mode = INAGG_FLOAT_FIXED,
                     .link_rate = "100mbit",
                     .link_bps = 100000000,
                     .mtu = 9000,
                     .plot_path = "allreduce-sizes.png"};
    uint32_t world = 0;
    bench_opts_t b = {.cmd = AR_CMD,
                      BENCH_OPTS_JOB_FLAGS(o),
                      .world = &world,
                      .iters_max = AR_MAX_ITERS,
                      .timeout_min = 100,
                      .link_bps = &o->link_bps,
                      .switch_threads = &o->switch_threads,
                      .transport = &o->transport};
    static const struct option own[] = {{"elems", required_argument, 0, 'e'},
                                        {"dtype", required_argument, 0, 'd'},
                                        {"float-mode", required_argument, 0, 'F'},
                                        {"packet-elems", required_argument, 0, 'p'},
                                        {"window", required_argument, 0, 's'},
                                        {"threads", required_argument, 0, 't'},
                                        {"baseline", required_argument, 0, 'b'},
                                        {"rto-min-us", required_argument, 0, 'm'},
                                        {"rto-max-us", required_argument, 0, 'M'},
                                        {"mtu", required_argument, 0, 'U'},
                                        {"sizes", optional_argument, 0, 'z'},
                                        {"plot", required_argument, 0, 'G'},
                                        {"compress", required_argument, 0, 'C'},
                                        {"leaves", required_argument, 0, 1101},
                                        {"hosts-per-leaf", required_argument, 0, 1102},
                                        {"shards", required_argument, 0, 1103},
                                        {"pin-switches", no_argument, 0, 1104},
                                        {"switch-cpu-share", required_argument, 0, 1105},
                                        {"pcap", required_argument, 0, 'a'},
                                        {"roce-psn", required_argument, 0, 'N'},
                                        {"roce-mtu", required_argument, 0, 1107},
                                        {"no-dataplane-auth", no_argument, 0, 1106},
                                        {"switch-multicast", required_argument, 0, 1108},
                                        {"xdp", required_argument, 0, 1090},
                                        {0, 0, 0, 0}};
    ar_parse_ctx_t pc = {.o = o};
    int rc = bench_opts_parse(&b, argc, argv, own, parse_own_flag, &pc, usage);
    if (rc)
        return rc;
    note_given(&b, o, &pc.seen, world);
    rc = check_rank_and_switches(o, &pc.seen);
    if (rc == 0)
        rc = check_testbed(o, &pc.seen);
    if (rc == 0)
        rc = check_data_path(o);
    return rc;
}
