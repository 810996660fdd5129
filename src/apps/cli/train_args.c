/*
 * train_args.c - `inagg train`'s command line (see train.h): the help text, the flags, and
 * the checks between them, with a message and exit code 2 for every usage error.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps/cli/bench_opts.h"
#include "apps/cli/flags.h"
#include "apps/cli/train.h"
#include "apps/glm/objective.h"
#include "apps/launch/launch.h"
#include "inagg.h"
#include "lib/base/util.h"
#include "lib/codec/codec.h"
#include "lib/kernels/optim.h"

static uint32_t default_switch_threads(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return cpus < 1 ? 1u : (uint32_t)util_min_u64((uint64_t)cpus, MAX_DEFAULT_SWITCH_THREADS);
}

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: inagg train [--data FILE | --synthetic SPEC] [--test-data FILE]\n"
        "                   [--workers N] [--mode model|data|single]\n"
        "                   [--objective logistic|squared|hinge] [--batch B] [--micro-batch MB]\n"
        "                   [--epochs E] [--lr G] [--lr-schedule sqrt|const] [--l2 L]\n"
        "                   [--backend inagg|mpi] [--protocol p4sgd|switchml] [--no-pipeline]\n"
        "                   [--precision 32|8|4] [--seed S] [--json FILE|-] [--plot FILE.png]\n"
        "                   [--reference auto|liblinear|single|none]\n"
        "                   [--switch HOST:PORT --rank R --world W [--job NAME]]\n"
        "                   [--switch-threads N] [--timeout MS]\n"
        "                   [--testbed N [--fabric inagg|bridge] [--link-delay D] [--link-rate "
        "R]]\n"
        "\n"
        "Trains an L2-regularised linear model (objective = mean loss + L/2 ||w||^2, no bias,\n"
        "w starts at 0) with synchronous mini-batch SGD, distributed through the aggregation\n"
        "switch. With no arguments: an embedded switch on 127.0.0.1, %u local worker\n"
        "processes, a generated rcv1-like dataset, model-parallel logistic regression.\n"
        "\n"
        "modes:\n"
        "  --mode M             model (the default), data or single:\n"
        "  model   (default) P4SGD Algorithm 1: the FEATURES are split across workers,\n"
        "          balanced by nonzeros. Per micro-batch of MB samples each worker computes MB\n"
        "          partial dot products, the switch sums them (p4sgd protocol: one packet, one\n"
        "          round trip), each worker accumulates the gradient of its own features; one\n"
        "          update per mini-batch of B samples. Pipelined: the allreduces of all B/MB\n"
        "          micro-batches are in flight at once while the worker computes; results are\n"
        "          consumed in order, so the model is bit-identical to --no-pipeline.\n"
        "  data    the SAMPLES are split across workers; each computes the gradient of its share\n"
        "          of every global mini-batch, the D-float gradient is summed by the switch\n"
        "          (switchml protocol, block fixed point), every worker applies the same update.\n"
        "  single  one process, no switch: the reference trajectory the others follow.\n"
        "\n"
        "data:\n"
        "  --data FILE          LIBSVM file (every worker reads it). Refused with the line\n"
        "                       number: lines over 1 MiB (INAGG_MAX_LINE_BYTES), feature\n"
        "                       indices past max(2^20, 16 x nonzeros) (INAGG_MAX_FEATURES:\n"
        "                       the model has a weight per index up to the largest), inputs\n"
        "                       over half the RAM (INAGG_MAX_INPUT_BYTES)\n"
        "  --synthetic SPEC     generated data, same seed -> same data in every worker:\n"
        "                       gisette | rcv1 | real-sim | dense:SxD | sparse:SxD:DENSITY\n"
        "                       (default " DEFAULT_SYNTHETIC " when no --data)\n"
        "  --test-data FILE     LIBSVM file for held-out accuracy after each epoch\n"
        "  --compress MODE      gradients through a codec in the switch (data mode, switchml):\n"
        "                       zfp:rate=R, zfp:precision=P, zfp:accuracy=A, zfp:reversible,\n"
        "                       fp16 (docs/COMPRESSION.md)\n"
        "  --no-error-feedback  with a lossy --compress: keep no residual (workers, switch)\n"
        "  --capture-gradients PREFIX [--capture-steps N]\n"
        "                       data mode: rank R writes the gradient it sends in each of\n"
        "                       the first --capture-steps steps (default 10) to\n"
        "                       PREFIX.rankR.f32 (raw little-endian float32, step after\n"
        "                       step); `inagg bench compress --input` codes such files\n"
        "  --precision BITS     32 (default), or 8 / 4: features quantized per column before\n"
        "                       training (P4SGD trains on 4-bit data)\n"
        "\n"
        "training:\n"
        "  --objective O        logistic (default), squared (least squares), hinge (SVM)\n"
        "  --epochs E           passes over the data (default %d)\n"
        "  --batch B            mini-batch size: samples per update (default %d)\n"
        "  --micro-batch MB     samples per allreduce in model mode (default %d, as P4SGD)\n"
        "  --lr G               base learning rate (default: calibrated on the data: each of\n"
        "                       2^-2..2^6 x %.2f / (beta * mean ||a||^2), beta = 1/4 logistic\n"
        "                       and hinge, 1 squared, trains 20 epochs on up to 16384 sampled\n"
        "                       rows; the one with the lowest objective on all rows is used)\n"
        "  --lr-schedule S      sqrt (default): rate G/sqrt(epoch); const: G every epoch\n"
        "  --average A          plain SGD: tail (default): the model reported and returned is a\n"
        "                       weighted mean of the iterates of the last half of the epochs;\n"
        "                       none: the last iterate\n"
        "  --precondition P     plain SGD: none (default): one rate for all features; diag:\n"
        "                       feature c steps with the rate times 1/sqrt(mean a_c^2)\n"
        "                       (normalised; closer to the optimum on data with features of\n"
        "                       very different scales, about 5x the step's cost)\n"
        "  --l2 L               regularisation (default 1/S, S samples: liblinear's C = 1)\n"
        "  --seed S             shuffle and synthetic data (default %d); every epoch visits the\n"
        "                       samples in a seeded random order, the same in every worker\n"
        "  --optimizer O        data mode: sgd, adagrad, adam or smorms3 (weight decay =\n"
        "                       --l2, constant rate; default rate adagrad 0.1, adam and\n"
        "                       smorms3 0.01), run by every worker after the allreduce...\n"
        "  --in-switch          ...or by the switch: workers push gradients, the switch\n"
        "                       averages, steps and returns the parameters\n"
        "  --eps-place P        inside (sqrt(v + eps), the paper's; default) or outside\n"
        "                       (sqrt(v) + eps, PyTorch's)\n"
        "  --no-pipeline        model mode: one micro-batch at a time (forward, allreduce,\n"
        "                       backward), the paper's vanilla model parallelism\n"
        "\n"
        "distribution:\n"
        "  --workers N          worker processes (default %u; single mode: 1)\n"
        "  --backend B          inagg (default) or mpi: the same algorithms over OpenMPI\n"
        "                       (MPI_Allreduce / MPI_Iallreduce over TCP on loopback), run\n"
        "                       with mpirun and inagg-mpi-train (the paper's CPUSync)\n"
        "  --protocol P         switch protocol: p4sgd (default for model mode) or switchml\n"
        "                       (default for data mode)\n"
        "  --switch HOST:PORT   use a running switch and run ONE rank here (multi-host); rank\n"
        "  --rank R --world W   and world come from these flags or from mpirun / PMI / srun\n"
        "                       (OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE, SLURM_PROCID/NTASKS)\n"
        "  --job NAME           with --switch: the job's name on the switch, the same on every\n"
        "                       rank (default train; give runs sharing a switch their own)\n"
        "  --switch-threads N   dataplane threads of the embedded switch (default: the online\n"
        "                       CPUs, at most %u). The switch handles every worker's packets\n"
        "                       (W times one worker's), so it is the first to need more than one\n"
        "                       core\n"
        "  --timeout MS         a worker silent this long fails the job (default %u)\n"
        "  --testbed N          build a testbed of N host namespaces (tools/testbed, root) and\n"
        "                       run one rank per host: the switch in the switch namespace (the\n"
        "                       fabric's own with --fabric inagg), --backend mpi through mpirun\n"
        "                       one rank per host; taken down at the end. Exit 3: testbeds\n"
        "                       cannot be built here\n"
        "  --fabric F           with --testbed: bridge or inagg (docs/FABRIC.md)\n"
        "  --link-delay D       with --testbed --fabric inagg: one-way delay per link (25us)\n"
        "  --link-rate R        with --testbed: every link's rate (1gbit; default none)\n"
        "  --report-lines       with --switch: this rank's report lines on stdout for a parent\n"
        "                       to render (what --testbed runs on each host)\n"
        "\n"
        "output:\n"
        "  a progress bar on a terminal, else one line per epoch; then a summary\n"
        "  --json FILE|-        one JSON object: mode, workers, backend, protocol, objective,\n"
        "                       batch, micro_batch, pipeline, epochs [{epoch, objective,\n"
        "                       accuracy, seconds, comm_share, test_accuracy}],\n"
        "                       final_objective, final_accuracy, total_seconds, ... (- for\n"
        "                       stdout; the human output then goes to stderr)\n"
        "  --plot FILE.png      objective vs epoch and vs training time (needs gnuplot)\n"
        "  --reference R        what the result is measured against, in the summary and the\n"
        "                       JSON (\"reference\", \"objective_gap\"): auto (default):\n"
        "                       liblinear-train's optimum of the same problem on the same\n"
        "                       data (logistic, hinge; apt-get install liblinear-tools), else\n"
        "                       the same training in one process; liblinear, single, or none\n"
        "\n"
        "examples:\n"
        "  inagg train\n"
        "  inagg train --data a9a --workers 4 --epochs 20 --json -\n"
        "  inagg train --synthetic rcv1 --no-pipeline --epochs 3\n"
        "  inagg train --synthetic gisette --mode data --backend mpi\n"
        "  inagg switch --listen 0.0.0.0:9999 &   # then on each host:\n"
        "  inagg train --data a9a --switch HOST:9999 --rank R --world 4\n"
        "\n"
        "Exit: 0 trained, 1 a worker or the run failed (its message says which rank and what),\n"
        "2 bad usage (also --synthetic data larger than the available memory: MemAvailable\n"
        "or a cgroup's limit). Ended by any signal, it takes its switch and workers along.\n",
        DEFAULT_WORKERS, GLM_DEFAULT_EPOCHS, GLM_DEFAULT_BATCH, GLM_DEFAULT_MICRO_BATCH,
        GLM_LR_SCALE, GLM_DEFAULT_SEED, DEFAULT_WORKERS, MAX_DEFAULT_SWITCH_THREADS,
        DEFAULT_TIMEOUT_MS);
}

/* ---- arguments ----------------------------------------------------------------------------- */

