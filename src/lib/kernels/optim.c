/*
 * optim.c - the optimizer kernels of optim.h (SGD, Adagrad, Adam, SMORMS3): per-call constants
 * prepared once, a scalar implementation of each kernel, an AVX2 one (compiled per function
 * with the target attribute, like vec.c) that runs the same float32 operations lane by lane
 * on whole groups of 8, and the run-time dispatch, which hands the tail (< 8 elements) to the
 * scalar kernels.
 */

/* No FMA contraction anywhere in this file, whatever the build flags (-std=gnu11 and -mfma or
   -march=native would otherwise let GCC fuse a*b+c, and clang fuses within an expression by
   default): the scalar and AVX2 paths must round every operation the same way. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "lib/kernels/optim.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <strings.h>

#include "lib/base/errmsg.h"
#include "lib/base/util.h"

#if defined(__x86_64__) || defined(__i386__)
#define OPTIM_HAVE_AVX2 1
#include <immintrin.h>
#else
#define OPTIM_HAVE_AVX2 0
#endif

/* ---- state ---- */

unsigned optim_state_words(const optim_config_t *c)
{
    switch (c->kind) {
        case OPTIM_SGD: return c->momentum != 0.0f ? 1u : 0u;
        case OPTIM_ADAGRAD: return 1;
        case OPTIM_ADAM: return 2;
        case OPTIM_SMORMS3: return 3;
    }
    return 0;
}

void optim_state_init(const optim_config_t *c, float *state, size_t n)
{
    size_t words = optim_state_words(c);
    for (size_t i = 0; i < words * n; i++)
        state[i] = 0.0f;
    if (c->kind == OPTIM_ADAGRAD) {
        for (size_t i = 0; i < n; i++)
            state[i] = c->initial_accumulator;
    } else if (c->kind == OPTIM_SMORMS3) {
        for (size_t i = 0; i < n; i++)
            state[i] = 1.0f; /* mem */
    }
}

/* ---- per-call constants, shared by both paths so they see the very same floats ---- */

struct prep {
    float lr, eps, wd, mom;
    float b1, omb1, b2, omb2; /* beta and 1 - beta (exact in float for beta in [0.5, 1)) */
    float bc1, bc2; /* Adam: 1 - beta^t, in double then rounded once */
    int has_wd, has_mom, first, inside;
};

static void prepare(const optim_config_t *c, uint64_t step, struct prep *k)
{
    if (step == 0)
        step = 1;
    k->lr = c->lr;
    k->eps = c->eps;
    k->wd = c->weight_decay;
    k->mom = c->momentum;
    k->b1 = c->beta1;
    k->omb1 = 1.0f - c->beta1;
    k->b2 = c->beta2;
    k->omb2 = 1.0f - c->beta2;
    k->bc1 = 1.0f;
    k->bc2 = 1.0f;
    if (c->kind == OPTIM_ADAM) {
        /* pow of a double to a double exponent: exact integer exponents up to 2^53. */
        k->bc1 = (float)(1.0 - pow((double)c->beta1, (double)step));
        k->bc2 = (float)(1.0 - pow((double)c->beta2, (double)step));
    }
    k->has_wd = c->weight_decay != 0.0f;
    k->has_mom = c->momentum != 0.0f;
    k->first = step == 1;
    k->inside = c->eps_placement == OPTIM_EPS_INSIDE;
}

/* ---- scalar kernels: one element at a time, every operation a float32 operation ---- */

static inline float scalar_grad(const struct prep *k, float g, float p)
{
    return k->has_wd ? g + k->wd * p : g;
}

static inline float scalar_denom(const struct prep *k, float v)
{
    return k->inside ? sqrtf(v + k->eps) : sqrtf(v) + k->eps;
}

