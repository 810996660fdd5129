/* output.c - shared printing helpers of the commands (see output.h). */
#include "cli/output.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_emit_json(json_writer_t *w, const char *path, const char *cmd)
{
    const char *text = json_text(w);
    FILE *f = strcmp(path, "-") == 0 ? stdout : fopen(path, "w");
    int rc = 0;
    if (!f || !text) {
        fprintf(stderr, "%s: cannot write %s%s%s\n", cmd, path, f ? "" : ": ",
                f ? "" : strerror(errno));
        rc = -1;
    } else {
        fprintf(f, "%s\n", text);
        if (f != stdout && fclose(f) != 0)
            rc = -1;
    }
    json_free(w);
    return rc;
}

int cli_parse_u64(const char *cmd, const char *flag, const char *text, uint64_t lo, uint64_t hi,
                  uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(text, &end, 10);
    if (end == text || *end || errno || x < lo || x > hi || text[0] == '-') {
        fprintf(stderr, "%s: %s needs an integer in %llu..%llu, got '%s'\n", cmd, flag,
                (unsigned long long)lo, (unsigned long long)hi, text);
        return -1;
    }
    *out = x;
    return 0;
}
