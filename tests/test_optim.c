/*
 * test_optim.c - the optimizer kernels of kernels/optim.h: the AVX2 and scalar paths give
 * bit-identical parameters and state over 100 steps for every optimizer and option; after 100
 * steps the float32 kernels stay within 1e-5 relative of a double-precision reference written
 * here (and, where parameters cross zero, within a few dozen float32 roundings of their largest
 * magnitude); hand-computed single steps pin every formula (signs, eps placement, bias
 * correction, SMORMS3's min and memory) even where the double reference could share a mistake;
 * no FMA contraction; config validation, name parsing, state size and initial values.
 * OPTIM_TEST_VERBOSE=1 prints the measured errors per configuration.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "lib/base/util.h"
#include "lib/kernels/optim.h"

#define NSTEPS 100

static const size_t k_ns[] = {1, 7, 8, 9, 1000, 1003};

/* ---- configurations: every optimizer x eps placement x momentum / weight decay ---- */

static optim_config_t make_cfg(optim_kind_t kind, optim_eps_t eps, float momentum, float wd)
{
    optim_config_t c = OPTIM_CONFIG_INIT;
    c.kind = kind;
    c.eps_placement = eps;
    c.momentum = kind == OPTIM_SGD ? momentum : 0.0f;
    c.weight_decay = wd;
    switch (kind) {
        case OPTIM_SGD: c.lr = 0.05f; break;
        case OPTIM_ADAGRAD:
            c.lr = 0.05f;
            c.eps = 1e-10f;
            c.initial_accumulator = wd != 0.0f ? 0.1f : 0.0f;
            break;
        case OPTIM_ADAM: c.lr = 0.01f; break;
        case OPTIM_SMORMS3: c.lr = 0.01f; break;
    }
    return c;
}

/* Fills cfgs with every combination; returns how many. */
static size_t all_cfgs(optim_config_t *cfgs, size_t cap)
{
    static const float moms[] = {0.0f, 0.9f};
    static const float wds[] = {0.0f, 0.01f};
    size_t n = 0;
    for (int k = 0; k < OPTIM_KIND_COUNT; k++)
        for (int e = 0; e < 2; e++)
            for (size_t mi = 0; mi < (k == OPTIM_SGD ? 2u : 1u); mi++)
                for (size_t wi = 0; wi < 2; wi++) {
                    CHECK(n < cap);
                    cfgs[n] = make_cfg((optim_kind_t)k, (optim_eps_t)e, moms[mi], wds[wi]);
                    char err[128];
                    CHECK_MSG(optim_check(&cfgs[n], err, sizeof(err)) == 0, "%s", err);
                    n++;
                }
    return n;
}

static void cfg_str(const optim_config_t *c, char *buf, size_t len)
{
    snprintf(buf, len, "%s eps=%s mom=%g wd=%g", optim_kind_name(c->kind),
             optim_eps_name(c->eps_placement), (double)c->momentum, (double)c->weight_decay);
}

/* ---- seeded data: initial parameters and per-step gradients ---- */

static float uniform(util_rng_t *r, float lo, float hi)
{
    return (float)(lo + (hi - lo) * util_rng_double(r));
}

/* away == 0: uniform in [-1, 1]. away != 0: magnitudes in [0.5, 1], either sign. */
static void init_params(float *p, size_t n, uint64_t seed, int away)
{
    util_rng_t r;
    util_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) {
        float u = uniform(&r, -1.0f, 1.0f);
        p[i] = away ? (u >= 0.0f ? 0.5f + 0.5f * u : -0.5f + 0.5f * u) : u;
    }
}

/* Gradients: noise in [-1, 1] plus a drift, times a per-element per-step magnitude spread over
   four decades (1e-3 .. 10), so the adaptive optimizers see both signal-dominated and
   noise-dominated elements and v both far above and near eps. p0 == NULL: a drift of +0.5 on
   every third element (many parameters cross zero). p0 != NULL: a drift of 0.5 on every
   element pointing away from zero (p -= lr*g moves |p| up), so no parameter ends near zero. */
static void gen_grad(util_rng_t *r, float *g, size_t n, const float *p0)
{
    for (size_t i = 0; i < n; i++) {
        float scale = powf(10.0f, uniform(r, -3.0f, 1.0f));
        float drift = p0 != NULL ? (p0[i] > 0.0f ? -0.5f : 0.5f) : (i % 3 == 0) ? 0.5f : 0.0f;
        g[i] = scale * (drift + uniform(r, -1.0f, 1.0f));
    }
}

