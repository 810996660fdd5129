/* plot.c - a command's PNG through gnuplot (see plot.h). */
#include "apps/cli/plot.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apps/launch/launch.h"

#define GNUPLOT_TIMEOUT_MS 60000

static void close_files(cli_plot_t *p)
{
    if (p->dataf)
        fclose(p->dataf);
    if (p->scriptf)
        fclose(p->scriptf);
    p->dataf = p->scriptf = NULL;
}

void cli_plot_discard(cli_plot_t *p)
{
    close_files(p);
    unlink(p->data);
    unlink(p->script);
    rmdir(p->dir);
}

static int find_gnuplot(const char *cmd, char *path, size_t len)
{
    if (launch_find_in_path("gnuplot", path, len) == 0)
        return 0;
    fprintf(stderr,
            "%s: --plot needs gnuplot, which is not installed (e.g. apt-get install "
            "gnuplot-nox)\n",
            cmd);
    return -ENOENT;
}

int cli_plot_available(const char *cmd)
{
    char path[4096];
    return find_gnuplot(cmd, path, sizeof(path));
}

int cli_plot_open(cli_plot_t *p, const char *cmd)
{
    *p = (cli_plot_t){.cmd = cmd};
    int rc = find_gnuplot(cmd, p->gnuplot, sizeof(p->gnuplot));
    if (rc < 0)
        return rc;
    snprintf(p->dir, sizeof(p->dir), "/tmp/inagg-plot-XXXXXX");
    if (!mkdtemp(p->dir)) {
        int err = errno;
        fprintf(stderr, "%s: --plot: mkdtemp: %s\n", cmd, strerror(err));
        return -err;
    }
    snprintf(p->data, sizeof(p->data), "%s/data", p->dir);
    snprintf(p->script, sizeof(p->script), "%s/plot.gp", p->dir);
    p->dataf = fopen(p->data, "w");
    p->scriptf = p->dataf ? fopen(p->script, "w") : NULL;
    if (!p->scriptf) {
        int err = errno;
        fprintf(stderr, "%s: --plot: %s: %s\n", cmd, p->dir, strerror(err));
        cli_plot_discard(p);
        return -err;
    }
    return 0;
}

int cli_plot_run(cli_plot_t *p, const char *png)
{
    int bad = ferror(p->dataf) || ferror(p->scriptf);
    bad |= fclose(p->dataf) != 0;
    bad |= fclose(p->scriptf) != 0;
    p->dataf = p->scriptf = NULL;
    int rc = -EIO;
    if (!bad) {
        char *argv[] = {p->gnuplot, p->script, NULL};
        launch_spec_t spec = {
            .argv = argv, .in = LAUNCH_DEVNULL, .out = LAUNCH_DEVNULL, .err = LAUNCH_INHERIT};
        struct stat st;
        if (launch_run(&spec, GNUPLOT_TIMEOUT_MS, NULL, 0) == 0 && stat(png, &st) == 0 &&
            st.st_size > 0)
            rc = 0;
    }
    if (rc < 0)
        fprintf(stderr,
                "%s: gnuplot could not write %s (no pngcairo terminal, or the path is "
                "not writable)\n",
                p->cmd, png);
    else
        fprintf(stderr, "%s: plot written to %s\n", p->cmd, png);
    cli_plot_discard(p);
    return rc;
}
