/* output.c - a command's `--json FILE|-` writer (see output.h). */
#include "cli/output.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int cli_emit_json(json_writer_t *w, const char *path, const char *cmd)
{
    const char *text = json_text(w);
    FILE *f = strcmp(path, "-") == 0 ? stdout : fopen(path, "w");
    int rc = 0;
    if (!f || !text) {
        rc = f ? -ENOMEM : -errno;
        fprintf(stderr, "%s: cannot write %s%s%s\n", cmd, path, f ? "" : ": ",
                f ? "" : strerror(-rc));
        if (f && f != stdout)
            fclose(f);
    } else {
        fprintf(f, "%s\n", text);
        if (f != stdout && fclose(f) != 0)
            rc = -EIO;
    }
    json_free(w);
    return rc;
}
