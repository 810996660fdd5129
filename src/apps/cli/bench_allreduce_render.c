/*
 * bench_allreduce_render.c - what `inagg bench allreduce` prints: the summary and a table per
 * size and system, the --json object, and the --sizes plot (bus bandwidth against tensor size,
 * one line per system, with gnuplot).
 *
 * Bandwidths follow nccl-tests: algBw = bytes per rank / time, busBw = algBw * 2(n-1)/n, the
 * per-link rate a ring allreduce would need for that time; here in Gbit/s (nccl-tests prints
 * GB/s) so that they read against the link rate. inagg's busBw can exceed the link rate: it
 * sends the tensor once instead of 2(n-1)/n times.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apps/cli/bench_allreduce_cli.h"
#include "apps/cli/output.h"
#include "apps/cli/plot.h"
#include "lib/json/json.h"
#include "lib/netio/roce_frame.h"
#include "lib/wire/wire.h"

static const ar_size_result_t *last_size(const ar_run_t *run)
{
    return &run->size[run->nsizes - 1];
}

double ar_alg_bw_gbps(const ar_size_result_t *s, ar_system_t sys)
{
    const ar_sys_result_t *r = &s->sys[sys];
    return r->verified ? (double)ar_bytes(s) * 8 / r->tat_median_s / 1e9 : NAN;
}

double ar_theory_ratio(const ar_run_t *run) { return 2.0 * (run->world - 1) / run->world; }

double ar_bus_bw_gbps(const ar_run_t *run, const ar_size_result_t *s, ar_system_t sys)
{
    return ar_alg_bw_gbps(s, sys) * ar_theory_ratio(run);
}

double ar_goodput_fraction(const ar_run_t *run, const ar_size_result_t *s, ar_system_t sys)
{
    if (!run->on_testbed || !run->o->link_bps)
        return NAN;
    return ar_alg_bw_gbps(s, sys) * 1e9 / (double)run->o->link_bps;
}

double ar_speedup(const ar_size_result_t *s, ar_system_t sys)
{
    const ar_sys_result_t *a = &s->sys[AR_INAGG], *b = &s->sys[sys];
    return a->verified && b->verified ? b->tat_median_s / a->tat_median_s : NAN;
}

int ar_run_ok(const ar_run_t *run)
{
    if (run->nsizes < 1)
        return 0;
    for (int i = 0; i < run->nsizes; i++) {
        if (!run->size[i].sys[AR_INAGG].verified)
            return 0;
        for (int k = 0; k < run->o->nbase; k++)
            if (!run->size[i].sys[run->o->base[k]].verified)
                return 0;
    }
    return 1;
}

/* "4 KiB", "16 MiB" for multiples of 1024, else decimal ("16 MB"). */
static const char *size_text(uint64_t b, char *buf, size_t len)
{
    if (b >= (1ull << 30) && b % (1ull << 30) == 0)
        snprintf(buf, len, "%llu GiB", (unsigned long long)(b >> 30));
    else if (b >= (1ull << 20) && b % (1ull << 20) == 0)
        snprintf(buf, len, "%llu MiB", (unsigned long long)(b >> 20));
    else if (b >= (1ull << 10) && b % (1ull << 10) == 0 && b < (1ull << 20))
        snprintf(buf, len, "%llu KiB", (unsigned long long)(b >> 10));
    else if (b >= 1000000)
        snprintf(buf, len, "%.4g MB", (double)b / 1e6);
    else if (b >= 1000)
        snprintf(buf, len, "%.4g kB", (double)b / 1e3);
    else
        snprintf(buf, len, "%llu B", (unsigned long long)b);
    return buf;
}

static const char *pct_text(double x, char *buf, size_t len)
{
    if (isfinite(x))
        snprintf(buf, len, "%.0f", x);
    else
        snprintf(buf, len, "-");
    return buf;
}

