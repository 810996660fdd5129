/*
 * model_calib.c - `inagg model calibrate`: its flags and help, the progress of its five runs
 * and the parameters file it writes. The runs themselves, and the file's reader, are the
 * benchmarks' (apps/bench/calibrate.c).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apps/cli/model_cli.h"
#include "apps/cli/output.h"
#include "lib/base/errmsg.h"
#include "lib/json/json.h"

#define SUB "calibrate"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: inagg model calibrate [--out FILE] [--no-testbed] [--link-rate R]\n"
            "\n"
            "Measures this implementation's costs with short runs of the existing benchmarks\n"
            "(about three minutes; progress on stderr) and writes them as one JSON object:\n"
            "  switch_pkt_s    the switch's CPU time per contribution packet: `inagg bench\n"
            "                  allreduce` on loopback, %u workers x %u int32, %u-element\n"
            "                  packets, %u switch threads: switch CPU / packets received\n"
            "  worker_elem_s   a worker's CPU time per element (same run: worker CPU / elements)\n"
            "  hop_s, msg_s    one hop's one-way latency (inagg p50 / 2) and one MPI message\n"
            "                  step (MPI allreduce p50 of 2 ranks): `inagg bench latency` on a\n"
            "                  2-host testbed (root), or loopback with --no-testbed or\n"
            "                  where testbeds cannot be built\n"
            "  ring_step_s     what one step of the MPI ring costs beyond its bytes and msg_s\n"
            "                  (waiting for the slowest host): `inagg bench allreduce\n"
            "                  --testbed %u --baseline mpi-ring`, 4 MiB at 100 Mbit/s: (ring\n"
            "                  TAT - the model's ring without it) / 2(n-1); 0 without a testbed\n"
            "  stream_eff      a TCP stream's payload share at MTU 9000 (headers only)\n"
            "  codec_*         ratio and encode/decode bytes per second of zfp:rate=8 and fp16:\n"
            "                  `inagg bench compress` on 1M values, one thread\n"
            "  route_min_bytes the MPI route's threshold (the interposer's INAGG_CALIBRATION,\n"
            "                  coll/inagg's coll_inagg_calibration): `inagg bench allreduce\n"
            "                  --testbed %u --link-rate R --baseline mpi\n"
            "                  --sizes=%s` with the library's window and\n"
            "                  retransmission floor, as MPI runs it: the smallest size at\n"
            "                  which, and at every larger one, the switch was at least\n"
            "                  %.1fx faster than Open MPI's allreduce (medians);\n"
            "                  %.0f (every call stays with MPI) where it was at none;\n"
            "                  absent without a testbed. route_sizes: the times per size\n"
            "\n"
            "  --out FILE      where to write it (default %s; - for stdout)\n"
            "  --no-testbed    latency on loopback only, no ring step, no route_min_bytes\n"
            "  --link-rate R   the testbed's links for route_min_bytes (default %s): the\n"
            "                  rate of the network the MPI jobs will run on\n"
            "  -h, --help      this text\n"
            "\n"
            "Numbers depend on the machine's load (recorded as load1): calibrate on the\n"
            "machine and under the conditions you will predict for.\n",
            CAL_WORKERS, CAL_ELEMS, CAL_PACKET, CAL_SWITCH_THREADS, CAL_RING_HOSTS, CAL_ROUTE_HOSTS,
            CAL_ROUTE_SIZES, CAL_ROUTE_MARGIN, CAL_ROUTE_NEVER, MODEL_DEFAULT_PARAMS,
            CAL_ROUTE_RATE);
}

static int write_calib(const model_calib_t *c, const char *path)
{
    json_writer_t w;
    json_init(&w);
    json_begin_object(&w, NULL);
    json_string(&w, "what", "inagg model parameters (inagg model calibrate)");
    json_number(&w, "load1", c->load1);
    json_number_exact(&w, "switch_pkt_s", c->switch_pkt_s);
    json_int(&w, "switch_threads", c->switch_threads);
    json_number_exact(&w, "worker_elem_s", c->worker_elem_s);
    json_number_exact(&w, "hop_s", c->hop_s);
    json_number_exact(&w, "msg_s", c->msg_s);
    json_number_exact(&w, "ring_step_s", c->ring_step_s);
    json_string(&w, "latency_measured_on", c->where);
    json_number_exact(&w, "stream_eff", c->stream_eff);
    json_int(&w, "packet_elems", c->packet_elems);
    json_int(&w, "overhead_bytes", c->overhead_bytes);
    json_begin_array(&w, "codecs");
    for (int i = 0; i < c->ncodec; i++) {
        json_begin_object(&w, NULL);
        json_string(&w, "mode", c->codec[i].mode);
        json_number_exact(&w, "ratio", c->codec[i].ratio);
        json_number_exact(&w, "enc_Bps", c->codec[i].enc_Bps);
        json_number_exact(&w, "dec_Bps", c->codec[i].dec_Bps);
        json_end_object(&w);
    }
    json_end_array(&w);
    if (c->nroute > 0) {
        json_number_exact(&w, "route_min_bytes", c->route_min_bytes);
        json_number_exact(&w, "route_link_bps", c->route_link_bps);
        json_int(&w, "route_hosts", CAL_ROUTE_HOSTS);
        json_number(&w, "route_margin", CAL_ROUTE_MARGIN);
        json_begin_array(&w, "route_sizes");
        for (int i = 0; i < c->nroute; i++) {
            json_begin_object(&w, NULL);
            json_number_exact(&w, "bytes", c->route[i].bytes);
            json_number_exact(&w, "switch_s", c->route[i].inagg_s);
            json_number_exact(&w, "mpi_s", c->route[i].mpi_s);
            json_end_object(&w);
        }
        json_end_array(&w);
    }
    json_end_object(&w);
    return cli_emit_json(&w, path, MODEL_CMD " " SUB);
}

/* 1 (after saying which run failed and why) when a calibration step's result r is not 0. */
static int step_failed(int r, const char *what, const char *err)
{
    if (r != 0)
        fprintf(stderr, MODEL_CMD " " SUB ": %s failed: %s\n", what, err);
    return r != 0;
}