static int bad_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int bad_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "inagg train: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(inagg train --help lists the options)\n");
    return 2;
}

static int parse_u64(const char *flag, const char *v, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (end == v || *end || errno || v[0] == '-' || x < lo || x > hi)
        return bad_usage("%s needs an integer in %llu..%llu, got '%s'", flag,
                         (unsigned long long)lo, (unsigned long long)hi, v);
    *out = x;
    return 0;
}

static int parse_double(const char *flag, const char *v, double lo, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end || errno || !isfinite(x) || !(x >= lo))
        return bad_usage("%s needs a number >= %g, got '%s'", flag, lo, v);
    *out = x;
    return 0;
}

/* Rank and world from a launcher's environment; 0 if found. */
static int env_rank(long *rank, long *world)
{
    static const char *const pairs[][2] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                           {"PMI_RANK", "PMI_SIZE"},
                                           {"SLURM_PROCID", "SLURM_NTASKS"}};
    for (size_t i = 0; i < INAGG_ARRAY_LEN(pairs); i++) {
        const char *r = getenv(pairs[i][0]), *w = getenv(pairs[i][1]);
        if (r && w && *r && *w) {
            *rank = strtol(r, NULL, 10);
            *world = strtol(w, NULL, 10);
            return 0;
        }
    }
    return -ENOENT;
}

