/*
 * test_calibrate.c - the MPI route's threshold that `inagg model calibrate` measures
 * (apps/bench/calibrate.c): the sizes read from a `bench allreduce --sizes --baseline mpi`
 * report, and the threshold taken from them (the smallest size from which on the switch won by
 * the margin at every size, never below a size where it lost).
 */
#include <errno.h>
#include <string.h>

#include "apps/bench/calibrate.h"
#include "harness.h"

#define KB 1024.0
#define MB (1024.0 * 1024.0)

TEST(calib_route_threshold_from_measured_sizes, 5)
{
    /* the 4-host testbed at 1 Gbit/s, quiet: 0.42x, 0.83x, 1.75x, 2.48x, 2.50x */
    double b[] = {64 * KB, 256 * KB, 1 * MB, 4 * MB, 16 * MB};
    double sw[] = {1.0, 1.0, 1.0, 1.0, 1.0};
    double mpi[] = {0.42, 0.83, 1.75, 2.48, 2.50};
    CHECK(calib_route_threshold(b, sw, mpi, 5, CAL_ROUTE_MARGIN) == 1 * MB);
    /* a win below a loss does not count: the threshold starts above the last loss */
    double mpi2[] = {1.5, 0.9, 1.2, 1.5, 2.0};
    CHECK(calib_route_threshold(b, sw, mpi2, 5, CAL_ROUTE_MARGIN) == 1 * MB);
    /* a win by less than the margin is not a win */
    double mpi3[] = {0.5, 0.8, 1.05, 1.5, 2.0};
    CHECK(calib_route_threshold(b, sw, mpi3, 5, CAL_ROUTE_MARGIN) == 4 * MB);
    /* it won everywhere: the smallest size measured */
    double mpi4[] = {1.2, 1.3, 1.5, 1.5, 2.0};
    CHECK(calib_route_threshold(b, sw, mpi4, 5, CAL_ROUTE_MARGIN) == 64 * KB);
    /* it lost at the largest: every call stays with MPI */
    double mpi5[] = {1.2, 1.3, 1.5, 1.5, 0.9};
    CHECK(calib_route_threshold(b, sw, mpi5, 5, CAL_ROUTE_MARGIN) == CAL_ROUTE_NEVER);
    CHECK(calib_route_threshold(b, sw, mpi4, 0, CAL_ROUTE_MARGIN) == CAL_ROUTE_NEVER);
    /* a size without a time is no win */
    double sw6[] = {1.0, 1.0, 0.0, 1.0, 1.0};
    CHECK(calib_route_threshold(b, sw6, mpi4, 5, CAL_ROUTE_MARGIN) == 4 * MB);
    /* never more than an int count of 4-byte elements can ask for */
    CHECK(CAL_ROUTE_NEVER > 4.0 * 2147483647.0);
}

TEST(calib_route_parse_reads_each_size, 5)
{
    const char *report = "{\"workers\":4,\"tat_s\":9,\"speedup\":9,\"sizes\":["
                         "{\"bytes\":65536,\"elems\":16384,\"tat_s\":0.001,\"speedup\":0.5,"
                         "\"speedups\":{\"mpi\":0.5},"
                         "\"inagg\":{\"name\":\"inagg\",\"tat_s\":{\"median\":0.001}},"
                         "\"mpi\":{\"name\":\"mpi\",\"tat_s\":{\"median\":0.0005}}},"
                         "{\"bytes\":1048576,\"elems\":262144,\"tat_s\":0.01,\"speedup\":1.5,"
                         "\"speedups\":{\"mpi\":1.5},"
                         "\"inagg\":{\"name\":\"inagg\",\"tat_s\":{\"median\":0.01}},"
                         "\"mpi\":{\"name\":\"mpi\",\"tat_s\":{\"median\":0.015}}}]}";
    model_calib_t c;
    memset(&c, 0, sizeof(c));
    char err[200] = "";
    CHECK_MSG(calib_route_parse(report, &c, err, sizeof(err)) == 0, "%s", err);
    CHECK_EQ_INT(c.nroute, 2);
    CHECK(c.route[0].bytes == 65536 && c.route[0].inagg_s == 0.001);
    CHECK(c.route[0].mpi_s > 0.000499 && c.route[0].mpi_s < 0.000501);
    CHECK(c.route[1].bytes == 1048576 && c.route[1].inagg_s == 0.01);
    CHECK(c.route[1].mpi_s > 0.01499 && c.route[1].mpi_s < 0.01501);
    /* a size whose baseline failed (no speedup) is an error, not a guess */
    const char *nobase = "{\"sizes\":[{\"bytes\":65536,\"tat_s\":0.001}]}";
    CHECK(calib_route_parse(nobase, &c, err, sizeof(err)) == -EPROTO);
    CHECK_MSG(strstr(err, "speedup") != NULL, "%s", err);
    CHECK(calib_route_parse("{\"sizes\":[]}", &c, err, sizeof(err)) == -EPROTO);
    CHECK_MSG(strstr(err, "no sizes") != NULL, "%s", err);
}
