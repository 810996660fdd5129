/*
 * calibrate.c - the runs of `inagg model calibrate` (calibrate.h): the loopback allreduce for
 * the switch's CPU per packet and the worker's CPU per element, `inagg bench latency` on a
 * 2-host testbed (or loopback) for a hop and an MPI message, the MPI ring on a 4-host testbed
 * for what a ring step costs beyond its bytes, `inagg bench compress` for the codec, the
 * switch against Open MPI's allreduce size by size on a 4-host testbed for the MPI route's
 * threshold; and the parameters file read back into the model's parameters.
 */
#include "apps/bench/calibrate.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps/bench/subrun.h"
#include "apps/launch/launch.h"
#include "inagg.h"
#include "lib/base/errmsg.h"
#include "lib/json/json.h"

/* the progress lines of the runs name the command the user ran */
#define CAL_WHO "inagg model calibrate"
#define TESTBED_MTU 9000.0
#define TCP_IP_HEADERS 52.0 /* TCP with timestamps 32 + IPv4 20 */
#define ETH_HEADER 14.0
#define CAL_RING_RATE "100mbit"
#define CAL_RING_BPS 100e6 /* CAL_RING_RATE in bit/s */
#define CAL_RING_BYTES 4194304.0
static const char *const CAL_CODECS[] = {"zfp:rate=8", "fp16"};

static double load1(void)
{
    double l = NAN;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = NAN;
        fclose(f);
    }
    return l;
}

static int num(const char *text, const char *key, double *v)
{
    return json_find_number(text, key, v);
}

/* Run `args` (a benchmark writing its JSON report to `json`) within timeout_s and read that
 * report into *text (the caller frees it). 0, or a negative errno with the reason in err. */
static int run_report(char **args, const char *json, unsigned timeout_s, char **text, char *err,
                      size_t errlen)
{
    int rc = bench_run_self(args, json, timeout_s, err, errlen);
    if (rc < 0)
        return rc;
    *text = NULL;
    if (bench_read_file(json, text) < 0)
        return set_err(err, errlen, -EPROTO, "no report from %s %s", args[1], args[2]);
    return 0;
}

/* The loopback allreduce: switch CPU per packet and worker CPU per element. */
int calib_allreduce(const char *dir, model_calib_t *c, char *err, size_t errlen)
{
    char json[4200], elems[32], pk[32], it[32], wk[32], st[32];
    snprintf(json, sizeof(json), "%s/allreduce.json", dir);
    snprintf(elems, sizeof(elems), "%u", CAL_ELEMS);
    snprintf(pk, sizeof(pk), "%u", CAL_PACKET);
    snprintf(it, sizeof(it), "%u", CAL_ITERS);
    snprintf(wk, sizeof(wk), "%u", CAL_WORKERS);
    snprintf(st, sizeof(st), "%u", CAL_SWITCH_THREADS);
    char *args[] = {"inagg", "bench",    "allreduce", "--workers",        wk, "--elems",
                    elems,   "--dtype",  "int32",     "--packet-elems",   pk, "--iters",
                    it,      "--warmup", "1",         "--switch-threads", st, "--json",
                    json,    NULL};
    char *text;
    int rc = run_report(args, json, 120, &text, err, errlen);
    if (rc < 0)
        return rc;
    double tat, sw = NAN, wkr = NAN, retx;
    const char *cpu = strstr(text, "\"cpu\"");
    if (cpu) {
        num(cpu, "switch", &sw);
        num(cpu, "workers", &wkr);
    }
    if (num(text, "tat_s", &tat) || num(text, "retransmissions", &retx) || !(tat > 0) ||
        !(sw > 0) || !(wkr > 0)) {
        rc = set_err(err, errlen, -EPROTO, "bench allreduce's report lacks tat_s or cpu");
    } else {
        /* cpu.* is percent of one core over the timed iterations (about iters x TAT) */
        double window = tat * CAL_ITERS;
        double pkts = ceil((double)CAL_ELEMS / CAL_PACKET) * CAL_WORKERS * CAL_ITERS;
        c->switch_pkt_s = sw / 100.0 * window / pkts;
        c->switch_threads = CAL_SWITCH_THREADS;
        c->worker_elem_s = wkr / 100.0 * window / ((double)CAL_ELEMS * CAL_ITERS);
        fprintf(stderr,
                CAL_WHO ":   TAT %.1f ms, switch %.0f%% and each worker "
                        "%.0f%% of a core, %.0f retransmissions\n",
                tat * 1e3, sw, wkr, retx);
    }
    free(text);
    return rc;
}