/* Flags whose presence matters after parsing. */
typedef struct train_seen {
    int micro_batch, pipeline, capture_steps;
} train_seen_t;

/* A flag of what is trained and how (data, objective, batch, step size, optimizer,
 * averaging). 0 taken, 2 refused (said), -1 not one of these. */
static int parse_training_flag(train_opts_t *o, train_seen_t *seen, int c)
{
    uint64_t v = 0;
    double d = 0;
    switch (c) {
        case 'd': o->data = optarg; break;
        case 'y': o->synthetic = optarg; break;
        case 't': o->test = optarg; break;
        case 'm':
            if (glm_mode_parse(optarg, &o->cfg.mode) != 0)
                return bad_usage("--mode must be model, data or single, got '%s'", optarg);
            break;
        case 'o':
            if (glm_objective_parse(optarg, &o->cfg.objective) != 0)
                return bad_usage("--objective must be logistic, squared or hinge, got '%s'",
                                 optarg);
            break;
        case 'b':
            if (parse_u64("--batch", optarg, 1, 1u << 20, &v))
                return 2;
            o->cfg.batch = (size_t)v;
            break;
        case 'u':
            if (parse_u64("--micro-batch", optarg, 1, INAGG_MAX_PACKET_ELEMS, &v))
                return 2;
            o->cfg.micro_batch = (size_t)v;
            seen->micro_batch = 1;
            break;
        case 'e':
            if (parse_u64("--epochs", optarg, 1, 100000, &v))
                return 2;
            o->cfg.epochs = (uint32_t)v;
            break;
        case 'g':
            if (parse_double("--lr", optarg, 0, &d))
                return 2;
            if (d <= 0)
                return bad_usage("--lr must be positive");
            o->cfg.lr = d;
            o->lr_given = 1;
            break;
        case 'S':
            if (strcmp(optarg, "sqrt") == 0)
                o->cfg.schedule = GLM_LR_SQRT;
            else if (strcmp(optarg, "const") == 0)
                o->cfg.schedule = GLM_LR_CONST;
            else
                return bad_usage("--lr-schedule must be sqrt or const, got '%s'", optarg);
            break;
        case 'Q':
            if (strcmp(optarg, "diag") == 0)
                o->cfg.precondition = GLM_PRECOND_DIAG;
            else if (strcmp(optarg, "none") == 0)
                o->cfg.precondition = GLM_PRECOND_NONE;
            else
                return bad_usage("--precondition must be diag or none, got '%s'", optarg);
            break;
        case 1100:
            if (train_reference_parse(optarg, &o->reference) != 0)
                return bad_usage("--reference must be auto, liblinear, single or none, got '%s'",
                                 optarg);
            break;
        case 'V':
            if (strcmp(optarg, "tail") == 0)
                o->cfg.average = GLM_AVG_TAIL;
            else if (strcmp(optarg, "none") == 0)
                o->cfg.average = GLM_AVG_NONE;
            else
                return bad_usage("--average must be tail or none, got '%s'", optarg);
            break;
        case 'l':
            if (parse_double("--l2", optarg, 0, &d))
                return 2;
            o->cfg.l2 = d;
            o->l2_given = 1;
            break;
        case 'O': {
            optim_kind_t k;
            if (optim_parse_kind(optarg, &k) != 0)
                return bad_usage("--optimizer must be sgd, adagrad, adam or smorms3, got '%s'",
                                 optarg);
            o->cfg.optimizer = 1 + (int)k;
            break;
        }
        case 'I': o->cfg.in_switch = 1; break;
        case 'E':
            if (strcmp(optarg, "inside") == 0)
                o->cfg.eps_outside = 0;
            else if (strcmp(optarg, "outside") == 0)
                o->cfg.eps_outside = 1;
            else
                return bad_usage("--eps-place must be inside or outside, got '%s'", optarg);
            break;
        default: return -1;
    }
    return 0;
}

