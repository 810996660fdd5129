/*
 * cmd_train.c - `inagg train`, the project's main job: distributed training of a generalized
 * linear model (P4SGD's workload) through the aggregation switch.
 *
 * With no --switch, the command forks an embedded switch on loopback and N worker processes,
 * each a rank of one job; every worker loads (or generates) the same data, takes its slice
 * (features in model mode, samples in data mode) and trains with glm/train.c over the inagg
 * collective (glm/coll_inagg.c). Workers report one text line per event (glm/train.h's
 * report lines) through a pipe; the parent renders progress, the summary, JSON and a plot.
 * --backend mpi runs the same trainers under mpirun (inagg-mpi-train) and parses the same
 * lines from its stdout. --mode single trains in this process. --switch HOST:PORT runs one
 * rank here (multi-host; rank and world from flags or the launcher's environment).
 * Every wait is bounded: the library's per-call timeout, a watchdog on silent workers, and
 * the first failure kills the remaining workers.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/commands.h"
#include "mpi/baseline_mpi.h"
#include "json/json.h"
#include "kernels/optim.h"
#include "base/log.h"
#include "base/util.h"
#include "glm/collective.h"
#include "glm/dataset.h"
#include "glm/objective.h"
#include "glm/train.h"
#include "inagg.h"
#include "switch/switch.h"

#define DEFAULT_SYNTHETIC "rcv1"
#define DEFAULT_WORKERS 4u
#define DEFAULT_TIMEOUT_MS 30000u
/* The embedded switch's default threads: one per online CPU up to this. On the 2-core VM
 * two threads cut a pipelined epoch by a third against one; four were slower than two
 * (docs/PERFORMANCE.md). */
#define MAX_DEFAULT_SWITCH_THREADS 4u
#define P4SGD_PACKET_ELEMS 1024u /* >= micro-batch; evaluation allreduces go in big chunks */
#define MAX_SLOTS 256u
#define MPI_TIME_LIMIT_S 3600u
#define LINE_MAX_LEN 4096

typedef struct train_opts {
    const char *data, *synthetic, *test;
    uint32_t workers;
    int workers_given;
    glm_train_config_t cfg;
    int backend_mpi;
    int protocol; /* -1: by mode; 0 switchml; 1 p4sgd */
    int precision;
    const char *json_path, *plot_path;
    const char *switch_addr, *job;
    long rank, world; /* -1: not given */
    uint32_t timeout_ms;
    uint32_t switch_threads; /* the embedded switch's threads; 0 when there is none */
    int lr_given, l2_given;
} train_opts_t;

static uint32_t default_switch_threads(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return cpus < 1 ? 1u : (uint32_t)util_min_u64((uint64_t)cpus, MAX_DEFAULT_SWITCH_THREADS);
}

