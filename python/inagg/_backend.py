"""inagg._backend - the `inagg` torch.distributed backend's Python half: registers the backend,
and for each process group agrees on the switch and the job through the group's store, starts
the embedded switch when none is named, builds the Gloo group that serves the delegated calls
and the C++ ProcessGroupInagg (python/inagg/csrc) that sends all_reduce through the switch.
On torch 1.13 that object is the process group itself; on torch 2.x it is a c10d Backend,
registered for "cpu" and "cuda", which torch.distributed wraps in its ProcessGroup
(inagg_backend_of() finds it again).

Which switch (first that applies):
  1. Options(switch=...) passed as init_process_group(..., pg_options=Options(...))
  2. $INAGG_SWITCH ("HOST:PORT", or a comma-separated list of shards)
  3. the switch the world group of this process already uses (new_group reuses it)
  4. rank 0 of the group starts `inagg switch` (the embedded switch) and publishes its address
     in the store under "inagg/switch"; the others read it there.
Every group gets its own job on the switch; its name comes from the group's rank 0 through
the store ("inagg/job").
"""
import atexit
import datetime
import os
import shutil
import signal
import subprocess
import sys
import threading
import uuid
import weakref

import torch.distributed as dist

import inagg
from inagg import _torch_ext

_GLOO_PREFIX = "inagg-gloo/"
_FALLBACK_PREFIX = "inagg-fallback/"  # the fall-back's own Gloo group
_WORLD_SWITCH = None           # the address the first group of this process used
_EMBEDDED = []                 # the switch processes this process started
_GROUPS = weakref.WeakSet()    # live ProcessGroupInagg objects, shut down at exit
_LOCK = threading.Lock()


class Options:
    """Backend options: init_process_group("inagg", pg_options=inagg.torch.Options(...)) (on
    torch versions whose register_backend has extended_api; else use the environment).

    switch      "HOST:PORT" (default $INAGG_SWITCH, else the embedded switch)
    compress    None/"none", "fp16", "zfp:rate=8", ... (default $INAGG_COMPRESS)
    protocol    "switchml" or "p4sgd" (default $INAGG_PROTOCOL, else switchml)
    float_mode  "fixed" or "native" (default $INAGG_FLOAT_MODE, else fixed)
    slots, threads, packet_elems   the job's window, engine threads, packet size (0: default)
    error_feedback  with a lossy compress: keep what the codec dropped of each tensor and send
                it with that tensor's next all_reduce (one residual per tensor storage: DDP's
                buckets; default $INAGG_ERROR_FEEDBACK, else off)
    fallback    when no switch answers, finish the all_reduce calls in flight over Gloo and go
                on there (default $INAGG_TORCH_FALLBACK, else on; off: the call fails)
    retry_ms    fallen back, how often the ranks probe the switch to return to it (default
                $INAGG_TORCH_RETRY_MS, else 5000; 0: never)
    """

    def __init__(self, switch=None, compress=None, protocol=None, float_mode=None, slots=0,
                 threads=0, packet_elems=0, error_feedback=None, fallback=None, retry_ms=None):
        self.switch = switch
        self.compress = compress
        self.error_feedback = error_feedback
        self.protocol = protocol
        self.float_mode = float_mode
        self.slots = slots
        self.threads = threads
        self.packet_elems = packet_elems
        self.fallback = fallback
        self.retry_ms = retry_ms


def _switch_binary():
    """`inagg` for the embedded switch: $INAGG_BINARY, the copy `pip install ./python`
    bundles (inagg/bin/inagg), the source tree's build/inagg, the loaded library's directory,
    bin/ beside its lib/ (/usr/lib/<triplet>/ -> /usr/bin too), then PATH."""
    here = os.path.dirname(os.path.abspath(__file__))
    libdir = os.path.dirname(os.path.realpath(inagg.library()))
    cands = [os.environ.get("INAGG_BINARY"),
             os.path.join(here, "bin", "inagg"),
             os.path.normpath(os.path.join(here, os.pardir, os.pardir, "build", "inagg")),
             os.path.join(libdir, "inagg"),
             os.path.normpath(os.path.join(libdir, os.pardir, "bin", "inagg")),
             os.path.normpath(os.path.join(libdir, os.pardir, os.pardir, "bin", "inagg")),
             shutil.which("inagg")]
    for c in cands:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    raise RuntimeError("inagg: no switch named (Options(switch=...) or $INAGG_SWITCH) and no "
                       "`inagg` binary to start one (tried %s; install the package with the "
                       "binary built (make, then pip install ./python), put `inagg` on PATH, or "
                       "set INAGG_BINARY)" % ", ".join(c for c in cands if c))


