/*
 * cmd_switch.c - `inagg switch`: its flags, --help and messages; the daemon they describe is
 * run by switchd_run (src/switchd/switchd.h) until SIGINT/SIGTERM. With --stats it reads the
 * counters of a running one, with --fabric-ctl it changes a running fabric. Its options may
 * come from a config file (--config, the daemon's switch_conf; SIGHUP re-reads its limits)
 * and it can serve its counters to Prometheus (--metrics).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps/cli/commands.h"
#include "apps/cli/flags.h"
#include "lib/base/log.h"
#include "lib/base/netaddr.h"
#include "lib/client/ctl.h"
#include "lib/netio/mcast.h"
#include "lib/wire/fabricmsg.h"
#include "switchd/switchd.h"

static void usage_fabric(FILE *out);

static void usage(FILE *out)
{
    fprintf(out,
            "usage: inagg switch [options]\n"
            "       inagg switch --stats HOST:PORT [--json]\n"
            "       inagg switch --fabric-ctl HOST:PORT [--agg-ports LIST] [--add-mode M]\n"
            "\n"
            "Runs the aggregation switch: a TCP control port (job admission, barriers,\n"
            "counters) and UDP dataplane ports PORT..PORT+threads-1 where workers' packets\n"
            "are summed slot by slot (switchml protocol). Serves many jobs at once; each\n"
            "reserves slots from the shared pool. SIGINT/SIGTERM stop it and print its\n"
            "counters; SIGUSR1 prints them and carries on; SIGHUP reads the --config file's\n"
            "limits (request-timeout, idle-timeout, max-*) again, keeping every job.\n"
            "\n"
            "options:\n"
            "  --config FILE           read options from FILE first: 'key = value' lines, the\n"
            "                          keys being these long options without dashes (flags\n"
            "                          take true or false); the command line's win\n"
            "  --metrics HOST:PORT     serve the counters to Prometheus at\n"
            "                          http://HOST:PORT/metrics (port 0 = any, logged)\n"
            "  --log-format F          log lines as text (default), kv (key=value) or json\n"
            "                          (one object per line); also INAGG_LOG_FORMAT\n"
            "  --listen HOST:PORT      address to bind (default 127.0.0.1:7000; use\n"
            "                          0.0.0.0:7000 to serve other hosts; port 0 = any)\n"
            "  --threads N             dataplane threads, one UDP port each (1..64, default 1)\n"
            "  --slots S               slot budget shared by all jobs (default 8192)\n"
            "  --worker-timeout MS     a rank silent this long while others wait fails its\n"
            "                          job (default 30000; jobs may ask for less)\n"
            "  --batch N               packets per recvmmsg/sendmmsg (default 64)\n"
            "  --poll MODE             how the dataplane threads (and with --l2 the fabric's)\n"
            "                          wait for packets: adaptive[:US] (the default: busy\n"
            "                          for US microseconds after the last packet, default\n"
            "                          200, then sleep; without --poll the fabric spins\n"
            "                          20 us), sleep (in the kernel until one comes) or\n"
            "                          busy (never wait). A spin yields the CPU after each\n"
            "                          empty look, and stops for 100 ms when a yield lost\n"
            "                          the core to a CPU-bound thread (spin_bans);\n"
            "                          docs/PERFORMANCE.md \"Polling\"\n"
            "  --cpu LIST              pin dataplane thread t to the t-th CPU of LIST (mod its\n"
            "                          length), e.g. 1 or 0,2-3\n"
            "  --socket-buffer BYTES   UDP socket buffers (default 33554432)\n"
            "  --faults-in SPEC        inject faults on receive, e.g. drop=0.01,dup=0.01,\n"
            "                          reorder=0.01,seed=7 (testing only)\n"
            "  --faults-out SPEC       inject faults on send\n"
            "  --request-timeout MS    a request line, or its reply, must be done within MS\n"
            "                          or the connection is closed (default 10000)\n"
            "  --idle-timeout MS       close a connection without a job silent this long\n"
            "                          (default 60000)\n"
            "  --max-conns-per-addr N  control connections per client address (default 128)\n"
            "  --max-job-slots N       slots one job may hold (default: half the pool)\n"
            "  --max-addr-slots N      slots the jobs registered from one address may hold\n"
            "                          (default: three quarters of the pool)\n"
            "  --require-secret        refuse jobs registered without a job secret\n"
            "  --multicast GROUP[:PORT]  send a round's result once, to a multicast group,\n"
            "                          when every rank's copy is the same (jobs whose ranks\n"
            "                          all offer it: p4sgd, switchml with one engine thread;\n"
            "                          as SwitchML's and P4SGD's switches multicast): with\n"
            "                          GROUP A.B.x.y (e.g. 239.77.0.0), job i's group is\n"
            "                          A.B.0.0 + i, at PORT\n"
            "                          (default 7399); sent from --listen's address, TTL 1:\n"
            "                          the workers share its segment. Counted in\n"
            "                          results_multicast; docs/PROTOCOL.md 9.6\n"
            "  --ready-fd FD           write the bound port and a newline to FD once ready\n"
            "Hierarchy (docs/PROTOCOL.md \"Hierarchy\"): a leaf switch sums its own hosts and\n"
            "sends each round's partial sum to a spine switch, as one rank of the spine's\n"
            "job of the same name; its hosts get the spine's result:\n"
            "  --upstream HOST:PORT    the spine (an ordinary inagg switch, or another leaf)\n"
            "  --leaf-index R          this leaf's rank in the spine's jobs (default 0)\n"
            "  --leaves L              how many leaves the spine's jobs have (required)\n"
            "                          e.g. spine: inagg switch --listen 10.0.0.1:7000\n"
            "                          leaf 1 of 2: inagg switch --listen 10.1.0.1:7000\n"
            "                            --upstream 10.0.0.1:7000 --leaf-index 1 --leaves 2\n"
            "  --stats HOST:PORT       print a running switch's counters and exit\n");
    usage_fabric(out);
}

/* The L2 fabric's flags and what remains: the second half of --help. */
static void usage_fabric(FILE *out)
{
    fprintf(out,
            "L2 fabric (docs/FABRIC.md): forward Ethernet between interfaces and aggregate\n"
            "the frames addressed to the switch on the way: UDP to its own IP, and RoCE v1\n"
            "RDMA Writes to its MAC from workers with INAGG_TRANSPORT=roce (PROTOCOL.md 13):\n"
            "  --l2 IF1,IF2,...        switch between these interfaces (AF_PACKET)\n"
            "  --l2-ip A.B.C.D[/P]     the switch's address (default: --listen's host, /24),\n"
            "                          held by an internal port with the kernel's stack\n"
            "  --l2-mac MAC            the switch's MAC (default 02:69:61 + the IP's last\n"
            "                          three bytes)\n"
            "  --l2-stack-port NAME    the internal port's name (default inagg0)\n"
            "  --link-delay SPEC       one-way delay of every link, each way: D (25us, 1ms)\n"
            "                          or IF=D,IF=D,...\n"
            "  --link-jitter SPEC      extra uniform delay 0..J per frame, same syntax\n"
            "  --link-loss SPEC        drop each IPv4 or RoCE frame on every link, each\n"
            "                          way, with probability P (0.01 or 1%%), or\n"
            "                          IF=P,IF=P,...; counted\n"
            "                          per port (loss_drops); ARP is never dropped\n"
            "  --loss-seed S           the drops' random stream (default 1)\n"
            "  --mac-age MS            forget a MAC not seen this long (default 300000)\n"
            "  --agg-ports LIST        ports whose aggregation frames are aggregated:\n"
            "                          IF,IF,..., all (default) or none; such frames from\n"
            "                          the other ports are counted (agg_port_off), dropped\n"
            "  --add-mode M            which adder runs: any (default), fixed (int32 and\n"
            "                          block fixed point) or float (float32, coded); other\n"
            "                          contributions are counted (agg_add_off), dropped\n"
            "  --roce-result-buffer FxN  RoCE results kept per dataplane queue to answer a\n"
            "                          retransmission at its old PSNs: F flows x N frames\n"
            "                          (default 4x128, the paper's 512 frames; off: none);\n"
            "                          counters resbuf_answered, resbuf_evicted\n"
            "  --fabric-threads N      the fabric's pipeline on 1 thread (receive, classify\n"
            "                          and transmit; the default) or 2 (transmit on its own,\n"
            "                          fed by a ring); aggregation runs on --threads\n"
            "  --aggregation-threads   run the aggregation stage (the slot protocols) on\n"
            "                          --threads threads of its own, each fed by a queue;\n"
            "                          by default the fabric's receive thread runs it for\n"
            "                          every queue, so a packet is summed and its result\n"
            "                          sent without a hand-off between threads (lower\n"
            "                          latency and less CPU where cores are few)\n"
            "  --xdp auto|on|off       receive the fast-path frames (RoCE v1, UDP to the\n"
            "                          aggregation ports) through AF_XDP: an XDP program\n"
            "                          steers them into each port's XSK, the rest go to\n"
            "                          AF_PACKET; on: fail if a port cannot; auto: fall\n"
            "                          back to AF_PACKET, logging why; off (default):\n"
            "                          AF_PACKET only. Sending stays AF_PACKET (qdiscs)\n"
            "  --fabric-ctl HOST:PORT  change a running fabric: send it --agg-ports and\n"
            "                          --add-mode (either, both, or neither to ask) and print\n"
            "                          its settings; changes are taken only from the switch's\n"
            "                          own host (e.g. tools/testbed exec NAME sw -- ...)\n"
            "Without a fabric:\n"
            "  --afpacket IF           take the aggregation packets for --listen's IP and\n"
            "                          ports straight off interface IF (AF_PACKET ring), not\n"
            "                          through UDP sockets; the IP must be IF's (the control\n"
            "                          port is ordinary TCP)\n"
            "  --json                  with --stats: one JSON object\n"
            "  -h, --help              this text\n");
}

