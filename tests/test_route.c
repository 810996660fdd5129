/*
 * test_route.c - the allreduce route (apps/mpi/route.c) shared by the PMPI interposer and the
 * Open MPI component: every reason that keeps a call with MPI, each alone on a call that goes
 * through the switch otherwise; the default policy (1 MiB, one host stays with MPI) and its
 * overrides; byte counts with suffixes and the errors for bad ones; where the threshold comes
 * from (a setting, then a calibration file of `inagg model calibrate`, then the default), each
 * source passed over with a reason when it is unusable.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    CHECK_EQ_INT((long)p.min_bytes, 1048576);
    route_call_t c = good_call();
    c.count = 262144; /* 1 MiB of floats: at the threshold, through the switch, saying why */
    char why_switch[160] = "";
    CHECK(route_decide(&p, &c, why_switch, sizeof(why_switch)) == NULL);
    CHECK_MSG(
        !strcmp(why_switch, "1048576 bytes reach the threshold of 1048576 bytes, the default"),
        "%s", why_switch);
    c.count = 262143;
    const char *why = decide(&p, c);
    CHECK_MSG(why && !strcmp(why, "1048572 bytes are below the threshold of 1048576 bytes, the "
                                  "default"),
              "%s", why ? why : "(switch)");
    p.min_bytes = 65536;
    c.count = 16384; /* 64 KiB of floats under a 64 KiB threshold: through the switch */
    CHECK(decide(&p, c) == NULL);
    c.count = 16383;
    why = decide(&p, c);
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

/* A file with `text` in a temporary directory (made at the first file, removed by
 * remove_dir); its path in path. */
