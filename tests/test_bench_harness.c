/*
 * test_bench_harness.c - what every benchmark's rank starts from (bench/harness.c): the fault
 * spec --loss stands for, and the communicator options built from a run's protocol, window,
 * packet size, timeout and faults, with every other option left at the library's default.
 */
#include <string.h>

#include "bench/harness.h"
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