/* The control connection of the switch at HOST:PORT into *fd: 0, or the exit status (the
 * reason printed). */
static int connect_control(const char *addr_text, int *fd)
{
    struct sockaddr_in a;
    int prc = netaddr_parse(addr_text, 0, &a);
    if (prc != 0) {
        char why[160];
        netaddr_explain(addr_text, prc, why, sizeof(why));
        fprintf(stderr, "inagg switch: bad address '%s': %s\n", addr_text, why);
        return prc == -EHOSTUNREACH ? 1 : 2;
    }
    *fd = ctl_connect(&a, 3000);
    if (*fd < 0) {
        fprintf(stderr, "inagg switch: cannot connect to %s: %s\n", addr_text, strerror(-*fd));
        return 1;
    }
    return 0;
}

static int print_remote_stats(const char *addr_text, int json)
{
    int fd, status = connect_control(addr_text, &fd);
    if (status != 0)
        return status;
    ctl_reader_t *rd = calloc(1, sizeof(*rd));
    int rc = rd ? ctl_write_line(fd, json ? "STATS json" : "STATS", 3000) : -ENOMEM;
    char line[CTL_LINE_MAX];
    while (rc == 0 && (rc = ctl_read_line(fd, rd, line, sizeof(line), 3000)) == 0) {
        if (strcmp(line, "END") == 0)
            break;
        puts(line);
    }
    free(rd);
    close(fd);
    if (rc != 0) {
        fprintf(stderr, "inagg switch: reading counters from %s: %s\n", addr_text, strerror(-rc));
        return 1;
    }
    return 0;
}