static void render_summary(FILE *out, const ar_run_t *run, const ar_size_result_t *s)
{
    const ar_opts_t *o = run->o;
    const ar_sys_result_t *r = &s->sys[AR_INAGG];
    double tat_ms = r->tat_median_s * 1e3;
    fprintf(out, "inagg allreduce: %u %s, %llu %s elements%s, %u elems/packet, window %u, %s\n",
            run->world, run->on_testbed ? "hosts" : "workers", (unsigned long long)s->elems,
            o->dtype_float ? "float32" : "int32",
            o->dtype_float ? (o->float_mode == INAGG_FLOAT_FIXED ? " (fixed point)" : " (native)")
                           : "",
            o->packet_elems, o->window,
            o->faults                        ? o->faults
            : run->on_testbed && o->loss > 0 ? "loss on the links"
                                             : "no loss");
    if (o->compress)
        fprintf(out, "  compressed     %s (checked against an offline codec round trip)\n",
                o->compress);
    if (o->leaves)
        fprintf(out, "  two levels     %u leaf switches of %u %s each, under a spine switch\n",
                o->leaves, o->hosts_per_leaf, run->on_testbed ? "hosts" : "workers");
    if (o->no_dataplane_auth)
        fprintf(out, "  no MACs        the dataplane goes unauthenticated (--no-dataplane-auth)\n");
    if (o->shards > 1)
        fprintf(out, "  sharded        over %u switch processes (slot s on switch s %% %u)%s\n",
                o->shards, o->shards, o->pin_switches ? ", each pinned to a CPU" : "");
    if (o->switch_cpu_share)
        fprintf(out, "  switch cap     each switch process at most %u%% of one CPU (a cgroup)\n",
                o->switch_cpu_share);
    if (run->nswitch_cpu > 1) {
        fprintf(out, "  switch CPU    ");
        for (uint32_t k = 0; k < run->nswitch_cpu; k++)
            fprintf(out, " %.3f s", run->switch_cpu_s[k]);
        fprintf(out, " (each switch process, whole run)\n");
    }
    fprintf(out, "  verified       %s\n", r->verified ? "yes" : "NO");
    if (o->dtype_float && r->verified)
        fprintf(out, "  worst error    %.3f of the allowed bound\n", r->worst);
    fprintf(out, "  TAT            median %.3f ms  min %.3f ms  max %.3f ms (%u iterations)\n",
            tat_ms, r->tat_min_s * 1e3, r->tat_max_s * 1e3, r->iters);
    fprintf(out, "  ATE/s          %.4g elements/s\n", (double)s->elems / r->tat_median_s);
    fprintf(out, "  goodput        %.3f Gbit/s per worker\n", ar_alg_bw_gbps(s, AR_INAGG));
    fprintf(out, "  packets        %llu sent, %llu retransmitted, %llu duplicate results\n",
            (unsigned long long)r->packets, (unsigned long long)r->retransmissions,
            (unsigned long long)r->duplicates);
    if (r->failovers)
        fprintf(out,
                "  fail-overs     %llu (longest stall %u ms; chunks handed on %llu, reduced "
                "again %llu; stale results dropped %llu)\n",
                (unsigned long long)r->failovers, r->stall_ms_max,
                (unsigned long long)r->chunks_handed_on,
                (unsigned long long)r->chunks_reduced_again, (unsigned long long)r->stale_dropped);
    if (o->transport && strcmp(o->transport, "roce") == 0) {
        uint32_t nf, mtu = ar_roce_path_mtu(o);
        double pe = roce_message_efficiency(ar_packet_header_bytes(o) + 4 * o->packet_elems, mtu,
                                            4 * o->packet_elems, &nf);
        fprintf(out,
                "  roce frames    path MTU %u; payload efficiency (AllReduce-Switch Table IV; a "
                "%u B aggregation header in First): First %.1f%%, Middle %.1f%%, Last %.1f%%, "
                "Last with Immediate %.1f%%; a packet of %u elements: %u frames, %.1f%% "
                "(UDP: %.1f%%)\n",
                mtu, WIRE_HEADER_SIZE,
                100 * roce_payload_efficiency(ROCE_WRITE_FIRST, mtu, WIRE_HEADER_SIZE),
                100 * roce_payload_efficiency(ROCE_WRITE_MIDDLE, mtu, WIRE_HEADER_SIZE),
                100 * roce_payload_efficiency(ROCE_WRITE_LAST, mtu, WIRE_HEADER_SIZE),
                100 * roce_payload_efficiency(ROCE_WRITE_LAST_IMM, mtu, WIRE_HEADER_SIZE),
                o->packet_elems, nf, 100 * pe,
                100.0 * 4 * o->packet_elems / (42.0 + WIRE_HEADER_SIZE + 4 * o->packet_elems));
    }
    if (o->compress && r->encode_ns + r->decode_ns > 0)
        fprintf(out,
                "  coding         %.1f ms encode, %.1f ms decode (all ranks), %.0f%% "
                "overlapped with packets in flight; %llu of %llu chunks encoded ahead by "
                "helper threads; timeout floor %u us\n",
                (double)r->encode_ns / 1e6, (double)r->decode_ns / 1e6,
                100.0 * (double)r->overlap_ns / (double)(r->encode_ns + r->decode_ns),
                (unsigned long long)r->chunks_ahead, (unsigned long long)r->chunks_encoded,
                r->code_floor_us);
    fprintf(out, "  checksum       %s\n", r->checksum);
    for (int k = 0; k < o->nbase; k++) {
        ar_system_t b = o->base[k];
        const ar_sys_result_t *x = &s->sys[b];
        if (x->verified)
            fprintf(out, "  %-14s median %.3f ms  ATE/s %.4g  -> speedup %.2fx\n",
                    b == AR_MPI        ? "MPI_Allreduce"
                    : b == AR_MPI_RING ? "MPI ring"
                                       : "Gloo",
                    x->tat_median_s * 1e3, (double)s->elems / x->tat_median_s, ar_speedup(s, b));
        else
            fprintf(out, "  %-14s FAILED: %s\n", ar_system_name[b], x->error);
    }
}

