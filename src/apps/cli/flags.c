/* flags.c - the flag parsing every command shares (see flags.h). */
#include "apps/cli/flags.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_parse_u64(const char *cmd, const char *flag, const char *text, uint64_t lo, uint64_t hi,
                  uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(text, &end, 10);
    if (end == text || *end || errno || x < lo || x > hi || text[0] == '-') {
        fprintf(stderr, "%s: %s needs an integer in %llu..%llu, got '%s'\n", cmd, flag,
                (unsigned long long)lo, (unsigned long long)hi, text);
        return -EINVAL;
    }
    *out = x;
    return 0;
}

int cli_parse_u32(const char *cmd, const char *flag, const char *text, uint32_t lo, uint32_t hi,
                  uint32_t *out)
{
    uint64_t v;
    int rc = cli_parse_u64(cmd, flag, text, lo, hi, &v);
    if (rc == 0)
        *out = (uint32_t)v;
    return rc;
}

int cli_parse_protocol(const char *cmd, const char *text, inagg_protocol_t *out)
{
    if (strcmp(text, "switchml") == 0) {
        *out = INAGG_PROTO_SWITCHML;
    } else if (strcmp(text, "p4sgd") == 0) {
        *out = INAGG_PROTO_P4SGD;
    } else {
        fprintf(stderr, "%s: --protocol must be switchml or p4sgd, got '%s'\n", cmd, text);
        return -EINVAL;
    }
    return 0;
}

int cli_parse_loss(const char *cmd, const char *text, double *out)
{
    char *end;
    double p = strtod(text, &end);
    if (end == text || *end || !(p >= 0 && p < 1)) {
        fprintf(stderr, "%s: --loss needs a probability in [0, 1), got '%s'\n", cmd, text);
        return -EINVAL;
    }
    *out = p;
    return 0;
}

int cli_parse_baseline(const char *cmd, const char *text, const char *name, const char **out)
{
    if (strcmp(text, name) != 0 && strcmp(text, "none") != 0) {
        fprintf(stderr, "%s: --baseline must be %s or none\n", cmd, name);
        return -EINVAL;
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
        return -EINVAL;
    }
    return 0;
}
