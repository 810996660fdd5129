/* cn_handle.c - see cn_handle.h. */
#include "cn_handle.h"

#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

int cn_handle_make(cn_handle_t *h, const char *switch_addr, char *err, size_t errlen)
{
    memset(h, 0, sizeof(*h));
    memcpy(h->magic, CN_MAGIC, sizeof(h->magic));
    h->version = CN_VERSION;
    if (switch_addr && *switch_addr) {
        if (strlen(switch_addr) >= sizeof(h->switch_addr)) {
            snprintf(err, errlen,
                     "$INAGG_SWITCH (%zu characters) is longer than the %d a handle "
                     "carries",
                     strlen(switch_addr), CN_SWITCH_MAX - 1);
            return -1;
        }
        strcpy(h->switch_addr, switch_addr);
        h->has_switch = 1;
    }
    uint64_t r = 0;
    if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r)) { /* no entropy: still distinct */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        r = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20);
    }
    snprintf(h->job, sizeof(h->job), "nccl-%016llx", (unsigned long long)r);
    return 0;
}

int cn_handle_read(const void *raw, int rank, cn_handle_t *out, char *err, size_t errlen)
{
    if (!raw) {
        snprintf(err, errlen, "rank %d's handle is missing", rank);
        return -1;
    }
    memcpy(out, raw, sizeof(*out));
    if (memcmp(out->magic, CN_MAGIC, sizeof(out->magic)) != 0) {
        snprintf(err, errlen,
                 "rank %d's handle is not an inagg CollNet handle (another "
                 "plugin's, or damaged)",
                 rank);
        return -1;
    }
    if (out->version != CN_VERSION) {
        snprintf(err, errlen,
                 "rank %d's handle is of version %u, this plugin's %u: every "
                 "rank must load the same plugin",
                 rank, out->version, CN_VERSION);
        return -1;
    }
    if (out->has_switch > 1 || !memchr(out->switch_addr, '\0', sizeof(out->switch_addr)) ||
        !memchr(out->job, '\0', sizeof(out->job)) || strncmp(out->job, "nccl-", 5) != 0 ||
        (out->has_switch && !out->switch_addr[0])) {
        snprintf(err, errlen, "rank %d's handle is damaged", rank);
        return -1;
    }
    return 0;
}
