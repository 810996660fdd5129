/*
 * optconf.h - what describes an in-switch optimizer: its kind, hyper-parameters and where eps
 * goes, their names, and the one validation. Data only: the JOIN line carries it
 * (lib/wire/ctlmsg.h) and the kernels step with it (lib/kernels/optim.h); neither depends on
 * the other through it.
 */
#ifndef INAGG_BASE_OPTCONF_H
#define INAGG_BASE_OPTCONF_H

#include <stddef.h>

typedef enum { OPTIM_SGD = 0, OPTIM_ADAGRAD, OPTIM_ADAM, OPTIM_SMORMS3 } optim_kind_t;
#define OPTIM_KIND_COUNT 4

typedef enum {
    OPTIM_EPS_INSIDE = 0, /* the paper: sqrt(v + eps) */
    OPTIM_EPS_OUTSIDE /* PyTorch (and Chainer's SMORMS3): sqrt(v) + eps */
} optim_eps_t;

typedef struct optim_config {
    optim_kind_t kind;
    float lr; /* learning rate */
    float beta1, beta2; /* Adam */
    float eps;
    optim_eps_t eps_placement; /* default OPTIM_EPS_INSIDE (the paper's) */
    float momentum; /* SGD, torch semantics (see above); 0 = none */
    float weight_decay; /* g += wd * p (L2, torch style) for every optimizer; 0 = none */
    float initial_accumulator; /* Adagrad's starting acc, default 0 */
} optim_config_t;

#define OPTIM_CONFIG_INIT                                                                          \
    {                                                                                              \
        .kind = OPTIM_SGD, .lr = 0.01f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,              \
        .eps_placement = OPTIM_EPS_INSIDE                                                          \
    }

/* "sgd" | "adagrad" | "adam" | "smorms3" (case-insensitive). 0, or -EINVAL (and *out untouched). */
int optim_parse_kind(const char *name, optim_kind_t *out);
/* The name optim_parse_kind accepts for k; "unknown" for a value out of range. */
const char *optim_kind_name(optim_kind_t k);
/* "inside" | "outside" (case-insensitive). 0, or -EINVAL (and *out untouched). */
int optim_parse_eps(const char *name, optim_eps_t *out);
/* "inside" or "outside"; "unknown" for a value out of range. */
const char *optim_eps_name(optim_eps_t e);

/* Validate a config: 0, or -EINVAL with a message in err (when err != NULL and errlen > 0).
   Rules: kind and eps_placement known; lr > 0 and finite; eps > 0 and finite;
   0 <= beta1, beta2 < 1; 0 <= momentum < 1; weight_decay >= 0 and finite;
   initial_accumulator >= 0 and finite. Betas are checked for every kind, momentum too. */
int optim_check(const optim_config_t *c, char *err, size_t errlen);

#endif /* INAGG_BASE_OPTCONF_H */
