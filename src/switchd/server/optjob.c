/* optjob.c - parameters and optimizer state of an in-switch optimizer job (see optjob.h). */
#include "switchd/server/optjob.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/errmsg.h"
#include "lib/base/util.h"
#include "lib/kernels/vec.h"

uint64_t optjob_bytes(const optim_config_t *c, uint64_t nparams, uint32_t elems)
{
    uint64_t nchunks = elems ? (nparams + elems - 1) / elems : 0;
    return nparams * 4u * (1u + optim_state_words(c)) + nchunks * 8u;
}

float optjob_seeded_value(uint64_t seed, uint64_t i)
{
    uint64_t s = seed ^ (i * 0x9e3779b97f4a7c15ull);
    uint64_t r = util_splitmix64(&s);
    return (float)((double)(r >> 11) * (1.0 / 9007199254740992.0) * 0.1 - 0.05);
}

uint32_t optjob_chunk_len(const optjob_t *o, uint64_t chunk)
{
    if (chunk >= o->nchunks)
        return 0;
    uint64_t left = o->nparams - chunk * o->elems;
    return left < o->elems ? (uint32_t)left : o->elems;
}

int optjob_create(const optim_config_t *c, uint64_t nparams, uint32_t elems, enum optjob_init init,
                  uint64_t seed, optjob_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (optim_check(c, err, errlen) != 0)
        return -EINVAL; /* optim_check wrote the reason */
    if (nparams == 0 || elems == 0)
        return set_err(err, errlen, -EINVAL, "the optimizer needs at least one parameter");
    optjob_t *o = calloc(1, sizeof(*o));
    if (!o)
        return set_err(err, errlen, -ENOMEM, "out of memory");
    o->cfg = *c;
    o->nparams = nparams;
    o->elems = elems;
    o->nchunks = (nparams + elems - 1) / elems;
    o->words = optim_state_words(c);
    o->params = malloc(nparams * sizeof(float));
    o->state = o->words ? malloc(nparams * o->words * sizeof(float)) : NULL;
    o->steps = calloc(o->nchunks, sizeof(uint64_t));
    if (!o->params || (o->words && !o->state) || !o->steps) {
        optjob_free(o);
        return set_err(err, errlen, -ENOMEM,
                       "out of memory for %llu parameters and their optimizer state",
                       (unsigned long long)nparams);
    }
    for (uint64_t i = 0; i < nparams; i++)
        o->params[i] = init == OPTJOB_INIT_SEEDED ? optjob_seeded_value(seed, i) : 0.0f;
    for (uint64_t c2 = 0; c2 < o->nchunks && o->words; c2++)
        optim_state_init(c, o->state + c2 * o->elems * o->words, optjob_chunk_len(o, c2));
    *out = o;
    return 0;
}

void optjob_free(optjob_t *o)
{
    if (!o)
        return;
    free(o->params);
    free(o->state);
    free(o->steps);
    free(o);
}

int optjob_complete(optjob_t *o, uint64_t chunk, uint32_t *sum_be, uint32_t n, uint32_t world,
                    int set, float *scratch)
{
    if (n == 0 || n != optjob_chunk_len(o, chunk) || world == 0)
        return -EINVAL;
    float *p = o->params + chunk * o->elems;
    vec_be_to_f32(sum_be, scratch, n);
    if (set) {
        memcpy(p, scratch, n * sizeof(float));
    } else {
        float w = (float)world;
        for (uint32_t i = 0; i < n; i++)
            scratch[i] = scratch[i] / w; /* the average, one correctly rounded division */
        float *st = o->words ? o->state + chunk * o->elems * o->words : NULL;
        optim_step(&o->cfg, p, st, scratch, n, ++o->steps[chunk]);
    }
    vec_f32_to_be(p, sum_be, n);
    return 0;
}
