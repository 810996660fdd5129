/*
 * train_render.c - what `inagg train` shows (see train.h; its data from train_run.h's result): the header, the setup, one line per
 * epoch or a progress bar on a terminal, the summary, the JSON report and the plot (gnuplot,
 * started through launch/).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apps/bench/samples.h"
#include "apps/cli/output.h"
#include "apps/cli/plot.h"
#include "apps/cli/train.h"
#include "apps/glm/objective.h"
#include "apps/launch/launch.h"
#include "lib/base/util.h"
#include "lib/json/json.h"
#include "lib/kernels/optim.h"

#define GNUPLOT_TIMEOUT_MS 30000

const char *train_backend_name(const train_opts_t *o)
{
    if (o->cfg.mode == GLM_MODE_SINGLE)
        return "none";
    return o->backend_mpi ? "mpi" : "inagg";
}

const char *train_protocol_name(const train_opts_t *o)
{
    if (o->cfg.mode == GLM_MODE_SINGLE || o->backend_mpi)
        return "none";
    return o->protocol == 1 ? "p4sgd" : "switchml";
}

void train_clear_bar(train_screen_t *r)
{
    if (r->bar_drawn) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
        r->bar_drawn = 0;
    }
}

static void draw_bar(train_screen_t *r, double epochs_done, const glm_epoch_record_t *last)
{
    const int width = 28;
    uint32_t E = r->o->cfg.epochs;
    double f = E ? epochs_done / E : 0;
    if (f > 1)
        f = 1;
    int fill = (int)(f * width + 0.5);
    char bar[64];
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[width] = '\0';
    fprintf(stderr, "\r  [%s] epoch %u/%u", bar,
            (uint32_t)util_min_u64((uint64_t)floor(epochs_done) + (epochs_done < E ? 1 : 0), E), E);
    if (last)
        fprintf(stderr, "  objective %.6f  accuracy %.2f%%  %.2f s/epoch  comm %.0f%%",
                last->objective, 100 * last->accuracy, last->seconds, 100 * last->comm_share);
    fprintf(stderr, "\033[K");
    fflush(stderr);
    r->bar_drawn = 1;
}

void train_print_header(train_screen_t *r)
{
    const train_opts_t *o = r->o;
    const char *what = o->cfg.mode == GLM_MODE_MODEL  ? "model-parallel"
                       : o->cfg.mode == GLM_MODE_DATA ? "data-parallel"
                                                      : "single-process";
    fprintf(r->human, "inagg train: %s %s, ", what, glm_objective_name(o->cfg.objective));
    if (o->cfg.mode == GLM_MODE_SINGLE)
        fprintf(r->human, "1 process");
    else
        fprintf(r->human, "%u workers over %s%s%s%s", r->o->workers, train_backend_name(o),
                o->backend_mpi ? "" : " (", o->backend_mpi ? "" : train_protocol_name(o),
                o->backend_mpi   ? ""
                : o->switch_addr ? " protocol, switch "
                                 : " protocol)");
    if (o->switch_addr && !o->backend_mpi)
        fprintf(r->human, "%s)", o->switch_addr);
    if (o->testbed)
        fprintf(r->human, ", across a testbed of %u hosts (fabric %s, link delay %s)", o->testbed,
                o->fabric ? o->fabric : "tools/testbed's default",
                o->link_delay ? o->link_delay : "none");
    else if (o->switch_threads)
        fprintf(r->human, ", embedded switch with %u thread%s", o->switch_threads,
                o->switch_threads > 1 ? "s" : "");
    fprintf(r->human, "\n");
}

static void print_setup(train_screen_t *r)
{
    const train_opts_t *o = r->o;
    const glm_setup_record_t *s = &r->res->setup;
    fprintf(r->human, "  data      %s%s: %llu samples x %llu features, %llu nonzeros",
            o->data ? o->data : "synthetic ", o->data ? "" : o->synthetic,
            (unsigned long long)s->rows, (unsigned long long)s->cols, (unsigned long long)s->nnz);
    if (o->precision != 32)
        fprintf(r->human, ", %d-bit features", o->precision);
    if (s->test_rows)
        fprintf(r->human, "; test %s: %llu samples", o->test, (unsigned long long)s->test_rows);
    fprintf(r->human, "\n  training  %u epochs, batch %zu", o->cfg.epochs, o->cfg.batch);
    if (o->cfg.mode != GLM_MODE_DATA)
        fprintf(r->human, ", micro-batch %zu%s", o->cfg.micro_batch,
                o->cfg.mode == GLM_MODE_SINGLE ? ""
                : o->cfg.pipeline              ? " (pipelined)"
                                               : " (not pipelined)");
    fprintf(r->human, ", lr %.4g%s%s, l2 %.4g%s, seed %llu\n", s->lr,
            o->cfg.schedule == GLM_LR_SQRT ? "/sqrt(epoch)" : " constant",
            o->lr_given ? "" : " (default)", s->l2, o->l2_given ? "" : " (1/S)",
            (unsigned long long)o->cfg.seed);
    if (!o->cfg.optimizer && o->cfg.average == GLM_AVG_TAIL)
        fprintf(r->human,
                "  averaging the iterates from epoch %u on (the model reported is "
                "their weighted mean)\n",
                glm_average_start(o->cfg.epochs));
    fflush(r->human);
}

static void print_epoch_line(train_screen_t *r, const glm_epoch_record_t *e)
{
    fprintf(r->human, "  epoch %3u/%u  objective %.6f  accuracy %6.2f%%", e->epoch,
            r->o->cfg.epochs, e->objective, 100 * e->accuracy);
    if (isfinite(e->test_accuracy))
        fprintf(r->human, "  test %6.2f%%", 100 * e->test_accuracy);
    fprintf(r->human, "  %.3f s", e->seconds);
    if (r->o->cfg.mode != GLM_MODE_SINGLE)
        fprintf(r->human, "  comm %3.0f%%", 100 * e->comm_share);
    fprintf(r->human, "  (eval %.3f s)\n", e->eval_seconds);
    fflush(r->human);
}

void train_show_report(void *screen, const glm_line_t *l, int rank)
{
    train_screen_t *r = screen;
    const train_result_t *res = r->res;
    switch (l->type) {
        case GLM_LINE_SETUP: print_setup(r); break;
        case GLM_LINE_EPOCH:
            if (r->tty)
                draw_bar(r, l->epoch.epoch, &l->epoch);
            else
                print_epoch_line(r, &l->epoch);
            break;
        case GLM_LINE_PROGRESS:
            if (r->tty && rank == 0 && l->progress_epoch >= 1) {
                uint64_t now = util_now_ns();
                if (now - r->last_bar_ns > 100000000ull) {
                    r->last_bar_ns = now;
                    draw_bar(r, l->progress_epoch - 1 + l->progress_fraction,
                             res->nepochs ? &res->epochs[res->nepochs - 1] : NULL);
                }
            }
            break;
        default: break;
    }
}

void train_show_text(void *screen, const char *line)
{
    train_clear_bar(screen);
    fprintf(stderr, "%s\n", line);
}

/* The reference and the run's distance from it: objective (absolute and relative to the
 * reference's) and training accuracy (in points). */
