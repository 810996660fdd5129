/*
 * model.c - the cost models of model.h. Each function is a closed formula from one of the
 * papers (cited at the function), with this implementation's measured costs (per packet,
 * per element, per hop, per value coded) as the parameters. No I/O and no state.
 */
#include "apps/model/model.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <strings.h>

#include "lib/base/errmsg.h"

const char *const model_sys_name[MODEL_NSYS] = {"ina", "ring", "tree", "ps", "ca"};

void model_params_default(model_params_t *p)
{
    *p = (model_params_t){
        .link_bps = 100e9,
        .hop_s = 1e-6,
        .packet_elems = 2048,
        .elem_bytes = 4,
        /* inagg header 32 + UDP 8 + IPv4 20 + Ethernet 14 (what tbf counts on a veth) */
        .overhead_bytes = 74,
        .switch_threads = 1,
        .stream_eff = 1.0,
        .ratio = 1.0,
        .code_overlap = 1,
        .levels = 1,
        .buckets = 1,
    };
}

int model_params_check(const model_params_t *p, char *err, size_t errlen)
{
    if (!(p->link_bps > 0) || !isfinite(p->link_bps))
        return set_err(err, errlen, -EINVAL, "the link rate must be positive");
    if (p->slow_bps < 0 || !isfinite(p->slow_bps))
        return set_err(err, errlen, -EINVAL, "the slow link's rate must be positive");
    if (p->packet_elems == 0 || p->elem_bytes == 0)
        return set_err(err, errlen, -EINVAL, "packets must hold at least one element");
    if (!(p->ratio >= 1e-3) || !isfinite(p->ratio))
        return set_err(err, errlen, -EINVAL, "the compression ratio must be positive");
    if (p->levels < 1 || p->levels > MODEL_MAX_LEVELS)
        return set_err(err, errlen, -EINVAL, "levels must be 1..%u", MODEL_MAX_LEVELS);
    if (p->switch_threads < 1)
        return set_err(err, errlen, -EINVAL, "the switch needs at least one thread");
    if (p->buckets < 1)
        return set_err(err, errlen, -EINVAL, "at least one gradient bucket");
    if (!(p->stream_eff > 0) || p->stream_eff > 1)
        return set_err(err, errlen, -EINVAL, "the stream efficiency is a share in (0, 1]");
    const double nonneg[] = {p->hop_s,   p->switch_pkt_s, p->worker_elem_s,
                             p->msg_s,   p->ring_step_s,  p->enc_Bps,
                             p->dec_Bps, p->agg_value_s,  p->compute_s};
    for (unsigned i = 0; i < sizeof(nonneg) / sizeof(nonneg[0]); i++)
        if (!(nonneg[i] >= 0) || !isfinite(nonneg[i]))
            return set_err(err, errlen, -EINVAL, "times and rates must be finite and not negative");
    return 0;
}

/* ---- building blocks ---------------------------------------------------------------------- */

double model_wire_efficiency(double payload, double overhead)
{
    return payload / (payload + overhead);
}

uint32_t model_pool_size(double rate_bps, double rtt_s, double packet_bytes, int pow2)
{
    /* SwitchML appendix C: "the optimal s is ceil(BDP/b)", then "the next power of two". */
    double s = ceil(rate_bps / 8.0 * rtt_s / packet_bytes - 1e-9);
    if (s < 1)
        s = 1;
    if (s > 1u << 20)
        s = 1u << 20;
    uint32_t v = (uint32_t)s;
    if (pow2) {
        uint32_t q = 1;
        while (q < v)
            q <<= 1;
        v = q;
    }
    return v;
}

double model_ring_eff_bw(uint32_t n, double bmin)
{
    /* AllReduce-Switch II-C: efficient bandwidth n B / 2(n-1); with non-identical nodes the
     * slowest one restricts it: n B_min / 2(n-1). */
    return (double)n * bmin / (2.0 * (double)(n - 1));
}

double model_ina_bytes_each_way(double u) { return u; } /* SwitchML s3: 2|U| in all */

double model_ring_bytes_each_way(uint32_t n, double u)
{
    return 2.0 * u * (double)(n - 1) / (double)n; /* SwitchML s3: 4|U|(n-1)/n in all */
}