static void render_table(FILE *out, const ar_run_t *run)
{
    const ar_opts_t *o = run->o;
    if (run->on_testbed)
        fprintf(out,
                "testbed %s: %u hosts, links %s (%.0f Mbit/s each way), MTU %u, loss %g, "
                "subnet %s\n  %s\n",
                run->tb.name, run->world, o->link_rate, (double)o->link_bps / 1e6, run->tb.mtu,
                run->tb.loss, run->tb.subnet, run->defaults_note);
    fprintf(out,
            "  the machine was %.0f%% busy (all cores) in the second before the run; CPU%% "
            "below: switch and mean worker in %% of one core, box in %% of all cores\n",
            run->busy_before);
    fprintf(out, "%-10s %-9s %10s %10s %10s %8s %14s %8s %6s %s\n", "size/rank", "system", "TAT s",
            "algBw Gb/s", "busBw Gb/s", "goodput", "CPU% sw/wk/box", "speedup", "theory",
            "verified");
    for (int i = 0; i < run->nsizes; i++) {
        const ar_size_result_t *s = &run->size[i];
        char sz[32];
        size_text(ar_bytes(s), sz, sizeof(sz));
        for (int k = 0; k <= o->nbase; k++) {
            ar_system_t sys = k == 0 ? AR_INAGG : o->base[k - 1];
            const ar_sys_result_t *r = &s->sys[sys];
            if (!r->completed) {
                fprintf(out, "%-10s %-9s failed: %.200s\n", k == 0 ? sz : "", ar_system_name[sys],
                        r->error[0] ? r->error : "no report");
                continue;
            }
            char a[16], b[16], c[16], cpu[48], sp[16];
            snprintf(cpu, sizeof(cpu), "%s/%s/%s", pct_text(r->cpu_switch, a, sizeof(a)),
                     pct_text(r->cpu_workers, b, sizeof(b)),
                     pct_text(r->cpu_machine, c, sizeof(c)));
            double g = ar_goodput_fraction(run, s, sys), x = ar_speedup(s, sys);
            snprintf(sp, sizeof(sp), k == 0 ? "-" : "%.2f", x);
            fprintf(out, "%-10s %-9s %10.4g %10.4g %10.4g %8s %14s %8s %6.2f %s\n",
                    k == 0 ? sz : "", ar_system_name[sys], r->tat_median_s, ar_alg_bw_gbps(s, sys),
                    ar_bus_bw_gbps(run, s, sys),
                    isfinite(g) ? (snprintf(a, sizeof(a), "%.3f", g), a) : "-", cpu, sp,
                    ar_theory_ratio(run), r->verified ? "yes" : "NO");
        }
    }
}

