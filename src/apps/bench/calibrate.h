/*
 * calibrate.h - `inagg model calibrate`'s run: this implementation's costs measured by short
 * runs of the existing benchmarks (each a bounded child of this binary, apps/bench/subrun.h),
 * and the parameters file read back into the model's parameters. The command's flags, progress
 * and the file's writing are apps/cli/model_calib.c.
 */
#ifndef INAGG_BENCH_CALIBRATE_H
#define INAGG_BENCH_CALIBRATE_H

#include <stddef.h>
#include <stdint.h>

#include "apps/model/model.h"

#define CAL_ELEMS 2000000u /* loopback allreduce: 8 MB per worker */
#define CAL_WORKERS 2u
#define CAL_ITERS 5u
#define CAL_PACKET 2048u /* the testbed's packet at MTU 9000 */
#define CAL_SWITCH_THREADS 2u
#define CAL_RING_HOSTS 4u /* the ring's calibration: 4 hosts at 100 Mbit/s, 4 MiB each */
/* The MPI route's threshold: the switch's allreduce against Open MPI's own on 4 hosts at the
 * link rate asked for (default 1 Gbit/s), as the interposer and coll/inagg run it (the
 * library's window and retransmission floor), at each of these sizes per rank. */
#define CAL_ROUTE_HOSTS 4u
#define CAL_ROUTE_RATE "1gbit"
#define CAL_ROUTE_SIZES "16K,64K,256K,1M,4M,16M"
#define CAL_ROUTE_MAX_SIZES 8
/* The switch takes a size only where its median is at least this much faster than MPI's. */
#define CAL_ROUTE_MARGIN 1.1
/* The threshold when the switch won at no size: above every MPI allreduce of 4-byte elements
 * (an int count), so every call stays with MPI. */
#define CAL_ROUTE_NEVER 8589934592.0

/* What `inagg model calibrate` measured: this implementation's costs. */
typedef struct model_calib {
    int have; /* read from a file or measured */
    double switch_pkt_s; /* switch CPU per contribution packet */
    uint32_t switch_threads; /* the dataplane threads the testbed's switch runs */
    double worker_elem_s; /* worker CPU per element */
    double hop_s; /* one-way latency of one hop (worker to switch) */
    double msg_s; /* one message step between two hosts (MPI) */
    double ring_step_s; /* the MPI ring's further cost per step of a large message (0: not
                           measured, as without a testbed or in files from before it) */
    double stream_eff; /* payload share of a TCP stream at MTU 9000 */
    uint32_t packet_elems, overhead_bytes;
    /* the codec, per mode measured */
    int ncodec;
    struct {
        char mode[32];
        double ratio, enc_Bps, dec_Bps;
    } codec[4];
    char where[64]; /* "testbed" or "loopback" for the latency */
    /* the MPI route's threshold (calib_route): nroute 0 when not measured (no testbed) */
    int nroute;
    struct {
        double bytes, inagg_s, mpi_s; /* per rank; medians of the slowest rank's times */
    } route[CAL_ROUTE_MAX_SIZES];
    double route_min_bytes; /* calib_route_threshold of the sizes above */
    double route_link_bps; /* the links' rate they were measured at */
    double load1; /* load average when calibrated */
} model_calib_t;

/* Starts a calibration: the fields that need no run (load average, packet, overheads, the
 * TCP stream's payload share at MTU 9000). */
void calib_begin(model_calib_t *c);

/* The first four runs, each writing its report into dir: the switch's and workers' costs (loopback
 * allreduce), the latency of a hop and of an MPI step (a 2-host testbed with testbed, else or
 * where none can be built loopback: c->where says which), the MPI ring's step (a 4-host
 * testbed; 0 without one), the codec. 0, or a negative errno with the reason in err. */
int calib_allreduce(const char *dir, model_calib_t *c, char *err, size_t errlen);
int calib_latency(const char *dir, int testbed, model_calib_t *c, char *err, size_t errlen);
int calib_ring(const char *dir, model_calib_t *c, char *err, size_t errlen);
int calib_codec(const char *dir, model_calib_t *c, char *err, size_t errlen);
/* The route's threshold on a CAL_ROUTE_HOSTS-host testbed at `rate` (tools/testbed's
 * spelling, link_bps in bit/s): c->route, c->route_min_bytes, c->route_link_bps. */
int calib_route(const char *dir, const char *rate, double link_bps, model_calib_t *c, char *err,
                size_t errlen);
/* The sizes of a `bench allreduce --sizes --baseline mpi` report (its JSON text) into c->route:
 * per size object its bytes, the switch's median (its tat_s) and MPI's (tat_s x speedup, the
 * speedup being MPI's over the switch's). 0, or -EPROTO and why. */
int calib_route_parse(const char *text, model_calib_t *c, char *err, size_t errlen);
/* The smallest of n sizes (ascending) from which on the switch's time was at least `margin`
 * times shorter than MPI's at that size and every larger one; CAL_ROUTE_NEVER when it was not
 * at the largest (or n is 0). */
double calib_route_threshold(const double *bytes, const double *inagg_s, const double *mpi_s, int n,
                             double margin);
/* Removes the runs' reports and logs from dir, then dir. */
void calib_clean(const char *dir);

/* Read a parameters file written by calibrate. 0, or a negative errno with the reason in err. */
int model_calib_read(const char *path, model_calib_t *c, char *err, size_t errlen);
/* Params for a testbed of link_bps (bit/s) from the calibration, compression mode or NULL. */
int model_calib_params(const model_calib_t *c, double link_bps, const char *compress,
                       model_params_t *p, char *err, size_t errlen);

#endif /* INAGG_BENCH_CALIBRATE_H */
