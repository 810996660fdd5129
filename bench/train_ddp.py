#!/usr/bin/python3
"""Data-parallel (DDP) training of a Fashion-MNIST network through Gloo and through inagg, end
to end, one rank per host of a testbed whose links are rate-limited (or on loopback); what
`inagg bench train` runs.

  inagg bench train [--testbed N --link-rate R | --workers N] --model cnn|large
      --backend gloo,inagg[,inagg:fp16,inagg:zfp:rate=8,...] [--compress none|fp16|zfp:rate=8]
      [--epochs E] [--train-samples S] [--test-samples T] [--batch B] [--seed S]
      [--target-accuracy A] [--plot FILE.png] [--json FILE|-]

Every backend in the list is one run: the same model, initial weights, seed, batches and
order (python/inagg/train.py), one after another on the same testbed. A backend is `gloo`
(torch.distributed's Gloo: ring allreduce from host to host) or `inagg` with an optional
compression `inagg:fp16`, `inagg:zfp:rate=8` (default: --compress): the gradients are summed
by `inagg switch`, which runs in the testbed's switch namespace (the fabric's own with
--fabric inagg), so inagg's packets cross the same rate-limited links as Gloo's. inagg runs
use torch.distributed's backend "inagg" when it is registered, else inagg.torch's DDP hook
over a Gloo group ("mechanism" in the report).

--testbed N builds a testbed trXXXXXXXX (random hex; tools/testbed up N --link-rate R --mtu M)
for the invocation and takes it down at the end or on INT, TERM or HUP (after a SIGKILL:
`tools/testbed down NAME`, the name is in the progress). Without --testbed, --workers N
ranks run on loopback with a switch on 127.0.0.1 (no link limit: a functional run).

Report (--json): one object with "runs" (per backend: label, backend, compress, mechanism,
error_feedback (a residual per gradient bucket: the backend with a lossy compress),
epoch_s = median epoch wall time, comm_s = median time in communication per epoch,
final_test_accuracy, time_to_accuracy_s = training time (evaluation excluded) until the test
accuracy first reached target_accuracy (null if it never did), epochs = [{epoch, wall_s,
comm_s, wait_s, eval_s, train_s_total, train_loss, test_accuracy}], replicas_agree = every
rank ended with bit-identical parameters) and "speedup_vs_gloo" ({label: Gloo's epoch_s /
the run's epoch_s}). Progress goes to stderr. --plot: test accuracy against training time,
one curve per run (gnuplot).

Exit: 0 every run finished, 1 a run failed, 2 bad usage, 3 torch, the dataset or testbeds
are not available here (the reason on stderr).
"""
import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTBED = os.path.join(ROOT, "tools", "testbed")
PY = "/usr/bin/python3"  # Debian's, which has python3-torch
PROG = "inagg bench train"
COMPRESS_RE = re.compile(r"^(none|fp16|zfp:(rate|precision|accuracy)=[0-9.eE+-]+|zfp:reversible)$")
DEFAULT_THRESHOLD = {"cnn": 0.89, "large": 0.85}  # = inagg.models.DEFAULT_THRESHOLD
# inagg's packets on a testbed (as src/apps/cli/bench_allreduce_args.c): one frame each, a window
# of about 3 ms of the link, retransmission timeouts that tolerate a queue behind the link.
WIRE_HEADER, IP_UDP = 36, 28
WINDOW_TIME_S, WINDOW_MIN, WINDOW_MAX = 0.003, 4, 64
RTO_MIN_US, RTO_MAX_US = 20000, 500000
# Debian's torch calls the system's libblas.so.3, by default the reference BLAS, which is
# 5-10x slower than OpenBLAS for the Linear layers; the ranks load OpenBLAS from here when
# libopenblas0-pthread is installed (--blas), without changing the system's choice.
OPENBLAS_DIR = "/usr/lib/x86_64-linux-gnu/openblas-pthread"


class Usage(Exception):
    pass


