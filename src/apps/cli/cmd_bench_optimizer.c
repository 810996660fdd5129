/*
 * cmd_bench_optimizer.c - `inagg bench optimizer`: the in-switch optimizer against the
 * workers running it themselves.
 *
 * One embedded switch (or --switch) and N worker processes run three jobs in turn, each for
 * `--warmup` untimed and `--steps` timed steps over the same seeded gradients:
 *   in-switch        inagg_push_pull: the switch averages each chunk's gradients, applies the
 *                    optimizer and returns the new parameters (optimizer state lives once, in
 *                    the switch);
 *   allreduce+local  inagg_allreduce of the gradients (float32 native), then every worker
 *                    averages and runs the same optimizer on its own copy (kernels/optim.h, the
 *                    C kernels with torch.optim's semantics) - the usual data-parallel setup;
 *   sum-only         inagg_allreduce alone: what the switch costs without any optimizer;
 *   allreduce+torch.optim (with --baseline torch, for SGD/AdaGrad/Adam with epsilon outside,
 *                    when python3-torch is installed): as allreduce+local, but every worker's
 *                    step is torch.optim's, run by a helper process per worker
 *                    (tools/torch_worker.py) on parameters and gradients in memory shared
 *                    with the worker (no copies); this is then the baseline of the speedup.
 * Updated parameters per second = elems * steps / (slowest rank's time for the timed steps).
 * Verification: the gradients are multiples of 1/8, so their sums are exact in any order; the
 * in-switch and allreduce+local parameters must be bit-identical, and both are compared with a
 * reference run of the same steps by tools/optim_reference.py: PyTorch's torch.optim (SGD,
 * AdaGrad, Adam, epsilon outside the root) with --baseline torch when python3-torch is
 * installed, otherwise its straightforward double-precision implementation (always for SMORMS3
 * and for epsilon inside). Large vectors are checked on an evenly spaced sample (the
 * optimizers are element-wise). max_rel_err = max |p - p_ref| / max |p_ref|.
 */
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "apps/bench/bench_optimizer.h"
#include "apps/bench/harness.h"
#include "apps/cli/bench_opts.h"
#include "apps/cli/commands.h"
#include "apps/cli/flags.h"
#include "apps/cli/output.h"
#include "apps/launch/launch.h"
#include "lib/json/json.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: inagg bench optimizer [options]\n"
            "\n"
            "The in-switch optimizer: N workers push seeded gradients of --elems parameters for\n"
            "--steps steps; the switch averages them, applies the optimizer per chunk and\n"
            "returns the parameters. Compared in the same run with the workers allreducing\n"
            "the gradients through the switch and each running the optimizer on its own copy\n"
            "(allreduce+local, the baseline) and with the allreduce alone (sum-only). Prints\n"
            "updated parameters per second and speedup = in-switch / allreduce+local. The final\n"
            "parameters are verified against a reference run of the same steps\n"
            "(tools/optim_reference.py: torch.optim with --baseline torch when python3-torch is\n"
            "installed, else a straightforward double-precision implementation).\n"
            "\n"
            "options:\n"
            "  --optimizer O        sgd, adagrad, adam (default) or smorms3\n"
            "  --elems E            parameters (default 1000000); refused (exit 2) when the\n"
            "                       workers would need more memory than is available\n"
            "  --workers N          worker processes (default 4)\n"
            "  --steps K            timed steps (default 10)\n"
            "  --warmup W           untimed steps first (default 1)\n"
            "  --lr F               learning rate (default 0.001)\n"
            "  --eps-place P        outside (sqrt(v) + eps, PyTorch's; default here so torch can\n"
            "                       check it) or inside (the paper's)\n"
            "  --protocol P         switchml (default) or p4sgd\n"
            "  --packet-elems K     parameters per packet/chunk (default 16360)\n"
            "  --window S           slots (default 16)\n"
            "  --loss P             drop each packet with probability P in the workers (seeded)\n"
            "  --faults SPEC        full fault spec for the workers\n"
            "  --baseline B         torch: every worker also runs torch.optim after the\n"
            "                       allreduce (allreduce+torch.optim, then the baseline of the\n"
            "                       speedup; SGD, AdaGrad, Adam with --eps-place outside), and\n"
            "                       torch.optim is the reference; none: the baseline is\n"
            "                       allreduce + the C kernels and the reference is the\n"
            "                       double-precision implementation\n"
            "  --switch HOST:PORT   use a running switch\n"
            "  --timeout-ms MS      per-call progress timeout (default 30000)\n"
            "  --seed S             gradients (default 1)\n"
            "  --json FILE|-        one JSON object: optimizer, elems, workers, steps, verified,\n"
            "                       reference, max_rel_err, params_per_s, baseline {name,\n"
            "                       params_per_s}, speedup, local_c {params_per_s}, sum_only\n"
            "                       {params_per_s}\n"
            "  -h, --help           this text\n"
            "\n"
            "example:\n"
            "  inagg bench optimizer --optimizer adam --elems 1000000 --workers 4 --baseline torch "
            "--json -\n");
}