/* A flag of the job that trains (backend, pipelining, precision, compression, capture, report
 * lines). 0 taken, 2 refused (said), -1 not one of these. */
static int parse_job_flag(train_opts_t *o, train_seen_t *seen, int c)
{
    uint64_t v = 0;
    switch (c) {
        case 'B':
            if (strcmp(optarg, "inagg") == 0)
                o->backend_mpi = 0;
            else if (strcmp(optarg, "mpi") == 0)
                o->backend_mpi = 1;
            else
                return bad_usage("--backend must be inagg or mpi, got '%s'", optarg);
            break;
        case 'N':
            o->cfg.pipeline = 0;
            seen->pipeline = 1;
            break;
        case 'p':
            if (strcmp(optarg, "32") == 0)
                o->precision = 32;
            else if (strcmp(optarg, "8") == 0)
                o->precision = 8;
            else if (strcmp(optarg, "4") == 0)
                o->precision = 4;
            else
                return bad_usage("--precision must be 32, 8 or 4, got '%s'", optarg);
            break;
        case 'Z': {
            codec_spec_t cs;
            char why[256];
            if (codec_parse(optarg, &cs, why, sizeof why) != 0)
                return bad_usage("--compress: %s", why);
            o->compress = cs.mode == CODEC_NONE ? NULL : optarg;
            break;
        }
        case 'X': o->no_feedback = 1; break;
        case 'C':
            if (!optarg[0])
                return bad_usage("--capture-gradients needs a file name prefix");
            o->capture_prefix = optarg;
            break;
        case 'Y':
            if (parse_u64("--capture-steps", optarg, 1, 1000000, &v))
                return 2;
            o->cfg.capture_steps = (uint32_t)v;
            seen->capture_steps = 1;
            break;
        case 'L': o->report_lines = 1; break;
        default: return -1;
    }
    return 0;
}

