/*
 * launch.h - the one place in src/ that starts, waits for and ends processes: finding a
 * program (PATH, next to this binary), running one with its standard streams redirected,
 * forking N local ranks of a function (with a pipe back from each), running a program under
 * a deadline with its output captured or streamed line by line, mpirun command lines, and
 * the aggregation switch in a child process.
 *
 * Error convention: a function returns 0, a count or a pid on success, or a negative errno
 * (-ENOENT not found, -ETIMEDOUT killed at its deadline, -ECANCELED stopped by a callback,
 * -ECHILD exited with a non-zero status or a signal, else the failing call's errno); the
 * functions that take (err, errlen) also say why there (base/errmsg.h).
 * Every wait is bounded: past its deadline a process is killed (SIGKILL) and reaped.
 */
#ifndef INAGG_LAUNCH_H
#define INAGG_LAUNCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "switch/switch.h"

/* ---- finding programs ------------------------------------------------------------------- */

/* Whether path is a regular file this process may execute. */
int launch_is_executable(const char *path);

/* The executable `name` in $PATH (unset or empty: /usr/local/bin:/usr/bin:/bin; an empty entry
 * is the current directory) into buf. 0, or -ENOENT with buf "". */
int launch_find_in_path(const char *name, char *buf, size_t len);

/* `rel` (a name or a relative path) resolved against the directory of the running binary into
 * buf. 0, or -ENOENT when that directory is unknown or the path does not fit (buf ""). The file
 * itself is not checked. */
int launch_beside_self(const char *rel, char *buf, size_t len);

/* The program `name`: $env_var when that is set (env_var may be NULL), else the file next to
 * the running binary. 0 if it is executable, else -ENOENT (buf holds the path tried, or ""). */
int launch_find_program(const char *name, const char *env_var, char *buf, size_t len);

/* ---- one program ------------------------------------------------------------------------ */

#define LAUNCH_INHERIT (-1) /* the stream is this process's */
#define LAUNCH_DEVNULL (-2) /* /dev/null */
#define LAUNCH_TO_OUT (-3)  /* (stderr only) wherever stdout goes */

typedef struct launch_spec {
    char *const *argv;  /* argv[0]: the program's path (no PATH search: launch_find_in_path) */
    char *const *envp;  /* NULL: this process's environment */
    int in, out, err;   /* the child's 0, 1, 2: LAUNCH_INHERIT, LAUNCH_DEVNULL, LAUNCH_TO_OUT or
                           an fd of this process (open it O_CLOEXEC; the child gets a copy) */
    int new_group;      /* its own process group (pgid = its pid), to end a whole tree */
} launch_spec_t;

/* Start s->argv with the streams as given, the signal mask empty and SIGPIPE, SIGINT,
 * SIGTERM, SIGHUP and SIGCHLD at their defaults. pid, or -errno with the reason in err. */
pid_t launch_spawn(const launch_spec_t *s, char *err, size_t errlen);

/* Run s to the end, at most timeout_ms (then killed). 0 after exit status 0; -ECHILD after
 * another status or a signal; -ETIMEDOUT; or launch_spawn's error. err says which. */
int launch_run(const launch_spec_t *s, int timeout_ms, char *err, size_t errlen);

/* ---- waiting and ending ------------------------------------------------------------------ */

/* Wait at most timeout_ms for the child pid; past that, SIGKILL it and reap it. 0 once it
 * exited (its wait status in *status, may be NULL), -ETIMEDOUT after the kill (the status of
 * the killed process in *status), -ECHILD if pid is not a child of this process. */
int launch_wait(pid_t pid, int timeout_ms, int *status);

/* Send sig to pid, then as launch_wait with grace_ms. Nothing for pid <= 0 (returns 0). */
int launch_stop(pid_t pid, int sig, int grace_ms, int *status);

/* A wait status in words into buf: "exited with status N" or "was killed by signal N (name)".
 * Returns buf. */
const char *launch_status_text(int status, char *buf, size_t len);

/* The exit code of a wait status, or -1 when it did not exit. */
int launch_exit_code(int status);

/* ---- forked functions and local ranks --------------------------------------------------- */

#define LAUNCH_MAX_RANKS 64

enum {
    LAUNCH_PIPE = 1,            /* a pipe from each rank: its write end is the fd passed to fn */
    LAUNCH_DIE_WITH_PARENT = 2, /* SIGKILL the child when this process dies */
};

/* Fork; the child runs fn(arg) and exits with its return value (stdio flushed first, so
 * nothing buffered is written twice). pid, or -errno. */
pid_t launch_fork(int (*fn)(void *arg), void *arg, int flags);

typedef int (*launch_rank_fn)(uint32_t rank, int fd, void *arg);

typedef struct launch_ranks {
    uint32_t n;
    pid_t pid[LAUNCH_MAX_RANKS];
    int fd[LAUNCH_MAX_RANKS];     /* with LAUNCH_PIPE: the read end of rank r's pipe, else -1 */
    int status[LAUNCH_MAX_RANKS]; /* wait status once reaped */
    int reaped[LAUNCH_MAX_RANKS];
} launch_ranks_t;

