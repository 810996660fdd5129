/*
 * launch.h - the one place in src/ that starts, waits for and ends processes: finding a
 * program (PATH, next to this binary), running one with its standard streams redirected,
 * forking N local ranks of a function (with a pipe back from each), running a program under
 * a deadline with its output captured or streamed line by line, several programs at once with
 * their outputs, mpirun command lines (local, or one rank per host of a testbed or cluster),
 * the testbed of network namespaces (tools/testbed: up, exec, down, teardown on a signal or
 * by a sentinel when this process is killed), the aggregation switch in a child process, and
 * whether the processes to start fit in memory (memfit.c).
 *
 * Error convention: a function returns 0, a count or a pid on success, or a negative errno
 * (-ENOENT not found, -ETIMEDOUT killed at its deadline, -ECANCELED stopped by a callback,
 * -ECHILD exited with a non-zero status or a signal, else the failing call's errno); the
 * functions that take (err, errlen) also say why there (base/errmsg.h).
 * Every wait is bounded: past its deadline a process is killed (SIGKILL) and reaped.
 * Every child goes with this process, whatever ends it (children.c): call these functions from
 * the thread that outlives the children (the main thread), as PR_SET_PDEATHSIG fires when the
 * thread that forked exits. A program's own children go with it on a catchable signal (its
 * whole process group is ended); on SIGKILL only if the program ends them on the SIGTERM it
 * gets (mpirun does; `sh` does not).
 */
#ifndef INAGG_LAUNCH_H
#define INAGG_LAUNCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct switch_config;

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
#define LAUNCH_TO_OUT (-3) /* (stderr only) wherever stdout goes */

typedef struct launch_spec {
    char *const *argv; /* argv[0]: the program's path (no PATH search: launch_find_in_path) */
    char *const *envp; /* NULL: this process's environment */
    int in, out, err; /* the child's 0, 1, 2: LAUNCH_INHERIT, LAUNCH_DEVNULL, LAUNCH_TO_OUT or
                           an fd of this process (open it O_CLOEXEC; the child gets a copy) */
    int new_group; /* its own process group (pgid = its pid), to end a whole tree */
    int keep_fd; /* an fd > 2 of this process the child gets at the same number (a
                           readiness pipe, e.g. `inagg switch --ready-fd N`); 0: none */
} launch_spec_t;

/* Start s->argv with the streams as given, the signal mask empty and SIGPIPE, SIGINT,
 * SIGTERM, SIGHUP, SIGQUIT and SIGCHLD at their defaults; it gets SIGTERM when this process
 * dies (launch_fork_child). pid, or -errno with the reason in err (execve's included). */
pid_t launch_spawn(const launch_spec_t *s, char *err, size_t errlen);

/* Run s to the end, at most timeout_ms (then killed). 0 after exit status 0; -ECHILD after
 * another status or a signal; -ETIMEDOUT; or launch_spawn's error. err says which. */
int launch_run(const launch_spec_t *s, int timeout_ms, char *err, size_t errlen);

/* ---- the GLM trainers' reference solver -------------------------------------------------- */

/* Is liblinear-train (Debian liblinear-tools) an executable on PATH? 1 or 0. */
int launch_liblinear_available(void);

/* `liblinear-train -s solver -c C -e eps -q data_path MODEL` (no bias term, as the trainers;
 * solver 0: L2-regularised logistic regression, 3: L2-regularised hinge loss, dual), the model
 * in a temp dir that is removed after, output to /dev/null, killed after timeout_ms; its
 * weights for class +1 (glm/reference.h; malloc'd, *n_weights = its nr_feature). liblinear
 * minimises C * sum(loss) + 1/2 ||w||^2: the trainers' mean loss + l2/2 ||w||^2 over S
 * samples is the same problem with C = 1/(l2 S). 0, or a negative errno with the reason in err
 * (-ENOENT: not installed). */
int launch_liblinear(const char *data_path, int solver, double C, double eps, int timeout_ms,
                     double **weights, size_t *n_weights, char *err, size_t errlen);

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

/* The exit code of a wait status, or -1 when it did not exit (an exit code, not an errno). */
int launch_exit_code(int status);