/* Did inagg fail (not join, a failed call, a rank that died) at every size? Then there is no
 * measurement to show: its error was said on stderr, and a table of NaNs would read like a
 * verification failure. */
static int inagg_failed_everywhere(const ar_run_t *run)
{
    for (int i = 0; i < run->nsizes; i++)
        if (run->size[i].sys[AR_INAGG].completed)
            return 0;
    return 1;
}

void ar_render_text(FILE *out, const ar_run_t *run)
{
    if (run->nsizes < 1 || inagg_failed_everywhere(run))
        return;
    if (run->nsizes == 1)
        render_summary(out, run, last_size(run));
    if (run->on_testbed || run->nsizes > 1 || run->o->nbase > 1)
        render_table(out, run);
}

/* ---- JSON ------------------------------------------------------------------------------------ */

static void json_cpu(json_writer_t *w, const ar_sys_result_t *r)
{
    json_begin_object(w, "cpu");
    json_number(w, "switch", r->cpu_switch);
    json_number(w, "workers", r->cpu_workers);
    json_number(w, "workers_max", r->cpu_workers_max);
    json_number(w, "machine", r->cpu_machine);
    json_number(w, "machine_softirq", r->cpu_softirq);
    json_end_object(w);
}

/* One system at one size, under key. */
static void json_system(json_writer_t *w, const char *key, const ar_run_t *run,
                        const ar_size_result_t *s, ar_system_t sys)
{
    const ar_sys_result_t *r = &s->sys[sys];
    json_begin_object(w, key);
    json_string(w, "name", ar_system_name[sys]);
    json_bool(w, "verified", r->verified);
    json_int(w, "iters", r->iters);
    json_begin_object(w, "tat_s");
    json_number(w, "median", r->tat_median_s);
    json_number(w, "min", r->tat_min_s);
    json_number(w, "max", r->tat_max_s);
    json_end_object(w);
    json_begin_object(w, "tat_ms"); /* the loopback benchmark's unit, kept for its readers */
    json_number(w, "median", r->tat_median_s * 1e3);
    json_end_object(w);
    json_number(w, "ate_per_s", r->verified ? (double)s->elems / r->tat_median_s : NAN);
    json_number(w, "alg_bw_gbps", ar_alg_bw_gbps(s, sys));
    json_number(w, "bus_bw_gbps", ar_bus_bw_gbps(run, s, sys));
    json_number(w, "goodput_fraction", ar_goodput_fraction(run, s, sys));
    json_cpu(w, r);
    json_string(w, "checksum", r->checksum);
    json_bool(w, "checksums_agree", r->checksums_agree);
    if (sys == AR_INAGG) {
        json_int(w, "packets", (int64_t)r->packets);
        json_int(w, "retransmissions", (int64_t)r->retransmissions);
    } else {
        json_number(w, "speedup", ar_speedup(s, sys));
    }
    if (r->error[0])
        json_string(w, "error", r->error);
    json_end_object(w);
}

