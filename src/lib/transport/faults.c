/* faults.c - see faults.h. */
#include "lib/transport/faults.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/errmsg.h"

static int parse_prob(const char *val, double *out)
{
    char *end;
    double p = strtod(val, &end);
    if (end == val || *end != '\0' || !(p >= 0.0 && p <= 1.0))
        return -EINVAL;
    *out = p;
    return 0;
}

int faults_parse(faults_t *f, const char *spec, char *err, size_t errlen)
{
    memset(f, 0, sizeof(*f));
    f->held_len[0] = f->held_len[1] = -1;
    f->seed = 1;
    if (!spec || !*spec) {
        util_rng_seed(&f->rng, f->seed);
        return 0;
    }
    char buf[256];
    if (strlen(spec) >= sizeof(buf))
        return set_err(err, errlen, -EINVAL, "fault spec too long");
    strcpy(buf, spec);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq)
            return set_err(err, errlen, -EINVAL, "fault spec item '%s' is not key=value", tok);
        *eq = '\0';
        const char *key = tok, *val = eq + 1;
        int bad = 0;
        if (strcmp(key, "drop") == 0 || strcmp(key, "loss") == 0)
            bad = parse_prob(val, &f->drop);
        else if (strcmp(key, "dup") == 0)
            bad = parse_prob(val, &f->dup);
        else if (strcmp(key, "reorder") == 0)
            bad = parse_prob(val, &f->reorder);
        else if (strcmp(key, "seed") == 0) {
            char *end;
            f->seed = strtoull(val, &end, 10);
            bad = (end == val || *end != '\0');
        } else {
            return set_err(err, errlen, -EINVAL,
                           "unknown fault '%s' (expected drop, dup, reorder, seed)", key);
        }
        if (bad)
            return set_err(err, errlen, -EINVAL, "fault '%s' needs %s, got '%s'", key,
                           strcmp(key, "seed") == 0 ? "an integer" : "a probability in [0, 1]",
                           val);
    }
    util_rng_seed(&f->rng, f->seed);
    f->enabled = f->drop > 0 || f->dup > 0 || f->reorder > 0;
    if (f->reorder > 0) {
        for (int i = 0; i < 2; i++) {
            f->held[i] = malloc(FAULTS_MAX_PACKET);
            if (!f->held[i]) {
                faults_free(f);
                return set_err(err, errlen, -ENOMEM, "out of memory");
            }
        }
    }
    return 0;
}

void faults_free(faults_t *f)
{
    free(f->held[0]);
    free(f->held[1]);
    f->held[0] = f->held[1] = NULL;
    f->enabled = 0;
}

static int hold(faults_t *f, const transport_tx_t *m)
{
    int b = f->held_cur;
    if (!f->held[b] || f->held_len[0] >= 0 || f->held_len[1] >= 0)
        return 0; /* one packet held at a time */
    if ((size_t)m->head_len + m->body_len > FAULTS_MAX_PACKET)
        return 0;
    if (m->head_len)
        memcpy(f->held[b], m->head, m->head_len);
    if (m->body_len)
        memcpy(f->held[b] + m->head_len, m->body, m->body_len);
    f->held_to[b] = m->to;
    f->held_len[b] = (int)(m->head_len + m->body_len);
    f->held_cur ^= 1;
    return 1;
}

static void emit_held(faults_t *f, int b, transport_tx_t *out)
{
    *out = (transport_tx_t){
        .head = f->held[b], .head_len = (uint32_t)f->held_len[b], .to = f->held_to[b]};
    f->held_len[b] = -1; /* the buffer stays valid until the next hold into it */
}

int faults_on_send(faults_t *f, const transport_tx_t *in, int n, transport_tx_t *out)
{
    if (!f->enabled) {
        memcpy(out, in, sizeof(*in) * (size_t)n);
        return n;
    }
    /* A packet held on an earlier call goes out right after this call's first packet. */
    int pending = f->held_len[0] >= 0 ? 0 : (f->held_len[1] >= 0 ? 1 : -1);
    int held_now = 0, k = 0;
    for (int i = 0; i < n; i++) {
        double r = util_rng_double(&f->rng);
        if (r < f->drop) {
            f->dropped++;
            continue;
        }
        if (!held_now && pending < 0 && util_rng_double(&f->rng) < f->reorder && hold(f, &in[i])) {
            held_now = 1;
            pending = f->held_cur ^ 1; /* goes out right after the next packet */
            f->reordered++;
            continue;
        }
        out[k++] = in[i];
        if (util_rng_double(&f->rng) < f->dup) {
            f->duplicated++;
            out[k++] = in[i];
        }
        if (pending >= 0) {
            emit_held(f, pending, &out[k++]);
            pending = -1;
        }
    }
    return k;
}

int faults_on_recv(faults_t *f, int n, int *order)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (!f->enabled) {
            order[k++] = i;
            continue;
        }
        if (util_rng_double(&f->rng) < f->drop) {
            f->dropped++;
            continue;
        }
        order[k++] = i;
        if (util_rng_double(&f->rng) < f->dup) {
            f->duplicated++;
            order[k++] = i;
        }
    }
    if (f->enabled && f->reorder > 0) {
        for (int i = 0; i + 1 < k; i++) {
            if (util_rng_double(&f->rng) < f->reorder) {
                int j = i + 1 + (int)(util_rng_next(&f->rng) % (uint64_t)(k - i - 1));
                int t = order[i];
                order[i] = order[j];
                order[j] = t;
                f->reordered++;
            }
        }
    }
    return k;
}