class Parser(argparse.ArgumentParser):
    """argparse, its refusals in the wording of every other inagg command (src/apps/cli/flags.c):
    one line naming the option, exit 2, no usage dump."""

    def error(self, message):
        unknown = re.match(r"unrecognized arguments: (\S+)", message)
        novalue = re.match(r"argument (-[^/:\s]+)[^:]*: expected one argument", message)
        if unknown and unknown.group(1).startswith("-"):
            message = "unknown option '%s' (see --help)" % unknown.group(1).split("=")[0]
        elif unknown:
            message = "unexpected argument '%s'" % unknown.group(1)
        elif novalue:
            message = "option '%s' needs a value (see --help)" % novalue.group(1)
        sys.stderr.write("%s: %s\n" % (self.prog, message))
        sys.exit(2)


class Unavailable(Exception):
    pass


def log(msg):
    print("%s: %s" % (PROG, msg), file=sys.stderr, flush=True)


def inagg_binary():
    path = os.environ.get("INAGG_BIN") or os.path.join(ROOT, "build", "inagg")
    if not os.access(path, os.X_OK):
        raise Unavailable("%s is missing: run make first (or set INAGG_BIN)" % path)
    return path


# ---- arguments ------------------------------------------------------------------------------

def parse_backends(spec, compress):
    """[(label, backend, compress)] of --backend's comma-separated list."""
    runs = []
    for item in spec.split(","):
        item = item.strip()
        if item == "gloo":
            runs.append(("gloo", "gloo", "none"))
            continue
        if item != "inagg" and not item.startswith("inagg:"):
            raise Usage("--backend: unknown backend '%s' (gloo, inagg, inagg:fp16, "
                        "inagg:zfp:rate=8, ...)" % item)
        mode = item[len("inagg:"):] if item.startswith("inagg:") else compress
        if not COMPRESS_RE.match(mode):
            raise Usage("--backend %s: unknown compression '%s' (none, fp16, zfp:rate=R, "
                        "zfp:precision=P, zfp:accuracy=A, zfp:reversible)" % (item, mode))
        runs.append(("inagg" if mode == "none" else "inagg:" + mode, "inagg", mode))
    labels = [r[0] for r in runs]
    dup = {x for x in labels if labels.count(x) > 1}
    if dup:
        raise Usage("--backend names %s twice" % ", ".join(sorted(dup)))
    return runs