static void json_size(json_writer_t *w, const ar_run_t *run, const ar_size_result_t *s)
{
    const ar_opts_t *o = run->o;
    const ar_sys_result_t *r = &s->sys[AR_INAGG];
    json_begin_object(w, NULL);
    json_int(w, "bytes", (int64_t)ar_bytes(s));
    json_int(w, "elems", (int64_t)s->elems);
    json_int(w, "iters", s->iters);
    json_int(w, "warmup", s->warmup);
    json_bool(w, "verified", r->verified);
    json_number(w, "tat_s", r->tat_median_s);
    json_number(w, "alg_bw_gbps", ar_alg_bw_gbps(s, AR_INAGG));
    json_number(w, "bus_bw_gbps", ar_bus_bw_gbps(run, s, AR_INAGG));
    json_number(w, "goodput_fraction", ar_goodput_fraction(run, s, AR_INAGG));
    json_begin_object(w, "cpu");
    json_number(w, "switch", r->cpu_switch);
    json_number(w, "workers", r->cpu_workers);
    json_end_object(w);
    json_number(w, "speedup", o->nbase ? ar_speedup(s, o->base[0]) : NAN);
    json_begin_object(w, "speedups");
    for (int k = 0; k < o->nbase; k++)
        json_number(w, ar_system_key[o->base[k]], ar_speedup(s, o->base[k]));
    json_end_object(w);
    json_number(w, "theory_ratio", ar_theory_ratio(run));
    json_system(w, "inagg", run, s, AR_INAGG);
    for (int k = 0; k < o->nbase; k++)
        json_system(w, ar_system_key[o->base[k]], run, s, o->base[k]);
    json_end_object(w);
}

/* How much of each RoCE frame and of one packet's frames is payload (--transport roce). */
static void json_roce_efficiency(json_writer_t *w, const ar_opts_t *o)
{
    uint32_t nf, mtu = ar_roce_path_mtu(o);
    double pe = roce_message_efficiency(ar_packet_header_bytes(o) + 4 * o->packet_elems, mtu,
                                        4 * o->packet_elems, &nf);
    json_begin_object(w, "roce_payload_efficiency");
    json_int(w, "path_mtu", mtu);
    static const uint8_t ops[] = {ROCE_WRITE_FIRST, ROCE_WRITE_MIDDLE, ROCE_WRITE_LAST,
                                  ROCE_WRITE_LAST_IMM};
    for (size_t i = 0; i < sizeof(ops); i++)
        json_number(w, roce_opcode_name(ops[i]),
                    roce_payload_efficiency(ops[i], mtu, WIRE_HEADER_SIZE));
    json_int(w, "packet_frames", nf);
    json_number(w, "packet", pe);
    json_end_object(w);
}

/* The testbed a run was on. */
static void json_testbed(json_writer_t *w, const ar_run_t *run)
{
    json_begin_object(w, "testbed");
    json_string(w, "name", run->tb.name);
    json_int(w, "hosts", run->world);
    json_string(w, "link_rate", run->o->link_rate);
    json_int(w, "link_rate_bps", (int64_t)run->o->link_bps);
    json_int(w, "mtu", run->tb.mtu);
    json_number(w, "loss", run->tb.loss);
    json_string(w, "subnet", run->tb.subnet);
    json_string(w, "defaults", run->defaults_note);
    json_string(w, "switch_multicast", run->o->switch_multicast ? run->o->switch_multicast : "off");
    json_end_object(w);
}

