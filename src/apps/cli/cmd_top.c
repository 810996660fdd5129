/*
 * cmd_top.c - `inagg top HOST:PORT`: a live view of a running switch in the terminal, one
 * frame a second: the switch's packet rates, drops and slot use, and a line per job with its
 * rounds, packet and byte rates and drops. Plain ANSI escapes (cursor home, clear), so it
 * works over ssh and in any terminal; q or Ctrl-C quits, and it ends with a message when the
 * switch goes away. --once prints one frame (rates over --interval) without escapes.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "apps/cli/commands.h"
#include "apps/cli/flags.h"
#include "apps/cli/top_stats.h"

static volatile sig_atomic_t g_quit;
static struct termios g_saved_tty;
static int g_tty_raw;

static void on_signal(int sig)
{
    (void)sig;
    g_quit = 1;
}

/* Keys one at a time, not echoed; signals (Ctrl-C) still raised. */
static void tty_raw(void)
{
    struct termios t;
    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &g_saved_tty) != 0)
        return;
    t = g_saved_tty;
    t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
    t.c_cc[VMIN] = 0;
    t.c_cc[VTIME] = 0;
    if (tcsetattr(STDIN_FILENO, TCSANOW, &t) == 0)
        g_tty_raw = 1;
}

static void tty_restore(void)
{
    if (g_tty_raw)
        tcsetattr(STDIN_FILENO, TCSANOW, &g_saved_tty);
    g_tty_raw = 0;
}

static void usage(FILE *out)
{
    fprintf(out, "usage: inagg top HOST:PORT [--interval MS] [--once]\n"
                 "\n"
                 "A live view of the switch at HOST:PORT (its control port), refreshed every\n"
                 "second: packets in and out per second, drops, slots in use, control-plane\n"
                 "limits hit, and per job its state, rounds/s, packets/s, MB/s in and drops;\n"
                 "with an L2 fabric (--l2), the IP fragments it dropped (agg_fragment).\n"
                 "q or Ctrl-C quits; it exits (status 1) when the switch goes away. Each\n"
                 "frame fits the terminal's width (80 columns when not a terminal): where\n"
                 "the job columns do not fit, drops/s, world, protocol, slots, packets/s and\n"
                 "drops go, in that order, and job names are cut to the room left.\n"
                 "\n"
                 "  --interval MS   time between frames (default 1000)\n"
                 "  --once          print one frame (rates over one interval) and exit\n"
                 "  -h, --help      this text\n");
}

static void human_bytes(double bps, char *out, size_t cap)
{
    if (bps >= 1e9)
        snprintf(out, cap, "%.2f GB/s", bps / 1e9);
    else if (bps >= 1e6)
        snprintf(out, cap, "%.2f MB/s", bps / 1e6);
    else
        snprintf(out, cap, "%.1f kB/s", bps / 1e3);
}

/* ---- fitting the terminal's width ----------------------------------------------------------
 * A job row's columns, in order. Where the terminal is narrower than all of them, the ones
 * with a drop rank go, lowest rank first (as top drops fields), until the row fits; the JOB
 * column is as wide as the longest name shown (at least JOB_MIN, at most JOB_MAX) where there
 * is room, and a longer name is cut. The frame's other lines are cut at the width. */

enum {
    COL_ID,
    COL_JOB,
    COL_STATE,
    COL_PROTO,
    COL_WORLD,
    COL_SLOTS,
    COL_ROUNDS,
    COL_PKTS,
    COL_IN,
    COL_DROPS,
    COL_DROPS_S,
    NCOLS
};

typedef struct top_col {
    const char *head;
    int width; /* 0: the JOB column, sized by top_layout */
    int drop; /* 1 goes first when the row does not fit; 0 never goes */
    int left; /* left-aligned (text) */
} top_col_t;

static const top_col_t g_cols[NCOLS] = {
    [COL_ID] = {"ID", 5, 0, 0},
    [COL_JOB] = {"JOB", 0, 0, 1},
    [COL_STATE] = {"STATE", 8, 0, 1},
    [COL_PROTO] = {"PROTO", 8, 3, 1},
    [COL_WORLD] = {"WORLD", 5, 2, 0},
    [COL_SLOTS] = {"SLOTS", 6, 4, 0},
    [COL_ROUNDS] = {"ROUNDS/S", 10, 0, 0},
    [COL_PKTS] = {"PKTS/S", 10, 5, 0},
    [COL_IN] = {"IN", 12, 0, 0},
    [COL_DROPS] = {"DROPS", 8, 6, 0},
    [COL_DROPS_S] = {"DROPS/S", 8, 1, 0},
};

#define JOB_MIN 16
#define JOB_MAX 63 /* the longest job name */
#define TOP_DEFAULT_WIDTH 80 /* not a terminal, or one that does not say */

