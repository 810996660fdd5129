/*
 * switch_conf.h - the switch's configuration file (`inagg switch --config FILE`, installed
 * as /etc/inagg/switch.conf): one `key = value` per line, the keys being the long options
 * of `inagg switch` without their dashes (`threads = 2`, `require-secret = true`); '#'
 * starts a comment, blank lines are ignored. Options on the command line come after the
 * file's and win. Errors name the file and the line: a key set twice, a NUL byte, a line over
 * 1024 bytes. Only a regular file of at most SWITCH_CONF_MAX_BYTES is read (opened without
 * blocking: a FIFO or a device put in its place is refused, never waited on).
 */
#ifndef INAGG_CLI_SWITCH_CONF_H
#define INAGG_CLI_SWITCH_CONF_H

#include <getopt.h>
#include <stddef.h>

#include "switchd/switchd.h"

#define SWITCH_CONF_MAX_ENTRIES 128
#define SWITCH_CONF_MAX_BYTES (1 << 20)

typedef struct switch_conf {
    int n; /* entries */
    char *key[SWITCH_CONF_MAX_ENTRIES]; /* "--threads" */
    char *value[SWITCH_CONF_MAX_ENTRIES]; /* "2"; NULL for a flag set to true */
    int line[SWITCH_CONF_MAX_ENTRIES];
} switch_conf_t;

/* Read path, checking every key against opts (an option without an argument takes true or
 * false; false entries are left out). 0, or a negative errno with "FILE:LINE: why" (or
 * "FILE: why") in err. */
int switch_conf_read(const char *path, const struct option *opts, const char *const *refused,
                     switch_conf_t *conf, char *err, size_t errlen);
void switch_conf_free(switch_conf_t *conf);

/* The command line with the file's options put first: {argv[0], --key, value, ...,
 * argv[1..]}; argv_line[i] is the file's line of new argument i (0: the command line's).
 * NULL when out of memory; free the array with free() (the strings are conf's and argv's). */
char **switch_conf_argv(const switch_conf_t *conf, int argc, char **argv, int *new_argc,
                        int **argv_line);

/* The limits (switch_limits_t) the file sets, then those argv sets (later wins); unset ones
 * 0 (the default). 0, or -EINVAL with "FILE:LINE: why" in err for a value that is not a
 * non-negative integer. */
int switch_conf_limits(const char *path, const switch_conf_t *conf, int argc, char **argv,
                       switch_limits_t *l, char *err, size_t errlen);

/* SIGHUP: read path again and hand the switch its limits (the command line's still win);
 * logged. A file that no longer parses changes nothing (the error is logged). 0, or a
 * negative errno. */
int switch_conf_reload(inagg_switch_t *sw, const char *path, const struct option *opts,
                       const char *const *refused, int argc, char **argv);

#endif /* INAGG_CLI_SWITCH_CONF_H */