def _die_with_parent():
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _advertised_host():
    """The host the other ranks reach the embedded switch at."""
    host = os.environ.get("INAGG_SWITCH_HOST") or os.environ.get("MASTER_ADDR") or "127.0.0.1"
    return "127.0.0.1" if host == "localhost" else host


def _start_embedded_switch(timeout_ms):
    """Start `inagg switch` as a child of this process (it dies with it) and return its
    address once it has bound its port (it writes the port to a pipe: no sleep)."""
    host = _advertised_host()
    listen = "127.0.0.1:0" if host.startswith("127.") else "0.0.0.0:0"
    binary = _switch_binary()
    r, w = os.pipe()
    cmd = [binary, "switch", "--listen", listen, "--ready-fd", str(w),
           "--worker-timeout", str(max(1000, min(timeout_ms, 2**31 - 1)))]
    proc = subprocess.Popen(cmd, pass_fds=(w,), stdout=subprocess.DEVNULL,
                            stderr=None if os.environ.get("INAGG_VERBOSE") else
                            subprocess.DEVNULL, preexec_fn=_die_with_parent,
                            start_new_session=True)
    os.close(w)
    with os.fdopen(r) as f:
        line = f.readline().strip()  # EOF if the switch exits: never blocks past its end
    if not line.isdigit():
        proc.kill()
        proc.wait()
        raise RuntimeError("inagg: the embedded switch (%s) did not start" % " ".join(cmd))
    _EMBEDDED.append(proc)
    addr = "%s:%s" % (host, line)
    if os.environ.get("INAGG_VERBOSE"):
        print("inagg-torch: embedded switch at %s (pid %d)" % (addr, proc.pid), file=sys.stderr)
    return addr


def _store_get(store, key):
    return store.get(key).decode()


def _agree(store, rank, key, make):
    """Rank 0 makes the value and sets it; every rank returns it (store.get waits, bounded
    by the store's timeout)."""
    if rank == 0:
        store.set(key, make())
    return _store_get(store, key)


def _opt(options, name, env, default=None):
    v = getattr(options, name, None) if options is not None else None
    if v in (None, ""):
        v = os.environ.get(env) or default
    return v


def _flag(options, name, env, default=False):
    """An on/off option: the Options field when set, else $env ("1"/"0"), else default."""
    v = getattr(options, name, None) if options is not None else None
    if v is None:
        e = os.environ.get(env, "")
        if e not in ("", "0", "1"):
            raise ValueError("inagg: $%s must be 0 or 1, not %r" % (env, e))
        v = default if e == "" else e == "1"
    return bool(v)


def _millis(options, name, env, default):
    """A period in ms (>= 0): the Options field when set, else $env, else default."""
    v = getattr(options, name, None) if options is not None else None
    if v is None:
        e = os.environ.get(env, "")
        if e == "":
            return default
        if not e.isdigit():
            raise ValueError("inagg: $%s must be milliseconds (0 or more), not %r" % (env, e))
        v = int(e)
    if int(v) < 0 or int(v) > 2**32 - 1:
        raise ValueError("inagg: %s must be 0..%d ms, not %r" % (name, 2**32 - 1, v))
    return int(v)


