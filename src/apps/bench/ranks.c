/* ranks.c - collecting N local ranks' reports under one deadline (see ranks.h). */
#include "apps/bench/ranks.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

#include "lib/base/util.h"

uint32_t bench_ranks_collect(launch_ranks_t *g, uint32_t n, void *reports, size_t size, size_t *got,
                             uint64_t deadline_ns, int poll_ms, void (*tick)(void *ctx), void *ctx)
{
    uint32_t open_fds = 0;
    for (uint32_t k = 0; k < n; k++) {
        got[k] = 0;
        open_fds += g->fd[k] >= 0;
    }
    while (open_fds > 0 && util_now_ns() < deadline_ns) {
        struct pollfd pfd[LAUNCH_MAX_RANKS];
        uint32_t idx[LAUNCH_MAX_RANKS], m = 0;
        for (uint32_t k = 0; k < n; k++) {
            if (g->fd[k] >= 0) {
                pfd[m] = (struct pollfd){g->fd[k], POLLIN, 0};
                idx[m++] = k;
            }
        }
        uint64_t left_ms = (deadline_ns - util_now_ns()) / 1000000ull + 1;
        int pr = poll(pfd, m, (int)util_min_u64(left_ms, (uint64_t)poll_ms));
        if (tick)
            tick(ctx);
        for (uint32_t i = 0; pr > 0 && i < m; i++) {
            if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            uint32_t k = idx[i];
            char *dst = (char *)reports + (size_t)k * size;
            ssize_t r = read(g->fd[k], dst + got[k], size - got[k]);
            if (r > 0)
                got[k] += (size_t)r;
            if ((r <= 0 && !(r < 0 && errno == EINTR)) || got[k] == size) {
                close(g->fd[k]);
                g->fd[k] = -1;
                open_fds--;
            }
        }
    }
    return open_fds;
}

int bench_ranks_collect_reports(launch_ranks_t *g, uint32_t n, bench_rank_report_t *reps,
                                size_t line_max, int *ok, uint64_t deadline_ns, int poll_ms,
                                void (*tick)(void *ctx), void *ctx)
{
    char *text = malloc((size_t)n * line_max);
    size_t *got = calloc(n, sizeof(size_t));
    if (!text || !got) {
        free(text);
        free(got);
        return -ENOMEM;
    }
    uint32_t open_fds =
        bench_ranks_collect(g, n, text, line_max, got, deadline_ns, poll_ms, tick, ctx);
    for (uint32_t k = 0; k < n; k++) {
        char *line = text + (size_t)k * line_max;
        ok[k] = got[k] > 0 && got[k] < line_max; /* a full buffer: the line did not fit */
        if (ok[k]) {
            line[got[k]] = '\0';
            ok[k] = bench_rank_report_decode(line, &reps[k]) == 0;
        }
    }
    free(text);
    free(got);
    return (int)open_fds;
}