/* Latency of small allreduces: inagg (a round trip through the switch: 2 hops) and MPI (one
 * message step for 2 ranks). On a 2-host testbed when allowed, else on loopback. */
int calib_latency(const char *dir, int testbed, model_calib_t *c, char *err, size_t errlen)
{
    char json[4200];
    snprintf(json, sizeof(json), "%s/latency.json", dir);
    char *tb_args[] = {"inagg",  "bench",      "latency",  "--testbed", "2",   "--fabric",
                       "bridge", "--protocol", "switchml", "--iters",   "400", "--warmup",
                       "50",     "--baseline", "mpi",      "--json",    json,  NULL};
    char *lo_args[] = {"inagg",    "bench",   "latency", "--workers", "2",  "--protocol",
                       "switchml", "--iters", "400",     "--warmup",  "50", "--baseline",
                       "mpi",      "--json",  json,      NULL};
    int rc = -1;
    if (testbed) {
        rc = bench_run_self(tb_args, json, 120, err, errlen);
        if (rc == 0)
            snprintf(c->where, sizeof(c->where), "testbed (2 hosts, bridge)");
        else
            fprintf(stderr,
                    CAL_WHO ":   testbed latency failed (%s); loopback "
                            "instead\n",
                    err);
    }
    if (rc != 0) {
        rc = bench_run_self(lo_args, json, 120, err, errlen);
        if (rc < 0)
            return rc;
        snprintf(c->where, sizeof(c->where), "loopback");
    }
    char *text = NULL;
    if (bench_read_file(json, &text) < 0)
        return set_err(err, errlen, -EPROTO, "no report from bench latency");
    /* the first p50 is inagg's, the one after "baseline" MPI's */
    double p50 = NAN, mpi = NAN;
    num(text, "p50", &p50);
    const char *b = strstr(text, "\"baseline\"");
    if (b)
        num(b, "p50", &mpi);
    free(text);
    if (!(p50 > 0) || !(mpi > 0))
        return set_err(err, errlen, -EPROTO, "bench latency's report lacks p50");
    c->hop_s = p50 * 1e-6 / 2.0;
    c->msg_s = mpi * 1e-6;
    fprintf(stderr,
            CAL_WHO ":   inagg p50 %.0f us (hop %.0f us), MPI p50 %.0f us "
                    "(%s)\n",
            p50, p50 / 2, mpi, c->where);
    return 0;
}

/* The MPI ring's cost per step beyond its bytes and alpha: the ring baseline of a 4-host
 * testbed at 100 Mbit/s against the model's ring with the calibration so far. */