int ar_render_json(const ar_run_t *run)
{
    const ar_opts_t *o = run->o;
    const ar_size_result_t *s = last_size(run);
    const ar_sys_result_t *r = &s->sys[AR_INAGG];
    json_writer_t w;
    json_init(&w);
    json_begin_object(&w, NULL);
    /* the largest (or only) size at the top level, as the loopback benchmark always had it */
    json_int(&w, "workers", run->world);
    json_int(&w, "elems", (int64_t)s->elems);
    json_string(&w, "dtype", o->dtype_float ? "float32" : "int32");
    json_string(&w, "float_mode", o->float_mode == INAGG_FLOAT_FIXED ? "fixed" : "native");
    json_string(&w, "compress", o->compress ? o->compress : "none");
    json_string(&w, "protocol", o->protocol == INAGG_PROTO_P4SGD ? "p4sgd" : "switchml");
    json_int(&w, "packet_elems", o->packet_elems);
    json_int(&w, "window", o->window);
    uint32_t rto, rto_min, rto_max; /* what the ranks ran with, defaults included */
    ar_effective_rto(o, &rto, &rto_min, &rto_max);
    json_int(&w, "rto_us", rto);
    json_int(&w, "rto_min_us", rto_min);
    json_int(&w, "rto_max_us", rto_max);
    json_int(&w, "switch_threads", o->switch_threads);
    json_int(&w, "leaves", o->leaves);
    json_int(&w, "hosts_per_leaf", o->hosts_per_leaf);
    json_int(&w, "shards", o->shards ? o->shards : 1);
    json_int(&w, "dataplane_auth", !o->no_dataplane_auth);
    json_int(&w, "switch_cpu_share_pct", o->switch_cpu_share);
    json_begin_array(&w, "switch_cpu_s");
    for (uint32_t k = 0; k < run->nswitch_cpu; k++)
        json_number(&w, NULL, run->switch_cpu_s[k]);
    json_end_array(&w);
    json_number(&w, "loss", o->loss);
    json_number(&w, "machine_busy_before_pct", run->busy_before);
    json_int(&w, "iters", s->iters);
    json_int(&w, "warmup", s->warmup);
    json_bool(&w, "verified", ar_run_ok(run));
    if (!r->completed) /* inagg did not run to the end: why (which rank, what happened) */
        json_string(&w, "error", r->error[0] ? r->error : "no report from the ranks");
    json_begin_object(&w, "tat_ms");
    json_number(&w, "median", r->tat_median_s * 1e3);
    json_number(&w, "min", r->tat_min_s * 1e3);
    json_number(&w, "max", r->tat_max_s * 1e3);
    json_end_object(&w);
    json_number(&w, "tat_s", r->tat_median_s);
    json_number(&w, "ate_per_s", r->verified ? (double)s->elems / r->tat_median_s : NAN);
    json_number(&w, "goodput_gbps", ar_alg_bw_gbps(s, AR_INAGG));
    json_number(&w, "alg_bw_gbps", ar_alg_bw_gbps(s, AR_INAGG));
    json_number(&w, "bus_bw_gbps", ar_bus_bw_gbps(run, s, AR_INAGG));
    json_number(&w, "goodput_fraction", ar_goodput_fraction(run, s, AR_INAGG));
    json_number(&w, "theory_ratio", ar_theory_ratio(run));
    json_int(&w, "packets", (int64_t)r->packets);
    json_int(&w, "retransmissions", (int64_t)r->retransmissions);
    json_int(&w, "duplicate_results", (int64_t)r->duplicates);
    json_int(&w, "failovers", (int64_t)r->failovers);
    json_int(&w, "failover_stall_ms_max", r->stall_ms_max);
    json_int(&w, "chunks_handed_on", (int64_t)r->chunks_handed_on);
    json_int(&w, "chunks_reduced_again", (int64_t)r->chunks_reduced_again);
    json_int(&w, "stale_dropped", (int64_t)r->stale_dropped);
    json_string(&w, "transport", o->transport ? o->transport : "udp");
    if (o->transport && strcmp(o->transport, "roce") == 0)
        json_roce_efficiency(&w, o);
    json_int(&w, "encode_ns", (int64_t)r->encode_ns);
    json_int(&w, "decode_ns", (int64_t)r->decode_ns);
    json_int(&w, "overlap_ns", (int64_t)r->overlap_ns);
    json_int(&w, "chunks_encoded", (int64_t)r->chunks_encoded);
    json_int(&w, "chunks_ahead", (int64_t)r->chunks_ahead);
    json_int(&w, "rto_code_floor_us", r->code_floor_us);
    json_string(&w, "checksum", r->checksum);
    json_bool(&w, "checksums_agree", r->checksums_agree);
    json_cpu(&w, r);
    if (run->on_testbed)
        json_testbed(&w, run);
    if (o->nbase) {
        ar_system_t b = o->base[0];
        json_system(&w, "baseline", run, s, b);
        json_number(&w, "speedup", ar_speedup(s, b));
        json_begin_object(&w, "baselines");
        for (int k = 0; k < o->nbase; k++)
            json_system(&w, ar_system_key[o->base[k]], run, s, o->base[k]);
        json_end_object(&w);
        json_begin_object(&w, "speedups");
        for (int k = 0; k < o->nbase; k++)
            json_number(&w, ar_system_key[o->base[k]], ar_speedup(s, o->base[k]));
        json_end_object(&w);
    }
    json_begin_array(&w, "sizes");
    for (int i = 0; i < run->nsizes; i++)
        json_size(&w, run, &run->size[i]);
    json_end_array(&w);
    json_end_object(&w);
    return cli_emit_json(&w, o->json_path, AR_CMD);
}