/* ---- the vectorized path equals the scalar path, bit for bit ---- */

TEST(optim_avx2_matches_scalar, 20)
{
    if (strcmp(optim_impl_name(), "avx2") != 0)
        SKIP("no AVX2 on this CPU: optim_step is the scalar path");
    optim_config_t cfgs[32];
    size_t ncfg = all_cfgs(cfgs, INAGG_ARRAY_LEN(cfgs));
    size_t nmax = 1003 + 1;
    float *pa = malloc(nmax * 4), *pb = malloc(nmax * 4), *g = malloc(nmax * 4);
    float *sa = malloc(3 * nmax * 4), *sb = malloc(3 * nmax * 4);
    CHECK(pa && pb && g && sa && sb);
    for (size_t ci = 0; ci < ncfg; ci++) {
        const optim_config_t *c = &cfgs[ci];
        for (size_t ni = 0; ni < INAGG_ARRAY_LEN(k_ns); ni++) {
            size_t n = k_ns[ni];
            /* Every other case starts one float in, so the AVX2 loads are misaligned. */
            size_t off = ni & 1;
            float *p1 = pa + off, *p2 = pb + off, *s1 = sa + off, *s2 = sb + off;
            unsigned words = optim_state_words(c);
            init_params(p1, n, 1000 + ci, 0);
            memcpy(p2, p1, n * 4);
            optim_state_init(c, s1, n);
            optim_state_init(c, s2, n);
            util_rng_t r;
            util_rng_seed(&r, 77 + ni);
            for (uint64_t t = 1; t <= NSTEPS; t++) {
                gen_grad(&r, g + off, n, NULL);
                optim_step(c, p1, s1, g + off, n, t);
                optim_step_scalar(c, p2, s2, g + off, n, t);
            }
            char name[96];
            cfg_str(c, name, sizeof(name));
            size_t bad = n;
            for (size_t i = 0; i < n && bad == n; i++)
                if (memcmp(&p1[i], &p2[i], 4) != 0)
                    bad = i;
            CHECK_MSG(bad == n, "%s n=%zu: param %zu differs: avx2 %.9g scalar %.9g", name, n, bad,
                      bad < n ? (double)p1[bad] : 0.0, bad < n ? (double)p2[bad] : 0.0);
            CHECK_MSG(memcmp(s1, s2, (size_t)words * n * 4) == 0, "%s n=%zu: state differs", name,
                      n);
            for (size_t i = 0; i < n; i++)
                CHECK_MSG(isfinite(p1[i]), "%s n=%zu: param %zu not finite", name, n, i);
        }
    }
    free(pa);
    free(pb);
    free(g);
    free(sa);
    free(sb);
}

/* ---- an independent double-precision reference, straight from the formulas ---- */

static void ref_step(const optim_config_t *c, double *p, double *s, const float *gf, size_t n,
                     uint64_t t)
{
    const double lr = c->lr, eps = c->eps, wd = c->weight_decay;
    const double b1 = c->beta1, b2 = c->beta2, mom = c->momentum;
    const int inside = c->eps_placement == OPTIM_EPS_INSIDE;
    for (size_t i = 0; i < n; i++) {
        double g = (double)gf[i] + wd * p[i];
        switch (c->kind) {
            case OPTIM_SGD:
                if (mom != 0.0) {
                    s[i] = (t == 1) ? g : mom * s[i] + g;
                    p[i] -= lr * s[i];
                } else {
                    p[i] -= lr * g;
                }
                break;
            case OPTIM_ADAGRAD: {
                s[i] += g * g;
                double d = inside ? sqrt(s[i] + eps) : sqrt(s[i]) + eps;
                p[i] -= lr * g / d;
                break;
            }
            case OPTIM_ADAM: {
                double *m = s, *v = s + n;
                m[i] = b1 * m[i] + (1.0 - b1) * g;
                v[i] = b2 * v[i] + (1.0 - b2) * g * g;
                double mh = m[i] / (1.0 - pow(b1, (double)t));
                double vh = v[i] / (1.0 - pow(b2, (double)t));
                double d = inside ? sqrt(vh + eps) : sqrt(vh) + eps;
                p[i] -= lr * mh / d;
                break;
            }
            case OPTIM_SMORMS3: {
                double *mem = s, *g1 = s + n, *g2 = s + 2 * n;
                double rho = 1.0 / (mem[i] + 1.0);
                g1[i] = (1.0 - rho) * g1[i] + rho * g;
                g2[i] = (1.0 - rho) * g2[i] + rho * g * g;
                double x = g1[i] * g1[i] / (g2[i] + eps);
                double d = inside ? sqrt(g2[i] + eps) : sqrt(g2[i]) + eps;
                p[i] -= fmin(lr, x) / d * g;
                mem[i] = 1.0 + (1.0 - x) * mem[i];
                break;
            }
        }
    }
}

