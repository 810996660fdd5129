/*
 * cmd_bench_udp.c - `inagg bench udp`: the kernel's UDP ceiling on loopback. One sender
 * process blasts datagrams of one size with sendmmsg, one receiver process drains them with
 * recvmmsg; the receive rate is the most any UDP dataplane on this host can move at that
 * datagram size, the number the switch's and workers' packet rates are compared against.
 */
#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/bench/bench_udp.h"
#include "apps/cli/bench_opts.h"
#include "apps/cli/commands.h"
#include "apps/cli/flags.h"
#include "apps/cli/output.h"
#include "lib/json/json.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: inagg bench udp [--size BYTES] [--seconds S] [--batch N] [--repeats R]\n"
            "                       [--sockbuf BYTES] [--json FILE|-]\n"
            "\n"
            "Measures the kernel's UDP ceiling on loopback: how many datagrams per second of\n"
            "one size a receiver can take in when a sender sends as fast as it can. No\n"
            "aggregation, no protocol: just the kernel moving datagrams. It is the ceiling\n"
            "the inagg dataplane (switch and workers, also UDP over the kernel) is compared\n"
            "against: a switch forwarding near this rate is bound by the network stack, not\n"
            "by its own work.\n"
            "\n"
            "The sender and the receiver are separate processes (fork), so each gets its own\n"
            "core as two hosts would, and neither steals the other's time slices. The sender\n"
            "uses sendmmsg in batches to 127.0.0.1, the receiver recvmmsg on a port the kernel\n"
            "picks. Socket buffers are raised (SO_RCVBUFFORCE/SO_SNDBUFFORCE as root, else\n"
            "SO_RCVBUF/SO_SNDBUF, capped by net.core.rmem_max/wmem_max).\n"
            "\n"
            "Reported, median over the repeats:\n"
            "  received/s  datagrams the receiver took in per second (first to last arrival)\n"
            "  Gbps        UDP payload bits received per second\n"
            "  sent/s      datagrams the sender got into the kernel per second\n"
            "  loss %%      datagrams sent but never received (receive buffer overflow: the\n"
            "              sender outruns the receiver; expected, and why received/s is the\n"
            "              ceiling)\n"
            "\n"
            "options:\n"
            "  --size BYTES     UDP payload per datagram, %u..%u (default 4132: the 36-byte\n"
            "                   inagg header + 1024 float32)\n"
            "  --seconds S      how long the sender sends per repeat, 0.1..600 (default 2);\n"
            "                   the receiver gives up 1 s after that\n"
            "  --batch N        datagrams per sendmmsg/recvmmsg call, 1..%u (default 32)\n"
            "  --repeats R      runs, 1..%u (default 3)\n"
            "  --sockbuf BYTES  SO_RCVBUF/SO_SNDBUF to ask for, 0 = kernel default\n"
            "                   (default 8388608)\n"
            "  --json FILE|-    also write one JSON object to FILE; '-' prints only the JSON\n"
            "                   on stdout\n",
            UDP_MIN_SIZE, UDP_MAX_SIZE, UDP_MAX_BATCH, UDP_MAX_REPEATS);
}

static int parse_uint(const char *s, unsigned long lo, unsigned long hi, unsigned long *out)
{
    if (!s || !*s || *s == '-' || *s == '+')
        return -EINVAL;
    errno = 0;
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return -EINVAL;
    *out = v;
    return 0;
}

/* --seconds: 0.1..600. 0, or -EINVAL. */
static int parse_seconds(const char *text, double *out)
{
    char *end;
    errno = 0;
    double s = strtod(text, &end);
    if (errno || end == text || *end || !(s >= 0.1 && s <= 600))
        return -EINVAL;
    *out = s;
    return 0;
}

/* The UDP benchmark's own flags (bench_own_flag_fn). */
static int parse_own_flag(void *ctx, int c)
{
    struct udp_opts *o = ctx;
    unsigned long v = 0;
    const char *flag;
    int rc;
    switch (c) {
        case 's':
            flag = "--size";
            rc = parse_uint(optarg, UDP_MIN_SIZE, UDP_MAX_SIZE, &v);
            break;
        case 't':
            flag = "--seconds";
            rc = parse_seconds(optarg, &o->seconds);
            break;
        case 'b':
            flag = "--batch";
            rc = parse_uint(optarg, 1, UDP_MAX_BATCH, &v);
            break;
        case 'r':
            flag = "--repeats";
            rc = parse_uint(optarg, 1, UDP_MAX_REPEATS, &v);
            break;
        case 'B':
            flag = "--sockbuf";
            rc = parse_uint(optarg, 0, 1u << 30, &v);
            break;
        default: return -1;
    }
    if (rc < 0) {
        fprintf(stderr, "inagg bench udp: invalid value '%s' for %s (see --help)\n", optarg, flag);
        return 2;
    }
    if (c == 's')
        o->size = (unsigned)v;
    else if (c == 'b')
        o->batch = (unsigned)v;
    else if (c == 'r')
        o->repeats = (unsigned)v;
    else if (c == 'B')
        o->sockbuf = (int)v;
    return 0;
}