/* The data, the batch and where the job runs (single process, testbed). 0, or 2 after a
 * message. */
static int check_data_and_placement(train_opts_t *o, const train_seen_t *seen)
{
    if (o->data && o->synthetic)
        return bad_usage("give --data or --synthetic, not both");
    if (!o->data && !o->synthetic)
        o->synthetic = DEFAULT_SYNTHETIC;
    if (o->cfg.micro_batch > o->cfg.batch) {
        if (seen->micro_batch)
            return bad_usage("--micro-batch (%zu) cannot exceed --batch (%zu)", o->cfg.micro_batch,
                             o->cfg.batch);
        o->cfg.micro_batch = o->cfg.batch;
    }
    if (o->cfg.mode == GLM_MODE_SINGLE) {
        if (o->workers_given && o->workers != 1)
            return bad_usage("--mode single runs one process (got --workers %u)", o->workers);
        if (o->backend_mpi || o->protocol >= 0 || o->switch_addr)
            return bad_usage("--mode single uses no switch and no MPI (drop --backend, "
                             "--protocol, --switch)");
        o->workers = 1;
    }
    if (o->testbed) {
        if (o->switch_addr || o->cfg.mode == GLM_MODE_SINGLE)
            return bad_usage("--testbed runs one rank per host with its own switch (not with "
                             "--switch or --mode single)");
        if (o->workers_given)
            return bad_usage("--testbed runs one worker per host; --workers does not apply");
        o->workers = o->testbed;
    } else if (o->fabric || o->link_delay || o->link_rate) {
        return bad_usage("--fabric, --link-delay and --link-rate describe the testbed: they go "
                         "with --testbed N");
    }
    return 0;
}

/* What goes with the optimizer, the backend, the protocol, compression and capture; the
 * defaults they imply. 0, or 2 after a message. */