static void print_reference(FILE *h, const train_reference_t *ref, const glm_epoch_record_t *last)
{
    if (!ref || (!ref->have && !ref->why_not[0]))
        return;
    if (!ref->have) {
        fprintf(h, "  reference          none: %s\n", ref->why_not);
        return;
    }
    fprintf(h, "  reference          objective %.6f, accuracy %.2f%%  (%s; %.2f s)\n",
            ref->objective, 100 * ref->accuracy, ref->what, ref->seconds);
    fprintf(h,
            "  gap                objective %+.6f (%+.3f%% of the reference's), accuracy %+.2f "
            "points\n",
            last->objective - ref->objective,
            100 * (last->objective - ref->objective) / fabs(ref->objective),
            100 * (last->accuracy - ref->accuracy));
}

void train_summary(train_screen_t *r, double total_s)
{
    const train_opts_t *o = r->o;
    if (r->bar_drawn) { /* keep the finished bar on screen */
        fprintf(stderr, "\n");
        r->bar_drawn = 0;
    }
    if (r->res->nepochs == 0)
        return;
    const glm_epoch_record_t *last = &r->res->epochs[r->res->nepochs - 1];
    double train_s = 0, comm_s = 0, eval_s = 0;
    double *secs = malloc(r->res->nepochs * sizeof(double));
    for (uint32_t i = 0; i < r->res->nepochs; i++) {
        train_s += r->res->epochs[i].seconds;
        comm_s += r->res->epochs[i].comm_seconds;
        eval_s += r->res->epochs[i].eval_seconds;
        if (secs)
            secs[i] = r->res->epochs[i].seconds;
    }
    double med = secs ? bench_median(secs, r->res->nepochs) : NAN;
    free(secs);
    FILE *h = r->human;
    fprintf(h, "summary\n");
    fprintf(h, "  final objective    %.6f  (epoch 1: %.6f)\n", last->objective,
            r->res->epochs[0].objective);
    fprintf(h, "  training accuracy  %.2f%%\n", 100 * last->accuracy);
    if (isfinite(last->test_accuracy))
        fprintf(h, "  test accuracy      %.2f%%\n", 100 * last->test_accuracy);
    print_reference(h, &r->res->ref, last);
    fprintf(h,
            "  total time         %.2f s  (training %.2f s, evaluation %.2f s, the rest "
            "setup and data)\n",
            total_s, train_s, eval_s);
    fprintf(h, "  epoch time         mean %.3f s, median %.3f s\n", train_s / r->res->nepochs, med);
    if (o->cfg.mode != GLM_MODE_SINGLE)
        fprintf(h, "  comm share         %.1f%% of training time blocked in communication\n",
                train_s > 0 ? 100 * comm_s / train_s : 0.0);
    if (o->cfg.mode == GLM_MODE_MODEL) {
        fprintf(h,
                "  communication      %.3g B/sample payload per worker (one float32 partial "
                "activation)",
                last->payload_bytes_per_sample);
        if (last->wire_bytes_per_sample > 0)
            fprintf(h, ", %.3g B/sample sent on the wire with headers",
                    last->wire_bytes_per_sample);
        fprintf(h, "\n");
    } else if (o->cfg.mode == GLM_MODE_DATA) {
        fprintf(h,
                "  communication      %.4g B/sample payload per worker (the gradient, %llu "
                "floats per mini-batch)\n",
                last->payload_bytes_per_sample, (unsigned long long)r->res->setup.cols);
    }
    fflush(h);
}

