/*
 * children.c - see launch.h: every process started here goes with the process that started
 * it, whatever ends that one. Each child is forked with the signals that end this process
 * held until it is in the table of children; in the child, PR_SET_PDEATHSIG takes it down when
 * this process dies (SIGKILL included) and getppid() closes the race with a parent that died
 * before the call. For the signals a process may handle (SIGINT, SIGTERM, SIGHUP, SIGQUIT),
 * a handler installed with the first child ends every child in the table, each with the
 * process group it leads (what a program such as mpirun, tools/testbed or `ip netns exec`
 * started in turn): SIGTERM, a bounded grace period, SIGKILL; then this process dies of the
 * signal as it would have. A child is forgotten once it is reaped (launch_reap).
 */
#include "apps/launch/launch.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TRACK_MAX 256
#define END_GRACE_MS 2000
#define END_KILL_MS 1000

/* pid > 0: a child not reaped yet; group: it leads its own process group. */
static volatile pid_t tracked[TRACK_MAX];
static volatile sig_atomic_t tracked_group[TRACK_MAX];

static const int end_sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
#define N_END_SIGS (sizeof(end_sigs) / sizeof(end_sigs[0]))
static volatile sig_atomic_t handler_installed[N_END_SIGS];

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void nap_ms(long ms)
{
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* Signal child slot i (and its group when it leads one). */
static void signal_slot(unsigned i, int sig)
{
    pid_t pid = tracked[i];
    if (pid <= 0)
        return;
    if (tracked_group[i])
        kill(-pid, sig);
    kill(pid, sig);
}

/* Reap the children of the table that exited (what they left in their groups gets SIGKILL);
 * the number still running. */
static unsigned reap_exited(void)
{
    unsigned left = 0;
    for (unsigned i = 0; i < TRACK_MAX; i++) {
        pid_t pid = tracked[i];
        if (pid <= 0)
            continue;
        pid_t w = waitpid(pid, NULL, WNOHANG);
        if (w == pid || (w < 0 && errno == ECHILD)) {
            if (tracked_group[i])
                kill(-pid, SIGKILL);
            tracked[i] = 0;
        } else {
            left++;
        }
    }
    return left;
}

void launch_end_children(void)
{
    int saved = errno;
    for (unsigned i = 0; i < TRACK_MAX; i++)
        signal_slot(i, SIGTERM);
    uint64_t deadline = mono_ms() + END_GRACE_MS;
    while (reap_exited() > 0 && mono_ms() < deadline)
        nap_ms(10);
    for (unsigned i = 0; i < TRACK_MAX; i++)
        signal_slot(i, SIGKILL);
    deadline = mono_ms() + END_KILL_MS;
    while (reap_exited() > 0 && mono_ms() < deadline)
        nap_ms(5);
    errno = saved;
}

static void on_end_signal(int sig)
{
    launch_end_children();
    signal(sig, SIG_DFL);
    raise(sig); /* delivered once this handler returns: this process dies of it */
}

/* The handler for each ending signal still at its default (one ignored, as under nohup, or
 * handled by the command itself stays so). */
static void install_handlers(void)
{
    for (unsigned i = 0; i < N_END_SIGS; i++) {
        struct sigaction old;
        if (handler_installed[i] || sigaction(end_sigs[i], NULL, &old) != 0 ||
            (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL)
            continue;
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_end_signal;
        sigemptyset(&sa.sa_mask);
        for (unsigned k = 0; k < N_END_SIGS; k++)
            sigaddset(&sa.sa_mask, end_sigs[k]);
        if (sigaction(end_sigs[i], &sa, NULL) == 0)
            handler_installed[i] = 1;
    }
}

static void track(pid_t pid, int own_group)
{
    install_handlers();
    for (unsigned i = 0; i < TRACK_MAX; i++) {
        if (tracked[i] == 0) {
            tracked_group[i] = own_group;
            tracked[i] = pid;
            return;
        }
    }
    /* table full: the child still dies with this process (PR_SET_PDEATHSIG) */
}

static void untrack(pid_t pid)
{
    for (unsigned i = 0; i < TRACK_MAX; i++)
        if (tracked[i] == pid)
            tracked[i] = 0;
}

unsigned launch_children(void)
{
    unsigned n = 0;
    for (unsigned i = 0; i < TRACK_MAX; i++)
        n += tracked[i] > 0;
    return n;
}

pid_t launch_reap(pid_t pid, int *status, int options)
{
    if (pid <= 0)
        return -1; /* never waitpid(0) or (-1): those reap someone else's child */
    pid_t w;
    while ((w = waitpid(pid, status, options)) < 0 && errno == EINTR)
        ;
    if (w == pid || (w < 0 && errno == ECHILD))
        untrack(pid);
    return w;
}

int launch_die_with_parent(int sig, pid_t parent)
{
    if (prctl(PR_SET_PDEATHSIG, sig) != 0)
        return -errno;
    /* The parent may have died between fork() and prctl(): then nothing will send sig. */
    return getppid() == parent ? 0 : -ESRCH;
}

/* In a fresh child: forget the parent's children and its handlers of the ending signals
 * (ours, or a command's such as the testbed guard's, which would take the parent's testbed
 * down from the child); an ignored signal stays ignored. */
static void forget_parent(void)
{
    for (unsigned i = 0; i < TRACK_MAX; i++)
        tracked[i] = 0;
    for (unsigned i = 0; i < N_END_SIGS; i++) {
        struct sigaction old;
        if (sigaction(end_sigs[i], NULL, &old) == 0 &&
            ((old.sa_flags & SA_SIGINFO) ||
             (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN)))
            signal(end_sigs[i], SIG_DFL);
        handler_installed[i] = 0;
    }
}

pid_t launch_fork_child(int death_sig, int own_group)
{
    sigset_t ending, old;
    sigemptyset(&ending);
    for (unsigned i = 0; i < N_END_SIGS; i++)
        sigaddset(&ending, end_sigs[i]);
    pid_t parent = getpid();
    sigprocmask(SIG_BLOCK, &ending, &old); /* until the child is in the table */
    pid_t pid = fork();
    if (pid == 0) {
        forget_parent();
        if (own_group)
            setpgid(0, 0);
        if (launch_die_with_parent(death_sig, parent) != 0)
            _exit(1);
        sigprocmask(SIG_SETMASK, &old, NULL);
        return 0;
    }
    int e = errno;
    if (pid > 0) {
        if (own_group)
            setpgid(pid, pid); /* as the child does: whichever runs first */
        track(pid, own_group);
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    return pid < 0 ? -e : pid;
}
