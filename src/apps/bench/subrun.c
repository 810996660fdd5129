/* subrun.c - a benchmark run as a child of this binary, and its report read back (see
 * subrun.h). */
#include "apps/bench/subrun.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps/launch/launch.h"
#include "lib/base/errmsg.h"

#define READ_MAX (64u << 20) /* a rank's report of bench latency's most samples (1M) fits */

int bench_read_file(const char *path, char **text)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -errno;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    int rc = buf ? 0 : -ENOMEM;
    while (rc == 0) {
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0)
            break;
        if (len + 1 < cap)
            continue;
        char *bigger = cap < READ_MAX ? realloc(buf, cap * 2) : NULL;
        if (!bigger)
            rc = cap < READ_MAX ? -ENOMEM : -EFBIG;
        else {
            buf = bigger;
            cap *= 2;
        }
    }
    if (rc == 0 && ferror(f))
        rc = -EIO;
    fclose(f);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    buf[len] = '\0';
    *text = buf;
    return 0;
}

/* This binary's path, into self. 0, or -ENOENT. */
static int self_path(char *self, size_t len)
{
    ssize_t n = readlink("/proc/self/exe", self, len - 1);
    if (n <= 0)
        return -ENOENT;
    self[n] = '\0';
    /* rebuilt while running: the path now names the new binary */
    const char *del = " (deleted)";
    if ((size_t)n > strlen(del) && !strcmp(self + n - strlen(del), del))
        self[n - strlen(del)] = '\0';
    return 0;
}

/* The last line of the log at path, into last (empty when there is none). */
static void last_line(const char *path, char *last, size_t len)
{
    char *text = NULL;
    last[0] = '\0';
    if (bench_read_file(path, &text) < 0)
        return;
    size_t n = strlen(text);
    while (n && (text[n - 1] == '\n' || text[n - 1] == ' '))
        text[--n] = '\0';
    char *nl = strrchr(text, '\n');
    snprintf(last, len, "%s", nl ? nl + 1 : text);
    free(text);
}

int bench_run_self(char *const *args, const char *json_path, unsigned timeout_s, char *err,
                   size_t errlen)
{
    char self[4096];
    if (self_path(self, sizeof(self)) < 0)
        return set_err(err, errlen, -ENOENT, "cannot find this binary (/proc/self/exe)");
    char *argv[64];
    int a = 0;
    argv[a++] = self;
    for (int i = 1; args[i] && a < 63; i++)
        argv[a++] = args[i];
    argv[a] = NULL;
    char logp[4200];
    snprintf(logp, sizeof(logp), "%s.log", json_path);
    int fd = open(logp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return set_err(err, errlen, -errno, "cannot write %s: %s", logp, strerror(errno));
    launch_spec_t spec = {argv, NULL, LAUNCH_DEVNULL, fd, fd, 1, 0};
    char why[256];
    int rc = launch_run(&spec, (int)timeout_s * 1000, why, sizeof(why));
    close(fd);
    if (rc == 0)
        return 0;
    char last[400];
    last_line(logp, last, sizeof(last)); /* its last line says why */
    return set_err(err, errlen, rc == -ETIMEDOUT ? -ETIMEDOUT : -EIO, "%s%s%s", why,
                   last[0] ? ": " : "", last);
}