/* --fabric-ctl: one FABRIC line, its answer printed. */
static int fabric_ctl(const char *addr_text, const char *ports, const char *add)
{
    wire_fabric_t m = {0};
    char line[CTL_LINE_MAX], why[160];
    if (ports) {
        m.has_ports = 1;
        snprintf(m.ports, sizeof(m.ports), "%s", ports);
    }
    if (add) {
        m.has_add = 1;
        if (wire_add_mode_parse(add, &m.add) != 0) {
            fprintf(stderr, "inagg switch: --add-mode is any, fixed or float, got '%s'\n", add);
            return 2;
        }
    }
    if (wire_fabric_format(WIRE_VERB_FABRIC, &m, line, sizeof(line)) != 0 ||
        wire_fabric_parse(line, &m, why, sizeof(why)) != 0) {
        fprintf(stderr, "inagg switch: bad --agg-ports '%s' (expected IF,IF,..., all or none)\n",
                ports ? ports : "");
        return 2;
    }
    int fd, status = connect_control(addr_text, &fd);
    if (status != 0)
        return status;
    ctl_reader_t *rd = calloc(1, sizeof(*rd));
    int rc = rd ? ctl_write_line(fd, line, 3000) : -ENOMEM;
    if (rc == 0)
        rc = ctl_read_line(fd, rd, line, sizeof(line), 3000);
    free(rd);
    close(fd);
    if (rc != 0) {
        fprintf(stderr, "inagg switch: no answer from %s: %s\n", addr_text, strerror(-rc));
        return 1;
    }
    if (wire_verb_of(line) != WIRE_VERB_FABRIC_STATE) {
        const char *text;
        wire_err_parse(line, &text);
        fprintf(stderr, "inagg switch: %s refused: %s\n", addr_text, text);
        return 1;
    }
    puts(line);
    return 0;
}

