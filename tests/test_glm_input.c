/*
 * test_glm_input.c - the LIBSVM reader against hostile and odd files: a tiny file naming a huge
 * feature index is refused (memory bounded by the data), /dev/zero and a pipe that never ends
 * stop with a clear error, a file's control bytes are escaped in messages, an overlong line is
 * named by its line number (in memory and streamed from a file, across read boundaries), and
 * truncated files are reported as such. The limits come from the environment (INAGG_MAX_*).
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apps/glm/dataset.h"
#include "apps/glm/train.h"
#include "harness.h"

static void write_bytes(const char *path, const char *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    CHECK_MSG(f != NULL, "cannot create %s", path);
    CHECK(fwrite(buf, 1, len, f) == len);
    CHECK(fclose(f) == 0);
}

/* Every byte of a message is printable ASCII. */
static int printable(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
            return 0;
    return 1;
}

static long maxrss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

TEST(glm_input_huge_feature_index, 20)
{
    char path[] = "/tmp/inagg-glm-input-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    const char *text = "+1 2000000000:1 # far away\n"; /* 27 bytes */
    write_bytes(path, text, strlen(text));
    long rss0 = maxrss_kib();
    glm_dataset_t d;
    char err[512] = "";
    int rc = glm_load_libsvm(path, GLM_LABELS_BINARY, &d, err, sizeof(err));
    /* The trainer's loader (what `inagg train --data` runs) refuses it too. */
    glm_dataset_t tr, te;
    char err2[512] = "";
    int rc2 =
        glm_load_inputs(path, NULL, NULL, 1, GLM_OBJ_LOGISTIC, 32, &tr, &te, err2, sizeof(err2));
    long grew_kib = maxrss_kib() - rss0;
    CHECK_MSG(rc == -EFBIG, "a 27-byte file with feature 2000000000 was accepted (cols %zu)",
              d.cols);
    CHECK_MSG(strstr(err, path) && strstr(err, "2000000000") && strstr(err, "INAGG_MAX_FEATURES"),
              "%s", err);
    CHECK_MSG(rc2 == -EFBIG && strstr(err2, "INAGG_MAX_FEATURES"), "%s", err2);
    CHECK_MSG(grew_kib < 64 * 1024, "reading 27 bytes grew the process by %ld KiB", grew_kib);

    /* An explicit limit lets it through (nothing of size cols is allocated by the reader). */
    setenv("INAGG_MAX_FEATURES", "3000000000", 1);
    rc = glm_load_libsvm(path, GLM_LABELS_BINARY, &d, err, sizeof(err));
    CHECK_MSG(rc == 0, "%s", err);
    CHECK_EQ_INT(d.cols, 2000000000);
    glm_dataset_free(&d);
    unsetenv("INAGG_MAX_FEATURES");

    /* A sparse real-shaped set passes by default: 2000 rows, indices up to 900000. */
    size_t cap = 2000 * 64, len = 0;
    char *big = malloc(cap);
    CHECK(big != NULL);
    for (int r = 0; r < 2000; r++)
        len += (size_t)snprintf(big + len, cap - len, "%d %d:1 %d:0.5\n", r % 2 ? 1 : -1, 1 + r * 7,
                                900000 - r * 11);
    rc = glm_parse_libsvm(big, len, "sparse", GLM_LABELS_BINARY, &d, err, sizeof(err));
    free(big);
    CHECK_MSG(rc == 0, "%s", err);
    CHECK_EQ_INT(d.cols, 900000);
    glm_dataset_free(&d);
    unlink(path);
}

TEST(glm_input_dev_zero, 20)
{
    glm_dataset_t d;
    char err[512] = "";
    int rc = glm_load_libsvm("/dev/zero", GLM_LABELS_BINARY, &d, err, sizeof(err));
    CHECK(rc == -EINVAL);
    CHECK_MSG(strstr(err, "/dev/zero:1:") && strstr(err, "NUL"), "%s", err);
    /* Random bytes: refused, and the message carries no raw byte of them. */
    rc = glm_load_libsvm("/dev/urandom", GLM_LABELS_BINARY, &d, err, sizeof(err));
    CHECK(rc == -EINVAL);
    CHECK_MSG(strncmp(err, "/dev/urandom:", 13) == 0 && printable(err), "%s", err);
}

/* A pipe whose writer never stops: the reader stops at INAGG_MAX_INPUT_BYTES. */
TEST(glm_input_endless_pipe, 30)
{
    int fds[2];
    CHECK(pipe(fds) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        signal(SIGPIPE, SIG_IGN);
        static const char line[] = "1 1:1 2:0.5\n-1 3:2\n";
        for (long i = 0; i < 100000000L; i++)
            if (write(fds[1], line, sizeof(line) - 1) < 0)
                _exit(0); /* the reader closed the pipe: done (nothing allocated here) */
        _exit(1);
    }
    close(fds[1]);
    setenv("INAGG_MAX_INPUT_BYTES", "4000000", 1);
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fds[0]);
    glm_dataset_t d;
    char err[512] = "";
    int rc = glm_load_libsvm(path, GLM_LABELS_BINARY, &d, err, sizeof(err));
    close(fds[0]);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK_MSG(rc == -EFBIG, "an endless pipe was read to the end (%zu rows)", d.rows);
    CHECK_MSG(strstr(err, "more than 4000000 bytes") && strstr(err, "INAGG_MAX_INPUT_BYTES"), "%s",
              err);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer status %d", status);
}

