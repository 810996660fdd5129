/* output.c - a command's `--json FILE|-` writer (see output.h). */
#include "apps/cli/output.h"

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

FILE *cli_text_stream(const char *json_path)
{
    return json_path && strcmp(json_path, "-") == 0 ? stderr : stdout;
}

void cli_json_testbed_begin(json_writer_t *w, uint32_t hosts, const char *fabric,
                            const char *link_delay, const char *link_rate)
{
    json_begin_object(w, "testbed");
    json_int(w, "hosts", hosts);
    json_string(w, "fabric", fabric ? fabric : "default");
    json_string(w, "link_delay", link_delay ? link_delay : "0");
    json_string(w, "link_rate", link_rate ? link_rate : "none");
}