static void ref_init(const optim_config_t *c, double *s, size_t n)
{
    for (size_t i = 0; i < 3 * n; i++)
        s[i] = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (c->kind == OPTIM_ADAGRAD)
            s[i] = c->initial_accumulator;
        if (c->kind == OPTIM_SMORMS3)
            s[i] = 1.0;
    }
}

struct ref_result {
    double rel; /* max |p - p_ref| / max(|p_ref|, 1e-3): the acceptance metric */
    double eps_max; /* max |p - p_ref| / (2^-24 * max over the steps of |p_ref|) */
    double moved; /* max |p_ref - p0| */
    size_t worst; /* element of rel */
};

/* 100 steps of c on n parameters in float (optim_step) and in double (ref_step). */
static void run_vs_ref(const optim_config_t *c, size_t n, uint64_t seed, int away,
                       struct ref_result *res)
{
    float *p = malloc(n * 4), *p0 = malloc(n * 4), *s = malloc(3 * n * 4), *g = malloc(n * 4);
    double *pr = malloc(n * 8), *sr = malloc(3 * n * 8), *pmax = malloc(n * 8);
    CHECK(p && p0 && s && g && pr && sr && pmax);
    init_params(p, n, seed, away);
    memcpy(p0, p, n * 4);
    for (size_t i = 0; i < n; i++) {
        pr[i] = p[i];
        pmax[i] = fabs(pr[i]);
    }
    optim_state_init(c, s, n);
    ref_init(c, sr, n);
    util_rng_t r;
    util_rng_seed(&r, seed + 1);
    for (uint64_t t = 1; t <= NSTEPS; t++) {
        gen_grad(&r, g, n, away ? p0 : NULL);
        optim_step(c, p, s, g, n, t);
        ref_step(c, pr, sr, g, n, t);
        for (size_t i = 0; i < n; i++)
            pmax[i] = fmax(pmax[i], fabs(pr[i]));
    }
    memset(res, 0, sizeof(*res));
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)p[i] - pr[i]);
        double e = d / fmax(fabs(pr[i]), 1e-3);
        if (!(e <= res->rel)) { /* NaN lands here too */
            res->rel = e;
            res->worst = i;
        }
        double u = d / (pmax[i] * 0x1p-24);
        if (!(u <= res->eps_max))
            res->eps_max = u;
        res->moved = fmax(res->moved, fabs(pr[i] - (double)p0[i]));
    }
    free(p);
    free(p0);
    free(s);
    free(g);
    free(pr);
    free(sr);
    free(pmax);
}

/* The acceptance criterion: every parameter within 1e-5 relative (to max(|p_ref|, 1e-3)) of
   the double reference after 100 steps, for every optimizer and option. Parameters start at
   magnitudes 0.5 .. 1 and drift away from zero: a parameter that passes near zero after being
   large carries the absolute rounding error of its largest magnitude (see the next test), which
   no float32 implementation avoids and a per-element relative metric magnifies. */
TEST(optim_matches_double_reference, 20)
{
    optim_config_t cfgs[32];
    size_t ncfg = all_cfgs(cfgs, INAGG_ARRAY_LEN(cfgs));
    for (size_t ci = 0; ci < ncfg; ci++) {
        struct ref_result res;
        run_vs_ref(&cfgs[ci], 1003, 500 + 2 * ci, 1, &res);
        char name[96];
        cfg_str(&cfgs[ci], name, sizeof(name));
        if (getenv("OPTIM_TEST_VERBOSE") != NULL)
            printf("    %-36s rel %.3g  roundings-of-max %.1f  moved %.3g\n", name, res.rel,
                   res.eps_max, res.moved);
        CHECK_MSG(res.rel <= 1e-5, "%s: max relative error %.3g at element %zu", name, res.rel,
                  res.worst);
        /* The parameters must actually have moved, or the comparison proves little. */
        CHECK_MSG(res.moved > 0.3, "%s: parameters moved only %g", name, res.moved);
    }
}