/* ---- children go with their parent (children.c) ----------------------------------------- */

/* fork() for every child this process starts: in the child (0 returned), PR_SET_PDEATHSIG
 * death_sig, own process group when own_group, and no handler or child of the parent; if the
 * parent died before PR_SET_PDEATHSIG took hold the child _exits at once. In the parent the
 * child is tracked until launch_reap reaps it, and the first child installs a handler on
 * SIGINT, SIGTERM, SIGHUP and SIGQUIT (those still at their default) that runs
 * launch_end_children and then dies of the signal. The ending signals are held while the
 * child is not yet tracked. pid, or -errno. */
pid_t launch_fork_child(int death_sig, int own_group);

/* Async-signal-safe: SIGTERM to every tracked child (to its process group too when it leads
 * one), at most 2 s for them to exit, SIGKILL to what is left, reaped within 1 s more. */
void launch_end_children(void);

/* waitpid(pid) (EINTR retried) that forgets pid once it is reaped. As waitpid; -1 for pid <=
 * 0 (never waitpid(0) or (-1): those reap someone else's child). */
pid_t launch_reap(pid_t pid, int *status, int options);

/* The number of children tracked (started, not reaped yet). */
unsigned launch_children(void);

/* In a fresh child: PR_SET_PDEATHSIG sig, then whether `parent` is still its parent. 0, or
 * -ESRCH when it is gone already (then no signal would come), or prctl's -errno. */
int launch_die_with_parent(int sig, pid_t parent);

/* ---- forked functions and local ranks --------------------------------------------------- */

#define LAUNCH_MAX_RANKS 64

enum {
    LAUNCH_PIPE = 1, /* a pipe from each rank: its write end is the fd passed to fn */
};

/* Fork (launch_fork_child, SIGKILL at this process's death); the child runs fn(arg) and exits
 * with its return value (stdio flushed first, so nothing buffered is written twice). pid, or
 * -errno. */
pid_t launch_fork(int (*fn)(void *arg), void *arg);
/* In a forked child about to _exit in a LeakSanitizer build (ASan): run the leak check that
 * _exit would skip. 1 (and the report on stderr) when memory leaked, else 0; always 0 in
 * other builds. */
int launch_child_leak_check(void);

typedef int (*launch_rank_fn)(uint32_t rank, int fd, void *arg);

typedef struct launch_ranks {
    uint32_t n;
    pid_t pid[LAUNCH_MAX_RANKS];
    int fd[LAUNCH_MAX_RANKS]; /* with LAUNCH_PIPE: the read end of rank r's pipe, else -1 */
    int status[LAUNCH_MAX_RANKS]; /* wait status once reaped */
    int reaped[LAUNCH_MAX_RANKS];
} launch_ranks_t;

/* Give the ranks this process starts from now on a fresh job secret: 256 random bits in
 * INAGG_JOB_SECRET, unless INAGG_JOB_SECRET or INAGG_JOB_SECRET_FILE is already set (the
 * user's). launch_ranks_start calls it; launchers that spawn ranks otherwise call it first.
 * 0, or -errno with the reason in err. */
int launch_job_secret(char *err, size_t errlen);

/* Fork n ranks (1..LAUNCH_MAX_RANKS) as launch_fork does; rank r runs fn(r, fd, arg) and exits with its return
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
#define LAUNCH_TAIL_MAX 4096u /* the last bytes of stderr kept */
#define LAUNCH_LINE_MAX 8192u /* a streamed stdout line longer than this is cut */