def _create(store, rank, size, timeout, group_id, options):
    global _WORLD_SWITCH
    ext = _torch_ext.load()
    if options is not None and not isinstance(options, Options):
        raise TypeError("inagg: pg_options must be inagg.torch.Options, not %s"
                        % type(options).__name__)
    timeout_ms = int(timeout.total_seconds() * 1000) if isinstance(
        timeout, datetime.timedelta) else int(timeout)
    timeout_ms = max(1000, min(timeout_ms, 2**32 - 1))
    # A restarted torchrun attempt may get the store its failed attempt wrote (torch 2.x's
    # agent store): keys of their own per attempt, or the new group reads the old switch, job
    # and Gloo addresses
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT")
    if attempt:
        store = dist.PrefixStore("inagg-attempt-%s/" % attempt, store)
    gloo = dist.ProcessGroupGloo(dist.PrefixStore(_GLOO_PREFIX, store), rank, size, timeout)
    fallback = _flag(options, "fallback", "INAGG_TORCH_FALLBACK", default=True)
    retry_ms = _millis(options, "retry_ms", "INAGG_TORCH_RETRY_MS", 5000)
    # the fall-back's calls in one order on every rank, whatever is delegated to `gloo`
    fallback_group = dist.ProcessGroupGloo(dist.PrefixStore(_FALLBACK_PREFIX, store), rank, size,
                                           timeout) if fallback else gloo
    named = _opt(options, "switch", "INAGG_SWITCH")
    with _LOCK:
        known = named or _WORLD_SWITCH
    if known:
        switch = known
    else:
        switch = _agree(store, rank, "inagg/switch", lambda: _start_embedded_switch(timeout_ms))
    with _LOCK:
        if _WORLD_SWITCH is None and not named:
            _WORLD_SWITCH = switch
    job = _agree(store, rank, "inagg/job",
                 lambda: "torch-%s-%s" % (group_id or "g", uuid.uuid4().hex[:12]))
    cfg = {
        "switch": switch, "job": job, "timeout_ms": timeout_ms,
        "compress": _opt(options, "compress", "INAGG_COMPRESS", "none"),
        "error_feedback": _flag(options, "error_feedback", "INAGG_ERROR_FEEDBACK"),
        "protocol": _opt(options, "protocol", "INAGG_PROTOCOL", "switchml"),
        "float_mode": _opt(options, "float_mode", "INAGG_FLOAT_MODE", "fixed"),
        "slots": int(_opt(options, "slots", "INAGG_SLOTS", 0) or 0),
        "threads": int(_opt(options, "threads", "INAGG_THREADS", 0) or 0),
        "packet_elems": int(_opt(options, "packet_elems", "INAGG_PACKET_ELEMS", 0) or 0),
        "fallback": fallback, "retry_ms": retry_ms,
    }
    pg = ext.ProcessGroupInagg(rank, size, gloo, fallback_group, cfg)
    _GROUPS.add(pg)
    return pg


def _create_extended(backend_opts, pg_options):
    return _create(backend_opts.store, backend_opts.group_rank, backend_opts.group_size,
                   backend_opts.timeout, getattr(backend_opts, "group_id", None), pg_options)


def _create_plain(store, rank, size, timeout):
    return _create(store, rank, size, timeout, None, None)


def inagg_backend_of(pg):
    """The ProcessGroupInagg behind `pg` (None if it has none): `pg` itself on torch 1.13,
    the Backend torch 2.x's ProcessGroup dispatches CPU tensors to."""
    if pg is None:
        return None
    if pg in _GROUPS:
        return pg
    get = getattr(pg, "_get_backend", None)
    if get is None:
        return None
    import torch
    try:
        backend = get(torch.device("cpu"))
    except RuntimeError:  # a group with no CPU backend (NCCL only)
        return None
    return backend if backend in _GROUPS else None


def register():
    """Register "inagg" with torch.distributed (once)."""
    if "INAGG" in getattr(dist.Backend, "_plugins", {}) or hasattr(dist.Backend, "INAGG"):
        return
    import inspect
    _leave_on_destroy()
    _monitored_barrier_via_gloo()
    params = inspect.signature(dist.Backend.register_backend).parameters
    if "devices" in params:  # torch 2.x: a Backend, for both devices
        dist.Backend.register_backend("inagg", _create_extended, extended_api=True,
                                      devices=["cpu", "cuda"])
    elif "extended_api" in params:  # torch 1.13: group name and pg_options reach us
        dist.Backend.register_backend("inagg", _create_extended, extended_api=True)
    else:
        dist.Backend.register_backend("inagg", _create_plain)