/* "reference": {source, how, objective, accuracy, seconds} or null (with "reference_missing":
 * why, when one was wanted), and the gaps: final minus reference. */
static void write_json_reference(json_writer_t *w, const train_reference_t *ref,
                                 const glm_epoch_record_t *last)
{
    if (!ref || !ref->have || !last) {
        json_number(w, "reference", NAN); /* null */
        if (ref && ref->why_not[0])
            json_string(w, "reference_missing", ref->why_not);
        return;
    }
    json_begin_object(w, "reference");
    json_string(w, "source", ref->source);
    json_string(w, "how", ref->what);
    json_number(w, "objective", ref->objective);
    json_number(w, "accuracy", ref->accuracy);
    json_number(w, "seconds", ref->seconds);
    json_end_object(w);
    json_number(w, "objective_gap", last->objective - ref->objective);
    json_number(w, "relative_objective_gap",
                (last->objective - ref->objective) / fabs(ref->objective));
    json_number(w, "accuracy_gap", last->accuracy - ref->accuracy);
}

int train_write_json(train_screen_t *r, double total_s)
{
    const train_opts_t *o = r->o;
    json_writer_t w;
    json_init(&w);
    json_begin_object(&w, NULL);
    json_string(&w, "mode", glm_mode_name(o->cfg.mode));
    json_int(&w, "workers", r->o->workers);
    json_string(&w, "backend", train_backend_name(o));
    if (o->testbed) {
        cli_json_testbed_begin(&w, o->testbed, o->fabric, o->link_delay, o->link_rate);
        json_end_object(&w);
    }
    json_string(&w, "protocol", train_protocol_name(o));
    json_string(&w, "objective", glm_objective_name(o->cfg.objective));
    json_int(&w, "batch", (int64_t)o->cfg.batch);
    json_int(&w, "micro_batch", (int64_t)o->cfg.micro_batch);
    json_bool(&w, "pipeline", o->cfg.mode != GLM_MODE_DATA && o->cfg.pipeline);
    json_string(&w, "optimizer",
                o->cfg.optimizer ? optim_kind_name((optim_kind_t)(o->cfg.optimizer - 1))
                                 : "sgd-plain");
    json_bool(&w, "in_switch", o->cfg.in_switch);
    if (o->switch_threads)
        json_int(&w, "switch_threads", o->switch_threads);
    json_string(&w, "data", o->data ? o->data : o->synthetic);
    json_bool(&w, "synthetic", o->data == NULL);
    json_int(&w, "rows", (int64_t)r->res->setup.rows);
    json_int(&w, "cols", (int64_t)r->res->setup.cols);
    json_int(&w, "nnz", (int64_t)r->res->setup.nnz);
    json_int(&w, "precision", o->precision);
    json_number(&w, "lr", r->res->setup.lr);
    json_string(&w, "lr_schedule", o->cfg.schedule == GLM_LR_SQRT ? "sqrt" : "const");
    json_string(&w, "precondition",
                o->cfg.optimizer                          ? "none"
                : o->cfg.precondition == GLM_PRECOND_DIAG ? "diag"
                                                          : "none");
    json_string(&w, "average",
                o->cfg.optimizer                 ? "none"
                : o->cfg.average == GLM_AVG_TAIL ? "tail"
                                                 : "none");
    json_number(&w, "l2", r->res->setup.l2);
    json_int(&w, "seed", (int64_t)o->cfg.seed);
    json_begin_array(&w, "epochs");
    double train_s = 0, comm_s = 0;
    for (uint32_t i = 0; i < r->res->nepochs; i++) {
        const glm_epoch_record_t *e = &r->res->epochs[i];
        train_s += e->seconds;
        comm_s += e->comm_seconds;
        json_begin_object(&w, NULL);
        json_int(&w, "epoch", e->epoch);
        json_number(&w, "objective", e->objective);
        json_number(&w, "mean_loss", e->mean_loss);
        json_number(&w, "accuracy", e->accuracy);
        if (isfinite(e->test_accuracy))
            json_number(&w, "test_accuracy", e->test_accuracy);
        json_number(&w, "weight_norm", e->weight_norm);
        json_number(&w, "lr", e->lr);
        json_number(&w, "seconds", e->seconds);
        json_number(&w, "comm_share", e->comm_share);
        json_number(&w, "eval_seconds", e->eval_seconds);
        json_end_object(&w);
    }
    json_end_array(&w);
    const glm_epoch_record_t *last = r->res->nepochs ? &r->res->epochs[r->res->nepochs - 1] : NULL;
    json_number(&w, "final_objective", last ? last->objective : NAN);
    json_number(&w, "final_accuracy", last ? last->accuracy : NAN);
    if (last && isfinite(last->test_accuracy))
        json_number(&w, "final_test_accuracy", last->test_accuracy);
    write_json_reference(&w, &r->res->ref, last);
    json_number(&w, "total_seconds", total_s);
    json_number(&w, "train_seconds", train_s);
    json_number(&w, "mean_epoch_seconds", r->res->nepochs ? train_s / r->res->nepochs : NAN);
    json_number(&w, "comm_share", train_s > 0 ? comm_s / train_s : 0);
    json_number(&w, "payload_bytes_per_sample", last ? last->payload_bytes_per_sample : NAN);
    json_number(&w, "wire_bytes_per_sample", last ? last->wire_bytes_per_sample : NAN);
    json_end_object(&w);
    return cli_emit_json(&w, o->json_path, "inagg train");
}