static double bmin_of(const model_params_t *p)
{
    return (p->slow_bps > 0 && p->slow_bps < p->link_bps) ? p->slow_bps : p->link_bps;
}

/* Seconds for `bytes` of gradient (compressed by p->ratio) over the slowest host link. */
static double host_link_s(const model_params_t *p, double bytes)
{
    return (bytes / p->ratio) * 8.0 / (bmin_of(p) * p->stream_eff);
}

/* A collective of one worker: nothing moves, and only (zero) latency bounds it. */
static model_time_t alone(void)
{
    model_time_t t = {0};
    t.bound = "latency";
    return t;
}

uint32_t model_fanout(const model_params_t *p, uint32_t n)
{
    if (p->fanout >= 2)
        return p->fanout;
    if (p->levels <= 1)
        return n;
    uint32_t f = (uint32_t)ceil(pow((double)n, 1.0 / p->levels) - 1e-9);
    return f < 2 ? 2 : f;
}

/* Children of the busiest switch of an L-level hierarchy of fan-out f over n workers: the
 * leaves have f, the root what is left (n / f^(L-1), rounded up). */
static uint32_t busiest_children(const model_params_t *p, uint32_t n)
{
    if (p->levels <= 1)
        return n;
    uint32_t f = model_fanout(p, n);
    double below = pow((double)f, (double)(p->levels - 1));
    uint32_t top = (uint32_t)ceil((double)n / below - 1e-9);
    if (top < 1)
        top = 1;
    return f > top ? (f < n ? f : n) : top;
}

static double packet_wire_bytes(const model_params_t *p)
{
    return (double)p->packet_elems * p->elem_bytes / p->ratio + p->overhead_bytes;
}

double model_ina_rtt(const model_params_t *p)
{
    /* Up and down through every level: a hop's latency and one packet's serialization each
     * way per level, and one switch's work per level (SwitchML s4.1: self-clocked pool). */
    double ser = packet_wire_bytes(p) * 8.0 / p->link_bps;
    return 2.0 * p->levels * (p->hop_s + ser) + p->levels * p->switch_pkt_s;
}

static double code_bytes_s(double bytes, double rate_Bps)
{
    return rate_Bps > 0 ? bytes / rate_Bps : 0.0;
}

/* The streaming part's bound: the slowest stage when coding is pipelined with the wire, else
 * the slowest non-coding stage plus the coding. */
static void settle(model_time_t *t, double worker_s, double agg_code_s, int code_overlap,
                   const char *proc_name)
{
    struct {
        double v;
        const char *name;
    } st[] = {
        {t->link_s, "link"},
        {t->proc_s, proc_name},
        {t->window_s, "window"},
        {worker_s, "worker"},
    };
    double stream = 0;
    t->bound = "latency";
    for (unsigned i = 0; i < sizeof(st) / sizeof(st[0]); i++)
        if (st[i].v > stream) {
            stream = st[i].v;
            t->bound = st[i].name;
        }
    double code = t->code_s > agg_code_s ? t->code_s : agg_code_s;
    if (code_overlap) {
        if (code > stream) {
            stream = code;
            t->bound = "codec";
        }
    } else if (t->code_s + agg_code_s > 0) {
        if (t->code_s + agg_code_s > stream)
            t->bound = "codec";
        stream += t->code_s + agg_code_s;
        code = t->code_s + agg_code_s;
    }
    t->code_s = code;
    t->total_s = stream + t->latency_s;
    if (t->latency_s > stream)
        t->bound = "latency";
}

/* In-network aggregation (SwitchML s3-4 and appendix C; AllReduce-Switch Table II: delay of
 * the order of tau, full link bandwidth B): each worker sends |U| and receives |U| over its
 * own link, so the slowest host link sets the rate; the busiest switch handles its children's
 * packets; s packets per round trip bound the stream when s*b is below the BDP. A hierarchy
 * keeps every link at |U| each way (SwitchML s7: bandwidth-optimal) and adds 2 hops per
 * level to the round trip. */