/* Parameters that cross zero: the error of each parameter stays within a few dozen float32
   roundings of the largest magnitude it had on the way (measured: at most ~16 after 100 steps).
   The per-element relative metric of the test above reaches ~1e-4 .. 1e-3 here for a handful of
   the 1003 elements, those that end within ~1e-2 of zero after being of order 1: an absolute
   error of ~1e-7 is all float32 can do at that magnitude, for this code and any other. */
TEST(optim_error_bounded_through_zero, 20)
{
    optim_config_t cfgs[32];
    size_t ncfg = all_cfgs(cfgs, INAGG_ARRAY_LEN(cfgs));
    for (size_t ci = 0; ci < ncfg; ci++) {
        struct ref_result res;
        run_vs_ref(&cfgs[ci], 1003, 700 + 2 * ci, 0, &res);
        char name[96];
        cfg_str(&cfgs[ci], name, sizeof(name));
        if (getenv("OPTIM_TEST_VERBOSE") != NULL)
            printf("    %-36s rel %.3g  roundings-of-max %.1f  moved %.3g\n", name, res.rel,
                   res.eps_max, res.moved);
        CHECK_MSG(res.eps_max <= 32.0, "%s: error %.1f float roundings of max |p|", name,
                  res.eps_max);
        CHECK_MSG(res.moved > 0.3, "%s: parameters moved only %g", name, res.moved);
    }
}

/* ---- hand-computed steps: exact decimal values worked out below ---- */

/* |got - want| within a few float roundings of the exact value. */
#define CHECK_NEAR(got, want)                                                                      \
    do {                                                                                           \
        double g_ = (double)(got), w_ = (want);                                                    \
        CHECK_MSG(fabs(g_ - w_) <= 2e-6 * fmax(1.0, fabs(w_)), "%s = %.9g, want %.9g", #got, g_,   \
                  w_);                                                                             \
    } while (0)

/* Runs one step on a single parameter through both paths (n = 1 is all tail, so also n = 8
   copies of it to go through the AVX2 lanes) and checks they agree; leaves the result in
   p[0] and s[0], s[1], s[2] (state arrays of one element each). */
static void step1(const optim_config_t *c, float *p, float *s, float g, uint64_t t)
{
    float p8[8], s8[24], g8[8], ps = *p, ss[3] = {s[0], s[1], s[2]};
    unsigned w = optim_state_words(c);
    for (int i = 0; i < 8; i++) {
        p8[i] = *p;
        g8[i] = g;
        for (unsigned k = 0; k < w; k++)
            s8[k * 8 + i] = s[k];
    }
    optim_step(c, p8, s8, g8, 8, t);
    optim_step(c, p, s, &g, 1, t);
    optim_step_scalar(c, &ps, ss, &g, 1, t);
    CHECK(memcmp(p, &ps, 4) == 0);
    CHECK(memcmp(s, ss, w * 4) == 0);
    for (int i = 0; i < 8; i++) {
        CHECK(memcmp(&p8[i], p, 4) == 0);
        for (unsigned k = 0; k < w; k++)
            CHECK(memcmp(&s8[k * 8 + i], &s[k], 4) == 0);
    }
}