#define OPTB_CMD "inagg bench optimizer"

/* ---- parse ------------------------------------------------------------------------------ */

/* --lr: a positive number. 0, or 2 after a message. */
static int parse_lr(const char *text, optb_opts_t *o)
{
    char *end;
    double d = strtod(text, &end);
    if (end == text || *end || !(d > 0) || !isfinite(d)) {
        fprintf(stderr, OPTB_CMD ": --lr needs a positive number\n");
        return 2;
    }
    o->oc.lr = (float)d;
    return 0;
}

/* The optimizer benchmark's own flags (bench_own_flag_fn). */
static int parse_own_flag(void *ctx, int c)
{
    optb_opts_t *o = ctx;
    uint64_t v;
    switch (c) {
        case 'O':
            if (optim_parse_kind(optarg, &o->oc.kind) != 0) {
                fprintf(stderr, OPTB_CMD ": --optimizer must be sgd, adagrad, adam or smorms3\n");
                return 2;
            }
            return 0;
        case 'E':
            if (optim_parse_eps(optarg, &o->oc.eps_placement) != 0) {
                fprintf(stderr, OPTB_CMD ": --eps-place must be inside or outside\n");
                return 2;
            }
            return 0;
        case 'g': return parse_lr(optarg, o);
        case 'k':
            return cli_parse_u32(OPTB_CMD, "--steps", optarg, 1, 100000, &o->steps) < 0 ? 2 : 0;
        case 'e':
            if (cli_parse_u64(OPTB_CMD, "--elems", optarg, 1, 1ull << 30, &v) < 0)
                return 2;
            o->elems = v;
            return 0;
        case 'p':
            return cli_parse_u32(OPTB_CMD, "--packet-elems", optarg, 1, INAGG_MAX_PACKET_ELEMS,
                                 &o->packet_elems) < 0
                       ? 2
                       : 0;
        case 's':
            return cli_parse_u32(OPTB_CMD, "--window", optarg, 1, 4096, &o->window) < 0 ? 2 : 0;
        default: return -1;
    }
}

/* The optimizer's settings checked together, then the workers' fault spec (bench_check_fn). */
static int check_flags(void *ctx, const bench_opts_t *b, char *why, size_t whylen)
{
    (void)b;
    optb_opts_t *o = ctx;
    int rc = optim_check(&o->oc, why, whylen);
    if (rc < 0)
        return rc;
    o->faults =
        bench_worker_faults(o->faults, o->loss, o->seed, o->faults_buf, sizeof(o->faults_buf));
    return 0;
}

/* The options with their defaults, then argv's. 0, 1 after --help, 2 after a usage error
 * (its message printed). */
static int parse_args(int argc, char **argv, optb_opts_t *o)
{
    *o = (optb_opts_t){BENCH_OPTS_DEFAULTS,
                       .steps = 10,
                       .warmup = 1,
                       .packet_elems = INAGG_MAX_PACKET_ELEMS,
                       .window = 16,
                       .elems = 1000000,
                       .protocol = INAGG_PROTO_SWITCHML,
                       .baseline = "none"};
    optim_config_t dflt = OPTIM_CONFIG_INIT;
    o->oc = dflt;
    o->oc.kind = OPTIM_ADAM;
    o->oc.lr = 0.001f;
    o->oc.eps_placement = OPTIM_EPS_OUTSIDE;
    bench_opts_t b = {.cmd = OPTB_CMD,
                      .workers = &o->workers,
                      .warmup = &o->warmup,
                      .warmup_max = 100000,
                      .seed = &o->seed,
                      .seed_max = UINT32_MAX,
                      .timeout_ms = &o->timeout_ms,
                      .json_path = &o->json_path,
                      .switch_addr = &o->switch_addr,
                      .protocol = &o->protocol,
                      .loss = &o->loss,
                      .faults = &o->faults,
                      .baseline = &o->baseline,
                      .baseline_name = "torch",
                      .check = check_flags};
    static const struct option own[] = {
        {"optimizer", required_argument, 0, 'O'}, {"elems", required_argument, 0, 'e'},
        {"steps", required_argument, 0, 'k'},     {"lr", required_argument, 0, 'g'},
        {"eps-place", required_argument, 0, 'E'}, {"packet-elems", required_argument, 0, 'p'},
        {"window", required_argument, 0, 's'},    {0, 0, 0, 0}};
    return bench_opts_parse(&b, argc, argv, own, parse_own_flag, o, usage);
}