static int parse_u32(const char *flag, const char *v, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long x = strtoul(v, &end, 10);
    if (end == v || *end || errno || x > UINT32_MAX || v[0] == '-') {
        fprintf(stderr, "inagg switch: %s needs a non-negative integer, got '%s'\n", flag, v);
        return -EINVAL;
    }
    *out = (uint32_t)x;
    return 0;
}

/* parse_u32, then lo..hi: "--threads is 1..64, got '0'" ("--slots is at least 1"). */
static int parse_u32_in(const char *flag, const char *v, uint32_t lo, uint32_t hi, uint32_t *out)
{
    uint32_t x;
    if (parse_u32(flag, v, &x))
        return -EINVAL;
    if (x < lo || x > hi) {
        if (hi == UINT32_MAX)
            fprintf(stderr, "inagg switch: %s is at least %u, got '%s'\n", flag, lo, v);
        else
            fprintf(stderr, "inagg switch: %s is %u..%u, got '%s'\n", flag, lo, hi, v);
        return -EINVAL;
    }
    *out = x;
    return 0;
}

/* --l2: the fabric takes --listen's port, and its host as the switch's IP unless --l2-ip gave
 * one (host: a buffer for it). 0, or 2 after a message. */
static int l2_listen(fabric_config_t *fc, const switch_config_t *cfg, char *host, size_t cap)
{
    const char *colon = strrchr(cfg->listen, ':');
    uint32_t port;
    if (!colon || (size_t)(colon - cfg->listen) >= cap ||
        parse_u32("--listen port", colon + 1, &port) || port == 0 || port > 65535) {
        fprintf(stderr, "inagg switch: --l2 needs --listen HOST:PORT with a fixed port\n");
        return 2;
    }
    snprintf(host, cap, "%.*s", (int)(colon - cfg->listen), cfg->listen);
    if (!fc->ip) {
        if (strcmp(host, "0.0.0.0") == 0 || strncmp(host, "127.", 4) == 0) {
            fprintf(stderr, "inagg switch: --l2 needs the switch's own address: --l2-ip "
                            "A.B.C.D/P or --listen A.B.C.D:PORT\n");
            return 2;
        }
        fc->ip = host;
    }
    fc->agg_port = (uint16_t)port;
    return 0;
}

/* Set once the options are parsed: a usage error before that may be the config file's. */
static int options_parsed;
static const char *conf_path; /* --config, for SIGHUP */
static int cli_argc; /* the command line as given, whose limits beat the file's */
static char **cli_argv;
/* Long options that are no setting of the daemon, refused in the file. */
static const char *const conf_refused[] = {"config", "stats",    "fabric-ctl", "json",
                                           "help",   "ready-fd", NULL};