TEST(optim_sgd_hand, 5)
{
    optim_config_t c = OPTIM_CONFIG_INIT;
    c.lr = 0.1f;
    float p = 1.0f, s[3] = {0};
    /* plain: p = 1 - 0.1 * 0.5 = 0.95 */
    step1(&c, &p, s, 0.5f, 1);
    CHECK_NEAR(p, 0.95);

    /* momentum 0.9, wd 0.1, p = 1:
       t=1, g=0.5: g' = 0.5 + 0.1*1 = 0.6; buf = g' = 0.6 (no momentum term on the first
                   step); p = 1 - 0.1*0.6 = 0.94
       t=2, g=0.5: g' = 0.5 + 0.1*0.94 = 0.594; buf = 0.9*0.6 + 0.594 = 1.134;
                   p = 0.94 - 0.1*1.134 = 0.8266 */
    c.momentum = 0.9f;
    c.weight_decay = 0.1f;
    p = 1.0f;
    s[0] = 123.0f; /* whatever the buffer holds, step 1 overwrites it */
    step1(&c, &p, s, 0.5f, 1);
    CHECK_NEAR(s[0], 0.6);
    CHECK_NEAR(p, 0.94);
    step1(&c, &p, s, 0.5f, 2);
    CHECK_NEAR(s[0], 1.134);
    CHECK_NEAR(p, 0.8266);

    /* No FMA contraction: p - lr*g must round lr*g first. Pick values where a fused
       multiply-subtract would round differently, and the library must give the unfused. */
    optim_config_t c2 = OPTIM_CONFIG_INIT;
    c2.lr = 0.1f;
    float p0 = 1.0f / 3.0f, g0 = 0.0f, want = 0.0f, fused = 0.0f;
    int found = 0;
    for (int k = 0; k < 1000 && !found; k++) {
        g0 = 0.7f + 0.001f * (float)k;
        volatile float prod = c2.lr * g0; /* rounded to float here */
        want = p0 - prod;
        /* lr*g is exact in double (24 + 24 bits); one more rounding gives the fused result
           (the double rounding cannot matter for these magnitudes often enough to hide it). */
        fused = (float)((double)p0 - (double)c2.lr * (double)g0);
        found = want != fused;
    }
    CHECK_MSG(found, "no values where fused and unfused differ");
    float pp[9], gg[9];
    for (int i = 0; i < 9; i++) {
        pp[i] = p0;
        gg[i] = g0;
    }
    optim_step(&c2, pp, NULL, gg, 9, 1);
    for (int i = 0; i < 9; i++)
        CHECK_MSG(memcmp(&pp[i], &want, 4) == 0, "elem %d: %.9g, unfused %.9g, fused %.9g", i,
                  (double)pp[i], (double)want, (double)fused);
}

TEST(optim_adagrad_hand, 5)
{
    optim_config_t c = OPTIM_CONFIG_INIT;
    c.kind = OPTIM_ADAGRAD;
    c.lr = 0.5f;
    c.eps = 0.25f; /* large, so its placement changes the result visibly */
    float p, s[3];
    /* p = 1, g = 2, acc0 = 0: acc = 4
       inside:  D = sqrt(4 + 0.25) = 2.0615528; p = 1 - 0.5*2/2.0615528 = 0.51492875
       outside: D = sqrt(4) + 0.25 = 2.25;      p = 1 - 0.5*2/2.25      = 0.5555556 */
    c.eps_placement = OPTIM_EPS_INSIDE;
    p = 1.0f;
    optim_state_init(&c, s, 1);
    step1(&c, &p, s, 2.0f, 1);
    CHECK_NEAR(s[0], 4.0);
    CHECK_NEAR(p, 0.51492874992733);
    c.eps_placement = OPTIM_EPS_OUTSIDE;
    p = 1.0f;
    optim_state_init(&c, s, 1);
    step1(&c, &p, s, 2.0f, 1);
    CHECK_NEAR(p, 0.55555555555556);
    /* initial_accumulator 5: acc = 9, outside D = 3 + 0.25; p = 1 - 1/3.25 = 0.69230769 */
    c.initial_accumulator = 5.0f;
    p = 1.0f;
    optim_state_init(&c, s, 1);
    CHECK_NEAR(s[0], 5.0);
    step1(&c, &p, s, 2.0f, 1);
    CHECK_NEAR(s[0], 9.0);
    CHECK_NEAR(p, 0.69230769230769);
    /* wd 0.5, acc0 0, outside: g' = 2 + 0.5*1 = 2.5; acc = 6.25; D = 2.5 + 0.25 = 2.75;
       p = 1 - 0.5*2.5/2.75 = 0.54545455 */
    c.initial_accumulator = 0.0f;
    c.weight_decay = 0.5f;
    p = 1.0f;
    optim_state_init(&c, s, 1);
    step1(&c, &p, s, 2.0f, 1);
    CHECK_NEAR(s[0], 6.25);
    CHECK_NEAR(p, 0.54545454545455);
}