typedef struct launch_capture {
    /* In: each stdout line as it arrives, without its newline; a non-zero return stops the
     * run. NULL: stdout is kept in out instead. */
    int (*on_line)(const char *line, void *arg);
    void *arg;
    volatile pid_t *running; /* may be NULL: the child's pid is stored here while it runs, and
                                0 once it is reaped (for a signal handler that must end it) */
    /* Out */
    char out[LAUNCH_OUT_MAX + 1]; /* the first LAUNCH_OUT_MAX bytes of stdout (no on_line) */
    size_t out_len;
    char tail[2 * LAUNCH_TAIL_MAX + 1]; /* the last bytes of stderr */
    size_t tail_len;
    int status; /* wait status */
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

/* ---- several programs at once ------------------------------------------------------------ */

typedef struct launch_proc {
    pid_t pid; /* its own process group */
    int out_fd, err_fd; /* read ends of its stdout and stderr, -1 once at EOF */
    char out[LAUNCH_OUT_MAX + 1]; /* the first LAUNCH_OUT_MAX bytes of stdout, NUL-terminated */
    size_t out_len;
    char tail[2 * LAUNCH_TAIL_MAX + 1]; /* the last bytes of stderr */
    size_t tail_len;
    int status, reaped; /* wait status once reaped */
} launch_proc_t;

typedef struct launch_group { /* ~4.5 MiB: allocate it */
    unsigned n;
    launch_proc_t p[LAUNCH_MAX_RANKS];
} launch_group_t;

/* An empty group (no process). */
void launch_group_init(launch_group_t *g);

/* Start argv (argv[0] its path) as the next member: its own process group, stdin /dev/null,
 * stdout and stderr on pipes read by launch_group_wait. Its index, or -errno with the reason in
 * err (the members already started keep running). */
int launch_group_add(launch_group_t *g, char *const argv[], char *const envp[], char *err,
                     size_t errlen);

/* Read every member's stdout and stderr until all have exited (and are reaped) or timeout_ms
 * passes; meanwhile tick(arg) runs about every tick_ms (tick may be NULL). On the deadline each
 * member still running gets SIGTERM on its group, then SIGKILL after a grace period. 0 once all
 * exited (any status: p[i].status), -ETIMEDOUT. */
int launch_group_wait(launch_group_t *g, unsigned timeout_ms, void (*tick)(void *arg), void *arg,
                      unsigned tick_ms);

/* End what is still running (SIGTERM to its group, SIGKILL after a grace period), reap it and
 * close every pipe; what was read stays in p[i]. Also after launch_group_wait timed out. */
void launch_group_end(launch_group_t *g);

/* Append text to err collapsed to one line (whitespace runs to one space, "----" rules
 * dropped); if it does not fit, keep its end after "...". */
void launch_append_tail(char *err, size_t errlen, const char *text);

/* ---- mpirun ------------------------------------------------------------------------------- */

/* The mpirun flags that keep MPI on the kernel's TCP stack over loopback (no shared memory,
 * no RDMA), allow root and oversubscription. NULL-terminated. */
extern const char *const launch_mpirun_flags[];

/* Where and how mpirun places its ranks; NULL (or all fields zero) is the local run above. */
typedef struct launch_mpirun_cfg {
    const char *const *prefix; /* argv mpirun runs under, NULL-terminated (e.g. `tools/testbed
                                  exec NAME h1 --`: mpirun on a cluster's first node); NULL */
    const char *hosts; /* --host list, one rank per host (--map-by node); NULL: local */
    const char *if_include; /* btl_tcp_if_include and oob_tcp_if_include: an interface or a
                                  subnet; NULL: lo */
    const char *rsh_agent; /* plm_rsh_agent, the launcher's ssh (e.g. tools/testbed-rsh) */
    const char *const *mca; /* more MCA settings: {NAME, VALUE, ..., NULL}; NULL: none */
} launch_mpirun_cfg_t;

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

/*
 * As launch_mpirun, placed by cfg (NULL: as launch_mpirun). With hosts: `mpirun
 * --allow-run-as-root --host HOSTS -np np --map-by node --bind-to none`, TCP only (pml ob1,
 * btl tcp,self) on if_include for data and the runtime's channel, plm_rsh_agent, and
 * mpi_yield_when_idle 1 when np exceeds this machine's cores (Open MPI sees one slot per host
 * and would busy-poll on every core); then cfg->mca. The whole line runs under cfg->prefix.
 */
int launch_mpirun_cfg(const launch_mpirun_cfg_t *cfg, unsigned np, const char *program,
                      const char *const *args, unsigned timeout_s, launch_capture_t *cap, char *err,
                      size_t errlen);

/* ---- the testbed (tools/testbed) ---------------------------------------------------------- */

#define LAUNCH_TESTBED_MAX_HOSTS 64
#define LAUNCH_TESTBED_CANNOT 3 /* tools/testbed's exit status: testbeds cannot be built here */

typedef struct launch_testbed {
    char tool[4096]; /* tools/testbed */
    char name[16]; /* 1-12 of [a-z0-9] */
    unsigned hosts; /* h1..hN */
    unsigned mtu;
    uint64_t link_bps; /* 0: links not rate-limited */
    double loss;
    char subnet[32]; /* "10.77.C.0/24" */
    char net3[32]; /* "10.77.C": host K is net3.K */
    char switch_addr[24]; /* the bridge's address in the switch namespace */
    char iface[16]; /* the hosts' interface (tb0) */
    int is_up;
    const char *fabric; /* in: tools/testbed --fabric (NULL: its default, inagg) */
    const char *link_delay; /* in: --link-delay (NULL: none) */
    const char *xdp; /* in: --xdp auto|on|off, the inagg fabric's (NULL: the tool's
                               default, $INAGG_FABRIC_XDP or off) */
    unsigned fabric_port; /* out: the fabric's own aggregation switch port (0: bridge) */
    pid_t fabric_pid; /* out: the fabric's process (its CPU is the switch's), 0: unknown */
    unsigned leaves, hosts_per_leaf; /* in: two levels (tools/testbed --leaves L
                                        --hosts-per-leaf H): leaf namespaces l1..lL, leaf K
                                        at net3.(200+K), its hosts h((K-1)H+1)..h(KH); the
                                        switch namespace is the spine. 0: one level */
} launch_testbed_t;

#define LAUNCH_TESTBED_LEAF_OCTET0 200 /* leaf K's address is net3.(200+K) */

/* tools/testbed: $INAGG_TESTBED_TOOL when set, else ../tools/testbed beside the running binary
 * (build/inagg -> tools/testbed). 0 if it is executable, else -ENOENT (buf: the path tried). */
int launch_testbed_find(char *buf, size_t len);

/* A sibling of tools/testbed (e.g. "testbed-rsh", "gloo_allreduce.py") into buf. 0 if it exists,
 * else -ENOENT. */
int launch_testbed_sibling(const launch_testbed_t *tb, const char *file, char *buf, size_t len);

/* `tools/testbed up HOSTS --name NAME --link-rate RATE --mtu MTU [--loss P] --json`, its
 * report read into tb. Run launch_testbed_guard first so a signal meanwhile takes it down. 0;
 * -EOPNOTSUPP when testbeds cannot be built here (exit 3: not root, no network namespaces; err
 * holds tools/testbed's reason); else -errno with the reason in err (nothing is left behind:
 * tools/testbed removes what it built when it fails). */
int launch_testbed_up(launch_testbed_t *tb, unsigned hosts, const char *name, const char *rate,
                      unsigned mtu, double loss, char *err, size_t errlen);

/* `tools/testbed down NAME` (bounded); nothing when the testbed is not up. Idempotent. */
void launch_testbed_down(launch_testbed_t *tb);

/* Testbeds named b<PID> whose process PID no longer runs (a run that was SIGKILLed): down. */
void launch_testbed_reap_stale(const char *tool);

/* The address of host k (1..hosts) into buf. Returns buf. */
const char *launch_testbed_host_addr(const launch_testbed_t *tb, unsigned k, char *buf, size_t len);

/* argv for running cmd (NULL-terminated) in host `host` ("h1".."hN" or "sw"):
 * {tools/testbed, exec, NAME, HOST, --, cmd..., NULL} into out[cap]. The number of entries
 * before the NULL, or 0 when cap is too small. The strings are tb's and cmd's, not copies. */
size_t launch_testbed_argv(const launch_testbed_t *tb, const char *host, char *const *cmd,
                           char **out, size_t cap);

/* From now until launch_testbed_unguard: SIGINT, SIGTERM and SIGHUP end this process's
 * children (launch_end_children, a child building the testbed among them), run `tools/testbed
 * down NAME` (which ends every process inside its namespaces) and exit with 128 + the signal;
 * should this process die otherwise (SIGKILL), a sentinel child it starts here runs that
 * `down` (it waits for the end of a pipe only this process holds; unguard tells it the
 * testbed is handled and reaps it). Call unguard once the testbed is down. */
void launch_testbed_guard(launch_testbed_t *tb);
void launch_testbed_unguard(void);

/* ---- the switch in a child process ------------------------------------------------------- */

/* Run a switch with cfg (switch/switch.h) in a forked child: it binds, hands its port back
 * through a pipe (a readiness signal, never a sleep) and runs until SIGTERM or SIGINT; with
 * $INAGG_BENCH_SWITCH_STATS set it prints its counters to stderr before it stops. The pid
 * once it is bound, with its port in *port, or -errno (the child's own reason goes to its
 * stderr; err says what the parent saw). */
pid_t launch_switch(const struct switch_config *cfg, uint16_t *port, char *err, size_t errlen);

/* Stop a switch started by launch_switch (SIGTERM, bounded wait). Nothing for pid <= 0. */
void launch_switch_stop(pid_t pid);

/* A starting switch's readiness: wait up to timeout_ms for the line it writes to fd (the
 * read end of its readiness pipe) once it is bound. The port it reports (> 0); 0 when the
 * pipe closed first (it ended), or it wrote no port; -ETIMEDOUT. */
int launch_read_ready(int fd, int timeout_ms);

/* `self switch --listen LISTEN --threads T --ready-fd FD EXTRA...` (self: this inagg binary,
 * extra NULL-terminated or NULL) in testbed host `ns`, ready once it wrote its port. In "sw"
 * with $INAGG_TESTBED_SWITCH_METRICS set (PORT, on LISTEN's host, or HOST:PORT) it also gets
 * `--metrics` with that address. Its
 * stderr goes to err_fd (a memfd: what it said is quoted in err when it fails to start), or
 * is inherited when err_fd < 0. Its pid with "HOST:PORT" in addr, or -errno with the reason
 * in err (the child is killed). */
pid_t launch_ns_switch(const launch_testbed_t *tb, const char *ns, const char *self,
                       const char *listen, unsigned threads, char *const *extra, int err_fd,
                       int timeout_ms, char *addr, size_t len, char *err, size_t errlen);

/* The Python interpreter: $INAGG_PYTHON, else Debian's /usr/bin/python3 (where python3-torch
 * installs), else python3 in $PATH, into buf. 0, or -ENOENT when there is none. */
int launch_find_python(char *buf, size_t len);

/* ---- whether the processes to start fit in memory (memfit.c) ------------------------------ */

typedef struct launch_mem {
    uint64_t available; /* MemAvailable of /proc/meminfo, bytes (0: unknown) */
    uint64_t cg_limit; /* the memory limit of this process's cgroup (or of an ancestor) that
                          leaves the least room, bytes (0: none) */
    uint64_t cg_usage; /* that cgroup's memory in use, bytes */
} launch_mem_t;

/* What the machine has: PROC_ROOT/meminfo and the cgroups PROC_ROOT/self/cgroup names
 * under CGROUP_ROOT (v2 memory.max and memory.current of the cgroup and each ancestor; v1
 * memory/.../memory.limit_in_bytes and memory.usage_in_bytes). What is missing stays 0. */
void launch_mem_read(const char *proc_root, const char *cgroup_root, launch_mem_t *m);

/* The memory a new process may use: the smaller of MemAvailable and the cgroup's room
 * (UINT64_MAX when neither is known). */
uint64_t launch_mem_free(const launch_mem_t *m);

/* bytes as "12.3 GiB" or "45.6 MiB" into buf. Returns buf. */
const char *launch_mem_text(uint64_t bytes, char *buf, size_t len);

/* 0 when need bytes fit in launch_mem_free(m); else -ENOMEM with err "WHAT: N of memory
 * needed, more than the A available (MemAvailable M; this cgroup's limit L, U of it in use)".
 * `what` names who needs it ("2 ranks of 1000000000 float32 elements"). */
int launch_mem_fits(const launch_mem_t *m, uint64_t need, const char *what, char *err,
                    size_t errlen);

/* launch_mem_fits against this machine now (/proc, /sys/fs/cgroup): every command that
 * allocates by a user's size asks this before it starts its processes. */
int launch_mem_check(uint64_t need, const char *what, char *err, size_t errlen);

/* ---- a process capped at a share of a CPU (cpucap.c) -------------------------------------- */

/* Put process pid in a CPU cgroup of its own (cgroup v2 cpu.max, or v1 cfs quota) that lets it
 * run share_pct percent (1..100) of one CPU, in periods of a few ms; the group's directory
 * into path (index tells this process's groups apart). 0, or -errno with the reason in err
 * (-ENOTSUP: no writable CPU cgroup; needs root). */
int launch_cpucap(pid_t pid, unsigned index, unsigned share_pct, char *path, size_t len, char *err,
                  size_t errlen);

/* Remove a group made by launch_cpucap once its process has exited (path becomes ""). */
void launch_cpucap_remove(char *path);

/* ---- one job across a testbed (testbed_job.c) ---------------------------------------------- */

/* The group a testbed's `inagg switch` multicasts results to (its hosts share one L2
 * segment, as a rack under a switch that multicasts does; docs/TESTBED.md) */
#define LAUNCH_TBJOB_MCAST_GROUP "239.77.0.0"

typedef struct launch_tbjob {
    launch_testbed_t tb; /* in: tb.fabric, tb.link_delay; the rest filled by up */
    char rsh[4096]; /* tools/testbed-rsh, Open MPI's launch agent */
    char hosts_list[LAUNCH_TESTBED_MAX_HOSTS * 16]; /* "net3.1,net3.2,...": one rank per host */
    char *mpi_prefix[6]; /* tools/testbed exec NAME h1 --: where mpirun runs */
    launch_mpirun_cfg_t mpi; /* one rank per host over the testbed's subnet */
    pid_t sw_pid; /* `inagg switch` in the switch namespace, 0: none */
    char sw_addr[64]; /* the aggregation switch's HOST:PORT */
    char self[4096]; /* the inagg binary launch_tbjob_switch was given */
    const char *switch_poll; /* in: that switch's --poll MODE (NULL: its default) */
    const char *switch_multicast; /* in: that switch's --multicast GROUP, "off" for none
                                     (NULL: LAUNCH_TBJOB_MCAST_GROUP, one L2 segment's) */
} launch_tbjob_t;

/* Find tools/testbed and its rsh agent, remove testbeds of runs that are gone, guard against
 * signals and build testbed b<PID> (launch_testbed_up's arguments). 0; -EOPNOTSUPP when
 * testbeds cannot be built here; else -errno; err says why. Nothing is left up on failure. */
int launch_tbjob_up(launch_tbjob_t *j, unsigned hosts, const char *rate, unsigned mtu, double loss,
                    char *err, size_t errlen);

/* The aggregation switch into j->sw_addr: the fabric's own (--fabric inagg), or `self switch`
 * (self: this inagg binary) with `threads` threads started in the switch namespace and ready
 * once it wrote its port to its readiness pipe. 0, or -errno with the reason in err. */
int launch_tbjob_switch(launch_tbjob_t *j, const char *self, unsigned threads, char *err,
                        size_t errlen);

/* $INAGG_BENCH_SWITCH_STATS set: the counters of the testbed's aggregation switch at
 * sw_addr (the first of a list; with the fabric's, when it is the fabric) to stderr, asked
 * by `self switch --stats` in the switch namespace before the testbed goes, so that a run
 * leaves its evidence. `cmd` names the benchmark in what is printed. */
void launch_testbed_switch_stats(const launch_testbed_t *tb, const char *self, const char *sw_addr,
                                 const char *cmd);

/* $INAGG_TESTBED_SWITCH_LINGER_MS set (0..60000): say so and wait that long, so that a
 * Prometheus scraping the testbed switch's --metrics ($INAGG_TESTBED_SWITCH_METRICS, see
 * launch_ns_switch) sees its final counters before the switch stops. */
void launch_testbed_linger(void);

/* Stop the switch started here (after launch_testbed_linger), take the testbed down, drop
 * the signal guard. */
void launch_tbjob_down(launch_tbjob_t *j);

#endif /* INAGG_LAUNCH_H */