TEST(glm_input_escaped_bytes, 10)
{
    static const char *const bad[] = {
        "1 1:\x1b[2J\x07\n", /* a terminal escape as a value */
        "\xff\xfe 1:1\n", /* bytes that are no text as a label */
        "1 \x1b]0;owned\x07:1\n", /* as an index */
        "1 1:1 \x01\x02\x03\n", /* a feature without ':' */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        glm_dataset_t d;
        char err[512] = "";
        int rc =
            glm_parse_libsvm(bad[i], strlen(bad[i]), "t", GLM_LABELS_BINARY, &d, err, sizeof(err));
        CHECK_MSG(rc == -EINVAL, "case %zu accepted", i);
        CHECK_MSG(strncmp(err, "t:1:", 4) == 0, "case %zu: %s", i, err);
        CHECK_MSG(printable(err), "case %zu: raw bytes in the message", i);
        CHECK_MSG(strstr(err, "\\x"), "case %zu: %s", i, err);
    }
}

TEST(glm_input_long_lines, 30)
{
    /* In memory: line 2 is 1 MiB + 100 bytes of one token. */
    size_t big = GLM_DEFAULT_MAX_LINE_BYTES + 100;
    char *text = malloc(big + 64);
    CHECK(text != NULL);
    size_t len = (size_t)sprintf(text, "1 1:1\n1 ");
    memset(text + len, '7', big - 2);
    len += big - 2;
    text[len++] = '\n';
    glm_dataset_t d;
    char err[512] = "";
    int rc = glm_parse_libsvm(text, len, "t", GLM_LABELS_BINARY, &d, err, sizeof(err));
    CHECK_MSG(rc == -EINVAL && strncmp(err, "t:2:", 4) == 0 && strstr(err, "longer than 1048576"),
              "%s", err);

    /* From a file (the streamed path): the same line as line 3, after a line that itself spans
     * read boundaries but is within the limit (900 KB of valid features). */
    char path[] = "/tmp/inagg-glm-input-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    size_t cap = 2 * 1024 * 1024 + big, n = 0;
    char *file = malloc(cap);
    CHECK(file != NULL);
    n += (size_t)sprintf(file, "-1 5:2\n1");
    for (int k = 1; n < 900000; k++)
        n += (size_t)sprintf(file + n, " %d:0.25", k);
    file[n++] = '\n';
    size_t good_len = n;
    memcpy(file + n, text + 6, len - 6); /* "1 777...7\n" */
    n += len - 6;
    write_bytes(path, file, good_len);
    rc = glm_load_libsvm(path, GLM_LABELS_BINARY, &d, err, sizeof(err));
    CHECK_MSG(rc == 0, "a 900 KB line was refused: %s", err);
    CHECK_EQ_INT(d.rows, 2);
    glm_dataset_t m;
    CHECK(glm_parse_libsvm(file, good_len, "m", GLM_LABELS_BINARY, &m, err, sizeof(err)) == 0);
    CHECK(m.nnz == d.nnz && m.cols == d.cols &&
          memcmp(m.col, d.col, d.nnz * sizeof(uint32_t)) == 0 &&
          memcmp(m.val, d.val, d.nnz * sizeof(float)) == 0);
    glm_dataset_free(&m);
    glm_dataset_free(&d);
    write_bytes(path, file, n);
    rc = glm_load_libsvm(path, GLM_LABELS_BINARY, &d, err, sizeof(err));
    char where[96];
    snprintf(where, sizeof(where), "%s:3:", path);
    CHECK_MSG(rc == -EINVAL && strstr(err, where) && strstr(err, "longer than 1048576"), "%s", err);
    /* The limit is configurable. */
    setenv("INAGG_MAX_LINE_BYTES", "4000000", 1);
    rc = glm_load_libsvm(path, GLM_LABELS_BINARY, &d, err, sizeof(err));
    CHECK_MSG(rc == -EINVAL && strstr(err, where) && strstr(err, "no ':'"), "%s", err);
    unsetenv("INAGG_MAX_LINE_BYTES");
    free(file);
    free(text);
    unlink(path);
}

TEST(glm_input_truncated, 10)
{
    char path[] = "/tmp/inagg-glm-input-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    static const char *const cut[] = {"1 1:1\n-1 3:", "1 1:1\n-1 3", "1 1:1\n-1 3:0.5e"};
    for (size_t i = 0; i < 3; i++) {
        write_bytes(path, cut[i], strlen(cut[i]));
        glm_dataset_t d;
        char err[512] = "";
        int rc = glm_load_libsvm(path, GLM_LABELS_BINARY, &d, err, sizeof(err));
        char where[96];
        snprintf(where, sizeof(where), "%s:2:", path);
        CHECK_MSG(rc == -EINVAL && strstr(err, where) && strstr(err, "truncated"), "case %zu: %s",
                  i, err);
    }
    /* A complete last line without its '\n' is fine. */
    write_bytes(path, "1 1:1\n-1 3:0.5", 14);
    glm_dataset_t d;
    char err[512] = "";
    CHECK_MSG(glm_load_libsvm(path, GLM_LABELS_BINARY, &d, err, sizeof(err)) == 0, "%s", err);
    CHECK_EQ_INT(d.rows, 2);
    glm_dataset_free(&d);
    unlink(path);
}