TEST(optim_adam_hand, 5)
{
    optim_config_t c = OPTIM_CONFIG_INIT;
    c.kind = OPTIM_ADAM;
    c.lr = 0.1f;
    c.eps = 0.25f;
    /* beta1 0.9, beta2 0.999, p = 1:
       t=1, g=2:  m = 0.1*2 = 0.2; v = 0.001*4 = 0.004; m_hat = 0.2/0.1 = 2;
                  v_hat = 0.004/0.001 = 4
         inside:  D = sqrt(4.25) = 2.0615528; p = 1 - 0.1*2/2.0615528 = 0.90298575
         outside: D = 2 + 0.25 = 2.25;       p = 1 - 0.1*2/2.25      = 0.91111111
       t=2, g=-1: m = 0.9*0.2 - 0.1 = 0.08; v = 0.999*0.004 + 0.001 = 0.004996;
                  m_hat = 0.08/0.19 = 0.42105263; v_hat = 0.004996/0.001999 = 2.4992496
         inside:  D = sqrt(2.7492496) = 1.6580861; p = 0.90298575 - 0.025394 = 0.87759186
         outside: D = 1.5809015 + 0.25 = 1.8309015; p = 0.91111111 - 0.022997 = 0.88811410 */
    static const double want1[2] = {0.90298574998547, 0.91111111111111};
    static const double want2[2] = {0.87759185619606, 0.88811409972988};
    for (int e = 0; e < 2; e++) {
        c.eps_placement = (optim_eps_t)e;
        float p = 1.0f, s[3];
        optim_state_init(&c, s, 1);
        step1(&c, &p, s, 2.0f, 1);
        CHECK_NEAR(s[0], 0.2);
        CHECK_NEAR(s[1], 0.004);
        CHECK_NEAR(p, want1[e]);
        step1(&c, &p, s, -1.0f, 2);
        CHECK_NEAR(s[0], 0.08);
        CHECK_NEAR(s[1], 0.004996);
        CHECK_NEAR(p, want2[e]);
    }
    /* step 0 is taken as step 1 */
    float pa = 1.0f, pb = 1.0f, sa[2], sb[2], g = 2.0f;
    optim_state_init(&c, sa, 1);
    optim_state_init(&c, sb, 1);
    optim_step(&c, &pa, sa, &g, 1, 0);
    optim_step(&c, &pb, sb, &g, 1, 1);
    CHECK(memcmp(&pa, &pb, 4) == 0 && isfinite(pa));
}

TEST(optim_smorms3_hand, 5)
{
    optim_config_t c = OPTIM_CONFIG_INIT;
    c.kind = OPTIM_SMORMS3;
    c.eps = 0.25f;
    /* p = 1, mem = 1, g1 = g2 = 0:
       t=1, g=2: rho = 1/(1+1) = 0.5; g1 = 0.5*2 = 1; g2 = 0.5*4 = 2; x = 1/(2 + 0.25) = 0.444444;
                 mem = 1 + (1 - 0.444444)*1 = 1.5555556
         lr 0.1 (min = lr):  inside  D = sqrt(2.25) = 1.5:         p = 1 - 0.1/1.5*2 = 0.8666667
                             outside D = sqrt(2) + 0.25 = 1.6642136: p = 1 - 0.1/1.6642136*2
                                                                       = 0.87982312
         lr 1 (min = x):     inside:  p = 1 - 0.444444/1.5*2       = 0.40740741
                             outside: p = 1 - 0.444444/1.6642136*2 = 0.46588052
       t=2, g=1: rho = 1/2.5555556 = 0.39130435; g1 = 0.6086957*1 + 0.3913043*1 = 1;
                 g2 = 0.6086957*2 + 0.3913043 = 1.6086957; x = 1/1.8586957 = 0.5380117;
                 mem = 1 + 0.4619883*1.5555556 = 1.7186485
         lr 0.1: inside  D = sqrt(1.8586957) = 1.3633399: p = 0.8666667 - 0.1/1.3633399 = 0.79331739
                 outside D = 1.2683437 + 0.25 = 1.5183437: p = 0.8798231 - 0.1/1.5183437 = 0.81396187
         lr 1:   inside  p = 0.40740741 - 0.5380117/1.3633399 = 0.01277970
                 outside p = 0.46588052 - 0.5380117/1.5183437 = 0.11153933 */
    static const float lrs[2] = {0.1f, 1.0f};
    static const double want1[2][2] = {{0.86666666666667, 0.87982311614213},
                                       {0.40740740740741, 0.46588051618725}};
    static const double want2[2][2] = {{0.79331738610398, 0.81396187384581},
                                       {0.01277969911691, 0.11153932956377}};
    for (int li = 0; li < 2; li++) {
        for (int e = 0; e < 2; e++) {
            c.lr = lrs[li];
            c.eps_placement = (optim_eps_t)e;
            float p = 1.0f, s[3];
            optim_state_init(&c, s, 1);
            step1(&c, &p, s, 2.0f, 1);
            CHECK_NEAR(s[0], 1.5555555555556);
            CHECK_NEAR(s[1], 1.0);
            CHECK_NEAR(s[2], 2.0);
            CHECK_NEAR(p, want1[li][e]);
            step1(&c, &p, s, 1.0f, 2);
            CHECK_NEAR(s[0], 1.7186484730344);
            CHECK_NEAR(s[1], 1.0);
            CHECK_NEAR(s[2], 1.6086956521739);
            CHECK_NEAR(p, want2[li][e]);
        }
    }
}