static void scalar_sgd(const struct prep *k, float *p, float *buf, const float *g, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float gi = scalar_grad(k, g[i], p[i]);
        if (k->has_mom) {
            gi = k->first ? gi : k->mom * buf[i] + gi;
            buf[i] = gi;
        }
        p[i] = p[i] - k->lr * gi;
    }
}

static void scalar_adagrad(const struct prep *k, float *p, float *acc, const float *g, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float gi = scalar_grad(k, g[i], p[i]);
        float a = acc[i] + gi * gi;
        acc[i] = a;
        p[i] = p[i] - k->lr * (gi / scalar_denom(k, a));
    }
}

static void scalar_adam(const struct prep *k, float *p, float *m, float *v, const float *g,
                        size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float gi = scalar_grad(k, g[i], p[i]);
        float mi = k->b1 * m[i] + k->omb1 * gi;
        float vi = k->b2 * v[i] + k->omb2 * (gi * gi);
        m[i] = mi;
        v[i] = vi;
        float mh = mi / k->bc1;
        float vh = vi / k->bc2;
        p[i] = p[i] - k->lr * (mh / scalar_denom(k, vh));
    }
}

static void scalar_smorms3(const struct prep *k, float *p, float *mem, float *g1, float *g2,
                           const float *g, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float gi = scalar_grad(k, g[i], p[i]);
        float r = 1.0f / (mem[i] + 1.0f);
        float omr = 1.0f - r;
        float a = omr * g1[i] + r * gi;
        float b = omr * g2[i] + r * (gi * gi);
        float x = (a * a) / (b + k->eps);
        float lx = x < k->lr ? x : k->lr; /* as _mm256_min_ps(x, lr), NaN x gives lr */
        g1[i] = a;
        g2[i] = b;
        p[i] = p[i] - (lx / scalar_denom(k, b)) * gi;
        mem[i] = 1.0f + (1.0f - x) * mem[i];
    }
}

/* One family of kernels (scalar or AVX2), one per optimizer kind. */
struct optim_kernels {
    void (*sgd)(const struct prep *k, float *p, float *buf, const float *g, size_t n);
    void (*adagrad)(const struct prep *k, float *p, float *acc, const float *g, size_t n);
    void (*adam)(const struct prep *k, float *p, float *m, float *v, const float *g, size_t n);
    void (*smorms3)(const struct prep *k, float *p, float *mem, float *g1, float *g2,
                    const float *g, size_t n);
};

static const struct optim_kernels scalar_kernels = {scalar_sgd, scalar_adagrad, scalar_adam,
                                                    scalar_smorms3};

/* Elements [from, to) of one step with the family's kernel for c's kind; the state words are
 * laid out per kind (optim_state_words: momentum; accumulator; m, v; mem, g1, g2), n floats
 * each. */
static void run_step(const struct optim_kernels *kt, const optim_config_t *c, const struct prep *k,
                     float *params, float *state, const float *g, size_t n, size_t from, size_t to)
{
    float *p = params + from;
    const float *gf = g + from;
    size_t len = to - from;
    switch (c->kind) {
        case OPTIM_SGD: kt->sgd(k, p, k->has_mom ? state + from : NULL, gf, len); break;
        case OPTIM_ADAGRAD: kt->adagrad(k, p, state + from, gf, len); break;
        case OPTIM_ADAM: kt->adam(k, p, state + from, state + n + from, gf, len); break;
        case OPTIM_SMORMS3:
            kt->smorms3(k, p, state + from, state + n + from, state + 2 * n + from, gf, len);
            break;
    }
}

/* ---- AVX2 kernels: 8 lanes per iteration, the same operations in the same order; n is a
 * multiple of 8 (optim_step runs the rest through the scalar kernels) ---- */

#if OPTIM_HAVE_AVX2
#define AVX2_FN __attribute__((target("avx2")))

/* The step's scalars in all 8 lanes, broadcast once per kernel call (a kernel's unused ones
 * are dropped by the compiler). */