typedef struct top_layout {
    int shown[NCOLS];
    int job_width;
} top_layout_t;

/* The columns that fit `width`, for jobs whose longest name is name_len. */
static top_layout_t top_layout(int width, int name_len)
{
    top_layout_t l;
    int used = JOB_MIN - 1; /* every column but the first has a space before it */
    for (int i = 0; i < NCOLS; i++) {
        l.shown[i] = 1;
        used += g_cols[i].width + 1;
    }
    for (int rank = 1; used > width; rank++) {
        int found = 0;
        for (int i = 0; i < NCOLS; i++)
            if (g_cols[i].drop == rank) {
                l.shown[i] = 0;
                used -= g_cols[i].width + 1;
                found = 1;
            }
        if (!found)
            break; /* nothing left to drop: the lines are cut */
    }
    int want = name_len < JOB_MIN ? JOB_MIN : name_len > JOB_MAX ? JOB_MAX : name_len;
    int room = width - used;
    l.job_width = JOB_MIN + (room > want - JOB_MIN ? want - JOB_MIN : room > 0 ? room : 0);
    return l;
}

/* The terminal's columns (TIOCGWINSZ on out), or TOP_DEFAULT_WIDTH. */
static int terminal_width(FILE *out)
{
    struct winsize ws;
    if (ioctl(fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    return TOP_DEFAULT_WIDTH;
}

/* One line of the frame, cut at width. */
static void put_line(FILE *out, int width, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void put_line(FILE *out, int width, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (width >= 0 && (size_t)width < strlen(line))
        line[width] = 0;
    fprintf(out, "%s\n", line);
}

/* Column i of a row (text, right- or left-aligned at its width, cut to it) appended at *at. */
static void add_cell(char *row, size_t cap, size_t *at, const top_layout_t *l, int i,
                     const char *text)
{
    size_t w = (size_t)(i == COL_JOB ? l->job_width : g_cols[i].width);
    if (!l->shown[i] || *at + w + 2 > cap)
        return;
    if (*at)
        row[(*at)++] = ' ';
    size_t len = strlen(text) < w ? strlen(text) : w, pad = w - len;
    memset(row + *at, ' ', w);
    memcpy(row + *at + (g_cols[i].left ? 0 : pad), text, len);
    *at += w;
    row[*at] = 0;
}

static void job_row(FILE *out, int width, const top_layout_t *l, const top_job_t *j,
                    const top_job_t *was, uint64_t a, uint64_t b)
{
    char cell[NCOLS][48], row[1024];
    snprintf(cell[COL_ID], sizeof(cell[0]), "%u", j->id);
    snprintf(cell[COL_JOB], sizeof(cell[0]), "%s", j->name);
    if (j->gen > 0) /* rejoined after a fail-over: its generation */
        snprintf(cell[COL_STATE], sizeof(cell[0]), "%.10s g%u", j->state, j->gen);
    else
        snprintf(cell[COL_STATE], sizeof(cell[0]), "%s", j->state);
    snprintf(cell[COL_PROTO], sizeof(cell[0]), "%s", j->protocol);
    snprintf(cell[COL_WORLD], sizeof(cell[0]), "%u", j->world);
    snprintf(cell[COL_SLOTS], sizeof(cell[0]), "%u", j->slots);
    snprintf(cell[COL_ROUNDS], sizeof(cell[0]), "%.1f", top_rate(was->rounds, j->rounds, a, b));
    snprintf(cell[COL_PKTS], sizeof(cell[0]), "%.0f",
             top_rate(was->contributions, j->contributions, a, b));
    human_bytes(top_rate(was->bytes_in, j->bytes_in, a, b), cell[COL_IN], sizeof(cell[0]));
    snprintf(cell[COL_DROPS], sizeof(cell[0]), "%llu", (unsigned long long)j->drops);
    snprintf(cell[COL_DROPS_S], sizeof(cell[0]), "%.1f", top_rate(was->drops, j->drops, a, b));
    size_t at = 0;
    row[0] = 0;
    for (int i = 0; i < NCOLS; i++)
        add_cell(row, sizeof(row), &at, l, i, cell[i]);
    put_line(out, width, "%s", row);
}

static void render(FILE *out, const char *addr, const top_snapshot_t *p, const top_snapshot_t *c,
                   int ansi, int width)
{
    uint64_t a = p->taken_ns, b = c->taken_ns;
    if (ansi)
        fputs("\033[H\033[2J", out);
    put_line(out, width, "inagg top - switch %s (%s)  up %.0f s  threads %u  %s", addr, c->listen,
             c->uptime_s, c->threads, ansi ? "q quits" : "");
    put_line(out, width,
             "packets in %.0f/s  out %.0f/s   slots %u/%u used   jobs %d (%d retired kept, "
             "%llu rejoined after a fail-over)",
             top_rate(p->packets_in, c->packets_in, a, b),
             top_rate(p->packets_out, c->packets_out, a, b), c->slots_used, c->slots_total,
             c->njobs, c->retired, (unsigned long long)c->rejoined);
    put_line(out, width,
             "drops before any job %llu   control connections %u   control limits hit %llu",
             (unsigned long long)c->drops_pre_job, c->connections, (unsigned long long)c->refusals);
    if (c->fabric)
        put_line(
            out, width,
            "fabric: IP fragments dropped %llu (%.0f/s; aggregation packets must fit one frame)",
            (unsigned long long)c->ip_fragments, top_rate(p->ip_fragments, c->ip_fragments, a, b));
    int longest = 0;
    for (int i = 0; i < c->njobs; i++)
        if ((int)strlen(c->jobs[i].name) > longest)
            longest = (int)strlen(c->jobs[i].name);
    top_layout_t l = top_layout(width, longest);
    char row[1024];
    size_t at = 0;
    row[0] = 0;
    for (int i = 0; i < NCOLS; i++)
        add_cell(row, sizeof(row), &at, &l, i, g_cols[i].head);
    put_line(out, width, "%s", "");
    put_line(out, width, "%s", row);
    for (int i = 0; i < c->njobs; i++) {
        const top_job_t *j = &c->jobs[i];
        const top_job_t *was = top_find_job(p, j->id);
        top_job_t zero = {0};
        job_row(out, width, &l, j, was ? was : &zero, a, b);
    }
    if (c->njobs == 0)
        put_line(out, width, "      (no jobs)");
    fflush(out);
}

/* Wait up to ms for a key; 1 when it asked to quit. */
static int wait_key(int ms)
{
    struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
    int watch = g_tty_raw;
    if (!watch) {
        poll(NULL, 0, ms);
        return 0;
    }
    if (poll(&pfd, 1, ms) > 0) {
        char ch[16];
        ssize_t n = read(STDIN_FILENO, ch, sizeof(ch));
        for (ssize_t i = 0; i < n; i++)
            if (ch[i] == 'q' || ch[i] == 'Q' || ch[i] == 3)
                return 1;
    }
    return 0;
}

int cmd_top(int argc, char **argv)
{
    int once = 0;
    uint32_t interval = 1000;
    static const struct option opts[] = {{"interval", required_argument, 0, 'i'},
                                         {"once", no_argument, 0, 'o'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    optind = 1;
    opterr = 0; /* cli_bad_option says it, in the one wording */
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
            case 'i': {
                char *end;
                unsigned long v = strtoul(optarg, &end, 10);
                if (end == optarg || *end || v < 100 || v > 60000 || optarg[0] == '-') {
                    fprintf(stderr, "inagg top: --interval is 100..60000 ms, got '%s'\n", optarg);
                    return 2;
                }
                interval = (uint32_t)v;
                break;
            }
            case 'o': once = 1; break;
            case 'h': usage(stdout); return 0;
            default: return cli_bad_option("inagg top", c, argv);
        }
    }
    if (optind == argc) {
        fprintf(stderr, "inagg top: expected the switch's HOST:PORT (see --help)\n");
        return 2;
    }
    if (cli_no_extra_args("inagg top", argc, argv, optind + 1))
        return 2;
    const char *addr = argv[optind];
    top_snapshot_t *snap = calloc(2, sizeof(*snap));
    if (!snap) {
        fprintf(stderr, "inagg top: out of memory\n");
        return 1;
    }
    int rc = top_fetch(addr, 3000, &snap[0]);
    if (rc == -EINVAL) {
        fprintf(stderr, "inagg top: bad address '%s' (expected HOST:PORT)\n", addr);
        free(snap);
        return 2;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (!once)
        tty_raw();
    int cur = 0, status = 0, frames = 0;
    while (rc == 0 && !g_quit) {
        if (wait_key((int)interval))
            break;
        if (g_quit)
            break;
        rc = top_fetch(addr, 3000, &snap[cur ^ 1]);
        if (rc != 0)
            break;
        cur ^= 1;
        render(stdout, addr, &snap[cur ^ 1], &snap[cur], !once, terminal_width(stdout));
        frames++;
        if (once)
            break;
    }
    tty_restore();
    if (rc != 0) {
        if (!once && frames)
            fputs("\n", stdout);
        fprintf(stderr, "inagg top: the switch at %s %s (%s)\n", addr,
                frames ? "went away" : "is not answering", strerror(-rc));
        status = 1;
    }
    free(snap);
    return status;
}