/* The daemon's flags (also what --config FILE may set, less conf_refused). */
static const struct option switch_longopts[] = {{"listen", required_argument, 0, 'l'},
                                                {"threads", required_argument, 0, 't'},
                                                {"slots", required_argument, 0, 's'},
                                                {"worker-timeout", required_argument, 0, 'w'},
                                                {"batch", required_argument, 0, 'b'},
                                                {"socket-buffer", required_argument, 0, 'B'},
                                                {"faults-in", required_argument, 0, 'i'},
                                                {"faults-out", required_argument, 0, 'o'},
                                                {"ready-fd", required_argument, 0, 'r'},
                                                {"stats", required_argument, 0, 'S'},
                                                {"json", no_argument, 0, 'j'},
                                                {"help", no_argument, 0, 'h'},
                                                {"l2", required_argument, 0, 'L'},
                                                {"l2-ip", required_argument, 0, 'I'},
                                                {"l2-mac", required_argument, 0, 'M'},
                                                {"l2-stack-port", required_argument, 0, 'P'},
                                                {"link-delay", required_argument, 0, 'D'},
                                                {"link-jitter", required_argument, 0, 'J'},
                                                {"mac-age", required_argument, 0, 'A'},
                                                {"afpacket", required_argument, 0, 'K'},
                                                {"link-loss", required_argument, 0, 1010},
                                                {"loss-seed", required_argument, 0, 1011},
                                                {"agg-ports", required_argument, 0, 1012},
                                                {"add-mode", required_argument, 0, 1013},
                                                {"fabric-ctl", required_argument, 0, 1014},
                                                {"fabric-threads", required_argument, 0, 1015},
                                                {"aggregation-threads", no_argument, 0, 1017},
                                                {"xdp", required_argument, 0, 1018},
                                                {"roce-result-buffer", required_argument, 0, 1016},
                                                {"request-timeout", required_argument, 0, 1001},
                                                {"idle-timeout", required_argument, 0, 1002},
                                                {"max-conns-per-addr", required_argument, 0, 1003},
                                                {"max-job-slots", required_argument, 0, 1004},
                                                {"max-addr-slots", required_argument, 0, 1005},
                                                {"require-secret", no_argument, 0, 1006},
                                                {"upstream", required_argument, 0, 1020},
                                                {"leaf-index", required_argument, 0, 1021},
                                                {"leaves", required_argument, 0, 1022},
                                                {"config", required_argument, 0, 1030},
                                                {"metrics", required_argument, 0, 1031},
                                                {"log-format", required_argument, 0, 1032},
                                                {"poll", required_argument, 0, 1040},
                                                {"cpu", required_argument, 0, 1041},
                                                {"multicast", required_argument, 0, 1042},
                                                {0, 0, 0, 0}};

/* What the daemon's flags say: its configuration, its fabric's, and what else to do. */
typedef struct switch_args {
    switch_config_t cfg;
    fabric_config_t fcfg;
    const char *stats_addr, *ctl_addr, *metrics_addr;
    int json, ready_fd;
    int loss_seed_given, resbuf_given, agg_threads, cpu_given;
    char l2_host[64]; /* --listen's host, the fabric's IP when --l2-ip is not given */
} switch_args_t;

/* --multicast GROUP[:PORT] into a->cfg. 0, or 2 refused (said). */
static int parse_multicast(switch_args_t *a, const char *text)
{
    if (mcast_parse_group(text, SWITCH_MCAST_PORT_DEFAULT, &a->cfg.mcast_group,
                          &a->cfg.mcast_port) != 0) {
        fprintf(stderr,
                "inagg switch: --multicast wants an IPv4 multicast group (224.0.0.0/4, e.g. "
                "239.77.0.0) and an optional :PORT (1..65535), got '%s'\n",
                text);
        return 2;
    }
    return 0;
}

/* A flag of the daemon: listening, threads, slots, timeouts, transport, limits, upstream,
 * outputs. 0 taken, 2 refused (said), -1 not one of these. */