static int check_training_and_backend(train_opts_t *o, const train_seen_t *seen)
{
    if (o->report_lines && !o->switch_addr)
        return bad_usage("--report-lines goes with --switch (one rank of a job)");
    if (o->cfg.optimizer && o->cfg.mode != GLM_MODE_DATA)
        return bad_usage("--optimizer applies to --mode data (model mode updates each worker's "
                         "slice with plain SGD)");
    if (o->cfg.in_switch && !o->cfg.optimizer)
        return bad_usage("--in-switch needs --optimizer");
    if (o->cfg.in_switch && o->backend_mpi)
        return bad_usage("--in-switch needs the inagg backend (MPI has no switch)");
    if (o->cfg.mode == GLM_MODE_DATA && seen->pipeline)
        return bad_usage("--no-pipeline applies to model mode");
    if (o->backend_mpi && o->protocol >= 0)
        return bad_usage("--protocol applies to the inagg backend, not --backend mpi");
    if (o->backend_mpi && o->switch_addr)
        return bad_usage("--switch applies to the inagg backend, not --backend mpi");
    if (o->switch_threads && (o->switch_addr || o->backend_mpi || o->cfg.mode == GLM_MODE_SINGLE))
        return bad_usage("--switch-threads applies to the embedded switch (not with --switch, "
                         "--backend mpi or --mode single)");
    if (!o->switch_addr && !o->backend_mpi && o->cfg.mode != GLM_MODE_SINGLE && !o->switch_threads)
        o->switch_threads = default_switch_threads();
    if (o->protocol < 0)
        o->protocol = o->cfg.mode == GLM_MODE_DATA ? 0 : 1;
    if (o->compress &&
        (o->backend_mpi || o->protocol != 0 || o->cfg.mode != GLM_MODE_DATA || o->cfg.in_switch))
        return bad_usage("--compress applies to --mode data over the switchml protocol "
                         "(inagg backend, no --in-switch)");
    if (o->no_feedback && !o->compress)
        return bad_usage("--no-error-feedback goes with --compress");
    if (seen->capture_steps && !o->capture_prefix)
        return bad_usage("--capture-steps goes with --capture-gradients");
    if (o->capture_prefix && (o->cfg.mode != GLM_MODE_DATA || o->backend_mpi))
        return bad_usage("--capture-gradients applies to --mode data with the inagg backend "
                         "(model mode sends activations, not gradients)");
    if (o->capture_prefix && !o->cfg.capture_steps)
        o->cfg.capture_steps = 10;
    return 0;
}

/* --switch runs one rank of a job: its rank and world (from the flags or a launcher's
 * environment). 0, or 2 after a message. */
static int check_rank_of_job(train_opts_t *o)
{
    if (o->switch_addr) {
        if (o->rank < 0 || o->world < 0) {
            long r = -1, w = -1;
            if (env_rank(&r, &w) != 0 && (o->rank < 0 || o->world < 0))
                return bad_usage("--switch needs --rank and --world (or run under mpirun / "
                                 "srun, which set them in the environment)");
            if (o->rank < 0)
                o->rank = r;
            if (o->world < 0)
                o->world = w;
        }
        if (o->world < 1 || o->world > (long)INAGG_MAX_WORLD || o->rank < 0 || o->rank >= o->world)
            return bad_usage("rank %ld of world %ld is out of range (world 1..%u)", o->rank,
                             o->world, INAGG_MAX_WORLD);
        if (o->workers_given && o->workers != (uint32_t)o->world)
            return bad_usage("--workers %u disagrees with --world %ld", o->workers, o->world);
        o->workers = (uint32_t)o->world;
    } else if (o->rank >= 0 || o->world >= 0 || o->job) {
        return bad_usage("--rank, --world and --job go with --switch HOST:PORT");
    }
    return 0;
}

/* What the own-flag parser writes to. */
typedef struct train_parse_ctx {
    train_opts_t *o;
    train_seen_t seen;
} train_parse_ctx_t;

/* `inagg train`'s own flags (bench_own_flag_fn). */
static int parse_own_flag(void *ctx, int c)
{
    train_parse_ctx_t *pc = ctx;
    int rc = parse_training_flag(pc->o, &pc->seen, c);
    return rc >= 0 ? rc : parse_job_flag(pc->o, &pc->seen, c);
}

