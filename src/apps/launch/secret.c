/*
 * secret.c - see launch.h: a fresh job secret for the ranks a launcher starts. The ranks
 * inherit it through the environment (INAGG_JOB_SECRET), so the switch admits only them
 * into their job (PROTOCOL.md "Authentication").
 */
#include "apps/launch/launch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "lib/base/errmsg.h"
#include "lib/base/sha256.h"

int launch_job_secret(char *err, size_t errlen)
{
    if (getenv("INAGG_JOB_SECRET") || getenv("INAGG_JOB_SECRET_FILE"))
        return 0; /* the user's own */
    uint8_t raw[32];
    char hex[2 * sizeof(raw) + 1];
    if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
        int e = errno ? errno : EIO;
        return set_err(err, errlen, -e, "no random numbers for the job secret: %s", strerror(e));
    }
    hex_encode(raw, sizeof(raw), hex);
    explicit_bzero(raw, sizeof(raw));
    int rc = setenv("INAGG_JOB_SECRET", hex, 0) == 0 ? 0 : -errno;
    explicit_bzero(hex, sizeof(hex));
    if (rc != 0)
        return set_err(err, errlen, rc, "cannot set INAGG_JOB_SECRET: %s", strerror(-rc));
    return 0;
}
