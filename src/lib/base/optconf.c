/*
 * optconf.c - the optimizer description of optconf.h: names, parsing, validation.
 */
#include "lib/base/optconf.h"

#include <errno.h>
#include <math.h>
#include <strings.h>

#include "lib/base/errmsg.h"
#include "lib/base/util.h"

static const char *const k_kind_names[OPTIM_KIND_COUNT] = {"sgd", "adagrad", "adam", "smorms3"};

int optim_parse_kind(const char *name, optim_kind_t *out)
{
    if (name == NULL)
        return -EINVAL;
    for (int k = 0; k < OPTIM_KIND_COUNT; k++) {
        if (strcasecmp(name, k_kind_names[k]) == 0) {
            *out = (optim_kind_t)k;
            return 0;
        }
    }
    return -EINVAL;
}

const char *optim_kind_name(optim_kind_t k)
{
    return util_name_of(k_kind_names, OPTIM_KIND_COUNT, (unsigned)k);
}

int optim_parse_eps(const char *name, optim_eps_t *out)
{
    if (name == NULL)
        return -EINVAL;
    if (strcasecmp(name, "inside") == 0) {
        *out = OPTIM_EPS_INSIDE;
        return 0;
    }
    if (strcasecmp(name, "outside") == 0) {
        *out = OPTIM_EPS_OUTSIDE;
        return 0;
    }
    return -EINVAL;
}

const char *optim_eps_name(optim_eps_t e)
{
    switch (e) {
        case OPTIM_EPS_INSIDE: return "inside";
        case OPTIM_EPS_OUTSIDE: return "outside";
    }
    return "unknown";
}

#define CHECK_FAIL(...) return set_err(err, errlen, -EINVAL, __VA_ARGS__)

int optim_check(const optim_config_t *c, char *err, size_t errlen)
{
    if ((unsigned)c->kind >= OPTIM_KIND_COUNT)
        CHECK_FAIL("optimizer: unknown kind %d", (int)c->kind);
    if (c->eps_placement != OPTIM_EPS_INSIDE && c->eps_placement != OPTIM_EPS_OUTSIDE)
        CHECK_FAIL("optimizer: unknown eps placement %d", (int)c->eps_placement);
    /* Written so that NaN fails every test. */
    if (!(c->lr > 0.0f) || !isfinite(c->lr))
        CHECK_FAIL("optimizer: lr must be > 0 and finite (got %g)", (double)c->lr);
    if (!(c->eps > 0.0f) || !isfinite(c->eps))
        CHECK_FAIL("optimizer: eps must be > 0 and finite (got %g)", (double)c->eps);
    if (!(c->beta1 >= 0.0f && c->beta1 < 1.0f))
        CHECK_FAIL("optimizer: beta1 must be in [0, 1) (got %g)", (double)c->beta1);
    if (!(c->beta2 >= 0.0f && c->beta2 < 1.0f))
        CHECK_FAIL("optimizer: beta2 must be in [0, 1) (got %g)", (double)c->beta2);
    if (!(c->momentum >= 0.0f && c->momentum < 1.0f))
        CHECK_FAIL("optimizer: momentum must be in [0, 1) (got %g)", (double)c->momentum);
    if (!(c->weight_decay >= 0.0f) || !isfinite(c->weight_decay))
        CHECK_FAIL("optimizer: weight_decay must be >= 0 and finite (got %g)",
                   (double)c->weight_decay);
    if (!(c->initial_accumulator >= 0.0f) || !isfinite(c->initial_accumulator))
        CHECK_FAIL("optimizer: initial_accumulator must be >= 0 and finite (got %g)",
                   (double)c->initial_accumulator);
    return 0;
}
