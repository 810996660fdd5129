#!/usr/bin/python3
"""Run one allreduce measurement across an existing testbed's namespaces (tools/testbed) and
print one line of JSON. `inagg bench allreduce --testbed N` does the same in one command (it
builds its own testbed); this driver serves runs on a testbed that is already up (the
tests of tools/testbed, loss switched on and off between runs) and the bulk-TCP link check.

  bench/testbed_run.py --testbed NAME --system inagg|mpi|mpi-ring|gloo|linkcheck [options]

  inagg     `inagg switch` in the switch namespace (on the bridge's address), one worker rank
            per host namespace (`inagg bench allreduce --rank R`, its single-rank mode)
  mpi       build/inagg-mpi-bench under mpirun, started in h1, ranks placed one per host by
            Open MPI's rsh launcher through tools/testbed-rsh, TCP only, on the testbed
            subnet only; Open MPI's own choice of allreduce algorithm
  mpi-ring  the same with the ring algorithm forced (coll_tuned_allreduce_algorithm 4)
  gloo      tools/gloo_allreduce.py (PyTorch, gloo backend) one rank per host, TCPStore on h1
  linkcheck bulk TCP streams for a few seconds, hK -> hK+1 on every host at once: the rate
            each link achieves with all links busy (the machine's share of the work included)

Every allreduce result is verified (by the ranks themselves). The time of one iteration is
its slowest rank's; tat_s holds median / min / max over the timed iterations.
goodput_fraction = tensor bytes per rank / median TAT / link rate: 1.0 would be a link
carrying the tensor once at full rate with no headers; ring allreduce cannot pass
n / (2(n-1)). CPU use is sampled from /proc every 0.25 s while the run lasts (percent of one
core; the machine's over all cores): for inagg and gloo over the timed iterations
(the ranks report when they ran), for mpi over the busiest quarter-seconds adding up to
the timed iterations' length (inagg-mpi-bench does not report when it ran).
"""
import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTBED = os.path.join(ROOT, "tools", "testbed")
RSH = os.path.join(ROOT, "tools", "testbed-rsh")
PY = "/usr/bin/python3"  # Debian's, which has python3-torch
CLK = os.sysconf("SC_CLK_TCK")


def log(*a):
    print("testbed_run:", *a, file=sys.stderr, flush=True)