/* ---- the plot ----------------------------------------------------------------------------------- */

int ar_render_plot(const ar_run_t *run, const char *path)
{
    const ar_opts_t *o = run->o;
    cli_plot_t p;
    int rc = cli_plot_open(&p, AR_CMD);
    if (rc < 0)
        return rc;
    FILE *f = p.dataf, *g = p.scriptf;
    int nsys = o->nbase + 1;
    fprintf(f, "# bytes busBw_gbps per system:");
    for (int k = 0; k < nsys; k++)
        fprintf(f, " %s", ar_system_name[k == 0 ? AR_INAGG : o->base[k - 1]]);
    fprintf(f, "\n");
    for (int i = 0; i < run->nsizes; i++) {
        const ar_size_result_t *s = &run->size[i];
        fprintf(f, "%llu", (unsigned long long)ar_bytes(s));
        for (int k = 0; k < nsys; k++) {
            double b = ar_bus_bw_gbps(run, s, k == 0 ? AR_INAGG : o->base[k - 1]);
            if (isfinite(b))
                fprintf(f, " %.6g", b);
            else
                fprintf(f, " NaN");
        }
        fprintf(f, "\n");
    }
    char title[256];
    if (run->on_testbed)
        snprintf(title, sizeof(title), "allreduce bus bandwidth, %u hosts, %s links, MTU %u, %s",
                 run->world, o->link_rate, run->tb.mtu, o->dtype_float ? "float32" : "int32");
    else
        snprintf(title, sizeof(title), "allreduce bus bandwidth, %u workers on loopback, %s",
                 run->world, o->dtype_float ? "float32" : "int32");
    fprintf(g,
            "set terminal pngcairo size 900,560 font ',10'\n"
            "set output \"%s\"\n"
            "set title \"%s\"\n"
            "set logscale x 2\nset grid\nset key top left\n"
            "set xlabel \"tensor size per rank\"\n"
            "set ylabel \"busBw (Gbit/s) = size / TAT * 2(n-1)/n\"\n"
            "set xtics (",
            path, title);
    for (int i = 0; i < run->nsizes; i++) {
        char sz[32];
        fprintf(g, "%s\"%s\" %llu", i ? ", " : "",
                size_text(ar_bytes(&run->size[i]), sz, sizeof(sz)),
                (unsigned long long)ar_bytes(&run->size[i]));
    }
    fprintf(g, ")\nset datafile missing \"NaN\"\nplot ");
    for (int k = 0; k < nsys; k++)
        fprintf(g, "%s\"%s\" using 1:%d with linespoints lw 2 pt 7 ps 0.8 title \"%s\"",
                k ? ", " : "", p.data, k + 2, ar_system_name[k == 0 ? AR_INAGG : o->base[k - 1]]);
    if (run->on_testbed && o->link_bps)
        fprintf(g, ", %.6g with lines dt 2 lc rgb \"gray40\" title \"link rate\"",
                (double)o->link_bps / 1e9);
    fprintf(g, "\n");
    return cli_plot_run(&p, path);
}