def _leave_on_destroy():
    """destroy_process_group leaves the switch job at once (inagg_comm_destroy), even while
    a DDP model still holds the group: wrap torch's function to shut the destroyed inagg
    groups down after it ran."""
    c10d = dist.distributed_c10d
    original = c10d.destroy_process_group
    if getattr(original, "_inagg_leaves_jobs", False):
        return

    def destroy_process_group(group=None):
        world = dist.group.WORLD
        everything = group is None or group is world
        mine = inagg_backend_of(group)
        doomed = [pg for pg in list(_GROUPS) if everything or pg is mine]
        original(group)
        for pg in doomed:
            pg.shutdown()

    destroy_process_group.__doc__ = original.__doc__
    destroy_process_group._inagg_leaves_jobs = True
    c10d.destroy_process_group = destroy_process_group
    dist.destroy_process_group = destroy_process_group


def _monitored_barrier_via_gloo():
    """torch's monitored_barrier refuses every backend but Gloo by name; on an inagg group it
    is served by the group's Gloo (ProcessGroupInagg::monitoredBarrier, counted)."""
    c10d = dist.distributed_c10d
    original = c10d.monitored_barrier
    if getattr(original, "_inagg_serves", False):
        return

    def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
        pg = group if group is not None else dist.group.WORLD
        if inagg_backend_of(pg) is None or c10d._rank_not_in_group(group):
            return original(group, timeout, wait_all_ranks)
        if timeout is None:
            timeout = c10d.default_pg_timeout
        return pg.monitored_barrier(timeout, wait_all_ranks=wait_all_ranks)

    monitored_barrier.__doc__ = original.__doc__
    monitored_barrier._inagg_serves = True
    c10d.monitored_barrier = monitored_barrier
    dist.monitored_barrier = monitored_barrier


def backend_stats(group=None):
    """How the calls of an inagg process group went: {"switch": n all_reduce through the
    switch, "gloo": n calls passed to Gloo, "gloo_by_op": {name: n}, "switch_address",
    "job", "wire": libinagg's packet and byte counters, "error_feedback": {"tensors": with a
    residual, "untracked": calls sent without one}, "fallback": {"enabled", "on_switch": false
    while fallen back to Gloo, "fallbacks", "returns", "all_reduce_on_gloo": calls run over
    Gloo while fallen back, "salvaged": calls in flight finished by the salvage,
    "chunks_handed_on", "chunks_reduced", "stall_ms_total", "last_cause"}, "handoffs":
    {"progress_wakes": times the group's progress thread woke to a queued call or a completion,
    "futures_on_completers": Futures completed on a completer thread (a synchronous all_reduce
    on torch 2.x, waited for by its caller, adds to neither)}}."""
    group = group if group is not None else dist.group.WORLD
    if group is None:
        raise RuntimeError("inagg: no process group (call init_process_group first)")
    pg = inagg_backend_of(group)
    if pg is None:
        raise TypeError("inagg: %r is not an inagg process group" % (group,))
    by_op = dict(pg.delegated_calls())
    return {"switch": pg.switch_calls(), "gloo": sum(by_op.values()), "gloo_by_op": by_op,
            "switch_address": pg.switch_address, "job": pg.job, "wire": pg.wire_stats(),
            "error_feedback": dict(zip(("tensors", "untracked"), pg.error_feedback())),
            "fallback": dict(pg.fallback_stats()), "handoffs": dict(pg.handoffs())}


def _at_exit():
    for pg in list(_GROUPS):
        try:
            pg.shutdown()
        except Exception:  # exiting: nothing left to report to
            pass
    for proc in _EMBEDDED:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


atexit.register(_at_exit)