/* ---- validation, names, state ---- */

static void expect_bad(const optim_config_t *c, const char *word)
{
    char err[128] = "";
    CHECK(optim_check(c, err, sizeof(err)) == -EINVAL);
    CHECK_MSG(strstr(err, word) != NULL, "message \"%s\" does not name %s", err, word);
    CHECK(optim_check(c, NULL, 0) == -EINVAL);
}

TEST(optim_check_rejects, 5)
{
    const optim_config_t good = OPTIM_CONFIG_INIT;
    char err[128];
    CHECK(optim_check(&good, err, sizeof(err)) == 0);
    optim_config_t c;
#define BAD(field, value, word)                                                                    \
    do {                                                                                           \
        c = good;                                                                                  \
        c.field = value;                                                                           \
        expect_bad(&c, word);                                                                      \
    } while (0)
    BAD(lr, 0.0f, "lr");
    BAD(lr, -0.1f, "lr");
    BAD(lr, NAN, "lr");
    BAD(lr, INFINITY, "lr");
    BAD(eps, 0.0f, "eps");
    BAD(eps, -1e-8f, "eps");
    BAD(eps, NAN, "eps");
    BAD(beta1, 1.0f, "beta1");
    BAD(beta1, -0.1f, "beta1");
    BAD(beta1, NAN, "beta1");
    BAD(beta2, 1.0f, "beta2");
    BAD(beta2, 1.5f, "beta2");
    BAD(momentum, 1.0f, "momentum");
    BAD(momentum, -0.5f, "momentum");
    BAD(weight_decay, -0.01f, "weight_decay");
    BAD(weight_decay, INFINITY, "weight_decay");
    BAD(weight_decay, NAN, "weight_decay");
    BAD(initial_accumulator, -1.0f, "initial_accumulator");
    BAD(kind, (optim_kind_t)7, "kind");
    BAD(eps_placement, (optim_eps_t)2, "eps");
#undef BAD
    /* edges that are allowed */
    c = good;
    c.beta1 = 0.0f;
    c.beta2 = 0.0f;
    c.momentum = 0.0f;
    c.weight_decay = 0.0f;
    CHECK(optim_check(&c, err, sizeof(err)) == 0);
    c.momentum = 0.99f;
    c.kind = OPTIM_SMORMS3;
    c.eps_placement = OPTIM_EPS_OUTSIDE;
    CHECK(optim_check(&c, err, sizeof(err)) == 0);
    /* a tiny buffer is truncated, not overrun */
    char tiny[4] = {'x', 'x', 'x', 'x'};
    c = good;
    c.lr = -1.0f;
    CHECK(optim_check(&c, tiny, 3) == -EINVAL);
    CHECK(tiny[2] == '\0' && tiny[3] == 'x');
}