/* 0 parsed, 1 help printed, 2 bad usage (explained on stderr). */
static int parse_args(int argc, char **argv, struct udp_opts *o)
{
    static const struct option own[] = {
        {"size", required_argument, NULL, 's'},    {"seconds", required_argument, NULL, 't'},
        {"batch", required_argument, NULL, 'b'},   {"repeats", required_argument, NULL, 'r'},
        {"sockbuf", required_argument, NULL, 'B'}, {NULL, 0, NULL, 0}};
    *o = (struct udp_opts){4132, 2.0, 32, 3, 8 << 20, NULL};
    bench_opts_t b = {.cmd = "inagg bench udp", .json_path = &o->json};
    return bench_opts_parse(&b, argc, argv, own, parse_own_flag, o, usage);
}

/* Ask for `bytes` of socket buffer: the FORCE option (root, beyond rmem_max) first. Returns
 * the effective size the kernel reports. */
/* ---- render --------------------------------------------------------------------------------- */

static void render_header(const struct udp_opts *o)
{
    printf("inagg bench udp: %u-byte datagrams to 127.0.0.1, batch %u, %u x %.1f s\n"
           "(sender and receiver are separate processes)\n\n",
           o->size, o->batch, o->repeats, o->seconds);
    printf("%-7s %14s %9s %14s %8s\n", "repeat", "received/s", "Gbps", "sent/s", "loss %");
    fflush(stdout);
}

static void render_row(const char *label, const struct udp_run *r)
{
    printf("%-7s %14.0f %9.3f %14.0f %8.2f\n", label, r->recv_per_s, r->gbps, r->sent_per_s,
           r->loss_pct);
    fflush(stdout);
}

/* The --json object of the medians. 0, or a negative errno when it could not be written. */
static int render_json(const struct udp_opts *o, const struct udp_run *med, int rcvbuf, int sndbuf)
{
    json_writer_t w;
    json_init(&w);
    json_begin_object(&w, NULL);
    json_int(&w, "size", o->size);
    json_number(&w, "datagrams_per_s", med->recv_per_s);
    json_number(&w, "gbps", med->gbps);
    json_number(&w, "sent_per_s", med->sent_per_s);
    json_number(&w, "loss_pct", med->loss_pct);
    json_int(&w, "repeats", o->repeats);
    json_number(&w, "seconds", o->seconds);
    json_int(&w, "batch", o->batch);
    json_int(&w, "rcvbuf", rcvbuf);
    json_int(&w, "sndbuf", sndbuf);
    json_end_object(&w);
    return cli_emit_json(&w, o->json, "inagg bench udp");
}

int cmd_bench_udp(int argc, char **argv)
{
    struct udp_opts o;
    int prc = parse_args(argc, argv, &o);
    if (prc != 0)
        return prc == 1 ? 0 : prc;
    int table = !(o.json && strcmp(o.json, "-") == 0);
    struct udp_run runs[UDP_MAX_REPEATS];
    if (table)
        render_header(&o);
    for (unsigned r = 0; r < o.repeats; r++) {
        if (udp_run_once(&o, &runs[r]) != 0)
            return 1;
        char label[16];
        snprintf(label, sizeof(label), "%u", r + 1);
        if (table)
            render_row(label, &runs[r]);
    }
    struct udp_run med = {
        .recv_per_s = udp_median_of(runs, o.repeats, offsetof(struct udp_run, recv_per_s)),
        .gbps = udp_median_of(runs, o.repeats, offsetof(struct udp_run, gbps)),
        .sent_per_s = udp_median_of(runs, o.repeats, offsetof(struct udp_run, sent_per_s)),
        .loss_pct = udp_median_of(runs, o.repeats, offsetof(struct udp_run, loss_pct))};
    if (table) {
        render_row("median", &med);
        printf("\nsocket buffers: SO_RCVBUF %d, SO_SNDBUF %d bytes (as the kernel reports them)\n",
               runs[0].rcvbuf, runs[0].sndbuf);
    }
    if (o.json && render_json(&o, &med, runs[0].rcvbuf, runs[0].sndbuf) != 0)
        return 1;
    return 0;
}