static model_time_t ina_time(const model_params_t *p, uint32_t n, double bytes)
{
    model_time_t t = {0};
    double elems = bytes / p->elem_bytes;
    double pkts = ceil(elems / p->packet_elems - 1e-9);
    double wire = bytes / p->ratio + pkts * p->overhead_bytes;
    uint32_t f = busiest_children(p, n);
    t.link_s = wire * 8.0 / bmin_of(p);
    t.proc_s = (double)f * pkts * p->switch_pkt_s / p->switch_threads;
    double rtt = model_ina_rtt(p);
    uint32_t s = p->slots ? p->slots : model_pool_size(p->link_bps, rtt, packet_wire_bytes(p), 0);
    t.window_s = pkts * rtt / s;
    t.code_s = code_bytes_s(bytes, p->enc_Bps) + code_bytes_s(bytes, p->dec_Bps);
    double agg = (double)(f + 1) * elems * p->agg_value_s / p->switch_threads;
    t.latency_s = rtt;
    double worker = elems * p->worker_elem_s;
    if (p->code_inline && p->code_overlap) { /* one thread codes and runs the protocol */
        worker += t.code_s;
        t.code_s = 0;
    }
    settle(&t, worker, agg, p->code_overlap, "switch");
    return t;
}

/* Ring allreduce (AllReduce-Switch II-C: delay 2(n-1) tau, efficient bandwidth
 * n B_min / 2(n-1); GCOW 2.1: each of N-1 rounds moves P/N, twice): 2(n-1) steps, each a
 * message of |U|/n over the slowest link plus its fixed cost alpha and the wait for the
 * slowest host (ring_step_s). Coding: each step encodes what it sends and decodes what it
 * receives. */
static model_time_t ring_time(const model_params_t *p, uint32_t n, double bytes)
{
    if (n < 2)
        return alone();
    model_time_t t = {0};
    double steps = 2.0 * (n - 1);
    double chunk = bytes / n;
    t.link_s = steps * host_link_s(p, chunk);
    t.code_s = steps * (code_bytes_s(chunk, p->enc_Bps) + code_bytes_s(chunk, p->dec_Bps));
    t.latency_s = steps * (p->msg_s + p->ring_step_s);
    settle(&t, 0, 0, p->code_overlap, "worker");
    return t;
}

/* Tree allreduce (AllReduce-Switch II-B, Table II): depth log_m n, delay 2 log_m(n) tau,
 * efficient bandwidth B/2 (reduce up, then broadcast down), with the fat-tree condition
 * that a node of m children has m*B. Coding: a node decodes its m children and encodes once
 * on the way up; the way down is decoded once. */
static model_time_t tree_time(const model_params_t *p, uint32_t n, double bytes)
{
    if (n < 2)
        return alone();
    model_time_t t = {0};
    uint32_t m = p->fanout >= 2 ? p->fanout : 2;
    double depth = ceil(log((double)n) / log((double)m) - 1e-9);
    t.link_s = 2.0 * host_link_s(p, bytes);
    t.code_s = code_bytes_s(bytes * (m + 1), p->dec_Bps) + code_bytes_s(bytes, p->enc_Bps);
    t.latency_s = 2.0 * depth * p->msg_s;
    settle(&t, 0, 0, p->code_overlap, "worker");
    return t;
}

/* One parameter server (GCOW 2.1, Table 2.1: peak bandwidth O(N)): the server's link
 * carries N|U| in and N|U| out, streamed so that both directions run at once. */
static model_time_t ps_time(const model_params_t *p, uint32_t n, double bytes)
{
    model_time_t t = {0};
    double server = (double)n * (bytes / p->ratio) * 8.0 / (p->link_bps * p->stream_eff);
    double host = host_link_s(p, bytes);
    t.link_s = server > host ? server : host;
    t.code_s = code_bytes_s(bytes, p->enc_Bps) + code_bytes_s(bytes, p->dec_Bps);
    double agg = (double)(n + 1) * (bytes / p->elem_bytes) * p->agg_value_s;
    t.latency_s = 2.0 * p->msg_s;
    settle(&t, 0, agg, p->code_overlap, "server");
    return t;
}

/* Concurrent allreduce (GCOW 2.1: an allgather, every worker pulls (N-1)P at once; Table 2.1:
 * peak network bandwidth O(N^2), O(N) per link): each worker's downlink carries (N-1)|U|,
 * and each worker decodes the N-1 gradients it receives. */