static int parse_daemon_flag(switch_args_t *a, int c)
{
    uint32_t v;
    char perr[200];
    switch (c) {
        case 'l': a->cfg.listen = optarg; break;
        case 't':
            if (parse_u32_in("--threads", optarg, 1, SWITCH_MAX_THREADS, &a->cfg.threads))
                return 2;
            break;
        case 's':
            if (parse_u32_in("--slots", optarg, 1, UINT32_MAX, &a->cfg.total_slots))
                return 2;
            break;
        case 'w':
            if (parse_u32_in("--worker-timeout", optarg, 1, UINT32_MAX, &a->cfg.worker_timeout_ms))
                return 2;
            break;
        case 'b':
            if (parse_u32("--batch", optarg, &a->cfg.batch))
                return 2;
            break;
        case 'B':
            if (parse_u32("--socket-buffer", optarg, &v))
                return 2;
            a->cfg.transport.buffer_bytes = (int)v;
            break;
        case 'i': a->cfg.transport.faults_in = optarg; break;
        case 'o': a->cfg.transport.faults_out = optarg; break;
        case 'r':
            if (parse_u32("--ready-fd", optarg, &v))
                return 2;
            a->ready_fd = (int)v;
            break;
        case 'S': a->stats_addr = optarg; break;
        case 'j': a->json = 1; break;
        case 1014: a->ctl_addr = optarg; break;
        case 'K':
            a->cfg.transport.kind = "afpacket";
            a->cfg.transport.afpacket.iface = optarg;
            break;
        case 1001:
            if (parse_u32("--request-timeout", optarg, &a->cfg.request_ms))
                return 2;
            break;
        case 1002:
            if (parse_u32("--idle-timeout", optarg, &a->cfg.idle_ms))
                return 2;
            break;
        case 1003:
            if (parse_u32("--max-conns-per-addr", optarg, &a->cfg.max_conns_per_addr))
                return 2;
            break;
        case 1004:
            if (parse_u32("--max-job-slots", optarg, &a->cfg.max_job_slots))
                return 2;
            break;
        case 1005:
            if (parse_u32("--max-addr-slots", optarg, &a->cfg.max_addr_slots))
                return 2;
            break;
        case 1006: a->cfg.require_secret = 1; break;
        case 1020: a->cfg.upstream = optarg; break;
        case 1021:
            if (parse_u32("--leaf-index", optarg, &a->cfg.upstream_rank))
                return 2;
            break;
        case 1022:
            if (parse_u32_in("--leaves", optarg, 1, INAGG_MAX_WORLD, &a->cfg.upstream_world))
                return 2;
            break;
        case 1030: break; /* read before (cmd_switch) */
        case 1031: a->metrics_addr = optarg; break;
        case 1032:
            if (log_set_format(optarg) != 0) {
                fprintf(stderr, "inagg switch: --log-format is text, kv or json, got '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case 1040:
            if (switch_poll_parse(optarg, &a->cfg.poll, &a->cfg.poll_spin_us, perr, sizeof(perr))) {
                fprintf(stderr, "inagg switch: --poll: %s\n", perr);
                return 2;
            }
            a->fcfg.poll_set = 1;
            a->fcfg.poll = a->cfg.poll;
            a->fcfg.poll_spin_us = a->cfg.poll_spin_us;
            break;
        case 1041:
            if (switch_cpu_list_parse(optarg, a->cfg.cpus, &a->cfg.n_cpus, perr, sizeof(perr))) {
                fprintf(stderr, "inagg switch: --cpu: %s\n", perr);
                return 2;
            }
            a->cpu_given = 1;
            break;
        case 1042: return parse_multicast(a, optarg);
        default: return -1;
    }
    return 0;
}
/* A flag of the L2 fabric (--l2 and what goes with it). 0 taken, 2 refused (said), -1 not
 * one of these. */
static int parse_fabric_flag(switch_args_t *a, int c)
{
    switch (c) {
        case 'L': a->fcfg.ports = optarg; break;
        case 'I': a->fcfg.ip = optarg; break;
        case 'M': a->fcfg.mac = optarg; break;
        case 'P': a->fcfg.cpu_port = optarg; break;
        case 'D': a->fcfg.delay = optarg; break;
        case 'J': a->fcfg.jitter = optarg; break;
        case 1010: a->fcfg.loss = optarg; break;
        case 1012: a->fcfg.agg_ports = optarg; break;
        case 1013: a->fcfg.add_mode = optarg; break;
        case 1015:
            if (parse_u32("--fabric-threads", optarg, &a->fcfg.threads))
                return 2;
            if (a->fcfg.threads < 1 || a->fcfg.threads > 2) {
                fprintf(stderr, "inagg switch: --fabric-threads is 1 or 2, got '%s'\n", optarg);
                return 2;
            }
            break;
        case 1017: a->agg_threads = 1; break;
        case 1018: {
            int mode;
            if (fabric_xdp_parse(optarg, &mode) != 0) {
                fprintf(stderr, "inagg switch: --xdp is auto, on or off, got '%s'\n", optarg);
                return 2;
            }
            a->fcfg.xdp = optarg;
            break;
        }
        case 1016:
            if (strcmp(optarg, "off") == 0) {
                a->fcfg.roce_resbuf_rows = 0, a->fcfg.roce_resbuf_depth = 1;
            } else {
                unsigned fl = 0, fr = 0;
                char tail = 0;
                if (sscanf(optarg, "%ux%u%c", &fl, &fr, &tail) != 2 || fl < 1 || fr < 1 ||
                    fr > 65535 || (uint64_t)fl * fr > 65536) {
                    fprintf(stderr,
                            "inagg switch: --roce-result-buffer is FLOWSxFRAMES (e.g. "
                            "4x128, at most 65536 frames in all) or off, got '%s'\n",
                            optarg);
                    return 2;
                }
                a->fcfg.roce_resbuf_rows = fl, a->fcfg.roce_resbuf_depth = fr;
            }
            a->resbuf_given = 1;
            break;
        case 1011: {
            char *end;
            errno = 0;
            unsigned long long s = strtoull(optarg, &end, 10);
            if (errno || end == optarg || *end || optarg[0] == '-') {
                fprintf(stderr,
                        "inagg switch: --loss-seed needs a non-negative integer, got "
                        "'%s'\n",
                        optarg);
                return 2;
            }
            a->fcfg.loss_seed = s;
            a->loss_seed_given = 1;
            break;
        }
        case 'A':
            if (parse_u32("--mac-age", optarg, &a->fcfg.mac_age_ms))
                return 2;
            break;
        default: return -1;
    }
    return 0;
}

/* The modes that exclude each other (leaf switch, --l2, --afpacket), the fabric's flags
 * without --l2, and --l2's address. 0, or the exit status after a message. */
static int check_modes(switch_args_t *a)
{
    if (!a->cfg.upstream != !a->cfg.upstream_world) {
        fprintf(stderr, "inagg switch: --upstream and --leaves go together (a leaf switch "
                        "needs both)\n");
        return 2;
    }
    if (a->cfg.upstream && (a->fcfg.ports || a->cfg.transport.afpacket.iface)) {
        fprintf(stderr, "inagg switch: a leaf switch (--upstream) runs over UDP sockets: "
                        "not with --l2 or --afpacket\n");
        return 2;
    }
    if (a->fcfg.ports && a->cfg.transport.afpacket.iface) {
        fprintf(stderr, "inagg switch: --afpacket and --l2 exclude each other (the fabric "
                        "owns its ports)\n");
        return 2;
    }
    if (a->fcfg.ports && a->cpu_given && !a->agg_threads) {
        fprintf(stderr, "inagg switch: --cpu pins the switch's dataplane threads to CPUs; "
                        "with --l2 the fabric's thread runs the aggregation unless "
                        "--aggregation-threads is given\n");
        return 2;
    }
    if (a->fcfg.ports)
        return l2_listen(&a->fcfg, &a->cfg, a->l2_host, sizeof(a->l2_host));
    if (a->fcfg.ip || a->fcfg.mac || a->fcfg.cpu_port || a->fcfg.delay || a->fcfg.jitter ||
        a->fcfg.mac_age_ms || a->fcfg.loss || a->loss_seed_given || a->fcfg.agg_ports ||
        a->fcfg.add_mode || a->fcfg.threads || a->resbuf_given || a->agg_threads || a->fcfg.xdp) {
        fprintf(stderr, "inagg switch: --l2-ip, --l2-mac, --l2-stack-port, --link-delay, "
                        "--link-jitter, --link-loss, --loss-seed, --mac-age, --agg-ports, "
                        "--add-mode, --fabric-threads, --aggregation-threads, --xdp and "
                        "--roce-result-buffer need --l2 (or --fabric-ctl)\n");
        return 2;
    }
    return 0;
}

/* SIGHUP: --config's limits read again (switch_conf_reload). */
static void reload_conf(inagg_switch_t *sw, void *ctx)
{
    (void)ctx;
    switch_conf_reload(sw, conf_path, switch_longopts, conf_refused, cli_argc, cli_argv);
}

static int run_switch(int argc, char **argv, const struct option **opts_out)
{
    switch_args_t args = {.cfg = SWITCH_CONFIG_INIT, .fcfg = {.loss_seed = 1}, .ready_fd = -1};
    switch_args_t *a = &args;
    a->cfg.listen = "127.0.0.1:7000";
    *opts_out = switch_longopts;
    if (!argv) /* asked for the option table only */
        return 0;
    optind = 1;
    int c;
    opterr = 0; /* cli_bad_option says it, in the one wording */
    while ((c = getopt_long(argc, argv, ":h", switch_longopts, NULL)) != -1) {
        int rc = parse_daemon_flag(a, c);
        if (rc < 0)
            rc = parse_fabric_flag(a, c);
        if (rc > 0)
            return rc;
        if (rc == 0)
            continue;
        switch (c) {
            case 'h': usage(stdout); return 0;
            default: return cli_bad_option("inagg switch", c, argv);
        }
    }
    options_parsed = 1;
    if (cli_no_extra_args("inagg switch", argc, argv, optind))
        return 2;
    if (a->stats_addr && a->ctl_addr) {
        fprintf(stderr, "inagg switch: --stats and --fabric-ctl exclude each other\n");
        return 2;
    }
    if (a->stats_addr)
        return print_remote_stats(a->stats_addr, a->json);
    if (a->ctl_addr)
        return fabric_ctl(a->ctl_addr, a->fcfg.agg_ports, a->fcfg.add_mode);

    int mrc = check_modes(a);
    if (mrc != 0)
        return mrc;
    struct switchd_options so = {.cfg = a->cfg,
                                 .fabric = a->fcfg,
                                 .fabric_inline = !a->agg_threads,
                                 .metrics_addr = a->metrics_addr,
                                 .ready_fd = a->ready_fd,
                                 .reload = reload_conf};
    char err[256];
    if (switchd_run(&so, err, sizeof(err)) != 0) {
        fprintf(stderr, "inagg switch: %s\n", err);
        return 1;
    }
    return 0;
}

/* --config FILE (or --config=FILE) on the command line, or NULL. */
static const char *config_arg(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            break;
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
            return argv[i + 1];
        if (strncmp(argv[i], "--config=", 9) == 0)
            return argv[i] + 9;
    }
    return NULL;
}

int cmd_switch(int argc, char **argv)
{
    const struct option *opts;
    options_parsed = 0;
    cli_argc = argc, cli_argv = argv;
    conf_path = config_arg(argc, argv);
    if (!conf_path)
        return run_switch(argc, argv, &opts);
    run_switch(0, NULL, &opts);
    switch_conf_t conf;
    char err[512];
    if (switch_conf_read(conf_path, opts, conf_refused, &conf, err, sizeof(err)) != 0) {
        fprintf(stderr, "inagg switch: %s\n", err);
        return 2;
    }
    int n, *line_of = NULL;
    char **all = switch_conf_argv(&conf, argc, argv, &n, &line_of);
    int rc = 2;
    if (!all) {
        fprintf(stderr, "inagg switch: out of memory\n");
    } else {
        rc = run_switch(n, all, &opts);
        int at = optind - 1; /* getopt stopped past the option that failed */
        if (rc == 2 && !options_parsed && at > 0 && at < n && line_of[at])
            fprintf(stderr, "inagg switch: (that is %s:%d)\n", conf_path, line_of[at]);
    }
    free(all);
    free(line_of);
    switch_conf_free(&conf);
    return rc;
}
