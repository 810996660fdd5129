/*
 * test_switch_conf.c - the switch's config file reader alone (src/switchd/server/switch_conf.c),
 * against option tables of its own: more settings than it holds are refused (never written
 * past its arrays), a key set twice names both lines, a NUL byte names its line, and the
 * limits SIGHUP re-reads refuse a value past 32 bits instead of wrapping it. The command's
 * side (`inagg switch --config`, FIFOs, devices, SIGHUP) is tests/cli_service.sh "config".
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "switchd/switchd.h"

/* text into a new temp file; its path into path. */
static void write_conf(char *path, size_t cap, const char *text, size_t len)
{
    snprintf(path, cap, "/tmp/inagg-conf-XXXXXX");
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    CHECK(write(fd, text, len) == (ssize_t)len);
    close(fd);
}

#define MANY 200 /* settings, more than SWITCH_CONF_MAX_ENTRIES */

TEST(switch_conf_more_settings_than_it_holds_refused, 10)
{
    static struct option opts[MANY + 1];
    static char names[MANY][16];
    char *text = malloc(MANY * 32);
    CHECK(text);
    size_t len = 0;
    for (int i = 0; i < MANY; i++) {
        snprintf(names[i], sizeof(names[i]), "key%d", i);
        opts[i] = (struct option){names[i], required_argument, 0, 1000 + i};
        len += (size_t)sprintf(text + len, "key%d = %d\n", i, i);
    }
    char path[64], err[512] = "";
    write_conf(path, sizeof(path), text, len);
    switch_conf_t conf;
    int rc = switch_conf_read(path, opts, NULL, &conf, err, sizeof(err));
    char want[128];
    snprintf(want, sizeof(want), ":%d: more than %d settings", SWITCH_CONF_MAX_ENTRIES + 1,
             SWITCH_CONF_MAX_ENTRIES);
    CHECK_MSG(rc != 0 && strstr(err, want), "rc %d, '%s' (want '%s')", rc, err, want);
    CHECK_EQ_INT(conf.n, 0); /* nothing kept from a refused file */
    /* Exactly SWITCH_CONF_MAX_ENTRIES lines are taken whole. */
    len = 0;
    for (int i = 0; i < SWITCH_CONF_MAX_ENTRIES; i++)
        len += (size_t)sprintf(text + len, "key%d = %d\n", i, i);
    unlink(path);
    write_conf(path, sizeof(path), text, len);
    rc = switch_conf_read(path, opts, NULL, &conf, err, sizeof(err));
    CHECK_MSG(rc == 0, "rc %d: %s", rc, err);
    CHECK_EQ_INT(conf.n, SWITCH_CONF_MAX_ENTRIES);
    CHECK(strcmp(conf.key[SWITCH_CONF_MAX_ENTRIES - 1], "--key127") == 0);
    CHECK(strcmp(conf.value[SWITCH_CONF_MAX_ENTRIES - 1], "127") == 0);
    CHECK_EQ_INT(conf.line[SWITCH_CONF_MAX_ENTRIES - 1], SWITCH_CONF_MAX_ENTRIES);
    switch_conf_free(&conf);
    unlink(path);
    free(text);
}

static const struct option small_opts[] = {{"threads", required_argument, 0, 't'},
                                           {"max-job-slots", required_argument, 0, 1004},
                                           {"require-secret", no_argument, 0, 1006},
                                           {0, 0, 0, 0}};

/* Read text (len bytes) with small_opts: rc, the error in err. */
static int read_text(const char *text, size_t len, switch_conf_t *conf, char *err, size_t cap)
{
    char path[64];
    write_conf(path, sizeof(path), text, len);
    err[0] = 0;
    int rc = switch_conf_read(path, small_opts, NULL, conf, err, cap);
    unlink(path);
    return rc;
}

TEST(switch_conf_twice_and_nul_name_their_lines, 10)
{
    switch_conf_t conf;
    char err[512];
    const char twice[] = "threads = 2\n# comment\nthreads = 3\n";
    int rc = read_text(twice, sizeof(twice) - 1, &conf, err, sizeof(err));
    CHECK_MSG(rc != 0 && strstr(err, ":3: 'threads' is set again (first on line 1)"), "%d '%s'", rc,
              err);
    const char flag[] = "require-secret = false\nrequire-secret = true\n";
    rc = read_text(flag, sizeof(flag) - 1, &conf, err, sizeof(err));
    CHECK_MSG(rc != 0 && strstr(err, ":2: 'require-secret' is set again (first on line 1)"),
              "%d '%s'", rc, err);
    const char nul[] = "max-job-slots = 9\nthreads = 2\0threads = 4\n";
    rc = read_text(nul, sizeof(nul) - 1, &conf, err, sizeof(err));
    CHECK_MSG(rc != 0 && strstr(err, ":2: a NUL byte"), "%d '%s'", rc, err);
    /* A last line without its newline is still a line. */
    const char last[] = "threads = 2\nmax-job-slots = 9";
    rc = read_text(last, sizeof(last) - 1, &conf, err, sizeof(err));
    CHECK_MSG(rc == 0 && conf.n == 2 && strcmp(conf.value[1], "9") == 0, "%d '%s'", rc, err);
    switch_conf_free(&conf);
}

TEST(switch_conf_limits_refuse_past_32_bits, 10)
{
    switch_conf_t conf;
    switch_limits_t l;
    char err[512];
    const char max[] = "max-job-slots = 4294967295\n";
    CHECK_EQ_INT(read_text(max, sizeof(max) - 1, &conf, err, sizeof(err)), 0);
    char *argv[] = {"switch", NULL};
    CHECK_EQ_INT(switch_conf_limits("f.conf", &conf, 1, argv, &l, err, sizeof(err)), 0);
    CHECK(l.max_job_slots == UINT32_MAX);
    switch_conf_free(&conf);
    /* One more would wrap to 0 (the default) if it were taken. */
    const char over[] = "threads = 1\nmax-job-slots = 4294967296\n";
    CHECK_EQ_INT(read_text(over, sizeof(over) - 1, &conf, err, sizeof(err)), 0);
    int rc = switch_conf_limits("f.conf", &conf, 1, argv, &l, err, sizeof(err));
    CHECK_MSG(rc == -EINVAL && strstr(err, "f.conf:2: 'max-job-slots' needs a non-negative "
                                           "integer, got '4294967296'"),
              "%d '%s'", rc, err);
    switch_conf_free(&conf);
}