struct lanes {
    __m256 lr, wd, eps, mom, b1, omb1, b2, omb2, bc1, bc2, one;
};

AVX2_FN static inline struct lanes avx2_lanes(const struct prep *k)
{
    return (struct lanes){.lr = _mm256_set1_ps(k->lr),
                          .wd = _mm256_set1_ps(k->wd),
                          .eps = _mm256_set1_ps(k->eps),
                          .mom = _mm256_set1_ps(k->mom),
                          .b1 = _mm256_set1_ps(k->b1),
                          .omb1 = _mm256_set1_ps(k->omb1),
                          .b2 = _mm256_set1_ps(k->b2),
                          .omb2 = _mm256_set1_ps(k->omb2),
                          .bc1 = _mm256_set1_ps(k->bc1),
                          .bc2 = _mm256_set1_ps(k->bc2),
                          .one = _mm256_set1_ps(1.0f)};
}

AVX2_FN static inline __m256 avx2_grad(const struct prep *k, const struct lanes *vk, __m256 g,
                                       __m256 p)
{
    return k->has_wd ? _mm256_add_ps(g, _mm256_mul_ps(vk->wd, p)) : g;
}

AVX2_FN static inline __m256 avx2_denom(const struct prep *k, const struct lanes *vk, __m256 v)
{
    return k->inside ? _mm256_sqrt_ps(_mm256_add_ps(v, vk->eps))
                     : _mm256_add_ps(_mm256_sqrt_ps(v), vk->eps);
}

AVX2_FN static void avx2_sgd(const struct prep *k, float *p, float *buf, const float *g, size_t n)
{
    const struct lanes vk = avx2_lanes(k);
    for (size_t i = 0; i < n; i += 8) {
        __m256 pi = _mm256_loadu_ps(p + i);
        __m256 gi = avx2_grad(k, &vk, _mm256_loadu_ps(g + i), pi);
        if (k->has_mom) {
            if (!k->first)
                gi = _mm256_add_ps(_mm256_mul_ps(vk.mom, _mm256_loadu_ps(buf + i)), gi);
            _mm256_storeu_ps(buf + i, gi);
        }
        _mm256_storeu_ps(p + i, _mm256_sub_ps(pi, _mm256_mul_ps(vk.lr, gi)));
    }
}

AVX2_FN static void avx2_adagrad(const struct prep *k, float *p, float *acc, const float *g,
                                 size_t n)
{
    const struct lanes vk = avx2_lanes(k);
    for (size_t i = 0; i < n; i += 8) {
        __m256 pi = _mm256_loadu_ps(p + i);
        __m256 gi = avx2_grad(k, &vk, _mm256_loadu_ps(g + i), pi);
        __m256 a = _mm256_add_ps(_mm256_loadu_ps(acc + i), _mm256_mul_ps(gi, gi));
        _mm256_storeu_ps(acc + i, a);
        __m256 u = _mm256_mul_ps(vk.lr, _mm256_div_ps(gi, avx2_denom(k, &vk, a)));
        _mm256_storeu_ps(p + i, _mm256_sub_ps(pi, u));
    }
}

AVX2_FN static void avx2_adam(const struct prep *k, float *p, float *m, float *v, const float *g,
                              size_t n)
{
    const struct lanes vk = avx2_lanes(k);
    for (size_t i = 0; i < n; i += 8) {
        __m256 pi = _mm256_loadu_ps(p + i);
        __m256 gi = avx2_grad(k, &vk, _mm256_loadu_ps(g + i), pi);
        __m256 mi =
            _mm256_add_ps(_mm256_mul_ps(vk.b1, _mm256_loadu_ps(m + i)), _mm256_mul_ps(vk.omb1, gi));
        __m256 vi = _mm256_add_ps(_mm256_mul_ps(vk.b2, _mm256_loadu_ps(v + i)),
                                  _mm256_mul_ps(vk.omb2, _mm256_mul_ps(gi, gi)));
        _mm256_storeu_ps(m + i, mi);
        _mm256_storeu_ps(v + i, vi);
        __m256 mh = _mm256_div_ps(mi, vk.bc1);
        __m256 vh = _mm256_div_ps(vi, vk.bc2);
        __m256 u = _mm256_mul_ps(vk.lr, _mm256_div_ps(mh, avx2_denom(k, &vk, vh)));
        _mm256_storeu_ps(p + i, _mm256_sub_ps(pi, u));
    }
}