/* ---- render --------------------------------------------------------------------------------- */

static void render_text(FILE *table, const optb_opts_t *o, const optb_result_t *r)
{
    fprintf(table,
            "inagg optimizer: %s (eps %s), %llu parameters, %u workers, %u steps, %s, "
            "%s\n",
            optim_kind_name(o->oc.kind), optim_eps_name(o->oc.eps_placement),
            (unsigned long long)o->elems, o->workers, o->steps,
            o->protocol == INAGG_PROTO_P4SGD ? "p4sgd" : "switchml",
            o->faults ? o->faults : "no loss");
    fprintf(table,
            "  verified         %s (reference %s, max relative error %.3g, %u parameters "
            "checked)\n",
            r->verified ? "yes" : "NO", r->ref_name, r->max_rel, r->ns);
    for (int run = 0; run < r->nruns; run++)
        fprintf(table, "  %-22s %.4g parameters/s\n", optb_run_names[run], r->pps[run]);
    fprintf(table, "  speedup                %.2fx (in-switch / %s)\n", r->speedup,
            optb_run_names[r->base_run]);
}

/* The --json object. 0, or a negative errno when it could not be written. */
static int render_json(const optb_opts_t *o, const optb_result_t *r)
{
    json_writer_t w;
    json_init(&w);
    json_begin_object(&w, NULL);
    json_string(&w, "optimizer", optim_kind_name(o->oc.kind));
    json_string(&w, "eps_place", optim_eps_name(o->oc.eps_placement));
    json_int(&w, "elems", (int64_t)o->elems);
    json_int(&w, "workers", o->workers);
    json_int(&w, "steps", o->steps);
    json_string(&w, "protocol", o->protocol == INAGG_PROTO_P4SGD ? "p4sgd" : "switchml");
    json_number(&w, "loss", o->loss);
    json_bool(&w, "verified", r->verified);
    json_string(&w, "reference", r->ref_name);
    json_number(&w, "max_rel_err", r->max_rel);
    json_number(&w, "params_per_s", r->pps[RUN_IN_SWITCH]);
    json_begin_object(&w, "baseline");
    json_string(&w, "name", optb_run_names[r->base_run]);
    json_number(&w, "params_per_s", r->pps[r->base_run]);
    json_end_object(&w);
    json_begin_object(&w, "local_c");
    json_number(&w, "params_per_s", r->pps[RUN_LOCAL]);
    json_end_object(&w);
    json_number(&w, "speedup", r->speedup);
    json_begin_object(&w, "sum_only");
    json_number(&w, "params_per_s", r->pps[RUN_SUM_ONLY]);
    json_end_object(&w);
    json_end_object(&w);
    return cli_emit_json(&w, o->json_path, "inagg bench optimizer");
}

int cmd_bench_optimizer(int argc, char **argv)
{
    optb_opts_t o;
    int prc = parse_args(argc, argv, &o);
    if (prc)
        return prc == 1 ? 0 : prc;
    signal(SIGPIPE, SIG_IGN);
    char what[128], err[512];
    snprintf(what, sizeof(what), "%u workers of --elems %llu", o.workers,
             (unsigned long long)o.elems);
    if (launch_mem_check(optb_memory_bytes(&o), what, err, sizeof(err)) != 0) {
        fprintf(stderr, "inagg bench optimizer: %s; ask for fewer --elems or --workers\n", err);
        return 2;
    }
    optb_result_t res;
    if (optb_run(&o, &res) != 0)
        return 1;
    render_text(cli_text_stream(o.json_path), &o, &res);
    int json_rc = o.json_path ? render_json(&o, &res) : 0;
    return res.verified && json_rc == 0 ? 0 : 1;
}