/* Fork n ranks (1..LAUNCH_MAX_RANKS); rank r runs fn(r, fd, arg) and exits with its return
 * value, fd being the write end of its pipe with LAUNCH_PIPE (else -1); a rank holds no other
 * rank's pipe. All or nothing: on failure the ranks already started are killed and reaped.
 * 0, or -errno with the reason in err. */
int launch_ranks_start(launch_ranks_t *g, uint32_t n, launch_rank_fn fn, void *arg, int flags,
                       char *err, size_t errlen);

/* Reap rank r, at most timeout_ms (then killed); closes its fd. As launch_wait; the status is
 * kept in g->status[r]. A rank already reaped returns 0 at once. */
int launch_ranks_wait_one(launch_ranks_t *g, uint32_t r, int timeout_ms);

/* Reap every rank by one deadline timeout_ms away; those still running then are killed. The
 * number of ranks that did not exit with status 0 (killed ones included). */
int launch_ranks_wait(launch_ranks_t *g, int timeout_ms);

/* SIGKILL the ranks not reaped yet, reap them and close every fd. */
void launch_ranks_kill(launch_ranks_t *g);

/* ---- running a program with its output ---------------------------------------------------- */

#define LAUNCH_OUT_MAX (64u * 1024u) /* stdout kept when not streamed */
#define LAUNCH_TAIL_MAX 4096u        /* the last bytes of stderr kept */
#define LAUNCH_LINE_MAX 8192u        /* a streamed stdout line longer than this is cut */

typedef struct launch_capture {
    /* In: each stdout line as it arrives, without its newline; a non-zero return stops the
     * run. NULL: stdout is kept in out instead. */
    int (*on_line)(const char *line, void *arg);
    void *arg;
    /* Out */
    char out[LAUNCH_OUT_MAX + 1]; /* the first LAUNCH_OUT_MAX bytes of stdout (no on_line) */
    size_t out_len;
    char tail[2 * LAUNCH_TAIL_MAX + 1]; /* the last bytes of stderr */
    size_t tail_len;
    int status;                   /* wait status */
    /* Internal */
    char line[LAUNCH_LINE_MAX + 1];
    size_t line_len;
    int stopped;
} launch_capture_t;

/* Run argv (argv[0] its path) in its own process group with stdin on /dev/null and stdout and
 * stderr on pipes into cap, until it exits or timeout_s passes; on the deadline, or when
 * on_line asks to stop, the whole group gets SIGTERM, then after a grace period SIGKILL.
 * envp NULL: this environment. 0 once it exited (any status: cap->status); -ETIMEDOUT;
 * -ECANCELED; or -errno when it could not start (err says why, prefixed with `what`). */
int launch_capture(char *const argv[], char *const envp[], unsigned timeout_s,
                   launch_capture_t *cap, const char *what, char *err, size_t errlen);

/* Append text to err collapsed to one line (whitespace runs to one space, "----" rules
 * dropped); if it does not fit, keep its end after "...". */
void launch_append_tail(char *err, size_t errlen, const char *text);

/* ---- mpirun ------------------------------------------------------------------------------- */

/* The mpirun flags that keep MPI on the kernel's TCP stack over loopback (no shared memory,
 * no RDMA), allow root and oversubscription. NULL-terminated. */
extern const char *const launch_mpirun_flags[];

/* The mpirun in $PATH into buf. 0, or -ENOENT. */
int launch_find_mpirun(char *buf, size_t len);

/*
 * Run `mpirun <launch_mpirun_flags> -np np program args...` (args NULL-terminated, may be NULL)
 * as launch_capture does, with OpenMPI's root and oversubscription variables set. 0 when
 * mpirun exited with status 0; else a negative errno with err saying why: -ENOENT (mpirun is
 * not installed), -ETIMEDOUT, -ECANCELED ("stopped by the caller"), -ECHILD (a non-zero
 * status or a signal, with the tail of its stderr), or could not start. cap->status holds the
 * wait status either way.
 */
int launch_mpirun(unsigned np, const char *program, const char *const *args, unsigned timeout_s,
                  launch_capture_t *cap, char *err, size_t errlen);

/* ---- the switch in a child process ------------------------------------------------------- */

/* Run a switch with cfg (switch/switch.h) in a forked child: it binds, hands its port back
 * through a pipe (a readiness signal, never a sleep) and runs until SIGTERM or SIGINT; with
 * $INAGG_BENCH_SWITCH_STATS set it prints its counters to stderr before it stops. The pid
 * once it is bound, with its port in *port, or -errno (the child's own reason goes to its
 * stderr; err says what the parent saw). */
pid_t launch_switch(const switch_config_t *cfg, uint16_t *port, char *err, size_t errlen);

/* Stop a switch started by launch_switch (SIGTERM, bounded wait). Nothing for pid <= 0. */
void launch_switch_stop(pid_t pid);

#endif /* INAGG_LAUNCH_H */