AVX2_FN static void avx2_smorms3(const struct prep *k, float *p, float *mem, float *g1, float *g2,
                                 const float *g, size_t n)
{
    const struct lanes vk = avx2_lanes(k);
    const __m256 one = vk.one;
    for (size_t i = 0; i < n; i += 8) {
        __m256 pi = _mm256_loadu_ps(p + i);
        __m256 gi = avx2_grad(k, &vk, _mm256_loadu_ps(g + i), pi);
        __m256 mi = _mm256_loadu_ps(mem + i);
        __m256 r = _mm256_div_ps(one, _mm256_add_ps(mi, one));
        __m256 omr = _mm256_sub_ps(one, r);
        __m256 a = _mm256_add_ps(_mm256_mul_ps(omr, _mm256_loadu_ps(g1 + i)), _mm256_mul_ps(r, gi));
        __m256 b = _mm256_add_ps(_mm256_mul_ps(omr, _mm256_loadu_ps(g2 + i)),
                                 _mm256_mul_ps(r, _mm256_mul_ps(gi, gi)));
        __m256 x = _mm256_div_ps(_mm256_mul_ps(a, a), _mm256_add_ps(b, vk.eps));
        __m256 lx = _mm256_min_ps(x, vk.lr); /* (x < lr) ? x : lr, per lane */
        _mm256_storeu_ps(g1 + i, a);
        _mm256_storeu_ps(g2 + i, b);
        __m256 u = _mm256_mul_ps(_mm256_div_ps(lx, avx2_denom(k, &vk, b)), gi);
        _mm256_storeu_ps(p + i, _mm256_sub_ps(pi, u));
        _mm256_storeu_ps(mem + i, _mm256_add_ps(one, _mm256_mul_ps(_mm256_sub_ps(one, x), mi)));
    }
}

static const struct optim_kernels avx2_kernels = {avx2_sgd, avx2_adagrad, avx2_adam, avx2_smorms3};
#endif /* OPTIM_HAVE_AVX2 */

/* ---- dispatch ---- */

static pthread_once_t g_detect_once = PTHREAD_ONCE_INIT;
static int g_use_avx2; /* written once, under g_detect_once */

static void optim_detect(void)
{
#if OPTIM_HAVE_AVX2
    __builtin_cpu_init();
    g_use_avx2 = __builtin_cpu_supports("avx2") != 0;
#endif
}

static int use_avx2(void)
{
    pthread_once(&g_detect_once, optim_detect);
    return g_use_avx2;
}

const char *optim_impl_name(void) { return use_avx2() ? "avx2" : "scalar"; }

void optim_step_scalar(const optim_config_t *c, float *params, float *state, const float *g,
                       size_t n, uint64_t step)
{
    struct prep k;
    prepare(c, step, &k);
    run_step(&scalar_kernels, c, &k, params, state, g, n, 0, n);
}

void optim_step(const optim_config_t *c, float *params, float *state, const float *g, size_t n,
                uint64_t step)
{
    struct prep k;
    prepare(c, step, &k);
    size_t vec = 0; /* elements the AVX2 kernels step: whole groups of 8 */
#if OPTIM_HAVE_AVX2
    if (use_avx2()) {
        vec = n - n % 8;
        run_step(&avx2_kernels, c, &k, params, state, g, n, 0, vec);
    }
#endif
    run_step(&scalar_kernels, c, &k, params, state, g, n, vec, n);
}