int calib_ring(const char *dir, model_calib_t *c, char *err, size_t errlen)
{
    char json[4200], hosts[16], elems[32];
    snprintf(json, sizeof(json), "%s/ring.json", dir);
    snprintf(hosts, sizeof(hosts), "%u", CAL_RING_HOSTS);
    snprintf(elems, sizeof(elems), "%.0f", CAL_RING_BYTES / 4);
    char *args[] = {"inagg",    "bench",       "allreduce",   "--testbed", hosts, "--fabric",
                    "bridge",   "--link-rate", CAL_RING_RATE, "--elems",   elems, "--dtype",
                    "int32",    "--iters",     "3",           "--warmup",  "1",   "--baseline",
                    "mpi-ring", "--json",      json,          NULL};
    char *text;
    int rc = run_report(args, json, 300, &text, err, errlen);
    if (rc < 0)
        return rc;
    const char *b = strstr(text, "\"baseline\"");
    const char *t = b ? strstr(b, "\"tat_s\"") : NULL;
    double ring = NAN;
    if (t)
        num(t, "median", &ring);
    free(text);
    if (!(ring > 0))
        return set_err(err, errlen, -EPROTO, "bench allreduce's report lacks the ring's tat_s");
    model_params_t p;
    if (model_calib_params(c, CAL_RING_BPS, NULL, &p, err, errlen) != 0)
        return -EINVAL;
    p.ring_step_s = 0;
    model_time_t bare = model_allreduce(MODEL_RING, &p, CAL_RING_HOSTS, CAL_RING_BYTES);
    double steps = 2.0 * (CAL_RING_HOSTS - 1);
    c->ring_step_s = ring > bare.total_s ? (ring - bare.total_s) / steps : 0;
    fprintf(stderr,
            CAL_WHO ":   ring %.3f s against %.3f s from its bytes and steps: "
                    "%.2f ms more per step\n",
            ring, bare.total_s, c->ring_step_s * 1e3);
    return 0;
}

int calib_codec(const char *dir, model_calib_t *c, char *err, size_t errlen)
{
    char json[4200];
    snprintf(json, sizeof(json), "%s/compress.json", dir);
    char *args[] = {"inagg",  "bench",  "compress",  "--elems", "1048576", "--repeats", "3",
                    "--data", "normal", "--threads", "1",       "--json",  json,        NULL};
    char *text;
    int rc = run_report(args, json, 180, &text, err, errlen);
    if (rc < 0)
        return rc;
    c->ncodec = 0;
    for (size_t i = 0; i < sizeof(CAL_CODECS) / sizeof(CAL_CODECS[0]); i++) {
        char key[64];
        snprintf(key, sizeof(key), "\"mode\": \"%s\"", CAL_CODECS[i]);
        const char *at = strstr(text, key);
        if (!at) {
            snprintf(key, sizeof(key), "\"mode\":\"%s\"", CAL_CODECS[i]);
            at = strstr(text, key);
        }
        double r, e, d;
        if (!at || num(at, "ratio", &r) || num(at, "encode_gbs_1", &e) ||
            num(at, "decode_gbs_1", &d) || !(r > 0) || !(e > 0) || !(d > 0))
            continue;
        int k = c->ncodec++;
        snprintf(c->codec[k].mode, sizeof(c->codec[k].mode), "%s", CAL_CODECS[i]);
        c->codec[k].ratio = r;
        c->codec[k].enc_Bps = e * 1e9;
        c->codec[k].dec_Bps = d * 1e9;
        fprintf(stderr,
                CAL_WHO ":   %s: ratio %.2f, encode %.3f GB/s, decode %.3f "
                        "GB/s\n",
                CAL_CODECS[i], r, e, d);
    }
    free(text);
    if (c->ncodec == 0)
        return set_err(err, errlen, -EPROTO, "bench compress reported none of the codec modes");
    return 0;
}

double calib_route_threshold(const double *bytes, const double *inagg_s, const double *mpi_s, int n,
                             double margin)
{
    double t = CAL_ROUTE_NEVER;
    for (int i = n - 1; i >= 0; i--) {
        if (!(inagg_s[i] > 0) || !(mpi_s[i] >= margin * inagg_s[i]))
            break;
        t = bytes[i];
    }
    return t;
}