/* calibrate's flags */
typedef struct cal_flags {
    const char *out;
    int testbed;
    const char *rate; /* --link-rate, as given */
    double rate_bps;
} cal_flags_t;

static int parse_flag(void *ctx, int ch)
{
    cal_flags_t *f = ctx;
    switch (ch) {
        case 'o': f->out = optarg; return 0;
        case 'n': f->testbed = 0; return 0;
        case 'r':
            f->rate = optarg;
            if (model_parse_rate(optarg, &f->rate_bps) != 0 || !(f->rate_bps > 0))
                return model_bad(SUB, "--link-rate '%s' is not a rate such as 1gbit or 100mbit",
                                 optarg);
            return 0;
        default: return -1;
    }
}

int model_calibrate_main(int argc, char **argv)
{
    static const struct option longopts[] = {{"out", required_argument, 0, 'o'},
                                             {"no-testbed", no_argument, 0, 'n'},
                                             {"link-rate", required_argument, 0, 'r'},
                                             {"help", no_argument, 0, 'h'},
                                             {0, 0, 0, 0}};
    static const model_flags_t spec = {SUB, ":o:h", longopts, usage, parse_flag};
    cal_flags_t flags = {.out = MODEL_DEFAULT_PARAMS, .testbed = 1, .rate = CAL_ROUTE_RATE};
    if (model_parse_rate(flags.rate, &flags.rate_bps) != 0)
        return 1;
    int prc = model_parse_flags(&spec, argc, argv, &flags);
    if (prc)
        return prc == 1 ? 0 : prc;
    if (geteuid() != 0)
        flags.testbed = 0;

    char dir[] = "/tmp/inagg-model-XXXXXX";
    if (!mkdtemp(dir)) {
        fprintf(stderr, MODEL_CMD " " SUB ": mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    model_calib_t c;
    calib_begin(&c);
    char err[600];
    int rc = 0;
    fprintf(stderr,
            MODEL_CMD " " SUB ": 1/5 switch and worker costs (bench allreduce, "
                      "loopback, %u workers)\n",
            CAL_WORKERS);
    rc = step_failed(calib_allreduce(dir, &c, err, sizeof(err)), "bench allreduce", err);
    if (rc == 0) {
        fprintf(stderr, MODEL_CMD " " SUB ": 2/5 latency (bench latency, %s)\n",
                flags.testbed ? "2-host testbed" : "loopback");
        rc = step_failed(calib_latency(dir, flags.testbed, &c, err, sizeof(err)), "bench latency",
                         err);
    }
    if (rc == 0 && flags.testbed && strcmp(c.where, "loopback") != 0) {
        fprintf(stderr,
                MODEL_CMD " " SUB ": 3/5 the MPI ring's step (bench allreduce, %u-host "
                          "testbed)\n",
                CAL_RING_HOSTS);
        rc = step_failed(calib_ring(dir, &c, err, sizeof(err)), "the ring's run", err);
    } else if (rc == 0) {
        fprintf(stderr, MODEL_CMD " " SUB ": 3/5 the MPI ring's step: no testbed, 0\n");
    }
    if (rc == 0) {
        fprintf(stderr, MODEL_CMD " " SUB ": 4/5 codec (bench compress, 1M values)\n");
        rc = step_failed(calib_codec(dir, &c, err, sizeof(err)), "bench compress", err);
    }
    if (rc == 0 && flags.testbed && strcmp(c.where, "loopback") != 0) {
        fprintf(stderr,
                MODEL_CMD " " SUB ": 5/5 the MPI route's threshold (bench allreduce against "
                          "Open MPI, %u-host testbed at %s)\n",
                CAL_ROUTE_HOSTS, flags.rate);
        rc = step_failed(calib_route(dir, flags.rate, flags.rate_bps, &c, err, sizeof(err)),
                         "the route's run", err);
        if (rc == 0)
            fprintf(stderr, MODEL_CMD " " SUB ":   route_min_bytes %.0f%s\n", c.route_min_bytes,
                    c.route_min_bytes >= CAL_ROUTE_NEVER
                        ? ": the switch won at no size, every call stays with MPI"
                        : "");
    } else if (rc == 0) {
        fprintf(stderr, MODEL_CMD " " SUB ": 5/5 the MPI route's threshold: no testbed, not "
                                  "measured (the routes keep their default)\n");
    }
    calib_clean(dir);
    if (rc != 0)
        return rc;
    fprintf(stderr,
            MODEL_CMD " " SUB ": switch %.2f us/packet (%u threads), worker %.2f "
                      "ns/element, hop %.1f us, MPI step %.1f us, ring step +%.2f ms -> %s\n",
            c.switch_pkt_s * 1e6, c.switch_threads, c.worker_elem_s * 1e9, c.hop_s * 1e6,
            c.msg_s * 1e6, c.ring_step_s * 1e3, flags.out);
    return write_calib(&c, flags.out) == 0 ? 0 : 1;
}
