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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
                 "limits hit, and per job its state, rounds/s, packets/s, MB/s in and drops.\n"
                 "q or Ctrl-C quits; it exits (status 1) when the switch goes away.\n"
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

static void render(FILE *out, const char *addr, const top_snapshot_t *p, const top_snapshot_t *c,
                   int ansi)
{
    uint64_t a = p->taken_ns, b = c->taken_ns;
    if (ansi)
        fputs("\033[H\033[2J", out);
    fprintf(out, "inagg top - switch %s (%s)  up %.0f s  threads %u  %s\n", addr, c->listen,
            c->uptime_s, c->threads, ansi ? "q quits" : "");
    fprintf(out, "packets in %.0f/s  out %.0f/s   slots %u/%u used   jobs %d (%d retired kept)\n",
            top_rate(p->packets_in, c->packets_in, a, b),
            top_rate(p->packets_out, c->packets_out, a, b), c->slots_used, c->slots_total, c->njobs,
            c->retired);
    fprintf(out, "drops before any job %llu   control connections %u   control limits hit %llu\n",
            (unsigned long long)c->drops_pre_job, c->connections, (unsigned long long)c->refusals);
    fprintf(out, "\n%5s %-24s %-8s %-8s %5s %6s %10s %10s %12s %8s %8s\n", "ID", "JOB", "STATE",
            "PROTO", "WORLD", "SLOTS", "ROUNDS/S", "PKTS/S", "IN", "DROPS", "DROPS/S");
    for (int i = 0; i < c->njobs; i++) {
        const top_job_t *j = &c->jobs[i];
        const top_job_t *was = top_find_job(p, j->id);
        top_job_t zero = {0};
        if (!was)
            was = &zero;
        char in[32];
        human_bytes(top_rate(was->bytes_in, j->bytes_in, a, b), in, sizeof(in));
        fprintf(out, "%5u %-24.24s %-8s %-8s %5u %6u %10.1f %10.0f %12s %8llu %8.1f\n", j->id,
                j->name, j->state, j->protocol, j->world, j->slots,
                top_rate(was->rounds, j->rounds, a, b),
                top_rate(was->contributions, j->contributions, a, b), in,
                (unsigned long long)j->drops, top_rate(was->drops, j->drops, a, b));
    }
    if (c->njobs == 0)
        fprintf(out, "      (no jobs)\n");
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
        render(stdout, addr, &snap[cur ^ 1], &snap[cur], !once);
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