def parse(argv):
    # The docstring's first paragraph is the description (a whole sentence), the rest the epilog.
    description, epilog = __doc__.split("\n\n", 1)
    ap = Parser(prog=PROG, description=description,
                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=epilog)
    ap.add_argument("--testbed", type=int, metavar="N",
                    help="N hosts in network namespaces, one rank each (tools/testbed)")
    ap.add_argument("--link-rate", default="100mbit", metavar="R",
                    help="every testbed link's rate, each way (tc syntax; default 100mbit)")
    ap.add_argument("--mtu", type=int, choices=[1500, 9000], default=9000)
    ap.add_argument("--fabric", choices=["bridge", "inagg"],
                    help="the testbed's fabric (default tools/testbed's)")
    ap.add_argument("--workers", type=int, default=2, metavar="N",
                    help="without --testbed: N ranks on loopback (default 2)")
    ap.add_argument("--model", choices=["cnn", "large"], default="cnn")
    ap.add_argument("--backend", default="gloo,inagg",
                    help="runs, comma-separated: gloo, inagg, inagg:fp16, inagg:zfp:rate=8")
    ap.add_argument("--compress", default="none",
                    help="compression of `inagg` runs without their own (none, fp16, "
                    "zfp:rate=R)")
    ap.add_argument("--no-error-feedback", action="store_true",
                    help="lossy compression through the backend without its per-bucket error "
                    "feedback (on by default)")
    ap.add_argument("--mechanism", choices=["auto", "backend", "hook"], default="auto",
                    help="inagg runs: torch.distributed backend 'inagg', the DDP hook, or the "
                    "backend when registered (default)")
    ap.add_argument("--ddp-hook", choices=["allreduce", "fp16", "bf16", "powersgd"],
                    default="allreduce",
                    help="PyTorch's DDP communication hook for gloo and the inagg backend "
                    "(allreduce_hook, fp16_compress_hook, bf16_compress_hook, powerSGD_hook)")
    ap.add_argument("--python", metavar="PY",
                    help="the ranks' interpreter (default $INAGG_TORCH_PYTHON or "
                    "/usr/bin/python3; build/venv-torch2/bin/python for torch 2.x)")
    ap.add_argument("--in-switch-optimizer", action="store_true",
                    help="not supported by DDP training (see the error)")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--train-samples", type=int, default=60000)
    ap.add_argument("--test-samples", type=int, default=10000)
    ap.add_argument("--batch", type=int, default=64, help="samples per rank per step")
    ap.add_argument("--lr", type=float, help="Adam's learning rate (default per model)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--target-accuracy", type=float, metavar="A",
                    help="test accuracy for time_to_accuracy_s (default cnn 0.89, large 0.85)")
    ap.add_argument("--data", help="Fashion-MNIST's directory (default $INAGG_FMNIST_DIR or "
                    "/usr/share/datasets/fashion-mnist)")
    ap.add_argument("--switch-threads", type=int, default=1,
                    help="threads of the switch this command starts (not the fabric's)")
    ap.add_argument("--window", type=int, metavar="S",
                    help="inagg on a testbed: packets in flight per rank (default about 3 ms "
                    "of the link, 4..64)")
    ap.add_argument("--switch-fault", metavar="kill|restart:S",
                    help="inagg runs: SIGKILL the switch this command started in the middle of "
                    "epoch --switch-fault-epoch, and (restart:S) start it again on the same "
                    "address S seconds later; the run must still finish, its replicas equal")
    ap.add_argument("--switch-fault-epoch", type=int, default=2, metavar="E",
                    help="the epoch in whose middle the switch is killed (default 2; >= 2: "
                    "the middle is half of the epoch before's time)")
    ap.add_argument("--timeout-s", type=float, default=3600.0,
                    help="a run that takes longer is stopped and failed (default 3600)")
    ap.add_argument("--blas", choices=["auto", "system", "openblas"], default="auto",
                    help="the ranks' BLAS: OpenBLAS from libopenblas0-pthread (auto: when "
                    "installed) or the system's libblas.so.3")
    ap.add_argument("--plot", metavar="FILE.png")
    ap.add_argument("--json", metavar="FILE|-")
    try:
        a = ap.parse_args(argv)
    except SystemExit as e:
        raise SystemExit(0 if e.code == 0 else 2)
    if a.in_switch_optimizer:
        raise Usage("--in-switch-optimizer is not supported with DDP training: DDP needs every "
                    "rank to hold the averaged gradients and step its own optimizer, while the "
                    "in-switch optimizer returns parameters (see inagg train --in-switch)")
    if a.testbed is not None and not 2 <= a.testbed <= 16:
        raise Usage("--testbed N: N must be 2..16")
    if a.testbed is None and not 1 <= a.workers <= 16:
        raise Usage("--workers must be 1..16")
    if a.epochs < 1 or a.epochs > 1000 or a.batch < 1 or a.train_samples < 1 or \
            a.test_samples < 1 or a.switch_threads < 1 or a.timeout_s <= 0 or \
            (a.window is not None and not 1 <= a.window <= 1024):
        raise Usage("--epochs, --batch, --train-samples, --test-samples, --switch-threads, "
                    "--timeout-s and --window (up to 1024) must be positive")
    if not COMPRESS_RE.match(a.compress):
        raise Usage("--compress: unknown mode '%s' (none, fp16, zfp:rate=R, ...)" % a.compress)
    if a.target_accuracy is None:
        a.target_accuracy = DEFAULT_THRESHOLD[a.model]
    if not 0 < a.target_accuracy <= 1:
        raise Usage("--target-accuracy must be in (0, 1]")
    world = a.testbed if a.testbed is not None else a.workers
    if a.train_samples < world * a.batch:
        raise Usage("--train-samples %d is less than one global batch (%d ranks x %d)"
                    % (a.train_samples, world, a.batch))
    if a.blas == "auto":
        a.blas = "openblas" if os.path.exists(os.path.join(OPENBLAS_DIR, "libblas.so.3")) \
            else "system"
    elif a.blas == "openblas" and not os.path.exists(os.path.join(OPENBLAS_DIR, "libblas.so.3")):
        raise Usage("--blas openblas: %s/libblas.so.3 is missing (apt-get install "
                    "libopenblas0-pthread)" % OPENBLAS_DIR)
    a.runs = parse_backends(a.backend, a.compress)
    a.python = a.python or os.environ.get("INAGG_TORCH_PYTHON") or PY
    if not os.access(a.python, os.X_OK):
        raise Usage("--python %s: not an executable (tools/setup --torch2 makes "
                    "build/venv-torch2/bin/python)" % a.python)
    if a.ddp_hook != "allreduce" and a.mechanism == "hook":
        raise Usage("--ddp-hook %s needs the inagg backend, not --mechanism hook" % a.ddp_hook)
    a.fault_restart_s = None
    if a.switch_fault is not None:
        m = re.match(r"^(kill|restart:(\d+(\.\d+)?))$", a.switch_fault)
        if not m:
            raise Usage("--switch-fault is kill or restart:SECONDS, not '%s'" % a.switch_fault)
        if m.group(2):
            a.fault_restart_s = float(m.group(2))
        if not 2 <= a.switch_fault_epoch <= a.epochs:
            raise Usage("--switch-fault-epoch must be 2..--epochs (%d)" % a.epochs)
        if a.testbed is not None and a.fabric != "bridge":
            raise Usage("--switch-fault needs a switch of this command's own: --fabric bridge "
                        "(the inagg fabric's switch forwards every frame of the testbed)")
    return a


