/*
 * optim.h - the optimizer kernels for the in-switch optimizer: SGD, Adagrad, Adam and SMORMS3
 * applied element-wise to a chunk of float32 parameters once its averaged gradient is known.
 * A pure library: no I/O, no allocation, no global state besides the one-time CPU detection.
 * Each kernel has a scalar and an AVX2 implementation, picked at run time from the CPU (like
 * vec.h); both give bit-identical results (see "Exactness" below).
 *
 * Paper: Itsubo et al., "An FPGA-Based Optimizer Design for Distributed Deep Learning with
 * Multiple GPUs" (IEICE 2021), Algorithms 1-4. Notation: p parameter, g the (averaged) gradient
 * handed in, t = step (1-based), wd = weight_decay, eps = eps, lr = lr.
 *
 * Every optimizer first applies L2 weight decay to the gradient, as PyTorch does (the paper
 * has none; wd = 0 reproduces the paper exactly and then skips the term entirely):
 *     g' = g + wd * p                                     (only when wd != 0)
 *
 * SGD (Algorithm 1; momentum as torch.optim.SGD with dampening 0, nesterov off):
 *     momentum == 0:  p = p - lr * g'
 *     momentum  > 0:  buf = (t == 1) ? g' : momentum * buf + g';   p = p - lr * buf
 *
 * Adagrad (Algorithm 2; h = acc, initialised to initial_accumulator):
 *     acc = acc + g'^2
 *     D   = sqrt(acc + eps)      OPTIM_EPS_INSIDE  (the paper: lr_t = lr / sqrt(h_t + eps))
 *         = sqrt(acc) + eps      OPTIM_EPS_OUTSIDE (torch.optim.Adagrad; its default eps is
 *                                                   1e-10, here eps always comes from config)
 *     p   = p - lr * (g' / D)
 *     torch's lr_decay is not supported (it equals lr_decay = 0).
 *
 * Adam (Algorithm 3):
 *     m = beta1 * m + (1 - beta1) * g'
 *     v = beta2 * v + (1 - beta2) * g'^2
 *     m_hat = m / bc1,  v_hat = v / bc2,   bc1 = 1 - beta1^t, bc2 = 1 - beta2^t
 *             (bc1, bc2 computed once per call in double, then rounded to float)
 *     D = sqrt(v_hat + eps)      OPTIM_EPS_INSIDE  (the paper)
 *       = sqrt(v_hat) + eps      OPTIM_EPS_OUTSIDE (torch.optim.Adam, amsgrad off; torch
 *                                 writes it sqrt(v)/sqrt(bc2) + eps, the same value in exact
 *                                 arithmetic)
 *     p = p - lr * (m_hat / D)
 *
 * SMORMS3 (Algorithm 4; state s = mem, m = g1, v = g2):
 *     rho = 1 / (mem + 1)
 *     g1  = (1 - rho) * g1 + rho * g'
 *     g2  = (1 - rho) * g2 + rho * g'^2
 *     x   = g1^2 / (g2 + eps)                       (eps inside here under both placements)
 *     D   = sqrt(g2 + eps)       OPTIM_EPS_INSIDE  (the paper)
 *         = sqrt(g2) + eps       OPTIM_EPS_OUTSIDE (Funk's original [10] and Chainer's
 *                                                   SMORMS3, which the paper ran on CPU/GPU)
 *     p   = p - (min(lr, x) / D) * g'
 *     mem = 1 + (1 - x) * mem                        (the paper's s_{t+1} = 1 + (1-x_t) s_t)
 *   The stored mem is the s used by the coming step and starts at 1. The paper writes s_0 = 1
 *   and updates s before use with x_{t-1}, but x_0 is undefined there; taking x_0 = 1 gives
 *   s_1 = 1, i.e. rho_1 = 1/2, which is what the paper's reference [10] and Chainer do. (With
 *   x_0 = 0 one would get s_1 = 2; not what any implementation does.) min(lr, x) is
 *   (x < lr) ? x : lr, so a NaN x gives lr on both paths.
 *
 * Exactness: every operation above is one IEEE-754 float32 operation (+ - * / sqrt, min) in
 * the order written, rounded to nearest; no FMA contraction (this module is compiled with
 * fp-contract off whatever the build flags), no reciprocal or rsqrt approximations, no
 * reassociation. The AVX2 path does the same operations lane by lane with correctly rounded
 * _mm256_div_ps / _mm256_sqrt_ps, so scalar and AVX2 results are bit-identical for all four
 * optimizers and all options (NaN payloads aside). Assumes the default floating-point
 * environment (round to nearest, no FTZ/DAZ).
 *
 * Accuracy against a reference: float32 parameters carry the rounding error of the largest
 * magnitude they reached, so an element that passes near zero after being near 1 keeps an
 * absolute error of ~1e-7 that is large relative to its final value. Compare with
 * max|p - p_ref| / max|p_ref| (or per element against the largest magnitude it reached), not
 * element by element against max(|p_ref|, small floor).
 *
 * State layout: optim_state_words(c) arrays of n floats each, back to back:
 *     SGD      [buf]            (only with momentum > 0; else no state)
 *     Adagrad  [acc]
 *     Adam     [m][v]
 *     SMORMS3  [mem][g1][g2]
 * params, state and g must not overlap. Pointers need only float alignment.
 */
#ifndef INAGG_OPTIM_H
#define INAGG_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "lib/base/optconf.h"

/* Float32 state words per parameter: SGD 0 (1 with momentum > 0), Adagrad 1, Adam 2,
   SMORMS3 3. */
unsigned optim_state_words(const optim_config_t *c);

/* Initialise the state of n parameters (n * optim_state_words(c) floats, layout above):
   SGD buf 0; Adagrad acc = initial_accumulator; Adam m = v = 0; SMORMS3 mem = 1, g1 = g2 = 0. */
void optim_state_init(const optim_config_t *c, float *state, size_t n);

/* One step on n parameters with the averaged gradient g; updates params and state in place.
   step is the 1-based iteration number (Adam's bias correction, SGD momentum's first step);
   step 0 is treated as 1. The config is assumed to pass optim_check. optim_step uses AVX2
   when the CPU has it, optim_step_scalar never does; the results are bit-identical. */
void optim_step(const optim_config_t *c, float *params, float *state, const float *g, size_t n,
                uint64_t step);
void optim_step_scalar(const optim_config_t *c, float *params, float *state, const float *g,
                       size_t n, uint64_t step);

/* "avx2" or "scalar": the implementation optim_step uses on this CPU. */
const char *optim_impl_name(void);

#endif /* INAGG_OPTIM_H */
