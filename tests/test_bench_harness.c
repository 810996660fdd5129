/*
 * test_bench_harness.c - what every benchmark's rank starts from (bench/harness.c): the fault
 * spec --loss stands for, and the communicator options built from a run's protocol, window,
 * packet size, timeout and faults, with every other option left at the library's default;
 * and a rank's report read whole (bench/subrun.c) when it is megabytes long.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps/bench/harness.h"
#include "apps/bench/subrun.h"
#include "harness.h"
#include "inagg.h"

TEST(bench_worker_faults_from_loss_or_as_given, 10)
{
    char buf[64];
    CHECK(bench_worker_faults(NULL, 0.0, 7, buf, sizeof(buf)) == NULL);
    const char *f = bench_worker_faults(NULL, 0.01, 7, buf, sizeof(buf));
    CHECK(f == buf && strcmp(f, "drop=0.01,seed=7") == 0);
    CHECK(strcmp(bench_worker_faults("dup=0.5", 0.01, 7, buf, sizeof(buf)), "dup=0.5") == 0);
}

TEST(bench_comm_options_are_the_runs_over_the_defaults, 10)
{
    const inagg_options_t d = INAGG_OPTIONS_INIT;
    inagg_options_t o = bench_comm_options(INAGG_PROTO_P4SGD, 7, 123, 4321, "drop=0.5,seed=3");
    CHECK(o.protocol == INAGG_PROTO_P4SGD && o.slots == 7 && o.packet_elems == 123);
    CHECK(o.timeout_ms == 4321 && o.faults && strcmp(o.faults, "drop=0.5,seed=3") == 0);
    CHECK(o.struct_size == d.struct_size && o.float_mode == d.float_mode && o.threads == d.threads);
    CHECK(o.rto_us == d.rto_us && o.rto_min_us == d.rto_min_us && o.rto_max_us == d.rto_max_us);
    CHECK(o.compress == d.compress && o.optimizer == d.optimizer && o.transport == d.transport);
    CHECK(o.no_error_feedback == d.no_error_feedback && o.poll_us == d.poll_us);
    o = bench_comm_options(INAGG_PROTO_SWITCHML, 16, 256, 1000, NULL); /* no faults */
    CHECK(o.protocol == INAGG_PROTO_SWITCHML && o.packet_elems == 256 && o.faults == NULL);
}

/* A rank's report is read whole: bench latency's largest runs write reports of several MB (a
 * 4 MiB cap once lost a 400,000-operation run's reports as "without a report"). */
TEST(bench_read_file_takes_a_report_of_megabytes, 10)
{
    char path[] = "/tmp/inagg-report-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    size_t len = 9u << 20;
    char *data = malloc(len);
    CHECK(data != NULL);
    for (size_t i = 0; i < len; i++)
        data[i] = (char)('a' + i % 26);
    CHECK(write(fd, data, len) == (ssize_t)len);
    close(fd);
    char *text = NULL;
    CHECK(bench_read_file(path, &text) == 0);
    CHECK(text && strlen(text) == len && memcmp(text, data, len) == 0);
    free(text);
    free(data);
    unlink(path);
}