int calib_route_parse(const char *text, model_calib_t *c, char *err, size_t errlen)
{
    const char *at = strstr(text, "\"sizes\"");
    c->nroute = 0;
    while (at && (at = strstr(at, "{\"bytes\"")) != NULL) {
        const char *next = strstr(at + 1, "{\"bytes\"");
        size_t len = next ? (size_t)(next - at) : strlen(at);
        char *one = strndup(at, len);
        double b = NAN, t = NAN, sp = NAN;
        if (one && (num(one, "bytes", &b) || num(one, "tat_s", &t) || num(one, "speedup", &sp)))
            b = NAN;
        free(one);
        if (!(b > 0) || !(t > 0) || !(sp > 0))
            return set_err(err, errlen, -EPROTO,
                           "bench allreduce's report lacks a size's tat_s or speedup");
        if (c->nroute == CAL_ROUTE_MAX_SIZES)
            return set_err(err, errlen, -EPROTO, "bench allreduce reported too many sizes");
        int k = c->nroute++;
        c->route[k].bytes = b;
        c->route[k].inagg_s = t;
        c->route[k].mpi_s = t * sp;
        at = next;
    }
    return c->nroute ? 0 : set_err(err, errlen, -EPROTO, "bench allreduce reported no sizes");
}

int calib_route(const char *dir, const char *rate, double link_bps, model_calib_t *c, char *err,
                size_t errlen)
{
    inagg_options_t lib = INAGG_OPTIONS_INIT; /* what the MPI routes' jobs run with */
    char json[4200], png[4200], hosts[16], win[16], rto[16];
    snprintf(json, sizeof(json), "%s/route.json", dir);
    snprintf(png, sizeof(png), "%s/route.png", dir);
    snprintf(hosts, sizeof(hosts), "%u", CAL_ROUTE_HOSTS);
    snprintf(win, sizeof(win), "%u", lib.slots);
    snprintf(rto, sizeof(rto), "%u", lib.rto_min_us);
    char *args[] = {"inagg",
                    "bench",
                    "allreduce",
                    "--testbed",
                    hosts,
                    "--link-rate",
                    (char *)rate,
                    "--sizes=" CAL_ROUTE_SIZES,
                    "--window",
                    win,
                    "--rto-min-us",
                    rto,
                    "--iters",
                    "10",
                    "--warmup",
                    "2",
                    "--baseline",
                    "mpi",
                    "--plot",
                    png,
                    "--json",
                    json,
                    NULL};
    char *text;
    int rc = run_report(args, json, 400, &text, err, errlen);
    if (rc < 0)
        return rc;
    rc = calib_route_parse(text, c, err, errlen);
    free(text);
    if (rc < 0)
        return rc;
    double b[CAL_ROUTE_MAX_SIZES], ti[CAL_ROUTE_MAX_SIZES], tm[CAL_ROUTE_MAX_SIZES];
    for (int i = 0; i < c->nroute; i++) {
        b[i] = c->route[i].bytes;
        ti[i] = c->route[i].inagg_s;
        tm[i] = c->route[i].mpi_s;
        fprintf(stderr, CAL_WHO ":   %8.0f B: switch %.3f ms, Open MPI %.3f ms (%.2fx)\n", b[i],
                ti[i] * 1e3, tm[i] * 1e3, tm[i] / ti[i]);
    }
    c->route_min_bytes = calib_route_threshold(b, ti, tm, c->nroute, CAL_ROUTE_MARGIN);
    c->route_link_bps = link_bps;
    return 0;
}

void calib_begin(model_calib_t *c)
{
    memset(c, 0, sizeof(*c));
    c->load1 = load1();
    c->packet_elems = CAL_PACKET;
    c->overhead_bytes = 74; /* inagg header 32 + UDP 8 + IPv4 20 + Ethernet 14 */
    c->stream_eff = (TESTBED_MTU - TCP_IP_HEADERS) / (TESTBED_MTU + ETH_HEADER);
}

void calib_clean(const char *dir)
{
    const char *files[] = {"allreduce.json", "latency.json", "ring.json",
                           "compress.json",  "route.json",   "route.png"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char f[4300];
        snprintf(f, sizeof(f), "%s/%s", dir, files[i]);
        unlink(f);
        strncat(f, ".log", sizeof(f) - strlen(f) - 1);
        unlink(f);
    }
    rmdir(dir);
}

