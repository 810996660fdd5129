/*
 * harness.h - the test registry. Each TEST() registers itself at load time; the runner forks
 * a child per test, kills it after its time limit, and prints one line per test and a final
 * "N passed, N failed, N skipped". A test fails by returning from CHECK, by crashing, or by
 * running out of time; it skips by calling SKIP("why").
 *
 *   TEST(wire_roundtrip, 10) { CHECK(x == 1); CHECK_EQ_INT(a, b); }
 *
 * Run: inagg-tests [--list] [--timeout-scale F] [substring ...]
 */
#ifndef INAGG_TEST_HARNESS_H
#define INAGG_TEST_HARNESS_H

#include <stdio.h>
#include <stdlib.h>

typedef void (*test_fn)(void);
void harness_register(const char *name, test_fn fn, int timeout_s, const char *file);
void harness_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
void harness_skip(const char *why) __attribute__((noreturn));
/* Directory of the build (where `inagg` lives), from the test binary's own path. */
const char *harness_build_dir(void);
/* Path of ../shared/datasets/NAME relative to the source tree, or NULL if it is absent. */
const char *harness_dataset(const char *name);

#define TEST(name, timeout_s)                                                                      \
    static void test_##name(void);                                                                 \
    __attribute__((constructor)) static void register_##name(void)                                 \
    {                                                                                              \
        harness_register(#name, test_##name, timeout_s, __FILE__);                                 \
    }                                                                                              \
    static void test_##name(void)

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            harness_fail(__FILE__, __LINE__, "CHECK(%s)", #cond);                                  \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond))                                                                               \
            harness_fail(__FILE__, __LINE__, __VA_ARGS__);                                         \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                         \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        if (a_ != b_)                                                                              \
            harness_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, a_, b_);            \
    } while (0)

#define SKIP(why) harness_skip(why)

#endif /* INAGG_TEST_HARNESS_H */
