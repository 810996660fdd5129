/*
 * bench_compress.h - the run of `inagg bench compress`: GCOW's grid of ZFP modes and fp16 on
 * generated gradient-like data and on captured gradients (--input), coded chunk by chunk as
 * the aggregation path codes them, on one thread and on --threads; each mode's ratio, speed
 * and errors, and its difference from an offline libzfp round trip of the whole array. The
 * command's parsing and rendering are cli/cmd_bench_compress.c.
 */
#ifndef INAGG_BENCH_BENCH_COMPRESS_H
#define INAGG_BENCH_BENCH_COMPRESS_H

#include <stddef.h>
#include <stdint.h>

#define BC_CMD "inagg bench compress"
#define BC_MAX_THREADS 16
#define BC_MAX_INPUTS 64
#define BC_MAX_VALUES (1ull << 28) /* 1 GiB of float32 per data set */
#define BC_MIN_INPUT_VALUES 4096
#define BC_N_MODES 14
#define BC_N_DATA 3

/* The modes measured, and the data sets (generated normal and exponential, captured). */
extern const char *const bc_modes[BC_N_MODES];
extern const char *const bc_data[BC_N_DATA];

typedef struct bc_opts {
    size_t elems, chunk;
    uint32_t threads, repeats;
    uint64_t seed;
    int data_mask; /* bit 0 normal, bit 1 exponential, bit 2 captured (--input) */
    const char *inputs[BC_MAX_INPUTS];
    uint32_t ninputs;
    size_t captured; /* values read from the inputs */
    const char *json_path, *plot_path;
} bc_opts_t;

typedef struct bc_result {
    const char *mode, *data;
    size_t values;
    double ratio, bits_per_value;
    double enc_gbs[2], dec_gbs[2]; /* [0] one thread, [1] --threads */
    double max_err, rms_err; /* against the original */
    double ref_max_diff, ref_rms_diff; /* against the offline libzfp round trip (NaN: fp16) */
} bc_result_t;

/* The memory bc_run allocates for o->elems generated values (and o->captured ones), bytes:
 * the data set, its decoded copy, the offline reference, and the largest mode's codes. */
uint64_t bc_memory_bytes(const bc_opts_t *o);

/* Every mode on every data set of o->data_mask (bit 2, the captured values, set when
 * o->inputs are given: read here, their count into o->captured; data_given keeps the
 * generated sets then). *res: a new array of *n results (the caller frees it), also when a
 * mode failed or differed from libzfp's round trip. 0, or a negative errno after a message
 * (-ENOMEM, -EIO: a coding failure or a difference, -EINVAL: unreadable input). */
int bc_run(bc_opts_t *o, int data_given, bc_result_t **res, size_t *n);

#endif /* INAGG_BENCH_BENCH_COMPRESS_H */