int model_calib_read(const char *path, model_calib_t *c, char *err, size_t errlen)
{
    char *text = NULL;
    int rc = bench_read_file(path, &text);
    if (rc < 0)
        return set_err(err, errlen, rc, "cannot read %s: %s (run `inagg model calibrate` first)",
                       path, strerror(-rc));
    memset(c, 0, sizeof(*c));
    double v[8];
    const char *keys[] = {"switch_pkt_s", "switch_threads", "worker_elem_s", "hop_s",
                          "msg_s",        "stream_eff",     "packet_elems",  "overhead_bytes"};
    for (int i = 0; i < 8; i++)
        if (num(text, keys[i], &v[i]) != 0 || !(v[i] > 0) || !isfinite(v[i])) {
            free(text);
            return set_err(err, errlen, -EINVAL,
                           "%s: no valid \"%s\" (a file written by "
                           "inagg model calibrate?)",
                           path, keys[i]);
        }
    c->switch_pkt_s = v[0];
    c->switch_threads = (uint32_t)v[1];
    c->worker_elem_s = v[2];
    c->hop_s = v[3];
    c->msg_s = v[4];
    c->stream_eff = v[5] > 1 ? 1 : v[5];
    c->packet_elems = (uint32_t)v[6];
    c->overhead_bytes = (uint32_t)v[7];
    num(text, "load1", &c->load1);
    if (num(text, "ring_step_s", &c->ring_step_s) != 0) {
        c->ring_step_s = 0; /* a file from before the ring's step was calibrated */
    } else if (!(c->ring_step_s >= 0) || !isfinite(c->ring_step_s)) {
        free(text);
        return set_err(err, errlen, -EINVAL,
                       "%s: \"ring_step_s\" must be a number of seconds, 0 or more", path);
    }
    json_find_string(text, "latency_measured_on", c->where, sizeof(c->where));
    const char *at = strstr(text, "\"codecs\"");
    while (at && c->ncodec < 4) {
        const char *m = strstr(at, "\"mode\"");
        if (!m)
            break;
        int k = c->ncodec;
        if (json_find_string(m, "mode", c->codec[k].mode, sizeof(c->codec[k].mode)) == 0 &&
            num(m, "ratio", &c->codec[k].ratio) == 0 &&
            num(m, "enc_Bps", &c->codec[k].enc_Bps) == 0 &&
            num(m, "dec_Bps", &c->codec[k].dec_Bps) == 0 && c->codec[k].ratio > 0 &&
            c->codec[k].enc_Bps > 0 && c->codec[k].dec_Bps > 0)
            c->ncodec++;
        at = m + 6;
    }
    free(text);
    c->have = 1;
    return 0;
}

int model_calib_params(const model_calib_t *c, double link_bps, const char *compress,
                       model_params_t *p, char *err, size_t errlen)
{
    model_params_default(p);
    p->link_bps = link_bps;
    p->hop_s = c->hop_s;
    p->packet_elems = c->packet_elems;
    p->overhead_bytes = c->overhead_bytes;
    p->switch_pkt_s = c->switch_pkt_s;
    p->switch_threads = c->switch_threads;
    p->worker_elem_s = c->worker_elem_s;
    p->msg_s = c->msg_s;
    p->ring_step_s = c->ring_step_s;
    p->stream_eff = c->stream_eff;
    if (compress && strcmp(compress, "none") != 0) {
        for (int i = 0; i < c->ncodec; i++)
            if (!strcmp(c->codec[i].mode, compress)) {
                p->ratio = c->codec[i].ratio;
                p->enc_Bps = c->codec[i].enc_Bps;
                p->dec_Bps = c->codec[i].dec_Bps;
                /* the switch decodes each contribution and encodes the sum: per value coded,
                 * the mean of one decode and one encode (4-byte values) */
                p->agg_value_s = 2.0 / c->codec[i].dec_Bps + 2.0 / c->codec[i].enc_Bps;
                return 0;
            }
        return set_err(err, errlen, -ENOENT,
                       "the parameters have no codec '%s' (calibrated: "
                       "%s%s)",
                       compress, c->ncodec ? c->codec[0].mode : "none",
                       c->ncodec > 1 ? ", ..." : "");
    }
    return 0;
}