/* The shared flags bound to o, into b; rank, world and protocol through the temporaries in
 * shared (o keeps -1 for "not given"). */
typedef struct train_shared {
    uint32_t rank, world;
    inagg_protocol_t protocol;
} train_shared_t;

static bench_opts_t shared_flags(train_opts_t *o, train_shared_t *t)
{
    return (bench_opts_t){.cmd = "inagg train",
                          .workers = &o->workers,
                          .world = &t->world,
                          .rank = &t->rank,
                          .job = &o->job,
                          .switch_addr = &o->switch_addr,
                          .seed = &o->cfg.seed,
                          .timeout_ms = &o->timeout_ms,
                          .timeout_name = "timeout",
                          .timeout_min = 100,
                          .json_path = &o->json_path,
                          .plot_path = &o->plot_path,
                          .protocol = &t->protocol,
                          .testbed = &o->testbed,
                          .link_rate = &o->link_rate,
                          .link_delay = &o->link_delay,
                          .fabric = &o->fabric,
                          .switch_threads = &o->switch_threads};
}

int train_parse_args(int argc, char **argv, train_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    glm_train_config_t def = GLM_TRAIN_CONFIG_INIT;
    o->cfg = def;
    o->workers = DEFAULT_WORKERS;
    o->protocol = -1;
    o->precision = 32;
    o->rank = o->world = -1;
    o->timeout_ms = DEFAULT_TIMEOUT_MS;
    static const struct option own[] = {{"data", required_argument, 0, 'd'},
                                        {"synthetic", required_argument, 0, 'y'},
                                        {"test-data", required_argument, 0, 't'},
                                        {"mode", required_argument, 0, 'm'},
                                        {"objective", required_argument, 0, 'o'},
                                        {"batch", required_argument, 0, 'b'},
                                        {"micro-batch", required_argument, 0, 'u'},
                                        {"epochs", required_argument, 0, 'e'},
                                        {"lr", required_argument, 0, 'g'},
                                        {"lr-schedule", required_argument, 0, 'S'},
                                        {"l2", required_argument, 0, 'l'},
                                        {"backend", required_argument, 0, 'B'},
                                        {"no-pipeline", no_argument, 0, 'N'},
                                        {"precision", required_argument, 0, 'p'},
                                        {"compress", required_argument, 0, 'Z'},
                                        {"no-error-feedback", no_argument, 0, 'X'},
                                        {"capture-gradients", required_argument, 0, 'C'},
                                        {"capture-steps", required_argument, 0, 'Y'},
                                        {"optimizer", required_argument, 0, 'O'},
                                        {"in-switch", no_argument, 0, 'I'},
                                        {"eps-place", required_argument, 0, 'E'},
                                        {"report-lines", no_argument, 0, 'L'},
                                        {"average", required_argument, 0, 'V'},
                                        {"precondition", required_argument, 0, 'Q'},
                                        {"reference", required_argument, 0, 1100},
                                        {0, 0, 0, 0}};
    train_shared_t t = {0};
    bench_opts_t b = shared_flags(o, &t);
    train_parse_ctx_t pc = {.o = o};
    int rc = bench_opts_parse(&b, argc, argv, own, parse_own_flag, &pc, usage);
    if (rc)
        return rc;
    o->workers_given = bench_opts_given(&b, BOPT_WORKERS);
    if (bench_opts_given(&b, BOPT_RANK))
        o->rank = t.rank;
    if (bench_opts_given(&b, BOPT_WORLD))
        o->world = t.world;
    if (bench_opts_given(&b, BOPT_PROTOCOL))
        o->protocol = t.protocol == INAGG_PROTO_P4SGD;
    o->argc = argc;
    o->argv = argv;
    rc = check_data_and_placement(o, &pc.seen);
    if (rc == 0)
        rc = check_training_and_backend(o, &pc.seen);
    if (rc == 0)
        rc = check_rank_of_job(o);
    return rc;
}
