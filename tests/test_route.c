/*
 * test_route.c - the allreduce route (apps/mpi/route.c) shared by the PMPI interposer and the
 * Open MPI component: every reason that keeps a call with MPI, each alone on a call that goes
 * through the switch otherwise; the default policy (64 KiB, one host stays with MPI) and its
 * overrides; byte counts with suffixes and the errors for bad ones.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "apps/mpi/route.h"
#include "harness.h"

/* A call the default policy sends through the switch: 1 MiB of floats on several hosts. */
static route_call_t good_call(void)
{
    route_call_t c = {.has_job = 1,
                      .op_is_sum = 1,
                      .dtype_ok = 1,
                      .count = 262144,
                      .elem_bytes = 4,
                      .has_recv = 1,
                      .buffers_overlap = 0,
                      .hosts = ROUTE_MANY_HOSTS};
    return c;
}

static const char *decide(const route_policy_t *p, route_call_t c)
{
    static char why[160];
    return route_decide(p, &c, why, sizeof(why));
}

TEST(route_every_reason_keeps_the_call_with_mpi, 5)
{
    route_policy_t p = ROUTE_POLICY_INIT;
    CHECK(decide(&p, good_call()) == NULL);
    route_call_t c = good_call();
    c.has_job = 0;
    CHECK(strstr(decide(&p, c), "no switch job") != NULL);
    c = good_call();
    c.op_is_sum = 0;
    CHECK(strstr(decide(&p, c), "not MPI_SUM") != NULL);
    c = good_call();
    c.dtype_ok = 0;
    CHECK(strstr(decide(&p, c), "datatype") != NULL);
    c = good_call();
    c.has_recv = 0;
    CHECK(strstr(decide(&p, c), "no receive buffer") != NULL);
    c = good_call();
    c.buffers_overlap = 1;
    CHECK(strstr(decide(&p, c), "overlap") != NULL);
    c = good_call();
    c.count = 0;
    CHECK(strstr(decide(&p, c), "count 0 is below") != NULL);
    c = good_call();
    c.hosts = ROUTE_ONE_HOST;
    CHECK(strstr(decide(&p, c), "one host") != NULL);
    /* locality not found out: treated as several hosts */
    c.hosts = ROUTE_HOSTS_UNKNOWN;
    CHECK(decide(&p, c) == NULL);
}

TEST(route_size_threshold_in_bytes_and_elements, 5)
{
    route_policy_t p = ROUTE_POLICY_INIT;
    CHECK_EQ_INT((long)p.min_bytes, 65536);
    route_call_t c = good_call();
    c.count = 16384; /* 64 KiB of floats: at the threshold, through the switch */
    CHECK(decide(&p, c) == NULL);
    c.count = 16383;
    const char *why = decide(&p, c);
    CHECK_MSG(why && strstr(why, "65532 bytes are below the threshold of 65536 bytes"), "%s",
              why ? why : "(switch)");
    c.elem_bytes = 8; /* the same count of 8-byte elements is over it */
    CHECK(decide(&p, c) == NULL);
    p.min_bytes = 0; /* no threshold: one element goes through */
    c = good_call();
    c.count = 1;
    CHECK(decide(&p, c) == NULL);
    p.min_count = 2; /* the interposer's element minimum still applies */
    why = decide(&p, c);
    CHECK_MSG(why && strstr(why, "count 1 is below the minimum of 2 elements"), "%s",
              why ? why : "(switch)");
}

TEST(route_one_host_override_and_order_of_reasons, 5)
{
    route_policy_t p = ROUTE_POLICY_INIT;
    p.one_host_switch = 1;
    route_call_t c = good_call();
    c.hosts = ROUTE_ONE_HOST;
    CHECK(decide(&p, c) == NULL);
    /* the override does not lift the threshold */
    c.count = 1;
    CHECK(decide(&p, c) != NULL && strstr(decide(&p, c), "threshold") != NULL);
    /* the first reason wins: no job before the op, the op before the size */
    c.op_is_sum = 0;
    CHECK(strstr(decide(&p, c), "not MPI_SUM") != NULL);
    c.has_job = 0;
    CHECK(strstr(decide(&p, c), "no switch job") != NULL);
    /* without the override, one host comes first: such a communicator may have no job */
    p.one_host_switch = 0;
    CHECK(strstr(decide(&p, c), "one host") != NULL);
}

TEST(route_parse_bytes_suffixes_and_errors, 5)
{
    size_t v = 7;
    char err[160] = "";
    CHECK_EQ_INT(route_parse_bytes("0", "X", &v, err, sizeof(err)), 0);
    CHECK_EQ_INT((long)v, 0);
    CHECK_EQ_INT(route_parse_bytes("65536", "X", &v, err, sizeof(err)), 0);
    CHECK_EQ_INT((long)v, 65536);
    CHECK_EQ_INT(route_parse_bytes("64K", "X", &v, err, sizeof(err)), 0);
    CHECK_EQ_INT((long)v, 65536);
    CHECK_EQ_INT(route_parse_bytes("2m", "X", &v, err, sizeof(err)), 0);
    CHECK_EQ_INT((long)v, 2 << 20);
    CHECK_EQ_INT(route_parse_bytes("1G", "X", &v, err, sizeof(err)), 0);
    CHECK_EQ_INT((long)v, 1 << 30);
    v = 7;
    const char *bad[] = {"", "-1", "K", "12KB", "1.5M", "ten", "99999999999999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        CHECK_MSG(route_parse_bytes(bad[i], "INAGG_MIN_BYTES", &v, err, sizeof(err)) == -EINVAL,
                  "'%s' accepted", bad[i]);
        CHECK_MSG(strstr(err, "INAGG_MIN_BYTES") != NULL, "'%s': %s", bad[i], err);
    }
    CHECK_EQ_INT((long)v, 7);
    CHECK(route_parse_bytes("17179869184G", "X", &v, err, sizeof(err)) == -EINVAL);
    CHECK(strstr(err, "too large") != NULL);
}