static void usage(FILE *out)
{
    fprintf(out,
        "usage: inagg train [--data FILE | --synthetic SPEC] [--test-data FILE]\n"
        "                   [--workers N] [--mode model|data|single]\n"
        "                   [--objective logistic|squared|hinge] [--batch B] [--micro-batch MB]\n"
        "                   [--epochs E] [--lr G] [--lr-schedule sqrt|const] [--l2 L]\n"
        "                   [--backend inagg|mpi] [--protocol p4sgd|switchml] [--no-pipeline]\n"
        "                   [--precision 32|8|4] [--seed S] [--json FILE|-] [--plot FILE.png]\n"
        "                   [--switch HOST:PORT --rank R --world W [--job NAME]]\n"
        "                   [--switch-threads N] [--timeout MS]\n"
        "\n"
        "Trains an L2-regularised linear model (objective = mean loss + L/2 ||w||^2, no bias,\n"
        "w starts at 0) with synchronous mini-batch SGD, distributed through the aggregation\n"
        "switch. With no arguments: an embedded switch on 127.0.0.1, %u local worker\n"
        "processes, a generated rcv1-like dataset, model-parallel logistic regression.\n"
        "\n"
        "modes:\n"
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
        "  --data FILE          LIBSVM file (every worker reads it)\n"
        "  --synthetic SPEC     generated data, same seed -> same data in every worker:\n"
        "                       gisette | rcv1 | real-sim | dense:SxD | sparse:SxD:DENSITY\n"
        "                       (default " DEFAULT_SYNTHETIC " when no --data)\n"
        "  --test-data FILE     LIBSVM file for held-out accuracy after each epoch\n"
        "  --precision BITS     32 (default), or 8 / 4: features quantized per column before\n"
        "                       training (P4SGD trains on 4-bit data)\n"
        "\n"
        "training:\n"
        "  --objective O        logistic (default), squared (least squares), hinge (SVM)\n"
        "  --epochs E           passes over the data (default %d)\n"
        "  --batch B            mini-batch size: samples per update (default %d)\n"
        "  --micro-batch MB     samples per allreduce in model mode (default %d, as P4SGD)\n"
        "  --lr G               base learning rate (default: %.2f / (beta * mean ||a||^2) from\n"
        "                       the data, beta = 1/4 logistic and hinge, 1 squared: about 2/L)\n"
        "  --lr-schedule S      sqrt (default): rate G/sqrt(epoch); const: G every epoch\n"
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
        "\n"
        "output:\n"
        "  a progress bar on a terminal, else one line per epoch; then a summary\n"
        "  --json FILE|-        one JSON object: mode, workers, backend, protocol, objective,\n"
        "                       batch, micro_batch, pipeline, epochs [{epoch, objective,\n"
        "                       accuracy, seconds, comm_share, test_accuracy}],\n"
        "                       final_objective, final_accuracy, total_seconds, ... (- for\n"
        "                       stdout; the human output then goes to stderr)\n"
        "  --plot FILE.png      objective vs epoch and vs training time (needs gnuplot)\n"
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
        "2 bad usage.\n",
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
    return -1;
}

static int parse_args(int argc, char **argv, train_opts_t *o)
{
    static const struct option longopts[] = {
        {"data", required_argument, 0, 'd'},        {"synthetic", required_argument, 0, 'y'},
        {"test-data", required_argument, 0, 't'},   {"workers", required_argument, 0, 'n'},
        {"mode", required_argument, 0, 'm'},        {"objective", required_argument, 0, 'o'},
        {"batch", required_argument, 0, 'b'},       {"micro-batch", required_argument, 0, 'u'},
        {"epochs", required_argument, 0, 'e'},      {"lr", required_argument, 0, 'g'},
        {"lr-schedule", required_argument, 0, 'S'}, {"l2", required_argument, 0, 'l'},
        {"backend", required_argument, 0, 'B'},     {"protocol", required_argument, 0, 'P'},
        {"no-pipeline", no_argument, 0, 'N'},       {"precision", required_argument, 0, 'p'},
        {"seed", required_argument, 0, 's'},        {"json", required_argument, 0, 'j'},
        {"plot", required_argument, 0, 'G'},        {"switch", required_argument, 0, 'W'},
        {"rank", required_argument, 0, 'r'},        {"world", required_argument, 0, 'w'},
        {"timeout", required_argument, 0, 'T'},     {"job", required_argument, 0, 'J'},
        {"optimizer", required_argument, 0, 'O'},   {"in-switch", no_argument, 0, 'I'},
        {"eps-place", required_argument, 0, 'E'},  {"switch-threads", required_argument, 0, 'H'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    uint64_t v = 0;
    double d = 0;
    int c, mb_given = 0, pipeline_given = 0;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'd': o->data = optarg; break;
        case 'y': o->synthetic = optarg; break;
        case 't': o->test = optarg; break;
        case 'n':
            if (parse_u64("--workers", optarg, 1, INAGG_MAX_WORLD, &v)) return 2;
            o->workers = (uint32_t)v;
            o->workers_given = 1;
            break;
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
            if (parse_u64("--batch", optarg, 1, 1u << 20, &v)) return 2;
            o->cfg.batch = (size_t)v;
            break;
        case 'u':
            if (parse_u64("--micro-batch", optarg, 1, INAGG_MAX_PACKET_ELEMS, &v)) return 2;
            o->cfg.micro_batch = (size_t)v;
            mb_given = 1;
            break;
        case 'e':
            if (parse_u64("--epochs", optarg, 1, 100000, &v)) return 2;
            o->cfg.epochs = (uint32_t)v;
            break;
        case 'g':
            if (parse_double("--lr", optarg, 0, &d)) return 2;
            if (d <= 0) return bad_usage("--lr must be positive");
            o->cfg.lr = d;
            o->lr_given = 1;
            break;
        case 'S':
            if (strcmp(optarg, "sqrt") == 0) o->cfg.schedule = GLM_LR_SQRT;
            else if (strcmp(optarg, "const") == 0) o->cfg.schedule = GLM_LR_CONST;
            else return bad_usage("--lr-schedule must be sqrt or const, got '%s'", optarg);
            break;
        case 'l':
            if (parse_double("--l2", optarg, 0, &d)) return 2;
            o->cfg.l2 = d;
            o->l2_given = 1;
            break;
        case 'B':
            if (strcmp(optarg, "inagg") == 0) o->backend_mpi = 0;
            else if (strcmp(optarg, "mpi") == 0) o->backend_mpi = 1;
            else return bad_usage("--backend must be inagg or mpi, got '%s'", optarg);
            break;
        case 'P':
            if (strcmp(optarg, "p4sgd") == 0) o->protocol = 1;
            else if (strcmp(optarg, "switchml") == 0) o->protocol = 0;
            else return bad_usage("--protocol must be p4sgd or switchml, got '%s'", optarg);
            break;
        case 'N': o->cfg.pipeline = 0; pipeline_given = 1; break;
        case 'p':
            if (strcmp(optarg, "32") == 0) o->precision = 32;
            else if (strcmp(optarg, "8") == 0) o->precision = 8;
            else if (strcmp(optarg, "4") == 0) o->precision = 4;
            else return bad_usage("--precision must be 32, 8 or 4, got '%s'", optarg);
            break;
        case 's':
            if (parse_u64("--seed", optarg, 0, UINT64_MAX, &v)) return 2;
            o->cfg.seed = v;
            break;
        case 'j': o->json_path = optarg; break;
        case 'G': o->plot_path = optarg; break;
        case 'W': o->switch_addr = optarg; break;
        case 'r':
            if (parse_u64("--rank", optarg, 0, INAGG_MAX_WORLD - 1, &v)) return 2;
            o->rank = (long)v;
            break;
        case 'w':
            if (parse_u64("--world", optarg, 1, INAGG_MAX_WORLD, &v)) return 2;
            o->world = (long)v;
            break;
        case 'T':
            if (parse_u64("--timeout", optarg, 100, 3600000, &v)) return 2;
            o->timeout_ms = (uint32_t)v;
            break;
        case 'H':
            if (parse_u64("--switch-threads", optarg, 1, 64, &v)) return 2;
            o->switch_threads = (uint32_t)v;
            break;
        case 'J':
            if (!*optarg || strlen(optarg) > 48)
                return bad_usage("--job needs a name of 1..48 characters");
            o->job = optarg;
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
            if (strcmp(optarg, "inside") == 0) o->cfg.eps_outside = 0;
            else if (strcmp(optarg, "outside") == 0) o->cfg.eps_outside = 1;
            else return bad_usage("--eps-place must be inside or outside, got '%s'", optarg);
            break;
        case 'h': usage(stdout); return 1;
        case ':':
            return bad_usage("%s needs a value", argv[optind - 1]);
        default:
            return bad_usage("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return bad_usage("unexpected argument '%s'", argv[optind]);
    if (o->data && o->synthetic)
        return bad_usage("give --data or --synthetic, not both");
    if (!o->data && !o->synthetic)
        o->synthetic = DEFAULT_SYNTHETIC;
    if (o->cfg.micro_batch > o->cfg.batch) {
        if (mb_given)
            return bad_usage("--micro-batch (%zu) cannot exceed --batch (%zu)",
                             o->cfg.micro_batch, o->cfg.batch);
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
    if (o->cfg.optimizer && o->cfg.mode != GLM_MODE_DATA)
        return bad_usage("--optimizer applies to --mode data (model mode updates each worker's "
                         "slice with plain SGD)");
    if (o->cfg.in_switch && !o->cfg.optimizer)
        return bad_usage("--in-switch needs --optimizer");
    if (o->cfg.in_switch && o->backend_mpi)
        return bad_usage("--in-switch needs the inagg backend (MPI has no switch)");
    if (o->cfg.mode == GLM_MODE_DATA && pipeline_given)
        return bad_usage("--no-pipeline applies to model mode");
    if (o->backend_mpi && o->protocol >= 0)
        return bad_usage("--protocol applies to the inagg backend, not --backend mpi");
    if (o->backend_mpi && o->switch_addr)
        return bad_usage("--switch applies to the inagg backend, not --backend mpi");
    if (o->switch_threads && (o->switch_addr || o->backend_mpi || o->cfg.mode == GLM_MODE_SINGLE))
        return bad_usage("--switch-threads applies to the embedded switch (not with --switch, "
                         "--backend mpi or --mode single)");
    if (!o->switch_addr && !o->backend_mpi && o->cfg.mode != GLM_MODE_SINGLE &&
        !o->switch_threads)
        o->switch_threads = default_switch_threads();
    if (o->protocol < 0)
        o->protocol = o->cfg.mode == GLM_MODE_DATA ? 0 : 1;
    if (o->switch_addr) {
        if (o->rank < 0 || o->world < 0) {
            long r = -1, w = -1;
            if (env_rank(&r, &w) != 0 && (o->rank < 0 || o->world < 0))
                return bad_usage("--switch needs --rank and --world (or run under mpirun / "
                                 "srun, which set them in the environment)");
            if (o->rank < 0) o->rank = r;
            if (o->world < 0) o->world = w;
        }
        if (o->world < 1 || o->world > (long)INAGG_MAX_WORLD || o->rank < 0 ||
            o->rank >= o->world)
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

/* ---- the report state and its rendering -------------------------------------------------- */

typedef struct run {
    const train_opts_t *o;
    FILE *human;   /* summary and per-epoch lines */
    int tty;       /* progress bar on stderr */
    uint32_t world;
    glm_setup_record_t setup;
    int have_setup;
    glm_epoch_record_t *epochs;
    uint32_t nepochs;
    uint32_t done;         /* ranks that finished */
    int failed;
    char error[1400];
    uint64_t t_start;
    int bar_drawn;
    uint64_t last_bar_ns;
} run_t;

static const char *backend_name(const train_opts_t *o)
{
    if (o->cfg.mode == GLM_MODE_SINGLE)
        return "none";
    return o->backend_mpi ? "mpi" : "inagg";
}

static const char *protocol_name(const train_opts_t *o)
{
    if (o->cfg.mode == GLM_MODE_SINGLE || o->backend_mpi)
        return "none";
    return o->protocol == 1 ? "p4sgd" : "switchml";
}

static void clear_bar(run_t *r)
{
    if (r->bar_drawn) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
        r->bar_drawn = 0;
    }
}

static void draw_bar(run_t *r, double epochs_done, const glm_epoch_record_t *last)
{
    const int width = 28;
    uint32_t E = r->o->cfg.epochs;
    double f = E ? epochs_done / E : 0;
    if (f > 1)
        f = 1;
    int fill = (int)(f * width + 0.5);
    char bar[64];
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[width] = '\0';
    fprintf(stderr, "\r  [%s] epoch %u/%u", bar,
            (uint32_t)util_min_u64((uint64_t)floor(epochs_done) + (epochs_done < E ? 1 : 0), E),
            E);
    if (last)
        fprintf(stderr, "  objective %.6f  accuracy %.2f%%  %.2f s/epoch  comm %.0f%%",
                last->objective, 100 * last->accuracy, last->seconds, 100 * last->comm_share);
    fprintf(stderr, "\033[K");
    fflush(stderr);
    r->bar_drawn = 1;
}

static void print_header(run_t *r)
{
    const train_opts_t *o = r->o;
    const char *what = o->cfg.mode == GLM_MODE_MODEL  ? "model-parallel"
                       : o->cfg.mode == GLM_MODE_DATA ? "data-parallel"
                                                      : "single-process";
    fprintf(r->human, "inagg train: %s %s, ", what, glm_objective_name(o->cfg.objective));
    if (o->cfg.mode == GLM_MODE_SINGLE)
        fprintf(r->human, "1 process");
    else
        fprintf(r->human, "%u workers over %s%s%s%s", r->world, backend_name(o),
                o->backend_mpi ? "" : " (", o->backend_mpi ? "" : protocol_name(o),
                o->backend_mpi ? "" : o->switch_addr ? " protocol, switch " : " protocol)");
    if (o->switch_addr && !o->backend_mpi)
        fprintf(r->human, "%s)", o->switch_addr);
    if (o->switch_threads)
        fprintf(r->human, ", embedded switch with %u thread%s", o->switch_threads,
                o->switch_threads > 1 ? "s" : "");
    fprintf(r->human, "\n");
}

static void print_setup(run_t *r)
{
    const train_opts_t *o = r->o;
    const glm_setup_record_t *s = &r->setup;
    fprintf(r->human, "  data      %s%s: %llu samples x %llu features, %llu nonzeros",
            o->data ? o->data : "synthetic ", o->data ? "" : o->synthetic,
            (unsigned long long)s->rows, (unsigned long long)s->cols,
            (unsigned long long)s->nnz);
    if (o->precision != 32)
        fprintf(r->human, ", %d-bit features", o->precision);
    if (s->test_rows)
        fprintf(r->human, "; test %s: %llu samples", o->test, (unsigned long long)s->test_rows);
    fprintf(r->human, "\n  training  %u epochs, batch %zu", o->cfg.epochs, o->cfg.batch);
    if (o->cfg.mode != GLM_MODE_DATA)
        fprintf(r->human, ", micro-batch %zu%s", o->cfg.micro_batch,
                o->cfg.mode == GLM_MODE_SINGLE ? ""
                : o->cfg.pipeline             ? " (pipelined)"
                                              : " (not pipelined)");
    fprintf(r->human, ", lr %.4g%s%s, l2 %.4g%s, seed %llu\n", s->lr,
            o->cfg.schedule == GLM_LR_SQRT ? "/sqrt(epoch)" : " constant",
            o->lr_given ? "" : " (default)", s->l2, o->l2_given ? "" : " (1/S)",
            (unsigned long long)o->cfg.seed);
    fflush(r->human);
}

static void print_epoch_line(run_t *r, const glm_epoch_record_t *e)
{
    fprintf(r->human, "  epoch %3u/%u  objective %.6f  accuracy %6.2f%%", e->epoch,
            r->o->cfg.epochs, e->objective, 100 * e->accuracy);
    if (isfinite(e->test_accuracy))
        fprintf(r->human, "  test %6.2f%%", 100 * e->test_accuracy);
    fprintf(r->human, "  %.3f s", e->seconds);
    if (r->o->cfg.mode != GLM_MODE_SINGLE)
        fprintf(r->human, "  comm %3.0f%%", 100 * e->comm_share);
    fprintf(r->human, "  (eval %.3f s)\n", e->eval_seconds);
    fflush(r->human);
}

/* Feed one report; 0 to carry on, -1 once the run has failed. */
static int handle_line(run_t *r, const glm_line_t *l, int from_rank)
{
    int rank = from_rank >= 0 ? from_rank : l->rank;
    switch (l->type) {
    case GLM_LINE_SETUP:
        if (!r->have_setup) {
            r->setup = l->setup;
            r->have_setup = 1;
            print_setup(r);
        }
        break;
    case GLM_LINE_EPOCH: {
        glm_epoch_record_t *grown =
            realloc(r->epochs, (r->nepochs + 1) * sizeof(glm_epoch_record_t));
        if (!grown) {
            r->failed = 1;
            snprintf(r->error, sizeof(r->error), "out of memory");
            return -1;
        }
        r->epochs = grown;
        r->epochs[r->nepochs++] = l->epoch;
        if (r->tty) {
            draw_bar(r, l->epoch.epoch, &l->epoch);
        } else {
            print_epoch_line(r, &l->epoch);
        }
        break;
    }
    case GLM_LINE_PROGRESS:
        if (r->tty && rank == 0 && l->progress_epoch >= 1) {
            uint64_t now = util_now_ns();
            if (now - r->last_bar_ns > 100000000ull) {
                r->last_bar_ns = now;
                draw_bar(r, l->progress_epoch - 1 + l->progress_fraction,
                         r->nepochs ? &r->epochs[r->nepochs - 1] : NULL);
            }
        }
        break;
    case GLM_LINE_DONE:
        r->done++;
        break;
    case GLM_LINE_ERROR:
        if (!r->failed) {
            r->failed = 1;
            snprintf(r->error, sizeof(r->error), "%s", l->message);
            (void)rank;
        }
        return -1;
    default:
        break;
    }
    return r->failed ? -1 : 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void summary(run_t *r, double total_s)
{
    const train_opts_t *o = r->o;
    if (r->bar_drawn) { /* keep the finished bar on screen */
        fprintf(stderr, "\n");
        r->bar_drawn = 0;
    }
    if (r->nepochs == 0)
        return;
    const glm_epoch_record_t *last = &r->epochs[r->nepochs - 1];
    double train_s = 0, comm_s = 0, eval_s = 0;
    double *secs = malloc(r->nepochs * sizeof(double));
    for (uint32_t i = 0; i < r->nepochs; i++) {
        train_s += r->epochs[i].seconds;
        comm_s += r->epochs[i].comm_seconds;
        eval_s += r->epochs[i].eval_seconds;
        if (secs)
            secs[i] = r->epochs[i].seconds;
    }
    double med = NAN;
    if (secs) {
        qsort(secs, r->nepochs, sizeof(double), cmp_double);
        med = r->nepochs % 2 ? secs[r->nepochs / 2]
                             : 0.5 * (secs[r->nepochs / 2 - 1] + secs[r->nepochs / 2]);
        free(secs);
    }
    FILE *h = r->human;
    fprintf(h, "summary\n");
    fprintf(h, "  final objective    %.6f  (epoch 1: %.6f)\n", last->objective,
            r->epochs[0].objective);
    fprintf(h, "  training accuracy  %.2f%%\n", 100 * last->accuracy);
    if (isfinite(last->test_accuracy))
        fprintf(h, "  test accuracy      %.2f%%\n", 100 * last->test_accuracy);
    fprintf(h, "  total time         %.2f s  (training %.2f s, evaluation %.2f s, the rest "
               "setup and data)\n", total_s, train_s, eval_s);
    fprintf(h, "  epoch time         mean %.3f s, median %.3f s\n", train_s / r->nepochs, med);
    if (o->cfg.mode != GLM_MODE_SINGLE)
        fprintf(h, "  comm share         %.1f%% of training time blocked in communication\n",
                train_s > 0 ? 100 * comm_s / train_s : 0.0);
    if (o->cfg.mode == GLM_MODE_MODEL) {
        fprintf(h, "  communication      %.3g B/sample payload per worker (one float32 partial "
                   "activation)", last->payload_bytes_per_sample);
        if (last->wire_bytes_per_sample > 0)
            fprintf(h, ", %.3g B/sample sent on the wire with headers", last->wire_bytes_per_sample);
        fprintf(h, "\n");
    } else if (o->cfg.mode == GLM_MODE_DATA) {
        fprintf(h, "  communication      %.4g B/sample payload per worker (the gradient, %llu "
                   "floats per mini-batch)\n", last->payload_bytes_per_sample,
                (unsigned long long)r->setup.cols);
    }
    fflush(h);
}

static int write_json(run_t *r, double total_s)
{
    const train_opts_t *o = r->o;
    json_writer_t w;
    json_init(&w);
    json_begin_object(&w, NULL);
    json_string(&w, "mode", glm_mode_name(o->cfg.mode));
    json_int(&w, "workers", r->world);
    json_string(&w, "backend", backend_name(o));
    json_string(&w, "protocol", protocol_name(o));
    json_string(&w, "objective", glm_objective_name(o->cfg.objective));
    json_int(&w, "batch", (int64_t)o->cfg.batch);
    json_int(&w, "micro_batch", (int64_t)o->cfg.micro_batch);
    json_bool(&w, "pipeline", o->cfg.mode != GLM_MODE_DATA && o->cfg.pipeline);
    json_string(&w, "optimizer", o->cfg.optimizer
                                     ? optim_kind_name((optim_kind_t)(o->cfg.optimizer - 1))
                                     : "sgd-plain");
    json_bool(&w, "in_switch", o->cfg.in_switch);
    if (o->switch_threads)
        json_int(&w, "switch_threads", o->switch_threads);
    json_string(&w, "data", o->data ? o->data : o->synthetic);
    json_bool(&w, "synthetic", o->data == NULL);
    json_int(&w, "rows", (int64_t)r->setup.rows);
    json_int(&w, "cols", (int64_t)r->setup.cols);
    json_int(&w, "nnz", (int64_t)r->setup.nnz);
    json_int(&w, "precision", o->precision);
    json_number(&w, "lr", r->setup.lr);
    json_string(&w, "lr_schedule", o->cfg.schedule == GLM_LR_SQRT ? "sqrt" : "const");
    json_number(&w, "l2", r->setup.l2);
    json_int(&w, "seed", (int64_t)o->cfg.seed);
    json_begin_array(&w, "epochs");
    double train_s = 0, comm_s = 0;
    for (uint32_t i = 0; i < r->nepochs; i++) {
        const glm_epoch_record_t *e = &r->epochs[i];
        train_s += e->seconds;
        comm_s += e->comm_seconds;
        json_begin_object(&w, NULL);
        json_int(&w, "epoch", e->epoch);
        json_number(&w, "objective", e->objective);
        json_number(&w, "mean_loss", e->mean_loss);
        json_number(&w, "accuracy", e->accuracy);
        if (isfinite(e->test_accuracy))
            json_number(&w, "test_accuracy", e->test_accuracy);
        json_number(&w, "weight_norm", e->weight_norm);
        json_number(&w, "lr", e->lr);
        json_number(&w, "seconds", e->seconds);
        json_number(&w, "comm_share", e->comm_share);
        json_number(&w, "eval_seconds", e->eval_seconds);
        json_end_object(&w);
    }
    json_end_array(&w);
    const glm_epoch_record_t *last = r->nepochs ? &r->epochs[r->nepochs - 1] : NULL;
    json_number(&w, "final_objective", last ? last->objective : NAN);
    json_number(&w, "final_accuracy", last ? last->accuracy : NAN);
    if (last && isfinite(last->test_accuracy))
        json_number(&w, "final_test_accuracy", last->test_accuracy);
    json_number(&w, "total_seconds", total_s);
    json_number(&w, "train_seconds", train_s);
    json_number(&w, "mean_epoch_seconds", r->nepochs ? train_s / r->nepochs : NAN);
    json_number(&w, "comm_share", train_s > 0 ? comm_s / train_s : 0);
    json_number(&w, "payload_bytes_per_sample", last ? last->payload_bytes_per_sample : NAN);
    json_number(&w, "wire_bytes_per_sample", last ? last->wire_bytes_per_sample : NAN);
    json_end_object(&w);
    const char *text = json_text(&w);
    int rc = 0;
    FILE *f = strcmp(o->json_path, "-") == 0 ? stdout : fopen(o->json_path, "w");
    if (!f || !text) {
        fprintf(stderr, "inagg train: cannot write %s: %s\n", o->json_path,
                text ? strerror(errno) : "out of memory");
        rc = -1;
    } else {
        fprintf(f, "%s\n", text);
        if (f != stdout && fclose(f) != 0)
            rc = -1;
        else if (f == stdout)
            fflush(stdout);
    }
    json_free(&w);
    return rc;
}

/* ---- the plot ------------------------------------------------------------------------------ */

static int find_in_path(const char *name, char *buf, size_t len)
{
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        const char *colon = strchr(path, ':');
        size_t dlen = colon ? (size_t)(colon - path) : strlen(path);
        int n = snprintf(buf, len, "%.*s/%s", (int)dlen, path, name);
        if (dlen && n > 0 && (size_t)n < len && access(buf, X_OK) == 0)
            return 0;
        if (!colon)
            break;
        path = colon + 1;
    }
    return -1;
}

/* Run gnuplot on a script file, at most timeout_s; its exit status or -1. */
static int run_gnuplot(const char *gnuplot, const char *script, int timeout_s)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) {
            dup2(devnull, STDOUT_FILENO);
            dup2(devnull, STDERR_FILENO);
        }
        execl(gnuplot, "gnuplot", script, (char *)NULL);
        _exit(127);
    }
    uint64_t deadline = util_now_ns() + (uint64_t)timeout_s * 1000000000ull;
    for (;;) {
        int status;
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        if (w < 0 && errno != EINTR)
            return -1;
        if (util_now_ns() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            return -1;
        }
        usleep(20000);
    }
}

static int write_plot(run_t *r)
{
    const train_opts_t *o = r->o;
    char gnuplot[4096];
    if (find_in_path("gnuplot", gnuplot, sizeof(gnuplot)) != 0) {
        fprintf(stderr, "inagg train: --plot needs gnuplot, which is not installed (e.g. "
                        "apt-get install gnuplot-nox)\n");
        return -1;
    }
    char dir[] = "/tmp/inagg-plot-XXXXXX";
    if (!mkdtemp(dir)) {
        fprintf(stderr, "inagg train: --plot: mkdtemp: %s\n", strerror(errno));
        return -1;
    }
    char datafile[64], script[64];
    snprintf(datafile, sizeof(datafile), "%s/data", dir);
    snprintf(script, sizeof(script), "%s/plot.gp", dir);
    int rc = -1;
    FILE *f = fopen(datafile, "w");
    if (f) {
        double t = 0;
        fprintf(f, "# epoch training_seconds objective\n");
        for (uint32_t i = 0; i < r->nepochs; i++) {
            t += r->epochs[i].seconds;
            fprintf(f, "%u %.9g %.12g\n", r->epochs[i].epoch, t, r->epochs[i].objective);
        }
        fclose(f);
        const char *terms[] = {"pngcairo size 1100,450 font ',10'", "png size 1100,450"};
        for (size_t k = 0; k < INAGG_ARRAY_LEN(terms) && rc != 0; k++) {
            FILE *s = fopen(script, "w");
            if (!s)
                break;
            char title[512];
            snprintf(title, sizeof(title), "%s %s, %s, %u worker%s, %s/%s, B=%zu MB=%zu",
                     glm_mode_name(o->cfg.mode), glm_objective_name(o->cfg.objective),
                     o->data ? o->data : o->synthetic, r->world, r->world == 1 ? "" : "s",
                     backend_name(o), protocol_name(o), o->cfg.batch, o->cfg.micro_batch);
            for (char *p = title; *p; p++)
                if (*p == '"' || *p == '\\')
                    *p = '\'';
            fprintf(s,
                    "set terminal %s\n"
                    "set output \"%s\"\n"
                    "set multiplot layout 1,2 title \"%s\"\n"
                    "set grid\nset key off\n"
                    "set xlabel \"epoch\"\nset ylabel \"objective\"\n"
                    "plot \"%s\" using 1:3 with linespoints pt 7 ps 0.6\n"
                    "set xlabel \"training time (s)\"\n"
                    "plot \"%s\" using 2:3 with linespoints pt 7 ps 0.6\n"
                    "unset multiplot\n",
                    terms[k], o->plot_path, title, datafile, datafile);
            fclose(s);
            rc = run_gnuplot(gnuplot, script, 30);
        }
        struct stat st;
        if (rc == 0 && (stat(o->plot_path, &st) != 0 || st.st_size == 0))
            rc = -1;
    }
    if (rc != 0)
        fprintf(stderr, "inagg train: gnuplot could not write %s (no png terminal, or the "
                        "path is not writable)\n", o->plot_path);
    unlink(datafile);
    unlink(script);
    rmdir(dir);
    return rc == 0 ? 0 : -1;
}

/* ---- a worker (one rank) ------------------------------------------------------------------- */

typedef struct worker_ctx {
    run_t *run;     /* in-process: render directly */
    int fd;         /* forked: write report lines here */
    uint32_t rank;
    int write_failed;
} worker_ctx_t;

static int emit(worker_ctx_t *w, glm_line_t *l)
{
    l->rank = (int)w->rank;
    if (w->run)
        return handle_line(w->run, l, (int)w->rank) == 0 || l->type == GLM_LINE_ERROR ? 0 : -1;
    char buf[LINE_MAX_LEN];
    int n = glm_line_format(l, buf, sizeof(buf) - 1);
    if (n < 0)
        return 0;
    buf[n++] = '\n';
    size_t off = 0;
    while (off < (size_t)n) {
        ssize_t k = write(w->fd, buf + off, (size_t)n - off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            w->write_failed = 1;
            return -1; /* the parent is gone: stop */
        }
        off += (size_t)k;
    }
    return 0;
}

static int w_setup(const glm_setup_record_t *s, void *arg)
{
    worker_ctx_t *w = arg;
    if (w->rank != 0)
        return 0;
    glm_line_t l;
    memset(&l, 0, sizeof(l));
    l.type = GLM_LINE_SETUP;
    l.setup = *s;
    return emit(w, &l);
}

static int w_epoch(const glm_epoch_record_t *e, void *arg)
{
    worker_ctx_t *w = arg;
    if (w->rank != 0)
        return 0;
    glm_line_t l;
    memset(&l, 0, sizeof(l));
    l.type = GLM_LINE_EPOCH;
    l.epoch = *e;
    return emit(w, &l);
}

static int w_progress(uint32_t epoch, double fraction, void *arg)
{
    worker_ctx_t *w = arg;
    if (w->run && w->rank != 0)
        return 0;
    glm_line_t l;
    memset(&l, 0, sizeof(l));
    l.type = GLM_LINE_PROGRESS; /* every rank: also the parent's sign of life */
    l.progress_epoch = epoch;
    l.progress_fraction = fraction;
    return emit(w, &l);
}

static void w_error(worker_ctx_t *w, const char *msg)
{
    glm_line_t l;
    memset(&l, 0, sizeof(l));
    l.type = GLM_LINE_ERROR;
    if (strncmp(msg, "rank ", 5) == 0)
        snprintf(l.message, sizeof(l.message), "%s", msg);
    else
        snprintf(l.message, sizeof(l.message), "rank %u: %s", w->rank, msg);
    emit(w, &l);
}

static uint32_t p4sgd_slots(const train_opts_t *o)
{
    size_t nmb = (o->cfg.batch + o->cfg.micro_batch - 1) / o->cfg.micro_batch;
    return (uint32_t)util_min_u64(util_max_u64(16, nmb), MAX_SLOTS);
}

static uint32_t packet_elems(const train_opts_t *o)
{
    if (o->cfg.mode == GLM_MODE_DATA)
        return 0; /* the library's default: one full datagram per packet */
    return (uint32_t)util_max_u64(P4SGD_PACKET_ELEMS, o->cfg.micro_batch);
}

/* One rank: load, join, train, report. 0 or 1 (the error was reported). */
static int worker_main(const train_opts_t *o, uint32_t rank, uint32_t world, const char *addr,
                       const char *job, worker_ctx_t *w)
{
    char err[1024];
    glm_dataset_t train, test;
    if (glm_load_inputs(o->data, o->synthetic, o->test, o->cfg.seed, o->cfg.objective,
                        o->precision, &train, &test, err, sizeof(err)) != 0) {
        w_error(w, err);
        return 1;
    }
    glm_coll_t *coll = NULL;
    int rc;
    if (o->cfg.mode == GLM_MODE_SINGLE)
        rc = glm_coll_local_create(&coll, err, sizeof(err));
    else {
        glm_coll_optimizer_t opt = {0};
        if (o->cfg.in_switch) {
            /* The switch needs the optimizer at join: the model's length, the rate and the
             * weight decay (= l2) must be resolved here, as glm_train would resolve them. */
            optim_config_t dflt = OPTIM_CONFIG_INIT;
            opt.kind = o->cfg.optimizer - 1;
            opt.params = train.cols;
            opt.lr = (float)glm_resolved_lr(&o->cfg, &train);
            opt.beta1 = dflt.beta1;
            opt.beta2 = dflt.beta2;
            opt.eps = dflt.eps;
            opt.weight_decay = (float)glm_resolved_l2(&o->cfg, &train);
            opt.eps_outside = o->cfg.eps_outside;
        }
        rc = glm_coll_inagg_create(&coll, addr, job, rank, world, o->protocol == 1,
                                   o->protocol == 1 || o->cfg.mode == GLM_MODE_MODEL
                                       ? p4sgd_slots(o)
                                       : 16,
                                   packet_elems(o), o->timeout_ms,
                                   o->cfg.in_switch ? &opt : NULL, err, sizeof(err));
    }
    if (rc == 0) {
        glm_train_config_t cfg = o->cfg;
        cfg.progress = w_progress;
        cfg.progress_arg = w;
        cfg.progress_ms = w->run ? 100 : 250;
        rc = glm_train(&cfg, coll, &train, o->test ? &test : NULL, w_setup, w_epoch, w, NULL,
                       err, sizeof(err));
    }
    if (rc != 0 && !w->write_failed && !(w->run && w->run->failed))
        w_error(w, err);
    glm_coll_destroy(coll);
    glm_dataset_free(&train);
    glm_dataset_free(&test);
    if (rc == 0) {
        glm_line_t l;
        memset(&l, 0, sizeof(l));
        l.type = GLM_LINE_DONE;
        emit(w, &l);
    }
    return rc == 0 ? 0 : 1;
}

/* ---- the local job: embedded switch + forked workers -------------------------------------- */

typedef struct child {
    pid_t pid;
    int fd;
    int finished;     /* done line seen */
    int reaped;
    char buf[LINE_MAX_LEN];
    size_t len;
    uint64_t last_heard_ns;
} child_t;

static void kill_children(child_t *ch, uint32_t n)
{
    for (uint32_t r = 0; r < n; r++)
        if (ch[r].pid > 0 && !ch[r].reaped)
            kill(ch[r].pid, SIGKILL);
    for (uint32_t r = 0; r < n; r++) {
        if (ch[r].pid > 0 && !ch[r].reaped) {
            waitpid(ch[r].pid, NULL, 0);
            ch[r].reaped = 1;
        }
    }
}

static void feed_child(run_t *run, child_t *c, uint32_t rank, const char *data, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (data[i] != '\n') {
            if (c->len < sizeof(c->buf) - 1)
                c->buf[c->len++] = data[i];
            continue;
        }
        c->buf[c->len] = '\0';
        c->len = 0;
        glm_line_t l;
        if (glm_line_parse(c->buf, &l) == GLM_LINE_NONE)
            continue;
        if (l.type == GLM_LINE_DONE)
            c->finished = 1;
        handle_line(run, &l, (int)rank);
    }
}

static int run_local(const train_opts_t *o, run_t *run)
{
    uint32_t W = o->workers;
    uint16_t port = 0;
    switch_config_t scfg = SWITCH_CONFIG_INIT;
    scfg.listen = "127.0.0.1:0";
    scfg.worker_timeout_ms = o->timeout_ms;
    scfg.threads = o->switch_threads;
    pid_t sw = switch_spawn(&scfg, &port);
    if (sw < 0) {
        snprintf(run->error, sizeof(run->error), "the embedded switch did not start");
        run->failed = 1;
        return -1;
    }
    char addr[64], job[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
    snprintf(job, sizeof(job), "train-%d-%llu", (int)getpid(),
             (unsigned long long)(util_now_ns() % 1000000000ull));
    child_t *ch = calloc(W, sizeof(child_t));
    if (!ch) {
        kill(sw, SIGTERM);
        waitpid(sw, NULL, 0);
        snprintf(run->error, sizeof(run->error), "out of memory");
        run->failed = 1;
        return -1;
    }
    pid_t parent = getpid();
    fflush(NULL);
    for (uint32_t r = 0; r < W; r++) {
        int p[2];
        if (pipe(p) != 0) {
            snprintf(run->error, sizeof(run->error), "pipe: %s", strerror(errno));
            run->failed = 1;
            break;
        }
        pid_t pid = fork();
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the command */
            if (getppid() != parent)
                _exit(1);
            signal(SIGPIPE, SIG_IGN);
            close(p[0]);
            for (uint32_t k = 0; k < r; k++)
                close(ch[k].fd);
            worker_ctx_t w = {NULL, p[1], r, 0};
            int rc = worker_main(o, r, W, addr, job, &w);
            close(p[1]);
            _exit(rc);
        }
        close(p[1]);
        if (pid < 0) {
            close(p[0]);
            snprintf(run->error, sizeof(run->error), "fork: %s", strerror(errno));
            run->failed = 1;
            break;
        }
        ch[r].pid = pid;
        ch[r].fd = p[0];
        ch[r].last_heard_ns = util_now_ns();
    }
    /* A rank is given up on when silent for this long: the library fails a collective after
     * timeout_ms, so a live worker always says something well before (loading included). */
    uint64_t idle_limit_ns = (uint64_t)o->timeout_ms * 4000000ull + 120000000000ull;
    struct pollfd *pfd = calloc(W, sizeof(struct pollfd));
    if (!pfd && !run->failed) {
        run->failed = 1;
        snprintf(run->error, sizeof(run->error), "out of memory");
    }
    while (!run->failed && pfd) {
        nfds_t n = 0;
        uint32_t map[INAGG_MAX_WORLD];
        for (uint32_t r = 0; r < W; r++) {
            if (ch[r].fd > 0) {
                pfd[n].fd = ch[r].fd;
                pfd[n].events = POLLIN;
                pfd[n].revents = 0;
                map[n++] = r;
            }
        }
        if (n == 0)
            break;
        int k = poll(pfd, n, 200);
        if (k < 0 && errno != EINTR) {
            snprintf(run->error, sizeof(run->error), "poll: %s", strerror(errno));
            run->failed = 1;
            break;
        }
        uint64_t now = util_now_ns();
        for (nfds_t i = 0; i < n && !run->failed; i++) {
            uint32_t r = map[i];
            child_t *c = &ch[r];
            if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) {
                char data[8192];
                ssize_t got = read(c->fd, data, sizeof(data));
                if (got > 0) {
                    c->last_heard_ns = now;
                    feed_child(run, c, r, data, (size_t)got);
                    continue;
                }
                if (got < 0 && errno == EINTR)
                    continue;
                close(c->fd);
                c->fd = -1;
                int status = 0;
                waitpid(c->pid, &status, 0);
                c->reaped = 1;
                if (!c->finished && !run->failed) {
                    run->failed = 1;
                    if (WIFSIGNALED(status))
                        snprintf(run->error, sizeof(run->error),
                                 "rank %u was killed by signal %d (%s) without a report", r,
                                 WTERMSIG(status), strsignal(WTERMSIG(status)));
                    else
                        snprintf(run->error, sizeof(run->error),
                                 "rank %u exited with status %d without a report", r,
                                 WEXITSTATUS(status));
                }
            } else if (now - c->last_heard_ns > idle_limit_ns) {
                run->failed = 1;
                snprintf(run->error, sizeof(run->error),
                         "rank %u said nothing for %.0f s: killed", r,
                         (double)(now - c->last_heard_ns) / 1e9);
            }
        }
    }
    free(pfd);
    for (uint32_t r = 0; r < W; r++)
        if (ch[r].fd > 0)
            close(ch[r].fd);
    kill_children(ch, W);
    free(ch);
    kill(sw, SIGTERM);
    waitpid(sw, NULL, 0);
    return run->failed ? -1 : 0;
}

/* ---- the MPI backend ---------------------------------------------------------------------- */

typedef struct mpi_ctx {
    run_t *run;
} mpi_ctx_t;

static int mpi_line(const char *line, void *arg)
{
    mpi_ctx_t *m = arg;
    glm_line_t l;
    if (glm_line_parse(line, &l) == GLM_LINE_NONE) {
        clear_bar(m->run);
        fprintf(stderr, "%s\n", line); /* something else the program or MPI printed */
        return 0;
    }
    return handle_line(m->run, &l, -1) == 0 ? 0 : 1;
}

static int run_mpi(const train_opts_t *o, run_t *run)
{
    char prog[4096];
    if (baseline_mpi_find_named("inagg-mpi-train", "INAGG_MPI_TRAIN", prog, sizeof(prog)) != 0) {
        snprintf(run->error, sizeof(run->error),
                 "--backend mpi needs the program '%.1000s', which is missing or not executable (it "
                 "is built by `make` when mpicc is installed: apt-get install openmpi-bin "
                 "libopenmpi-dev; $INAGG_MPI_TRAIN overrides the path)",
                 prog[0] ? prog : "inagg-mpi-train");
        run->failed = 1;
        return -1;
    }
    char batch[32], mb[32], epochs[32], lr[64], l2[64], prec[16], seed[32];
    snprintf(batch, sizeof(batch), "%zu", o->cfg.batch);
    snprintf(mb, sizeof(mb), "%zu", o->cfg.micro_batch);
    snprintf(epochs, sizeof(epochs), "%u", o->cfg.epochs);
    snprintf(lr, sizeof(lr), "%.17g", o->cfg.lr);
    snprintf(l2, sizeof(l2), "%.17g", o->cfg.l2);
    snprintf(prec, sizeof(prec), "%d", o->precision);
    snprintf(seed, sizeof(seed), "%llu", (unsigned long long)o->cfg.seed);
    const char *args[40];
    size_t a = 0;
    args[a++] = o->data ? "--data" : "--synthetic";
    args[a++] = o->data ? o->data : o->synthetic;
    if (o->test) {
        args[a++] = "--test-data";
        args[a++] = o->test;
    }
    args[a++] = "--mode";
    args[a++] = glm_mode_name(o->cfg.mode);
    args[a++] = "--objective";
    args[a++] = glm_objective_name(o->cfg.objective);
    args[a++] = "--batch";
    args[a++] = batch;
    args[a++] = "--micro-batch";
    args[a++] = mb;
    args[a++] = "--epochs";
    args[a++] = epochs;
    if (o->lr_given) {
        args[a++] = "--lr";
        args[a++] = lr;
    }
    args[a++] = "--lr-schedule";
    args[a++] = o->cfg.schedule == GLM_LR_SQRT ? "sqrt" : "const";
    if (o->l2_given) {
        args[a++] = "--l2";
        args[a++] = l2;
    }
    if (!o->cfg.pipeline)
        args[a++] = "--no-pipeline";
    if (o->cfg.optimizer) {
        args[a++] = "--optimizer";
        args[a++] = optim_kind_name((optim_kind_t)(o->cfg.optimizer - 1));
        args[a++] = "--eps-place";
        args[a++] = o->cfg.eps_outside ? "outside" : "inside";
    }
    args[a++] = "--precision";
    args[a++] = prec;
    args[a++] = "--seed";
    args[a++] = seed;
    args[a] = NULL;
    mpi_ctx_t m = {run};
    struct baseline_mpi_exec_params p = {o->workers, prog, args, MPI_TIME_LIMIT_S, mpi_line, &m};
    char err[1024];
    int code = -1;
    int rc = baseline_mpi_exec(&p, &code, err, sizeof(err));
    if (run->failed)
        return -1; /* a rank's own error line says more than mpirun's stderr */
    if (rc != 0) {
        run->failed = 1;
        snprintf(run->error, sizeof(run->error), "MPI run failed: %s", err);
        return -1;
    }
    if (run->done == 0) {
        run->failed = 1;
        snprintf(run->error, sizeof(run->error),
                 "the MPI run ended without its final report (%u of %u epochs)", run->nepochs,
                 o->cfg.epochs);
        return -1;
    }
    return 0;
}

/* ---- the command ---------------------------------------------------------------------------- */

int cmd_train(int argc, char **argv)
{
    train_opts_t o;
    memset(&o, 0, sizeof(o));
    glm_train_config_t def = GLM_TRAIN_CONFIG_INIT;
    o.cfg = def;
    o.workers = DEFAULT_WORKERS;
    o.protocol = -1;
    o.precision = 32;
    o.rank = o.world = -1;
    o.timeout_ms = DEFAULT_TIMEOUT_MS;
    int prc = parse_args(argc, argv, &o);
    if (prc)
        return prc == 1 ? 0 : prc;
    signal(SIGPIPE, SIG_IGN);
    log_init(LOG_WARN, "inagg"); /* the embedded switch: no per-job chatter ($INAGG_LOG wins) */

    run_t run;
    memset(&run, 0, sizeof(run));
    run.o = &o;
    run.world = o.workers;
    run.t_start = util_now_ns();
    int json_stdout = o.json_path && strcmp(o.json_path, "-") == 0;
    run.human = json_stdout ? stderr : stdout;
    int is_rank0 = !o.switch_addr || o.rank == 0;
    run.tty = isatty(STDERR_FILENO) && is_rank0;

    if (o.plot_path) {
        char g[4096];
        if (find_in_path("gnuplot", g, sizeof(g)) != 0) {
            fprintf(stderr, "inagg train: --plot needs gnuplot, which is not installed (e.g. "
                            "apt-get install gnuplot-nox)\n");
            return 1;
        }
    }
    if (is_rank0)
        print_header(&run);

    int rc;
    if (o.cfg.mode == GLM_MODE_SINGLE) {
        worker_ctx_t w = {&run, -1, 0, 0};
        rc = worker_main(&o, 0, 1, NULL, NULL, &w) == 0 && !run.failed ? 0 : -1;
    } else if (o.backend_mpi) {
        rc = run_mpi(&o, &run);
    } else if (o.switch_addr) {
        /* One rank here; rank 0 renders, the others only report failure. */
        if (!is_rank0)
            run.human = fopen("/dev/null", "w");
        if (!run.human)
            run.human = stderr;
        worker_ctx_t w = {&run, -1, (uint32_t)o.rank, 0};
        rc = worker_main(&o, (uint32_t)o.rank, (uint32_t)o.world, o.switch_addr,
                         o.job ? o.job : "train", &w) ==
                     0 && !run.failed
                 ? 0
                 : -1;
    } else {
        rc = run_local(&o, &run);
    }
    double total_s = (double)(util_now_ns() - run.t_start) / 1e9;
    if (rc != 0 || run.failed) {
        clear_bar(&run);
        fprintf(stderr, "inagg train: %s\n", run.error[0] ? run.error : "training failed");
        if (run.human != stdout && run.human != stderr)
            fclose(run.human);
        free(run.epochs);
        return 1;
    }
    int out = 0;
    if (is_rank0) {
        summary(&run, total_s);
        if (o.json_path && write_json(&run, total_s) != 0)
            out = 1;
        if (o.plot_path && write_plot(&run) != 0)
            out = 1;
    }
    if (run.human != stdout && run.human != stderr)
        fclose(run.human);
    free(run.epochs);
    return out;
}