static model_time_t ca_time(const model_params_t *p, uint32_t n, double bytes)
{
    model_time_t t = {0};
    double m = (double)(n - 1);
    t.link_s = m * host_link_s(p, bytes);
    t.code_s = code_bytes_s(bytes, p->enc_Bps) + code_bytes_s(m * bytes, p->dec_Bps);
    t.latency_s = p->msg_s;
    settle(&t, 0, 0, p->code_overlap, "worker");
    return t;
}

model_time_t model_allreduce(model_sys_t sys, const model_params_t *p, uint32_t n, double bytes)
{
    switch (sys) {
        case MODEL_INA: return ina_time(p, n, bytes);
        case MODEL_RING: return ring_time(p, n, bytes);
        case MODEL_TREE: return tree_time(p, n, bytes);
        case MODEL_PS: return ps_time(p, n, bytes);
        case MODEL_CA: return ca_time(p, n, bytes);
        default: break;
    }
    model_time_t t = {.total_s = NAN, .bound = "unknown"};
    return t;
}

double model_iteration(model_sys_t sys, const model_params_t *p, uint32_t n, double bytes)
{
    /* GCOW Fig. 2.2 and s4.4: K buckets; with overlap, bucket i's communication runs during
     * bucket i+1's backward pass (a two-stage pipeline: c + (K-1) max(c, m) + m per bucket
     * times c, m), without it the communication follows the whole backward pass. */
    uint32_t k = p->buckets ? p->buckets : 1;
    double m = model_allreduce(sys, p, n, bytes / k).total_s;
    double c = p->compute_s / k;
    if (p->overlap && k > 1)
        return c + (k - 1) * (c > m ? c : m) + m;
    return p->compute_s + k * m;
}

/* ---- P4SGD (section II-A, II-B, III-B) ---------------------------------------------------- */

double model_p4sgd_dp(double t_fd, double t_bd, double batch, double d_bytes, double bw_Bps,
                      double t_l)
{
    return t_fd + t_bd / batch + d_bytes / bw_Bps + t_l; /* eq. 1 */
}

double model_p4sgd_mp(double t_fm, double t_bm, double b_bytes, double bw_Bps, double t_l)
{
    return t_fm + t_bm + b_bytes / bw_Bps + t_l; /* eq. 2 */
}

double model_p4sgd_mp_pipelined(double t_fm, double t_bm, double batch, double micro,
                                double mb_bytes, double bw_Bps, double t_l)
{
    return micro / batch * t_fm + t_bm + mb_bytes / bw_Bps + t_l; /* eq. 3 */
}

/* ---- units of the command lines ---- */

int model_parse_rate(const char *text, double *bps)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || !(v > 0) || !isfinite(v))
        return -EINVAL;
    double mul;
    if (*end == '\0')
        mul = 1e6; /* a bare number: Mbit/s, as tools/testbed reads it */
    else if (!strcasecmp(end, "bit") || !strcasecmp(end, "bps"))
        mul = 1;
    else if (!strcasecmp(end, "kbit") || !strcasecmp(end, "k"))
        mul = 1e3;
    else if (!strcasecmp(end, "mbit") || !strcasecmp(end, "m"))
        mul = 1e6;
    else if (!strcasecmp(end, "gbit") || !strcasecmp(end, "g"))
        mul = 1e9;
    else
        return -EINVAL;
    *bps = v * mul;
    return *bps >= 1e3 && *bps <= 1e13 ? 0 : -EINVAL;
}

int model_parse_bytes(const char *text, double *bytes)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || !(v > 0) || !isfinite(v))
        return -EINVAL;
    double mul = 1;
    if (*end) {
        switch (*end) {
            case 'k':
            case 'K': mul = 1024.0; break;
            case 'm':
            case 'M': mul = 1024.0 * 1024; break;
            case 'g':
            case 'G': mul = 1024.0 * 1024 * 1024; break;
            default: return -EINVAL;
        }
        end++;
        if (*end == 'B' || *end == 'b' || (*end == 'i' && end[1] == 'B' && (end++, 1)))
            end++;
        if (*end)
            return -EINVAL;
    }
    *bytes = v * mul;
    return *bytes >= 4 && *bytes <= 1e12 ? 0 : -EINVAL;
}
