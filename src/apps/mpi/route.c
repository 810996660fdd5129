/*
 * route.c - which way one MPI allreduce goes (route.h): the checks in order, each with the
 * sentence INAGG_VERBOSE=2 prints, the byte counts the threshold is spelled in, and where the
 * threshold comes from (a setting, a calibration file, the default).
 */
#include "apps/mpi/route.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/errmsg.h"
#include "lib/json/json.h"

#define CALIBRATION_MAX_BYTES (1u << 20) /* a calibration file is a few hundred bytes */

const char *route_decide(const route_policy_t *p, const route_call_t *c, char *why, size_t len)
{
    if (c->hosts == ROUTE_ONE_HOST && !p->one_host_switch)
        return "every rank is on one host: MPI's shared memory is faster";
    if (!c->has_job)
        return "the communicator has no switch job";
    if (!c->op_is_sum)
        return "the op is not MPI_SUM";
    if (!c->dtype_ok)
        return "the datatype is not a 4-byte int or float the switch adds";
    if (!c->has_recv)
        return "no receive buffer";
    if (c->buffers_overlap)
        return "the send and receive buffers overlap";
    if (c->count < 1 || c->count < p->min_count) {
        snprintf(why, len, "count %ld is below the minimum of %ld elements", c->count,
                 p->min_count > 1 ? p->min_count : 1);
        return why;
    }
    size_t bytes = (size_t)c->count * c->elem_bytes;
    if (bytes < p->min_bytes) {
        snprintf(why, len, "%zu bytes are below the threshold of %zu bytes, %s", bytes,
                 p->min_bytes, p->min_bytes_from);
        return why;
    }
    snprintf(why, len, "%zu bytes reach the threshold of %zu bytes, %s", bytes, p->min_bytes,
             p->min_bytes_from);
    return NULL;
}

int route_parse_bytes(const char *text, const char *what, size_t *out, char *err, size_t errlen)
{
    if (!text || !*text)
        return set_err(err, errlen, -EINVAL, "%s is empty: give a byte count such as 65536 or 64K",
                       what);
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text || text[0] == '-' || errno)
        return set_err(err, errlen, -EINVAL, "%s='%s' is not a byte count such as 65536 or 64K",
                       what, text);
    unsigned shift = 0;
    switch (*end) {
        case 'k':
        case 'K':
            shift = 10;
            end++;
            break;
        case 'm':
        case 'M':
            shift = 20;
            end++;
            break;
        case 'g':
        case 'G':
            shift = 30;
            end++;
            break;
        default: break;
    }
    if (*end)
        return set_err(err, errlen, -EINVAL,
                       "%s='%s' is not a byte count: only K, M or G may follow the number", what,
                       text);
    if (v > (SIZE_MAX >> shift))
        return set_err(err, errlen, -EINVAL, "%s='%s' is too large", what, text);
    *out = (size_t)(v << shift);
    return 0;
}

/* The file at path, NUL-terminated, in *text (the caller frees it): 0 or a negative errno. */
static int read_small_file(const char *path, char **text)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -errno;
    char *buf = malloc(CALIBRATION_MAX_BYTES + 1);
    size_t n = buf ? fread(buf, 1, CALIBRATION_MAX_BYTES + 1, f) : 0;
    int bad = !buf ? -ENOMEM : ferror(f) ? -EIO : n > CALIBRATION_MAX_BYTES ? -EFBIG : 0;
    fclose(f);
    if (bad) {
        free(buf);
        return bad;
    }
    buf[n] = '\0';
    *text = buf;
    return 0;
}

int route_read_calibration(const char *path, const char *what, size_t *out, char *err,
                           size_t errlen)
{
    char *text = NULL;
    int rc = read_small_file(path, &text);
    if (rc < 0)
        return set_err(err, errlen, rc, "%s=%s: cannot read it: %s", what, path, strerror(-rc));
    double v = NAN;
    rc = json_find_number(text, "route_min_bytes", &v);
    free(text);
    if (rc == -ENOENT)
        return set_err(err, errlen, -EINVAL,
                       "%s=%s has no route_min_bytes (`inagg model calibrate` measures it on a "
                       "testbed, as root)",
                       what, path);
    if (rc < 0 || !(v >= 0) || v != floor(v) || v > (double)(SIZE_MAX / 2))
        return set_err(err, errlen, -EINVAL,
                       "%s=%s: route_min_bytes is not a whole number of bytes, 0 or more", what,
                       path);
    *out = (size_t)v;
    return 0;
}

/* err's sentences so far, "; " and one more (cut to fit). */
static void append_reason(char *err, size_t errlen, const char *more)
{
    size_t used = strlen(err);
    if (used + 1 < errlen)
        snprintf(err + used, errlen - used, "%s%s", used ? "; " : "", more);
}

int route_set_min_bytes(route_policy_t *p, const char *setting, const char *setting_name,
                        const char *calibration, const char *calibration_name, char *err,
                        size_t errlen)
{
    char why[600];
    size_t v = 0;
    int passed_over = 0;
    if (err && errlen)
        err[0] = '\0';
    if (setting && *setting) {
        if (route_parse_bytes(setting, setting_name, &v, why, sizeof(why)) == 0) {
            p->min_bytes = v;
            snprintf(p->min_bytes_from, sizeof(p->min_bytes_from), "set by %s", setting_name);
            return 0;
        }
        append_reason(err, errlen, why);
        passed_over = 1;
    }
    if (calibration && *calibration &&
        route_read_calibration(calibration, calibration_name, &v, why, sizeof(why)) == 0) {
        p->min_bytes = v;
        snprintf(p->min_bytes_from, sizeof(p->min_bytes_from), "from calibration %s", calibration);
    } else {
        if (calibration && *calibration) {
            append_reason(err, errlen, why);
            passed_over = 1;
        }
        p->min_bytes = ROUTE_MIN_BYTES_DEFAULT;
        snprintf(p->min_bytes_from, sizeof(p->min_bytes_from), "the default");
    }
    if (!passed_over)
        return 0;
    snprintf(why, sizeof(why), "the threshold is %zu bytes, %s", p->min_bytes, p->min_bytes_from);
    append_reason(err, errlen, why);
    return -EINVAL;
}