# ---- processes ------------------------------------------------------------------------------

def stop_group(procs, grace=3.0):
    """SIGTERM each process's group, SIGKILL what is left after `grace` seconds, reap all."""
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.time() + grace
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


def wait_ready(fd, proc, what, timeout=15.0):
    """The port `inagg switch --ready-fd` writes, within timeout seconds."""
    buf = b""
    deadline = time.time() + timeout
    os.set_blocking(fd, False)
    while not buf.endswith(b"\n") and time.time() < deadline and proc.poll() is None:
        try:
            chunk = os.read(fd, 64)
            if not chunk:
                break
            buf += chunk
        except BlockingIOError:
            time.sleep(0.05)
    os.close(fd)
    if not buf.endswith(b"\n") or not buf.strip().isdigit():
        err = proc.stderr.read() if proc.poll() is not None and proc.stderr else ""
        raise RuntimeError("%s did not start%s" % (what, ": " + err.strip()[-400:] if err else
                                                   " in %.0f s" % timeout))
    return int(buf)


class Place:
    """Where ranks and the switch run: loopback, or the hosts of a testbed."""

    def __init__(self, a):
        self.a = a
        self.testbed = None
        self.switch_procs = []
        self.switch = None
        self.switch_dead = None  # the address of a switch kill_switch stopped
        self.info = None

    def up(self):
        a = self.a
        if a.testbed is None:
            self.world = a.workers
            self.hosts = ["127.0.0.1"] * a.workers
            self.ifname = "lo"
            return
        self.world = a.testbed
        # Not b<PID>: `inagg bench allreduce --testbed` takes testbeds of that name down when
        # no process PID runs, and a process in another PID namespace may share the testbeds.
        name = "tr" + os.urandom(4).hex()
        cmd = [TESTBED, "up", str(a.testbed), "--name", name, "--link-rate", a.link_rate,
               "--mtu", str(a.mtu), "--json"]
        if a.fabric:
            cmd += ["--fabric", a.fabric]
        log("building testbed %s: %d hosts, links %s" % (name, a.testbed, a.link_rate))
        self.testbed = name
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if out.returncode == 3:
            self.testbed = None
            raise Unavailable("testbeds cannot be built here: " + out.stderr.strip()[-400:])
        if out.returncode != 0:
            self.testbed = None
            raise RuntimeError("tools/testbed up failed: " + out.stderr.strip()[-400:])
        self.info = json.loads(out.stdout)
        self.hosts = [h["addr"] for h in self.info["hosts"]]
        self.ifname = self.info["iface"]

    def prefix(self, k):
        """argv prefix that runs a command on rank k's host."""
        if self.testbed is None:
            return []
        return [TESTBED, "exec", self.testbed, "h%d" % (k + 1), "--"]

    def start_switch(self, listen=None):
        """The aggregation switch's HOST:PORT (started once for all inagg runs; after
        kill_switch, again on the same address)."""
        if self.switch:
            return self.switch
        listen = listen or self.switch_dead
        if self.info and self.info.get("fabric") == "inagg":
            self.switch = "%s:%d" % (self.info["switch"]["addr"], self.info["fabric_port"])
            return self.switch
        listen = listen or ("127.0.0.1:0" if self.testbed is None else
                            "%s:7000" % self.info["switch"]["addr"])
        self.switch_dead = None
        r, w = os.pipe()
        argv = [inagg_binary(), "switch", "--listen", listen, "--threads",
                str(self.a.switch_threads), "--ready-fd", str(w)]
        if self.testbed:
            argv = [TESTBED, "exec", self.testbed, "sw", "--"] + argv
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True, pass_fds=(w,),
                             start_new_session=True)
        os.close(w)
        self.switch_procs.append(p)
        port = wait_ready(r, p, "inagg switch")
        self.switch = "%s:%d" % (listen.rsplit(":", 1)[0], port)
        return self.switch

    def kill_switch(self):
        """SIGKILL the switch this command started (the address stays for a restart)."""
        for p in self.switch_procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
        self.switch_procs = []
        self.switch_dead = self.switch
        self.switch = None

    def restart_switch(self):
        """A new switch on the killed one's address and port."""
        listen, self.switch_dead = self.switch_dead, None
        if listen:
            self.start_switch(listen)

    def inagg_options(self, compress):
        """Packet options of inagg's ranks on a testbed, as `inagg bench allreduce --testbed`
        chooses them: one datagram per frame (no IP fragments: the inagg fabric drops them),
        a window of about 3 ms of the link, a retransmission floor above queueing delays."""
        if self.testbed is None:
            return []
        a = self.a
        fit = max(1, (a.mtu - WIRE_HEADER - IP_UDP) // 4)
        elems = 1
        while elems * 2 <= fit:
            elems *= 2
        per_elem = 4.0
        if compress == "fp16":
            per_elem = 2.0
        elif compress.startswith("zfp:rate="):
            per_elem = max(0.125, float(compress.split("=", 1)[1]) / 8)
        if a.window:
            window = a.window
        else:
            bps = self.info.get("link_rate_bps") or 0
            pkt = elems * per_elem + WIRE_HEADER
            window = int(-(-bps / 8 * WINDOW_TIME_S // pkt)) if bps else 16
            window = max(WINDOW_MIN, min(WINDOW_MAX, window))
        return ["--packet-elems", str(elems), "--slots", str(window),
                "--rto-min-us", str(RTO_MIN_US), "--rto-max-us", str(RTO_MAX_US)]

    def master(self, run_index):
        if self.testbed is None:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                return "127.0.0.1:%d" % s.getsockname()[1]
        return "%s:%d" % (self.hosts[0], 29500 + run_index)

    def down(self):
        stop_group(self.switch_procs)
        self.switch_procs = []
        if self.testbed:
            log("taking testbed %s down" % self.testbed)
            subprocess.run([TESTBED, "down", self.testbed], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=120)
            self.testbed = None


class Rank(threading.Thread):
    """Reads one rank's stdout (JSON lines) and stderr; rank 0's epochs are shown as they come."""

    def __init__(self, proc, rank, label, epochs):
        super().__init__(daemon=True)
        self.proc, self.rank, self.label, self.epochs_total = proc, rank, label, epochs
        self.events = []
        self.err = []
        self._errt = threading.Thread(target=self._read_err, daemon=True)
        self._errt.start()

    def _read_err(self):
        for line in self.proc.stderr:
            self.err.append(line)
            del self.err[:-40]

    def run(self):
        for line in self.proc.stdout:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            self.events.append(ev)
            if self.rank == 0 and ev.get("event") == "start":
                log("%s: %s, %s parameters (%.1f MB of gradients), %d steps per epoch" % (
                    self.label, ev["mechanism"], "{:,}".format(ev["params"]),
                    ev["grad_bytes"] / 1e6, ev["steps_per_epoch"]))
            elif self.rank == 0 and ev.get("event") == "epoch":
                log("%s: epoch %d/%d  %.2f s (communication %.2f s)  loss %.4f  test accuracy "
                    "%.2f%%" % (self.label, ev["epoch"], self.epochs_total, ev["wall_s"],
                                ev["comm_s"], ev["train_loss"], 100 * ev["test_accuracy"]))
        self._errt.join(timeout=5)

    def stderr_tail(self):
        """The rank's own error line if it printed one, else the end of its stderr."""
        own = [x for x in self.err if x.startswith("inagg.train:")]
        return own[-1].strip() if own else "".join(self.err[-8:]).strip()


def run_one(a, place, index, label, backend, compress):
    """One training run over every rank; its report (raises RuntimeError on failure)."""
    master = place.master(index)
    common = ["--world", str(place.world), "--master", master, "--backend", backend,
              "--compress", compress, "--mechanism", a.mechanism, "--ifname", place.ifname,
              "--ddp-hook", a.ddp_hook,
              "--model", a.model, "--epochs", str(a.epochs), "--train-samples",
              str(a.train_samples), "--test-samples", str(a.test_samples), "--batch",
              str(a.batch), "--seed", str(a.seed),
              "--timeout-s", str(min(a.timeout_s, 600.0))]
    if a.lr is not None:
        common += ["--lr", repr(a.lr)]
    if a.no_error_feedback:
        common.append("--no-error-feedback")
    if a.data:
        common += ["--data", os.path.abspath(a.data)]
    if backend == "inagg":
        common += ["--switch", place.start_switch()] + place.inagg_options(compress)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(ROOT, "python") + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if a.blas == "openblas":
        env["LD_LIBRARY_PATH"] = OPENBLAS_DIR + (
            os.pathsep + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
        env["OPENBLAS_NUM_THREADS"] = "1"  # one core per rank, as torch.set_num_threads(1)
    procs, readers = [], []
    t0 = time.time()
    try:
        for k in range(place.world):
            p = subprocess.Popen(place.prefix(k) + [a.python, "-m", "inagg.train", "--rank", str(k)]
                                 + common, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=env,
                                 start_new_session=True)
            procs.append(p)
            r = Rank(p, k, label, a.epochs)
            r.start()
            readers.append(r)
        deadline = t0 + a.timeout_s
        failed = None
        fault = SwitchFault(a, place, readers[0]) if backend == "inagg" and a.switch_fault \
            else None
        while any(p.poll() is None for p in procs):
            if fault:
                fault.step()
            bad = [k for k, p in enumerate(procs) if p.poll() not in (None, 0)]
            if bad:
                failed = bad[0]
                time.sleep(2)  # the others fail too once a rank is gone; give them a moment
                break
            if time.time() > deadline:
                raise RuntimeError("%s: stopped after --timeout-s %.0f s" % (label, a.timeout_s))
            time.sleep(0.2)
        if failed is None:
            bad = [k for k, p in enumerate(procs) if p.returncode != 0]
            failed = bad[0] if bad else None
        if failed is not None:
            rc = procs[failed].returncode
            for r in readers:
                r.join(timeout=2)
            why = readers[failed].stderr_tail() or "exit status %s" % rc
            if rc == 3:
                raise Unavailable(why)
            raise RuntimeError("%s: rank %d failed: %s" % (label, failed, why))
    finally:
        stop_group(procs)
    for r in readers:
        r.join(timeout=10)
    if fault:
        if place.switch is None:
            place.restart_switch()  # the next inagg run needs one
        if fault.killed_at is None:
            raise RuntimeError("%s: the run ended before the switch fault" % label)
    report = summarize(a, label, backend, compress, readers)
    if fault:
        report["switch_fault"] = fault.report()
    return report


class SwitchFault:
    """--switch-fault: kills the switch in the middle of epoch E (half of epoch E-1's time after
    rank 0 reported it) and, with restart:S, starts it again S seconds later."""

    def __init__(self, a, place, reader0):
        self.a, self.place, self.reader0 = a, place, reader0
        self.kill_at = self.killed_at = self.restarted_at = None

    def step(self):
        now = time.time()
        if self.kill_at is None:
            before = [e for e in self.reader0.events if e.get("event") == "epoch"
                      and e["epoch"] == self.a.switch_fault_epoch - 1]
            if before:
                self.kill_at = now + before[0]["wall_s"] / 2
        elif self.killed_at is None and now >= self.kill_at:
            self.place.kill_switch()
            self.killed_at = now
            log("switch SIGKILLed in the middle of epoch %d%s" % (
                self.a.switch_fault_epoch, "" if self.a.fault_restart_s is None else
                "; restarting it in %g s" % self.a.fault_restart_s))
        elif (self.killed_at is not None and self.restarted_at is None
              and self.a.fault_restart_s is not None
              and now >= self.killed_at + self.a.fault_restart_s):
            self.place.restart_switch()
            self.restarted_at = now
            log("switch restarted on %s" % self.place.switch)

    def report(self):
        return {"kind": "kill" if self.a.fault_restart_s is None else "restart",
                "epoch": self.a.switch_fault_epoch,
                "restarted_after_s": None if self.restarted_at is None
                else round(self.restarted_at - self.killed_at, 3)}


def summarize(a, label, backend, compress, readers):
    ev0 = readers[0].events
    start = next((e for e in ev0 if e["event"] == "start"), None)
    epochs = [{k: v for k, v in e.items() if k != "event"} for e in ev0 if e["event"] == "epoch"]
    ends = [next((e for e in r.events if e["event"] == "end"), None) for r in readers]
    if start is None or len(epochs) != a.epochs or None in ends:
        raise RuntimeError("%s: a rank ended without its report" % label)
    tta = next((e["train_s_total"] for e in epochs
                if e["test_accuracy"] >= a.target_accuracy), None)
    return {
        "label": label, "backend": backend, "compress": compress,
        "mechanism": start["mechanism"], "ddp_hook": start.get("ddp_hook", "allreduce"),
        "error_feedback": bool(start.get("error_feedback")),
        "epoch_s": statistics.median(e["wall_s"] for e in epochs),
        "comm_s": statistics.median(e["comm_s"] for e in epochs),
        "final_test_accuracy": epochs[-1]["test_accuracy"],
        "time_to_accuracy_s": tta,
        "epochs": epochs,
        "replicas_agree": len({e["params_digest"] for e in ends}) == 1,
        "buckets_per_rank": ends[0]["buckets"],
        "params": start["params"], "grad_bytes": start["grad_bytes"],
        "steps_per_epoch": start["steps_per_epoch"], "lr": start["lr"],
        "torch": start["torch"], "blas": start["blas"],
    }


# ---- output ---------------------------------------------------------------------------------

def write_plot(path, report):
    """Test accuracy against training time, one curve per run, with gnuplot."""
    gp = None
    for d in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep):
        if os.access(os.path.join(d, "gnuplot"), os.X_OK):
            gp = os.path.join(d, "gnuplot")
            break
    if gp is None:
        raise Unavailable("--plot needs gnuplot, which is not installed (apt-get install "
                          "gnuplot-nox)")
    with tempfile.TemporaryDirectory(prefix="inagg-plot-") as tmp:
        plots = []
        for i, run in enumerate(report["runs"]):
            data = os.path.join(tmp, "run%d" % i)
            with open(data, "w") as f:
                f.write("0 nan\n")
                for e in run["epochs"]:
                    f.write("%.6f %.6f\n" % (e["train_s_total"], 100 * e["test_accuracy"]))
            plots.append('"%s" using 1:2 with linespoints pt 7 ps 0.7 title "%s"'
                         % (data, run["label"].replace('"', "'")))
        where = ("testbed, %d hosts, links %s" % (report["world"], report["link_rate"])
                 if report["testbed"] else "loopback, %d ranks" % report["world"])
        title = "Fashion-MNIST %s (%s)" % (report["model"], where)
        ok = False
        for term in ("pngcairo size 900,500 font ',10'", "png size 900,500"):
            script = os.path.join(tmp, "plot.gp")
            with open(script, "w") as f:
                f.write('set terminal %s\nset output "%s"\nset title "%s"\nset grid\n'
                        'set key bottom right\nset xlabel "training time (s)"\n'
                        'set ylabel "test accuracy (%%)"\nset xrange [0:*]\n'
                        'set arrow from graph 0, first %.2f to graph 1, first %.2f nohead '
                        'dashtype 2\nplot %s\n'
                        % (term, path, title, 100 * report["target_accuracy"],
                           100 * report["target_accuracy"], ", ".join(plots)))
            r = subprocess.run([gp, script], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=60)
            if r.returncode == 0 and os.path.exists(path) and os.path.getsize(path) > 0:
                ok = True
                break
        if not ok:
            raise RuntimeError("gnuplot could not write %s" % path)


def summary_line(run, gloo):
    s = "%-18s %-7s epoch %7.2f s  comm %7.2f s  accuracy %6.2f%%  to target %s" % (
        run["label"], run["mechanism"], run["epoch_s"], run["comm_s"],
        100 * run["final_test_accuracy"],
        "%.1f s" % run["time_to_accuracy_s"] if run["time_to_accuracy_s"] is not None
        else "not reached")
    if gloo and run["label"] != "gloo":
        s += "  %.2fx Gloo" % (gloo["epoch_s"] / run["epoch_s"])
    return s


def main(argv):
    try:
        a = parse(argv)
    except Usage as e:
        log(str(e))
        return 2
    place = Place(a)

    def on_signal(signum, _frame):
        raise KeyboardInterrupt("signal %d" % signum)
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)
    runs = []
    try:
        if any(b == "inagg" for _, b, _ in a.runs):
            inagg_binary()
        place.up()
        for i, (label, backend, compress) in enumerate(a.runs):
            log("run %d/%d: %s, %s on %s, %d ranks, %d epochs of %d samples" % (
                i + 1, len(a.runs), label, a.model,
                "testbed %s" % place.testbed if place.testbed else "loopback", place.world,
                a.epochs, a.train_samples))
            runs.append(run_one(a, place, i, label, backend, compress))
    except Unavailable as e:
        log(str(e))
        return 3
    except RuntimeError as e:
        log(str(e))
        return 1
    except KeyboardInterrupt as e:
        log("interrupted (%s)" % (e or "SIGINT"))
        return 130
    finally:
        place.down()
    gloo = next((r for r in runs if r["label"] == "gloo"), None)
    report = {
        "benchmark": "train", "dataset": "fashion-mnist", "model": a.model,
        "params": runs[0]["params"], "grad_bytes": runs[0]["grad_bytes"],
        "world": place.world, "testbed": a.testbed is not None,
        "link_rate": a.link_rate if a.testbed is not None else None,
        "mtu": a.mtu if a.testbed is not None else None,
        "fabric": (place.info or {}).get("fabric"),
        "epochs": a.epochs, "train_samples": a.train_samples, "test_samples": a.test_samples,
        "batch_per_rank": a.batch, "seed": a.seed, "blas": runs[0]["blas"], "target_accuracy": a.target_accuracy,
        "runs": runs,
        "speedup_vs_gloo": {r["label"]: gloo["epoch_s"] / r["epoch_s"] for r in runs} if gloo
        else {},
    }
    for r in runs:
        log(summary_line(r, gloo))
    if a.plot:
        try:
            write_plot(a.plot, report)
            log("plot written to %s" % a.plot)
        except (Unavailable, RuntimeError) as e:
            log(str(e))
            return 1
    if a.json == "-":
        print(json.dumps(report), flush=True)
    elif a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
            f.write("\n")
    return 0 if all(r["replicas_agree"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