static char g_dir[64];
static void write_file(char *path, size_t len, const char *name, const char *text)
{
    char *dir = g_dir;
    if (!dir[0]) {
        snprintf(g_dir, sizeof(g_dir), "/tmp/inagg-route-XXXXXX");
        if (!mkdtemp(dir))
            dir[0] = '\0';
    }
    snprintf(path, len, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void remove_dir(void)
{
    if (g_dir[0])
        rmdir(g_dir);
    g_dir[0] = '\0';
}

TEST(route_calibration_file_read, 5)
{
    char path[200], err[400];
    size_t v = 7;
    write_file(path, sizeof(path), "cal.json",
               "{\"what\": \"inagg model parameters\", \"hop_s\": 7.6e-05, "
               "\"route_min_bytes\": 524288, \"route_link_bps\": 1e9}");
    CHECK_EQ_INT(route_read_calibration(path, "INAGG_CALIBRATION", &v, err, sizeof(err)), 0);
    CHECK_EQ_INT((long)v, 524288);
    /* 0 is a threshold too: every size goes through the switch */
    write_file(path, sizeof(path), "zero.json", "{\"route_min_bytes\": 0}");
    CHECK_EQ_INT(route_read_calibration(path, "X", &v, err, sizeof(err)), 0);
    CHECK_EQ_INT((long)v, 0);
    v = 7;
    /* each bad file says what is wrong with it, naming the setting */
    struct {
        const char *name, *text, *says;
    } bad[] = {{"none.json", "{\"hop_s\": 7.6e-05}", "has no route_min_bytes"},
               {"neg.json", "{\"route_min_bytes\": -1}", "not a whole number"},
               {"frac.json", "{\"route_min_bytes\": 1.5}", "not a whole number"},
               {"str.json", "{\"route_min_bytes\": \"1M\"}", "not a whole number"},
               {"huge.json", "{\"route_min_bytes\": 1e300}", "not a whole number"}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        write_file(path, sizeof(path), bad[i].name, bad[i].text);
        err[0] = '\0';
        CHECK_MSG(route_read_calibration(path, "INAGG_CALIBRATION", &v, err, sizeof(err)) ==
                      -EINVAL,
                  "%s accepted", bad[i].name);
        CHECK_MSG(strstr(err, bad[i].says) && strstr(err, "INAGG_CALIBRATION="), "%s: %s",
                  bad[i].name, err);
    }
    CHECK(route_read_calibration("/nonexistent/cal.json", "X", &v, err, sizeof(err)) == -ENOENT);
    CHECK_MSG(strstr(err, "cannot read") != NULL, "%s", err);
    CHECK_EQ_INT((long)v, 7);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        write_file(path, sizeof(path), bad[i].name, "");
        unlink(path);
    }
    write_file(path, sizeof(path), "cal.json", "");
    unlink(path);
    write_file(path, sizeof(path), "zero.json", "");
    unlink(path);
    remove_dir();
}

TEST(route_threshold_precedence_setting_calibration_default, 5)
{
    char cal[200], nokey[200], err[1200];
    write_file(cal, sizeof(cal), "p.json", "{\"route_min_bytes\": 262144}");
    write_file(nokey, sizeof(nokey), "n.json", "{\"hop_s\": 1e-05}");
    route_policy_t p = ROUTE_POLICY_INIT;
    /* nothing given: the default, silently */
    CHECK_EQ_INT(route_set_min_bytes(&p, NULL, "M", "", "C", err, sizeof(err)), 0);
    CHECK_EQ_INT((long)p.min_bytes, ROUTE_MIN_BYTES_DEFAULT);
    CHECK(!strcmp(p.min_bytes_from, "the default"));
    /* a calibration file: its threshold */
    CHECK_EQ_INT(route_set_min_bytes(&p, "", "M", cal, "C", err, sizeof(err)), 0);
    CHECK_EQ_INT((long)p.min_bytes, 262144);
    CHECK_MSG(strstr(p.min_bytes_from, "from calibration ") && strstr(p.min_bytes_from, cal), "%s",
              p.min_bytes_from);
    /* an explicit setting wins over the calibration */
    CHECK_EQ_INT(route_set_min_bytes(&p, "64K", "INAGG_MIN_BYTES", cal, "C", err, sizeof(err)), 0);
    CHECK_EQ_INT((long)p.min_bytes, 65536);
    CHECK(!strcmp(p.min_bytes_from, "set by INAGG_MIN_BYTES"));
    route_call_t c = good_call();
    c.count = 100;
    const char *why = decide(&p, c);
    CHECK_MSG(why && strstr(why, "below the threshold of 65536 bytes, set by INAGG_MIN_BYTES"),
              "%s", why ? why : "(switch)");
    /* a bad setting is passed over for the calibration, saying both */
    CHECK_EQ_INT(route_set_min_bytes(&p, "lots", "INAGG_MIN_BYTES", cal, "C", err, sizeof(err)),
                 -EINVAL);
    CHECK_EQ_INT((long)p.min_bytes, 262144);
    CHECK_MSG(strstr(err, "INAGG_MIN_BYTES='lots'") &&
                  strstr(err, "the threshold is 262144 bytes, from calibration"),
              "%s", err);
    /* an unusable calibration is passed over for the default, saying why */
    CHECK_EQ_INT(route_set_min_bytes(&p, NULL, "M", nokey, "INAGG_CALIBRATION", err, sizeof(err)),
                 -EINVAL);
    CHECK_EQ_INT((long)p.min_bytes, ROUTE_MIN_BYTES_DEFAULT);
    CHECK_MSG(strstr(err, "has no route_min_bytes") &&
                  strstr(err, "the threshold is 1048576 bytes, the default"),
              "%s", err);
    /* both bad: both reasons, then the default */
    CHECK_EQ_INT(route_set_min_bytes(&p, "1.5M", "coll_inagg_min_bytes", "/nonexistent/c.json",
                                     "coll_inagg_calibration", err, sizeof(err)),
                 -EINVAL);
    CHECK_EQ_INT((long)p.min_bytes, ROUTE_MIN_BYTES_DEFAULT);
    CHECK_MSG(strstr(err, "coll_inagg_min_bytes='1.5M'") &&
                  strstr(err, "coll_inagg_calibration=/nonexistent/c.json: cannot read") &&
                  strstr(err, "the default"),
              "%s", err);
    unlink(cal);
    unlink(nokey);
    remove_dir();
}