/* ---- the plot ------------------------------------------------------------------------------ */

int train_write_plot(train_screen_t *r)
{
    const train_opts_t *o = r->o;
    cli_plot_t p;
    int rc = cli_plot_open(&p, "inagg train");
    if (rc < 0)
        return rc;
    double t = 0;
    fprintf(p.dataf, "# epoch training_seconds objective\n");
    for (uint32_t i = 0; i < r->res->nepochs; i++) {
        t += r->res->epochs[i].seconds;
        fprintf(p.dataf, "%u %.9g %.12g\n", r->res->epochs[i].epoch, t,
                r->res->epochs[i].objective);
    }
    char title[512];
    snprintf(title, sizeof(title), "%s %s, %s, %u worker%s, %s/%s, B=%zu MB=%zu",
             glm_mode_name(o->cfg.mode), glm_objective_name(o->cfg.objective),
             o->data ? o->data : o->synthetic, r->o->workers, r->o->workers == 1 ? "" : "s",
             train_backend_name(o), train_protocol_name(o), o->cfg.batch, o->cfg.micro_batch);
    for (char *c = title; *c; c++)
        if (*c == '"' || *c == '\\')
            *c = '\'';
    fprintf(p.scriptf,
            "set terminal pngcairo size 1100,450 font ',10'\n"
            "set output \"%s\"\n"
            "set multiplot layout 1,2 title \"%s\"\n"
            "set grid\nset key off\n"
            "set xlabel \"epoch\"\nset ylabel \"objective\"\n"
            "plot \"%s\" using 1:3 with linespoints pt 7 ps 0.6\n"
            "set xlabel \"training time (s)\"\n"
            "plot \"%s\" using 2:3 with linespoints pt 7 ps 0.6\n"
            "unset multiplot\n",
            o->plot_path, title, p.data, p.data);
    return cli_plot_run(&p, o->plot_path);
}