def testbed_info(name):
    out = subprocess.run([TESTBED, "show", name, "--json"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"testbed_run: {out.stderr.strip()}")
    return json.loads(out.stdout)


def texec(name, host, argv, **kw):
    """Popen of argv in a testbed host; its own session so the whole group can be killed."""
    return subprocess.Popen([TESTBED, "exec", name, host, "--"] + argv,
                            start_new_session=True, **kw)


def kill_all(procs):
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.time() + 3
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


# ---- CPU sampling ---------------------------------------------------------------------------

class Sampler(threading.Thread):
    """Every `period` s: CPU ticks of all processes in each namespace, and the machine's."""

    def __init__(self, ns_names, period=0.25):
        super().__init__(daemon=True)
        self.period = period
        self.ino = {}
        for ns in ns_names:
            try:
                self.ino[os.stat(f"/run/netns/{ns}").st_ino] = ns
            except OSError:
                pass
        self.samples = []  # (t, {ns: ticks}, busy, total)
        self.stop_ev = threading.Event()

    def sample(self):
        ticks = {ns: 0 for ns in self.ino.values()}
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                ino = os.stat(f"/proc/{pid}/ns/net").st_ino
                ns = self.ino.get(ino)
                if ns is None:
                    continue
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                ticks[ns] += int(fields[11]) + int(fields[12])  # utime + stime
            except (OSError, IndexError, ValueError):
                continue
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        idle = v[3] + v[4]
        return (time.time(), ticks, sum(v) - idle, sum(v), v[5] + v[6])

    def run(self):
        while not self.stop_ev.is_set():
            self.samples.append(self.sample())
            self.stop_ev.wait(self.period)

    def stop(self):
        self.stop_ev.set()
        self.join()
        self.samples.append(self.sample())

    def intervals(self):
        """Per interval: (t0, t1, {ns: % of a core}, machine % of all cores, irq+softirq %)."""
        out = []
        ncpu = os.cpu_count() or 1
        for a, b in zip(self.samples, self.samples[1:]):
            dt = b[0] - a[0]
            if dt <= 0:
                continue
            per = {ns: max(0.0, (b[1][ns] - a[1][ns]) / CLK / dt * 100) for ns in b[1]}
            tot = b[3] - a[3]
            mach = (b[2] - a[2]) / tot * 100 if tot > 0 else 0.0
            soft = (b[4] - a[4]) / tot * 100 if tot > 0 else 0.0
            out.append((a[0], b[0], per, mach, soft))
        return out

    def summary(self, hosts, switch, window=None, busiest_s=None):
        iv = self.intervals()
        if window:
            t0, t1 = window
            sel = [x for x in iv if x[0] >= t0 - 0.05 and x[1] <= t1 + 0.05]
            if not sel:  # a window shorter than one interval
                sel = [x for x in iv if x[1] > t0 and x[0] < t1]
        else:
            k = max(1, int(round((busiest_s or 1.0) / self.period)))
            sel = sorted(iv, key=lambda x: -sum(x[2][h] for h in hosts))[:k]
        if not sel:
            return None

        def mean(f):
            return round(statistics.mean(f(x) for x in sel), 1)
        return {
            "hosts_max_pct": mean(lambda x: max(x[2][h] for h in hosts)),
            "hosts_mean_pct": mean(lambda x: statistics.mean(x[2][h] for h in hosts)),
            "switch_pct": mean(lambda x: x[2][switch]),
            "machine_pct": mean(lambda x: x[3]),
            "machine_softirq_pct": mean(lambda x: x[4]),
            "seconds": round(sum(x[1] - x[0] for x in sel), 2),
        }


# ---- the systems ----------------------------------------------------------------------------

def collect(procs, timeout, what):
    """Wait for every process (bounded); return their stdouts; raise on any failure."""
    deadline = time.time() + timeout
    outs = []
    try:
        for p in procs:
            left = deadline - time.time()
            out, err = p.communicate(timeout=max(0.1, left))
            if p.returncode != 0:
                raise RuntimeError(f"{what}: a process exited with {p.returncode}: "
                                   f"{(err or '').strip()[-800:]}")
            outs.append(out)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{what}: no result within {timeout:.0f} s")
    finally:
        kill_all(procs)
    return outs


def json_lines(text):
    res = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            res.append(json.loads(line))
    return res


def per_iter_max(reports):
    iters = len(reports[0]["times_s"])
    return [max(r["times_s"][i] for r in reports) for i in range(iters)]


def run_inagg(a, tb, hosts, sampler):
    inagg = os.path.join(ROOT, "build", "inagg")
    if not os.path.exists(inagg):
        raise RuntimeError("build/inagg is missing: run make first")
    sw = tb["switch"]
    swps = []
    port = a.port
    if tb.get("fabric") == "inagg":
        # the fabric's own switch (inagg switch --l2) aggregates; it runs until `down`
        port = tb["fabric_port"]
    else:
        r, w = os.pipe()
        swp = texec(a.testbed, "sw", [os.path.join(ROOT, "build", "inagg"), "switch",
                                      "--listen", f"{sw['addr']}:{a.port}", "--threads",
                                      str(a.switch_threads), "--ready-fd", str(w)],
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                    pass_fds=(w,))
        swps.append(swp)
        os.close(w)
    try:
        if swps:
            ready = b""
            t_end = time.time() + 10
            while not ready.endswith(b"\n") and time.time() < t_end:
                chunk = os.read(r, 64)
                if not chunk:
                    break
                ready += chunk
            os.close(r)
            if not ready.endswith(b"\n"):
                raise RuntimeError("inagg switch did not start: " +
                                   (swps[0].stderr.read() or "")[-500:])
        job = f"tb{os.getpid()}"
        common = ["--switch", f"{sw['addr']}:{port}", "--job", job, "--world", str(len(hosts)),
                  "--elems", str(a.elems), "--dtype", a.dtype, "--iters", str(a.iters),
                  "--warmup", str(a.warmup), "--packet-elems", str(a.packet_elems),
                  "--window", str(a.window), "--seed", str(a.seed), "--rto-max-us", "500000"]
        if a.rto_min_us:
            common += ["--rto-min-us", str(a.rto_min_us)]
        if a.protocol != "switchml":
            common += ["--protocol", a.protocol]
        procs = [texec(a.testbed, h["name"],
                       [inagg, "bench", "allreduce", "--rank", str(i)] + common,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for i, h in enumerate(hosts)]
        outs = collect(procs, a.timeout, "inagg")
    finally:
        kill_all(swps)
    reps = [json_lines(o)[-1] for o in outs]
    times = per_iter_max(reps)
    window = (min(x["t_start"] for x in reps), max(x["t_end"] for x in reps))
    return {
        "verified": all(x["verified"] for x in reps),
        "checksum": reps[0]["checksum"],
        "checksums_agree": len({x["checksum"] for x in reps}) == 1,
        "times_s": times,
        "retransmissions": sum(x["retransmissions"] for x in reps),
        "packets_sent": sum(x["packets_sent"] for x in reps),
        "packet_elems": a.packet_elems, "window": a.window, "rto_min_us": a.rto_min_us,
        "worker_cpu_s": round(max(x["cpu_s"] for x in reps), 3),
        "cpu_window": window,
    }


def run_mpi(a, tb, hosts, sampler, ring):
    subnet = tb["subnet"]
    argv = ["env", f"INAGG_TESTBED={a.testbed}", "OMPI_ALLOW_RUN_AS_ROOT=1",
            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", "mpirun", "--allow-run-as-root",
            "--mca", "plm_rsh_agent", RSH,
            "--host", ",".join(h["addr"] for h in hosts), "-np", str(len(hosts)),
            "--map-by", "node", "--bind-to", "none",
            "--mca", "pml", "ob1", "--mca", "btl", "tcp,self",
            "--mca", "btl_tcp_if_include", subnet, "--mca", "oob_tcp_if_include", subnet,
            "--mca", "mpi_yield_when_idle", "1"]
    if ring:
        argv += ["--mca", "coll_tuned_use_dynamic_rules", "1",
                 "--mca", "coll_tuned_allreduce_algorithm", "4"]
    argv += [os.path.join(ROOT, "build", "inagg-mpi-bench"), "--elems", str(a.elems),
             "--dtype", a.dtype, "--iters", str(a.iters), "--warmup", str(a.warmup),
             "--seed", str(a.seed)]
    if a.mpi_mode != "bench":
        argv += ["--mode", a.mpi_mode]
    p = texec(a.testbed, hosts[0]["name"], argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
              text=True)
    out = collect([p], a.timeout, "mpi-ring" if ring else "mpi")[0]
    rep = json_lines(out)[-1]
    med = rep["tat_ms"]["median"] / 1e3
    return {
        "verified": rep["verified"],
        "tat_from_report": True,
        "tat_s_report": {"median": med, "min": rep["tat_ms"]["min"] / 1e3,
                         "max": rep["tat_ms"]["max"] / 1e3},
        "algorithm": "ring (forced)" if ring else "Open MPI default (tuned)",
        **({"latency_us": rep["latency_us"]} if "latency_us" in rep else {}),
        "cpu_busiest_s": a.iters * med,
    }


def run_gloo(a, tb, hosts, sampler):
    master = f"{hosts[0]['addr']}:{a.port + 100}"
    procs = [texec(a.testbed, h["name"],
                   [PY, os.path.join(ROOT, "tools", "gloo_allreduce.py"), "--rank", str(i),
                    "--world", str(len(hosts)), "--master", master, "--ifname", tb["iface"],
                    "--elems", str(a.elems), "--dtype", a.dtype, "--iters", str(a.iters),
                    "--warmup", str(a.warmup), "--seed", str(a.seed),
                    "--timeout-s", str(int(a.timeout))],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i, h in enumerate(hosts)]
    outs = collect(procs, a.timeout, "gloo")
    reps = [json_lines(o)[-1] for o in outs]
    return {
        "verified": all(x["verified"] for x in reps),
        "checksum": reps[0]["checksum"],
        "times_s": per_iter_max(reps),
        "cpu_window": (min(x["t_start"] for x in reps), max(x["t_end"] for x in reps)),
    }


def run_linkcheck(a, tb, hosts, sampler):
    n = len(hosts)
    if n < 2:
        raise RuntimeError("linkcheck needs 2 hosts or more")
    me = os.path.abspath(__file__)
    port = a.port + 200
    recv = [texec(a.testbed, h["name"], [PY, me, "--bulk-recv", f"{h['addr']}:{port}",
                                         "--bulk-seconds", str(a.bulk_seconds)],
                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for h in hosts]
    time.sleep(0.5)
    t0 = time.time()
    send = [texec(a.testbed, h["name"], [PY, me, "--bulk-send",
                                         f"{hosts[(i + 1) % n]['addr']}:{port}",
                                         "--bulk-seconds", str(a.bulk_seconds)],
                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for i, h in enumerate(hosts)]
    collect(send, a.bulk_seconds + 30, "linkcheck send")
    outs = collect(recv, 30, "linkcheck receive")
    mbps = [json_lines(o)[-1]["mbit_s"] for o in outs]
    return {"verified": True, "stream_mbit_s": mbps, "cpu_window": (t0 + 0.5, t0 + a.bulk_seconds)}


def bulk(mode, addr, secs):
    host, port = addr.rsplit(":", 1)
    if mode == "recv":
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, int(port)))
        s.listen(1)
        s.settimeout(secs + 20)
        c, _ = s.accept()
        c.settimeout(secs + 20)
        n, t0, skip = 0, None, None
        while True:
            b = c.recv(1 << 20)
            if not b:
                break
            now = time.time()
            if t0 is None:
                t0 = now
            if skip is None and now - t0 >= 0.5:  # leave out slow start
                skip, n = now, 0
            n += len(b)
        dt = time.time() - (skip or t0)
        print(json.dumps({"mbit_s": round(n * 8 / dt / 1e6, 2), "seconds": round(dt, 2)}))
    else:
        c = socket.create_connection((host, int(port)), timeout=10)
        buf = b"\0" * (1 << 20)
        end = time.time() + secs
        while time.time() < end:
            c.sendall(buf)
        c.close()
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 2)[2])
    ap.add_argument("--testbed", help="testbed name (tools/testbed up N --name NAME)")
    ap.add_argument("--system", choices=["inagg", "mpi", "mpi-ring", "gloo", "linkcheck"])
    ap.add_argument("--hosts", type=int, default=0, help="use h1..hK only (default all)")
    ap.add_argument("--elems", type=int, default=4000000)
    ap.add_argument("--dtype", choices=["int32", "float32"], default="int32")
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--packet-elems", type=int, default=0,
                    help="inagg elements per packet (default 0: the largest power of two whose "
                         "datagram fits one frame of the testbed's MTU: 2048 at 9000, 256 at "
                         "1500; the library refuses one the path would fragment)")
    ap.add_argument("--window", type=int, default=0,
                    help="inagg slots in flight per worker (default 0: sized to the link, "
                         "3 ms of the link rate in packets, 4..64; SwitchML sizes its pool "
                         "to the bandwidth-delay product the same way)")
    ap.add_argument("--rto-min-us", type=int, default=20000,
                    help="inagg retransmission timeout floor (default 20000: a window queued "
                         "behind a slow link delays its own acknowledgements by ms; 0: the "
                         "library's floor)")
    ap.add_argument("--switch-threads", type=int, default=2)
    ap.add_argument("--mpi-mode", choices=["bench", "latency"], default="bench",
                    help="inagg-mpi-bench --mode (latency: every iteration verified, p50/p99)")
    ap.add_argument("--protocol", choices=["switchml", "p4sgd"], default="switchml",
                    help="inagg's slot protocol (p4sgd: one packet per slot, for small tensors)")
    ap.add_argument("--port", type=int, default=7000)
    ap.add_argument("--timeout", type=float, default=0, help="seconds (default from the size)")
    ap.add_argument("--bulk-seconds", type=float, default=4.0)
    ap.add_argument("--tag", default="", help="copied into the report")
    ap.add_argument("--bulk-recv", help=argparse.SUPPRESS)
    ap.add_argument("--bulk-send", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.bulk_recv:
        return bulk("recv", a.bulk_recv, a.bulk_seconds)
    if a.bulk_send:
        return bulk("send", a.bulk_send, a.bulk_seconds)
    if not a.testbed or not a.system:
        ap.error("--testbed and --system are required")
    tb = testbed_info(a.testbed)
    hosts = tb["hosts"][:a.hosts] if a.hosts else tb["hosts"]
    bps = tb["link_rate_bps"]
    nbytes = a.elems * 4
    if not a.timeout:
        per = nbytes * 8 * 3 / bps if bps else 2.0
        a.timeout = 60 + (a.warmup + a.iters) * per
    if a.packet_elems == 0:  # IPv4 + UDP (28), header and dataplane MAC (64) in the MTU
        a.packet_elems = 1
        while (2 * a.packet_elems) * 4 + 92 <= tb["mtu"]:
            a.packet_elems *= 2
    if a.window == 0:
        pkt = a.packet_elems * 4 + 32
        a.window = 16 if not bps else max(4, min(64, -(-int(bps / 8 * 0.003) // pkt)))
    host_ns = [h["netns"] for h in hosts]
    sampler = Sampler(host_ns + [tb["switch"]["netns"]])
    # how busy the machine is without this run (other users of a shared box): 1 s before it
    s0 = sampler.sample()
    time.sleep(1.0)
    s1 = sampler.sample()
    before = round((s1[2] - s0[2]) / max(1, s1[3] - s0[3]) * 100, 1)
    sampler.start()
    t0 = time.time()
    try:
        if a.system == "inagg":
            res = run_inagg(a, tb, hosts, sampler)
        elif a.system in ("mpi", "mpi-ring"):
            res = run_mpi(a, tb, hosts, sampler, a.system == "mpi-ring")
        elif a.system == "gloo":
            res = run_gloo(a, tb, hosts, sampler)
        else:
            res = run_linkcheck(a, tb, hosts, sampler)
    except RuntimeError as e:
        sampler.stop()
        log(str(e))
        print(json.dumps({"system": a.system, "testbed": a.testbed, "error": str(e),
                          "tag": a.tag}))
        return 1
    finally:
        if sampler.is_alive():
            sampler.stop()
    wall = time.time() - t0
    rep = {"system": a.system, "tag": a.tag, "testbed": a.testbed, "hosts": len(hosts),
           "link_rate_bps": bps, "mtu": tb["mtu"], "loss": tb["loss"], "elems": a.elems,
           "dtype": a.dtype, "iters": a.iters, "warmup": a.warmup, "wall_s": round(wall, 2),
           "machine_busy_before_pct": before}
    if "times_s" in res:
        t = res.pop("times_s")
        res["tat_s"] = {"median": statistics.median(t), "min": min(t), "max": max(t)}
        res["times_s"] = [round(x, 6) for x in t]
        srt = sorted(t)
        near = lambda q: srt[min(len(srt) - 1, max(0, int(-(-q * len(srt) // 100)) - 1))]
        res["latency_us"] = {"p50": round(near(50) * 1e6, 1), "p99": round(near(99) * 1e6, 1)}
    elif "tat_s_report" in res:
        res["tat_s"] = res.pop("tat_s_report")
        res.pop("tat_from_report")
    if "tat_s" in res and bps:
        res["goodput_fraction"] = round(nbytes * 8 / res["tat_s"]["median"] / bps, 4)
    if "stream_mbit_s" in res and bps:
        res["stream_fraction_min"] = round(min(res["stream_mbit_s"]) * 1e6 / bps, 4)
    hn = [h["netns"] for h in hosts]
    sn = tb["switch"]["netns"]
    if "cpu_window" in res:
        res["cpu"] = sampler.summary(hn, sn, window=res.pop("cpu_window"))
    else:
        res["cpu"] = sampler.summary(hn, sn, busiest_s=res.pop("cpu_busiest_s", 1.0))
    rep.update(res)
    print(json.dumps(rep), flush=True)
    return 0 if rep.get("verified") else 1


if __name__ == "__main__":
    sys.exit(main())
