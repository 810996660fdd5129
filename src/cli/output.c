/* output.c - shared printing helpers of the commands (see output.h). */
#include "cli/output.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/util.h"
#include "launch/launch.h"
#include "switch/switch.h"

int cli_emit_json(json_writer_t *w, const char *path, const char *cmd)
{
    const char *text = json_text(w);
    FILE *f = strcmp(path, "-") == 0 ? stdout : fopen(path, "w");
    int rc = 0;
    if (!f || !text) {
        fprintf(stderr, "%s: cannot write %s%s%s\n", cmd, path, f ? "" : ": ",
                f ? "" : strerror(errno));
        rc = -1;
    } else {
        fprintf(f, "%s\n", text);
        if (f != stdout && fclose(f) != 0)
            rc = -1;
    }
    json_free(w);
    return rc;
}

int cli_parse_u64(const char *cmd, const char *flag, const char *text, uint64_t lo, uint64_t hi,
                  uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(text, &end, 10);
    if (end == text || *end || errno || x < lo || x > hi || text[0] == '-') {
        fprintf(stderr, "%s: %s needs an integer in %llu..%llu, got '%s'\n", cmd, flag,
                (unsigned long long)lo, (unsigned long long)hi, text);
        return -1;
    }
    *out = x;
    return 0;
}

int cli_parse_protocol(const char *cmd, const char *text, inagg_protocol_t *out)
{
    if (strcmp(text, "switchml") == 0) {
        *out = INAGG_PROTO_SWITCHML;
    } else if (strcmp(text, "p4sgd") == 0) {
        *out = INAGG_PROTO_P4SGD;
    } else {
        fprintf(stderr, "%s: --protocol must be switchml or p4sgd, got '%s'\n", cmd, text);
        return -1;
    }
    return 0;
}

int cli_parse_loss(const char *cmd, const char *text, double *out)
{
    char *end;
    double p = strtod(text, &end);
    if (end == text || *end || !(p >= 0 && p < 1)) {
        fprintf(stderr, "%s: --loss needs a probability in [0, 1), got '%s'\n", cmd, text);
        return -1;
    }
    *out = p;
    return 0;
}

int cli_parse_baseline(const char *cmd, const char *text, const char *name, const char **out)
{
    if (strcmp(text, name) != 0 && strcmp(text, "none") != 0) {
        fprintf(stderr, "%s: --baseline must be %s or none\n", cmd, name);
        return -1;
    }
    *out = text;
    return 0;
}

int cli_bad_option(const char *cmd, int c, char **argv)
{
    /* getopt_long leaves optind past the argument it refused: a long option is named by it
     * (without any "=value"), a short one by optopt (it may sit in a cluster like "-hx") */
    const char *arg = optind > 0 ? argv[optind - 1] : "";
    char name[64];
    if (strncmp(arg, "--", 2) == 0)
        snprintf(name, sizeof(name), "%.*s", (int)strcspn(arg, "="), arg);
    else if (optopt > ' ' && optopt < 127)
        snprintf(name, sizeof(name), "-%c", optopt);
    else
        snprintf(name, sizeof(name), "%s", arg);
    if (c == ':')
        fprintf(stderr, "%s: option '%s' needs a value (see --help)\n", cmd, name);
    else
        fprintf(stderr, "%s: unknown option '%s' (see --help)\n", cmd, name);
    return 2;
}

int cli_no_extra_args(const char *cmd, int argc, char **argv, int first)
{
    if (first < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", cmd, argv[first]);
        return -1;
    }
    return 0;
}

const char *cli_worker_faults(const char *faults, double loss, uint64_t seed, char *buf,
                              size_t len)
{
    if (faults || !(loss > 0))
        return faults;
    snprintf(buf, len, "drop=%g,seed=%llu", loss, (unsigned long long)seed);
    return buf;
}

pid_t cli_switch_begin(const char *cmd, const char *given, uint32_t threads,
                       uint32_t worker_timeout_ms, char *addr, size_t len)
{
    if (given) {
        snprintf(addr, len, "%s", given);
        return 0;
    }
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    cfg.listen = "127.0.0.1:0";
    cfg.threads = threads ? threads : 1;
    cfg.worker_timeout_ms = worker_timeout_ms;
    uint16_t port = 0;
    char err[256];
    pid_t pid = launch_switch(&cfg, &port, err, sizeof(err));
    if (pid < 0) {
        fprintf(stderr, "%s: the embedded switch did not start\n", cmd);
        return -1;
    }
    snprintf(addr, len, "127.0.0.1:%u", port);
    return pid;
}

void cli_switch_end(pid_t pid) { launch_switch_stop(pid); }

const char *cli_job_name(const char *prefix, char *buf, size_t len)
{
    snprintf(buf, len, "%s-%d-%llu", prefix, (int)getpid(),
             (unsigned long long)(util_now_ns() % 1000000));
    return buf;
}

int cli_read_full(int fd, void *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, (char *)buf + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        got += (size_t)n;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void cli_sort(double *v, size_t n) { qsort(v, n, sizeof(double), cmp_double); }

double cli_median(double *v, size_t n)
{
    cli_sort(v, n);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double cli_percentile(const double *v, size_t n, double p)
{
    if (n == 0)
        return NAN;
    double rank = ceil(p * (double)n);
    size_t i = rank < 1 ? 0 : (size_t)rank - 1;
    return v[i < n ? i : n - 1];
}
