/*
 * test_harness.c - the test machinery checks itself: in the ASan build a worker process that
 * leaks memory is reported as failed (forked children end with _exit, which would skip
 * LeakSanitizer), so leak checking really runs; a worker that frees everything passes.
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "testutil.h"

#if defined(__SANITIZE_ADDRESS__)
static void *volatile g_sink;

static int leaking_worker(uint32_t rank, void *arg)
{
    (void)arg;
    char *p = malloc(4096 + rank);
    if (!p)
        return 1;
    memset(p, 1, 4096);
    g_sink = p;
    g_sink = NULL; /* the last pointer is gone: a leak */
    return 0;
}

static int clean_worker(uint32_t rank, void *arg)
{
    (void)arg;
    char *p = malloc(4096 + rank);
    free(p);
    return p ? 0 : 1;
}

#endif

TEST(harness_catches_a_leaking_worker, 30)
{
#if defined(__SANITIZE_ADDRESS__)
    CHECK_EQ_INT(run_workers(2, clean_worker, NULL, 20), 0);
    CHECK_EQ_INT(run_workers(2, leaking_worker, NULL, 20), 2);
#else
    SKIP("leak checking runs in the ASan build (make SAN=1)");
#endif
}
