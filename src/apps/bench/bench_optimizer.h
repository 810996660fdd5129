/*
 * bench_optimizer.h - the run of `inagg bench optimizer`: its options, its jobs (in-switch,
 * allreduce+local, sum-only, allreduce+torch.optim), what a run measures, and the run itself
 * (bench_optimizer.c). The command's parsing and rendering are cli/cmd_bench_optimizer.c.
 */
#ifndef INAGG_BENCH_BENCH_OPTIMIZER_H
#define INAGG_BENCH_BENCH_OPTIMIZER_H

#include <stdint.h>

#include "inagg.h"
#include "lib/kernels/optim.h"

#define OPTB_MAX_SAMPLE 200000u

enum optb_run { RUN_IN_SWITCH = 0, RUN_LOCAL, RUN_SUM_ONLY, RUN_TORCH, RUN_COUNT };
extern const char *const optb_run_names[RUN_COUNT];

typedef struct optb_opts {
    optim_config_t oc;
    uint32_t workers, steps, warmup, packet_elems, window, timeout_ms;
    uint64_t elems, seed;
    inagg_protocol_t protocol;
    double loss;
    const char *faults, *switch_addr, *json_path, *baseline;
    char faults_buf[160]; /* the spec --loss stands for */
} optb_opts_t;

typedef struct optb_result {
    int verified;
    int nruns; /* runs made: RUN_TORCH, or RUN_COUNT with the torch baseline */
    enum optb_run base_run; /* the speedup's baseline */
    double pps[RUN_COUNT]; /* updated parameters per second */
    double speedup;
    const char *ref_name; /* the reference verified against, or "none" */
    double max_rel;
    uint32_t ns; /* parameters checked */
} optb_result_t;

/* The memory the run allocates on this machine for o->elems parameters, bytes, in its most
 * demanding job: each worker's gradient, parameters and (allreduce+local) optimizer state, or
 * (in-switch) the workers' gradients and parameters and, with no --switch, the embedded
 * switch's parameters and state. */
uint64_t optb_memory_bytes(const optb_opts_t *o);

/* The three jobs (four with --baseline torch) in turn, then the verification. 0 with res
 * filled, or -1 after a message. */
int optb_run(const optb_opts_t *o, optb_result_t *res);

#endif /* INAGG_BENCH_BENCH_OPTIMIZER_H */