TEST(optim_parse_names, 5)
{
    static const char *const names[] = {"sgd", "adagrad", "adam", "smorms3"};
    for (int k = 0; k < OPTIM_KIND_COUNT; k++) {
        optim_kind_t out = (optim_kind_t)99;
        CHECK(optim_parse_kind(names[k], &out) == 0);
        CHECK_EQ_INT(out, k);
        CHECK(strcmp(optim_kind_name((optim_kind_t)k), names[k]) == 0);
    }
    optim_kind_t kk = OPTIM_ADAM;
    CHECK(optim_parse_kind("ADAM", &kk) == 0 && kk == OPTIM_ADAM);
    kk = OPTIM_SMORMS3;
    CHECK(optim_parse_kind("rmsprop", &kk) == -EINVAL);
    CHECK(optim_parse_kind("", &kk) == -EINVAL);
    CHECK(optim_parse_kind("adam ", &kk) == -EINVAL);
    CHECK(optim_parse_kind(NULL, &kk) == -EINVAL);
    CHECK_EQ_INT(kk, OPTIM_SMORMS3); /* untouched on failure */
    CHECK(strcmp(optim_kind_name((optim_kind_t)9), "unknown") == 0);

    optim_eps_t e = OPTIM_EPS_OUTSIDE;
    CHECK(optim_parse_eps("inside", &e) == 0 && e == OPTIM_EPS_INSIDE);
    CHECK(optim_parse_eps("outside", &e) == 0 && e == OPTIM_EPS_OUTSIDE);
    CHECK(optim_parse_eps("middle", &e) == -EINVAL && e == OPTIM_EPS_OUTSIDE);
    CHECK(optim_parse_eps(NULL, &e) == -EINVAL);
    CHECK(strcmp(optim_eps_name(OPTIM_EPS_INSIDE), "inside") == 0);
    CHECK(strcmp(optim_eps_name(OPTIM_EPS_OUTSIDE), "outside") == 0);
}

TEST(optim_state_layout, 5)
{
    optim_config_t c = OPTIM_CONFIG_INIT;
    /* the defaults */
    CHECK_EQ_INT(c.kind, OPTIM_SGD);
    CHECK_EQ_INT(c.eps_placement, OPTIM_EPS_INSIDE);
    CHECK(c.lr == 0.01f && c.beta1 == 0.9f && c.beta2 == 0.999f && c.eps == 1e-8f);
    CHECK(c.momentum == 0.0f && c.weight_decay == 0.0f && c.initial_accumulator == 0.0f);

    CHECK_EQ_INT(optim_state_words(&c), 0);
    c.momentum = 0.9f;
    CHECK_EQ_INT(optim_state_words(&c), 1);
    c.kind = OPTIM_ADAGRAD;
    CHECK_EQ_INT(optim_state_words(&c), 1);
    c.kind = OPTIM_ADAM;
    CHECK_EQ_INT(optim_state_words(&c), 2);
    c.kind = OPTIM_SMORMS3;
    CHECK_EQ_INT(optim_state_words(&c), 3);

    const size_t n = 5;
    float s[3 * 5 + 1];
    for (size_t i = 0; i < INAGG_ARRAY_LEN(s); i++)
        s[i] = -7.0f;
    optim_state_init(&c, s, n); /* SMORMS3: mem 1, g1 0, g2 0 */
    for (size_t i = 0; i < n; i++) {
        CHECK(s[i] == 1.0f);
        CHECK(s[n + i] == 0.0f);
        CHECK(s[2 * n + i] == 0.0f);
    }
    CHECK(s[3 * n] == -7.0f); /* nothing written past the end */

    c.kind = OPTIM_ADAGRAD;
    c.initial_accumulator = 0.25f;
    s[n] = -7.0f;
    optim_state_init(&c, s, n);
    for (size_t i = 0; i < n; i++)
        CHECK(s[i] == 0.25f);
    CHECK(s[n] == -7.0f);

    c.kind = OPTIM_ADAM;
    for (size_t i = 0; i < INAGG_ARRAY_LEN(s); i++)
        s[i] = -7.0f;
    optim_state_init(&c, s, n);
    for (size_t i = 0; i < 2 * n; i++)
        CHECK(s[i] == 0.0f);
    CHECK(s[2 * n] == -7.0f);

    c.kind = OPTIM_SGD;
    c.momentum = 0.0f;
    s[0] = -7.0f;
    optim_state_init(&c, s, n); /* no state: writes nothing */
    CHECK(s[0] == -7.0f);
    /* n = 0 is a no-op for every optimizer */
    for (int k = 0; k < OPTIM_KIND_COUNT; k++) {
        c.kind = (optim_kind_t)k;
        optim_step(&c, s, s, s, 0, 1);
        optim_step_scalar(&c, s, s, s, 0, 1);
    }
    CHECK(s[0] == -7.0f);
}
