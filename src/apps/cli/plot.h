/*
 * plot.h - the one way a command draws a PNG with gnuplot: a temporary directory holding a
 * data file and a script, both opened for the caller to write; then gnuplot runs on the
 * script (bounded), the PNG is checked, and the directory goes, whatever happened.
 */
#ifndef INAGG_CLI_PLOT_H
#define INAGG_CLI_PLOT_H

#include <stdio.h>

typedef struct cli_plot {
    const char *cmd; /* every message starts with it */
    char gnuplot[4096]; /* gnuplot's path */
    char dir[64], data[80], script[80];
    FILE *dataf, *scriptf; /* open for writing after cli_plot_open */
} cli_plot_t;

/* Whether gnuplot is installed: 0, or -ENOENT after the message cli_plot_open would give (a
 * command checks before a long run whose plot it was asked for). */
int cli_plot_available(const char *cmd);

/* Find gnuplot and open the data file and the script in a new temporary directory.
 * 0, or a negative errno after a message naming cmd (-ENOENT: no gnuplot); nothing is left
 * behind on failure. */
int cli_plot_open(cli_plot_t *p, const char *cmd);

/* Close both files, run gnuplot on the script and check that png was written (not empty);
 * say where it went; remove the directory. 0, or -EIO after a message. */
int cli_plot_run(cli_plot_t *p, const char *png);

/* Close both files and remove the directory without running gnuplot. */
void cli_plot_discard(cli_plot_t *p);

#endif /* INAGG_CLI_PLOT_H */
