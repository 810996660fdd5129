#!/usr/bin/env python3
"""torch_backend_cases.py - cases of the `inagg` torch.distributed backend, for
tests/cli_torch.sh: each spawns its ranks on loopback, checks inside the ranks (assert) and
prints one JSON line from rank 0 on success.

    torch_backend_cases.py CASE WORLD INIT(tcp|file|env) [TIMEOUT_S]

collectives  all_reduce SUM/AVG on float32, int32 (exact), float16/bfloat16/float64
             (through float32), sync and async (Work.wait, get_future), a non-contiguous
             tensor; MIN/MAX/PRODUCT, broadcast, all_gather, reduce_scatter, barrier,
             send/recv delegated; new_group of a subset; the counters of every call
compressed   with $INAGG_COMPRESS (or $CASE_PG_COMPRESS: pg_options=Options(compress=)) set: the result within the codec's bound and fewer bytes on
             the wire than float32 needs; with $INAGG_ERROR_FEEDBACK=1 the same input
             reduced twice through one tensor differs by the first call's residual (equal
             without), and the group counts a residual per tensor
killed       the last rank exits after init; every other rank's all_reduce raises a
             RuntimeError within the process group's timeout (TIMEOUT_S)
stalled      the same with the last rank alive but silent
switch       the same with rank 0's embedded switch killed (run with INAGG_TORCH_FALLBACK=0:
             the error names the lost switch)
fallback     on the switch $INAGG_SWITCH, which the caller kills (SIGKILL) once rank 0 wrote
             CASE_KILL_AT to $CASE_PROGRESS, then creates $CASE_PROGRESS.killed: $CASE_OPS
             rounds of an int32 and a float32 all_reduce in flight together (async_op), every
             element of every result checked (integer-valued, so exact on any path). In round
             CASE_KILL_AT the last rank waits for the kill before it calls: the other ranks'
             calls are in flight then, and it is idle; its backend must fall back (and finish
             their calls with them) before it calls again. The counters say how the calls went
             ($CASE_WANT_RETURN=1: the job must be back on the switch at the end)
torch2       (torch 2.x) what a 2.x program calls, each checked against a Gloo group of the
             same ranks (new_group(backend="gloo")): get_future().then() chained on the
             backend's Work, all_reduce_coalesced, DDP with fp16_compress_hook,
             bf16_compress_hook and powerSGD_hook, DDP(static_graph=True),
             ZeroRedundancyOptimizer, torch.compile(DDP(model)) and
             DDP(torch.compile(model)) with inductor (DDPOptimizer's graphs counted, each
             gradient bucket's all_reduce counted through the switch), FSDP,
             torch.distributed.checkpoint save/load,
             barrier(device_ids=), new_subgroups, monitored_barrier
cuda         (a CUDA build of torch 2.x and a GPU; prints {"skipped": why} without) CUDA
             tensors through the switch, staged through pinned host memory: float32/float16/
             non-contiguous, a tensor written on a side stream, async wait then use on the
             caller's stream, get_future().then(); DDP on CUDA against Gloo's (and NCCL's
             when there is a GPU per rank) of the same ranks
"""
import datetime
import json
import os
import socket
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))


def init(rank, world, method, timeout_s):
    import torch.distributed as dist
    import inagg.torch  # noqa: F401  registers "inagg"
    t = datetime.timedelta(seconds=timeout_s)
    opts = None
    if os.environ.get("CASE_PG_COMPRESS"):  # the codec as a backend option, not $INAGG_COMPRESS
        opts = inagg.torch.Options(compress=os.environ["CASE_PG_COMPRESS"])
    if method == "env":
        os.environ.update(RANK=str(rank), WORLD_SIZE=str(world))
        dist.init_process_group("inagg", timeout=t, pg_options=opts)
    else:
        dist.init_process_group("inagg", init_method=method, rank=rank, world_size=world,
                                timeout=t, pg_options=opts)


def case_collectives(rank, world):
    import torch
    import torch.distributed as dist
    import inagg.torch
    R = dist.ReduceOp
    expect_switch, expect_gloo = 0, {}

    def via_switch(n=1):
        nonlocal expect_switch
        expect_switch += n

    def via_gloo(op, n=1):
        expect_gloo[op] = expect_gloo.get(op, 0) + n

    tri = world * (world + 1) / 2  # sum over ranks of (rank + 1)
    t = torch.full((10000,), float(rank + 1))
    dist.all_reduce(t)
    via_switch()
    assert torch.allclose(t, torch.full_like(t, tri), rtol=1e-6), t[:4]
    if hasattr(R, "AVG"):
        t = torch.full((777,), float(rank + 1))
        dist.all_reduce(t, op=R.AVG)
        via_switch()
        assert torch.allclose(t, torch.full_like(t, tri / world), rtol=1e-6), t[:4]
    # int32 exact, values near the top of the range that float32 could not hold
    big = torch.arange(5000, dtype=torch.int32) + (2 ** 30 // world) - 7 * rank
    want = sum(torch.arange(5000, dtype=torch.int64) + (2 ** 30 // world) - 7 * r
               for r in range(world)).to(torch.int32)
    dist.all_reduce(big)
    via_switch()
    assert torch.equal(big, want), (big[:3], want[:3])
    # narrower and wider floats travel as float32 and come back in their dtype
    for dt, tol in ((torch.float16, 1e-3), (torch.bfloat16, 8e-3), (torch.float64, 1e-6)):
        x = (torch.arange(300, dtype=torch.float64) / 300 + rank).to(dt)
        ref = sum((torch.arange(300, dtype=torch.float64) / 300 + r).to(dt).double()
                  for r in range(world))
        dist.all_reduce(x)
        via_switch()
        assert x.dtype == dt
        err = ((x.double() - ref).abs() / ref.abs().clamp(min=1)).max().item()
        assert err <= tol, (dt, err)
    # non-contiguous: summed through a contiguous copy, written back
    m = torch.full((64, 32), float(rank)).t()
    dist.all_reduce(m)
    via_switch()
    assert torch.allclose(m, torch.full_like(m, world * (world - 1) / 2))
    # async: several in flight, completed by the progress thread from inagg_test
    ts = [torch.full((20000 + i,), float(rank + i)) for i in range(4)]
    works = [dist.all_reduce(x, async_op=True) for x in ts]
    via_switch(4)
    futs = [w.get_future() for w in works[:2]]
    for f in futs:
        f.wait()
    for w in works:
        w.wait()
        assert w.is_completed()
    for i, x in enumerate(ts):
        assert torch.allclose(x, torch.full_like(x, sum(r + i for r in range(world))))
    # delegated to Gloo
    for op, want_fn in ((R.MIN, lambda v: min(v)), (R.MAX, lambda v: max(v)),
                        (R.PRODUCT, lambda v: float(torch.tensor(v).prod()))):
        x = torch.full((5,), float(rank + 2))
        dist.all_reduce(x, op=op)
        via_gloo("all_reduce")
        assert torch.allclose(x, torch.full_like(x, want_fn([r + 2.0 for r in range(world)])))
    x = torch.full((3,), 1.0, dtype=torch.int64)  # int64 is not a switch dtype
    dist.all_reduce(x)
    via_gloo("all_reduce")
    assert torch.equal(x, torch.full((3,), world, dtype=torch.int64))
    b = torch.full((8,), float(rank))
    dist.broadcast(b, src=world - 1)
    via_gloo("broadcast")
    assert torch.equal(b, torch.full((8,), float(world - 1)))
    out = [torch.empty(4) for _ in range(world)]
    dist.all_gather(out, torch.full((4,), float(rank)))
    via_gloo("all_gather")
    assert all(torch.equal(o, torch.full((4,), float(r))) for r, o in enumerate(out))
    dist.barrier()
    via_gloo("barrier")
    if world >= 2:
        if rank == 0:
            dist.send(torch.arange(6.0), dst=1)
            via_gloo("send")
        elif rank == 1:
            y = torch.empty(6)
            dist.recv(y, src=0)
            via_gloo("recv")
            assert torch.equal(y, torch.arange(6.0))
    try:
        red = torch.empty(2)
        dist.reduce_scatter(red, [torch.full((2,), float(rank)) for _ in range(world)])
        via_gloo("reduce_scatter")
    except RuntimeError as e:  # Gloo of this torch has no reduce_scatter: the same error
        assert "reduce_scatter" in str(e), e
        via_gloo("reduce_scatter")
    st = inagg.torch.backend_stats()
    assert st["switch"] == expect_switch, (st, expect_switch)
    assert st["gloo_by_op"] == expect_gloo, (st["gloo_by_op"], expect_gloo)
    # a subset: its own switch job
    sub = [0, world - 1] if world > 2 else [0]
    g = dist.new_group(sub)
    if rank in sub:
        x = torch.full((100,), float(rank))
        dist.all_reduce(x, group=g)
        assert torch.allclose(x, torch.full_like(x, float(sum(sub))))
        gs = inagg.torch.backend_stats(g)
        assert gs["switch"] == 1 and gs["job"] != st["job"], gs
    # A synchronous all_reduce is its caller's alone: its Future, which nobody asks for, is
    # completed where the Work is (a Future asked for before its call ends goes to a completer
    # thread, as its callbacks may wait for another all_reduce), and on torch 2.x (asyncOp)
    # no other thread wakes for it.
    h0 = st["handoffs"]
    one = torch.ones(1)
    for _ in range(200):
        one.fill_(1.0)
        dist.all_reduce(one)
        assert one.item() == world
    h1 = inagg.torch.backend_stats()["handoffs"]
    handed = h1["futures_on_completers"] - h0["futures_on_completers"]
    woke = h1["progress_wakes"] - h0["progress_wakes"]
    assert handed == 0, ("Futures of synchronous calls handed to completer threads", handed)
    if int(torch.__version__.split(".")[0]) >= 2:
        assert woke <= 20, ("progress-thread wake-ups for 200 synchronous calls", woke)
        _claimed_sync_future(rank, world)
    dist.barrier()
    return {"switch": st["switch"], "gloo": st["gloo"], "gloo_by_op": st["gloo_by_op"],
            "job": st["job"], "switch_address": st["switch_address"]}


def _claimed_sync_future(rank, world):
    """A synchronous call (asyncOp false) wakes no progress thread; when its Future is claimed
    all the same (the c10d op called directly) and waited on, which does not drive the library,
    the claim wakes it. A group without the fall-back, whose idle progress thread sleeps up to
    1 s, shows a missed wake-up as a 1 s stall."""
    import time
    import torch
    import torch.distributed as dist
    import inagg.torch
    g = dist.new_group(backend="inagg", pg_options=inagg.torch.Options(fallback=False))
    t = torch.ones(4)
    worst = 0.0
    for _ in range(5):
        t.fill_(1.0)
        t0 = time.monotonic()
        op = dist.ReduceOp(dist.ReduceOp.SUM).boxed()
        _, work = torch.ops.c10d.allreduce_([t], g.boxed(), op, None, False, -1)
        dist.Work.unbox(work).get_future().wait()
        worst = max(worst, time.monotonic() - t0)
        assert t[0].item() == world, t
    assert worst < 0.5, ("a claimed Future of a synchronous call waited for", worst)
    assert inagg.torch.backend_stats(g)["switch"] == 5


def case_compressed(rank, world):
    import torch
    import torch.distributed as dist
    import inagg.torch
    n = 200000
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(n, generator=g)
    ref = sum(torch.randn(n, generator=torch.Generator().manual_seed(r)) for r in range(world))
    w0 = inagg.torch.backend_stats()["wire"]
    dist.all_reduce(x)
    w1 = inagg.torch.backend_stats()["wire"]
    packets = w1["packets_sent"] - w0["packets_sent"]
    resent = w1["retransmissions"] - w0["retransmissions"]
    # the bytes of first transmissions (a retransmission resends a packet of the same size)
    sent = (w1["bytes_sent"] - w0["bytes_sent"]) * (packets - resent) / packets
    err = (x - ref).abs().max().item()
    rel = err / ref.abs().max().item()
    bound = float(os.environ.get("CASE_REL_BOUND", "0.01"))
    assert rel <= bound, (rel, bound)
    ratio = sent / (4.0 * n)
    assert ratio < float(os.environ.get("CASE_MAX_WIRE_RATIO", "0.75")), ratio
    # Error feedback (INAGG_ERROR_FEEDBACK=1): the same input reduced twice through one
    # tensor's storage differs the second time by what the codec dropped the first time;
    # without, the codec is deterministic and both results are equal.
    ef = os.environ.get("INAGG_ERROR_FEEDBACK") == "1"
    z, y = torch.empty(n), torch.randn(n, generator=torch.Generator().manual_seed(7 + rank))
    z.copy_(y)
    dist.all_reduce(z)
    first = z.clone()
    z.copy_(y)
    dist.all_reduce(z)
    moved = (z - first).abs().max().item()
    assert (moved > 0) == ef, ("error feedback", ef, "second result moved by", moved)
    fb = inagg.torch.backend_stats()["error_feedback"]
    assert fb == ({"tensors": 2, "untracked": 0} if ef else {"tensors": 0, "untracked": 0}), fb
    return {"compress": os.environ.get("INAGG_COMPRESS") or os.environ.get("CASE_PG_COMPRESS"),
            "max_rel_err": rel, "error_feedback": ef, "feedback_moved": moved,
            "wire_bytes_per_float32_byte": round(ratio, 4)}


def case_failure(rank, world, timeout_s, how):
    """how: killed (the last rank exits), stalled (it stops calling, alive), switch (rank 0's
    embedded switch is killed)."""
    import torch
    import torch.distributed as dist
    from inagg import _backend
    x = torch.ones(1000)
    dist.all_reduce(x)  # everyone is there
    dist.barrier()
    if how == "killed" and rank == world - 1:
        os._exit(0)
    if how == "stalled" and rank == world - 1:
        time.sleep(timeout_s + 8)
        os._exit(0)
    if how == "switch" and rank == 0:
        for proc in _backend._EMBEDDED:
            proc.kill()
            proc.wait()
    t0 = time.monotonic()
    try:
        for _ in range(100000):
            dist.all_reduce(x)
            if time.monotonic() - t0 > timeout_s + 10:
                break
        raise AssertionError("all_reduce went on for %.1f s" % (time.monotonic() - t0))
    except RuntimeError as e:
        took = time.monotonic() - t0
        msg = str(e)
    assert took <= timeout_s + 2.5, (took, msg)
    assert "inagg" in msg, msg
    return {"how": how, "raised_after_s": round(took, 2), "error": msg[:240]}


def _fallback_input(rank, i, n, dtype):
    import torch
    base = torch.arange(n, dtype=torch.int64)
    return (((base * 7919 + i * 104729 + rank * 31) % 2001) - 1000).to(dtype)


def case_fallback(rank, world):
    import torch
    import torch.distributed as dist
    from inagg import _backend
    ops = int(os.environ.get("CASE_OPS", "300"))
    kill_at = int(os.environ.get("CASE_KILL_AT", "50"))
    progress = os.environ.get("CASE_PROGRESS")
    n = 40000  # elements a tensor: many chunks in flight when the switch dies
    checked = 0
    for i in range(ops):
        xi = _fallback_input(rank, i, n, torch.int32)
        xf = _fallback_input(rank, i, n, torch.float32)
        if progress and i + 1 == kill_at and rank == world - 1:
            # idle until the switch is dead: the others' calls of this round are in flight
            for _ in range(600):
                if os.path.exists(progress + ".killed"):
                    break
                time.sleep(0.05)
            # the backend falls back by itself, without a call of this rank: the others are
            # finishing their calls with it over Gloo meanwhile
            for _ in range(200):
                if _backend.backend_stats()["fallback"]["fallbacks"]:
                    break
                time.sleep(0.05)
            assert _backend.backend_stats()["fallback"]["fallbacks"] == 1, "idle: no fall-back"
        wi = dist.all_reduce(xi, async_op=True)
        wf = dist.all_reduce(xf, async_op=True)
        if progress and i + 1 == kill_at and rank == 0:
            with open(progress, "w") as f:
                f.write("%d\n" % (i + 1))
        wi.wait()
        wf.wait()
        want = sum(_fallback_input(r, i, n, torch.int64) for r in range(world))
        assert torch.equal(xi.to(torch.int64), want), (rank, i, "int32")
        assert torch.equal(xf.to(torch.int64), want), (rank, i, "float32")
        checked += 2
        time.sleep(0.01)  # paced: the switch's kill and restart land mid-run
    st = _backend.backend_stats()
    fb = st["fallback"]
    assert fb["fallbacks"] == 1, fb
    if os.environ.get("CASE_WANT_RETURN") == "1":
        assert fb["returns"] == 1 and fb["on_switch"], fb
    else:
        assert fb["returns"] == 0 and not fb["on_switch"], fb
    # every rank's results equal the same expected values: the replicas are equal
    return {"checked": checked, "switch": st["switch"], "fallback": fb}


def _train(model, opt, steps, rank, world, hook=None):
    """A few SGD steps on data that depends on the rank; the final parameters, flattened."""
    import torch
    if hook is not None:
        model.register_comm_hook(*hook)
    g = torch.Generator().manual_seed(100 + rank)
    for _ in range(steps):
        x = torch.randn(16, 32, generator=g)
        y = torch.randint(0, 4, (16,), generator=g)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return torch.cat([p.detach().reshape(-1).clone() for p in model.parameters()])


def _net():
    import torch
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))


def _ddp_on(group, rank, world, hook_fn=None, state=None, static=False, steps=6, zero=False):
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    m = DDP(_net(), process_group=group, static_graph=static)
    if zero:
        from torch.distributed.optim import ZeroRedundancyOptimizer
        opt = ZeroRedundancyOptimizer(m.parameters(), optimizer_class=torch.optim.SGD, lr=0.1,
                                      process_group=group)
    else:
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
    hook = None
    if hook_fn is not None:
        hook = (state(group) if callable(state) else group, hook_fn)
    return _train(m, opt, steps, rank, world, hook)


def case_torch2(rank, world):
    """torch 2.x's API on the inagg group, each result compared with Gloo's."""
    import torch
    import torch.distributed as dist
    import inagg.torch
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
    gloo = dist.new_group(backend="gloo")
    world_pg = dist.group.WORLD
    done = {}
    # the backend's own future, completed from the backend, with a then() chained on it
    x = torch.full((1000,), float(rank + 1))
    w = dist.all_reduce(x, async_op=True)
    doubled = w.get_future().then(lambda f: f.value()[0] * 2).wait()
    assert torch.allclose(doubled, torch.full_like(x, world * (world + 1))), doubled[:3]
    done["future_then"] = True
    if hasattr(dist, "all_reduce_coalesced"):
        ts = [torch.full((5,), float(rank)), torch.full((7,), 1.0)]
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dist.all_reduce_coalesced(ts)
        assert torch.allclose(ts[0], torch.full((5,), world * (world - 1) / 2.0))
        assert torch.allclose(ts[1], torch.full((7,), float(world)))
        done["all_reduce_coalesced"] = True
    before = inagg.torch.backend_stats()["switch"]
    ps = lambda g: powerSGD_hook.PowerSGDState(process_group=g, matrix_approximation_rank=2,  # noqa: E731
                                                start_powerSGD_iter=2, use_error_feedback=True,
                                                random_seed=0)
    for name, fn, state, tol in (("fp16_compress_hook", default_hooks.fp16_compress_hook, None, 2e-3),
                                 ("bf16_compress_hook", default_hooks.bf16_compress_hook, None, 2e-2),
                                 ("powerSGD_hook", powerSGD_hook.powerSGD_hook, ps, 1e-3)):
        mine = _ddp_on(world_pg, rank, world, fn, state)
        ref = _ddp_on(gloo, rank, world, fn, state)
        diff = (mine - ref).abs().max().item()
        assert diff <= tol, (name, diff)
        done[name] = diff
    assert inagg.torch.backend_stats()["switch"] > before  # the hooks' all_reduce: the switch's
    for name, kw in (("static_graph", {"static": True}), ("zero_redundancy", {"zero": True})):
        mine = _ddp_on(world_pg, rank, world, **kw)
        ref = _ddp_on(gloo, rank, world, **kw)
        spread = [torch.empty_like(mine) for _ in range(world)]
        dist.all_gather(spread, mine, group=gloo)
        assert all(torch.equal(s, spread[0]) for s in spread), name + ": replicas differ"
        diff = (mine - ref).abs().max().item()
        assert diff <= 1e-4, (name, diff)
        done[name] = diff
    done["compiled_ddp"] = _compiled_ddp(rank, world, gloo)
    done["fsdp"] = _fsdp(rank, world, gloo)
    done["checkpoint"] = _checkpoint(rank, world)
    dist.barrier(device_ids=[0])
    dist.monitored_barrier(timeout=__import__("datetime").timedelta(seconds=30))
    sub, _ = dist.new_subgroups(group_size=max(1, world // 2))
    y = torch.ones(10)
    dist.all_reduce(y, group=sub)
    assert torch.equal(y, torch.full((10,), float(dist.get_world_size(sub))))
    assert inagg.torch.backend_stats(sub)["switch"] == 1
    done["barrier_device_ids"] = done["monitored_barrier"] = done["new_subgroups"] = True
    st = inagg.torch.backend_stats()
    done["switch"], done["gloo_by_op"] = st["switch"], st["gloo_by_op"]
    return done


def _compiled_net():
    """A model of its own class (a torch.nn.Sequential under a compiled DDP hands no graph to
    the compiler: it runs eagerly), over 1 MB of parameters (DDPOptimizer splits a graph only
    at buckets of at least DDP's first bucket, 1 MB)."""
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(32, 512)
            self.b = torch.nn.Linear(512, 512)
            self.c = torch.nn.Linear(512, 4)

        def forward(self, x):
            return self.c(torch.relu(self.b(torch.relu(self.a(x)))))
    torch.manual_seed(0)
    return Net()


def _compiled_ddp_run(group, outer, steps, rank, world):
    """`steps` of training a model compiled with inductor under DDP on `group`: outer=True
    compiles DDP(model), as PyTorch's docs do; False wraps the compiled model in DDP. Either
    way Dynamo compiles while DDP's forward runs, so DDPOptimizer splits the graph at DDP's
    gradient buckets. The parameters, and the checked count of the all_reduce calls through
    the switch (DDP reduces one bucket on the first step, its rebuilt buckets after)."""
    import torch
    import inagg.torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    inductor = torch._dynamo.lookup_backend("inductor")
    torch._dynamo.reset()
    graphs = []

    def counted(gm, example_inputs):  # inductor, counting the graphs it is handed
        graphs.append(gm)
        return inductor(gm, example_inputs)
    if outer:
        ddp = DDP(_compiled_net(), process_group=group, bucket_cap_mb=1)
        model = torch.compile(ddp, backend=counted)
    else:
        ddp = model = DDP(torch.compile(_compiled_net(), backend=counted), process_group=group,
                          bucket_cap_mb=1)
    before = inagg.torch.backend_stats()
    params = _train(model, torch.optim.SGD(model.parameters(), lr=0.1), steps, rank, world)
    after = inagg.torch.backend_stats()
    assert after["gloo_by_op"].get("all_reduce", 0) == before["gloo_by_op"].get("all_reduce", 0)
    buckets = ddp._get_ddp_logging_data()
    first = len(buckets["bucket_sizes"].split(","))
    rebuilt = len(buckets["rebuilt_bucket_sizes"].split(","))
    assert len(graphs) == rebuilt >= 2, ("DDPOptimizer's graphs", len(graphs), rebuilt)
    return params, first + (steps - 1) * rebuilt, after["switch"] - before["switch"]


def _compiled_ddp(rank, world, gloo, steps=5):
    """torch.compile under DDP, both orders, on the inagg group: the parameters of the Gloo
    group's run, every gradient bucket's all_reduce through the switch."""
    import torch
    import torch.distributed as dist
    ref, _, through = _compiled_ddp_run(gloo, True, steps, rank, world)
    assert through == 0, ("the Gloo group's run went through the switch", through)
    diffs = []
    for outer in (True, False):
        mine, want, through = _compiled_ddp_run(dist.group.WORLD, outer, steps, rank, world)
        assert through == want, ("all_reduce through the switch", outer, through, want)
        spread = [torch.empty_like(mine) for _ in range(world)]
        dist.all_gather(spread, mine, group=gloo)
        assert all(torch.equal(s, spread[0]) for s in spread), "compiled_ddp: replicas differ"
        diffs.append((mine - ref).abs().max().item())
        assert diffs[-1] <= 1e-4, ("compiled_ddp", outer, diffs[-1])
    return max(diffs)


def _fsdp(rank, world, gloo):
    """FSDP trains on the inagg group as on Gloo's: the same parameters after 5 steps."""
    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    out = []
    for g in (dist.group.WORLD, gloo):
        m = FSDP(_net(), process_group=g, device_id=torch.device("cpu"), use_orig_params=True)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        _train(m, opt, 5, rank, world)
        with FSDP.summon_full_params(m):
            out.append(torch.cat([p.detach().reshape(-1).clone() for p in m.parameters()]))
    diff = (out[0] - out[1]).abs().max().item()
    assert diff <= 1e-4, ("fsdp", diff)
    return diff


def _checkpoint(rank, world):
    """torch.distributed.checkpoint saves through the group and loads back what it saved."""
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    d = [tempfile.mkdtemp(prefix="inagg-dcp-") if rank == 0 else None]
    dist.broadcast_object_list(d, src=0)
    state = {"w": torch.arange(10.0) + rank * 0, "step": torch.tensor(7)}
    dcp.save(state, checkpoint_id=d[0])
    back = {"w": torch.zeros(10), "step": torch.tensor(0)}
    dcp.load(back, checkpoint_id=d[0])
    assert torch.equal(back["w"], torch.arange(10.0)) and back["step"].item() == 7, back
    return True


def cuda_skip_reason():
    """Why the cuda case cannot run here ("" if it can)."""
    import torch
    if not torch.version.cuda:
        return "torch %s is not a CUDA build" % torch.__version__
    if not torch.cuda.is_available():
        return "no CUDA device"
    from inagg import _torch_ext
    from torch.utils import cpp_extension
    if not _torch_ext._cuda_build(torch, cpp_extension):
        return "no CUDA toolkit headers to build the backend's staging with (CUDA_HOME)"
    return ""


def case_cuda(rank, world):
    import torch
    import torch.distributed as dist
    import inagg.torch
    dev = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    before = inagg.torch.backend_stats()["switch"]
    n = 1 << 20
    x = torch.full((n,), float(rank + 1), device=dev)
    dist.all_reduce(x)
    assert torch.allclose(x, torch.full_like(x, world * (world + 1) / 2)), x[:3]
    h = (torch.arange(4096, device=dev, dtype=torch.float32) / 4096 + rank).half()
    dist.all_reduce(h)
    ref = sum((torch.arange(4096, device=dev, dtype=torch.float32) / 4096 + r).half().float()
              for r in range(world))
    assert h.dtype == torch.float16 and (h.float() - ref).abs().max().item() <= 2e-3 * world
    m = torch.full((256, 64), float(rank), device=dev).t()
    dist.all_reduce(m)
    assert torch.allclose(m, torch.full_like(m, world * (world - 1) / 2))
    # written on a side stream, reduced under it: the copy waits for the write
    side = torch.cuda.Stream(device=dev)
    with torch.cuda.stream(side):
        y = torch.empty(n, device=dev)
        torch.cuda._sleep(50_000_000)  # a slow kernel before the write
        y.fill_(float(rank))
        w = dist.all_reduce(y, async_op=True)
        w.wait()  # blocks the side stream, not the host
        z = y * 2  # on the side stream, after the copy back
    side.synchronize()
    assert torch.allclose(z, torch.full_like(z, world * (world - 1.0))), z[:3]
    fut = dist.all_reduce(torch.ones(1000, device=dev), async_op=True).get_future()
    got = fut.then(lambda f: f.value()[0] + 1).wait()
    assert torch.allclose(got, torch.full_like(got, world + 1.0))
    through = inagg.torch.backend_stats()["switch"] - before
    assert through == 6, through
    out = {"switch": through, "gloo_by_op": inagg.torch.backend_stats()["gloo_by_op"]}
    # DDP on CUDA: the same parameters as Gloo's (and NCCL's with a GPU per rank)
    refs = {"gloo": dist.new_group(backend="gloo")}
    if torch.cuda.device_count() >= world and dist.is_nccl_available():
        refs["nccl"] = dist.new_group(backend="nccl")
    mine = _ddp_cuda(dist.group.WORLD, rank, dev)
    for name, g in refs.items():
        diff = (mine - _ddp_cuda(g, rank, dev)).abs().max().item()
        assert diff <= 1e-4, (name, diff)
        out["ddp_max_diff_" + name] = diff
    return out


def _ddp_cuda(group, rank, dev, steps=6):
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    m = DDP(_net().to(dev), device_ids=[dev.index], process_group=group)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(100 + rank)
    for _ in range(steps):
        x = torch.randn(16, 32, generator=g).to(dev)
        y = torch.randint(0, 4, (16,), generator=g).to(dev)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(m(x), y).backward()
        opt.step()
    return torch.cat([p.detach().reshape(-1).cpu() for p in m.parameters()])


def left_after_destroy(rank, world, d, switch):
    """destroy_process_group left the jobs: once every rank has destroyed its groups (and
    is still alive), rank 0 asks its embedded switch: no job holds a slot."""
    import subprocess
    open(os.path.join(d, "destroyed.%d" % rank), "w").close()
    if rank != 0:
        return
    deadline = time.monotonic() + 60
    while any(not os.path.exists(os.path.join(d, "destroyed.%d" % r)) for r in range(world)):
        assert time.monotonic() < deadline, "ranks did not finish destroy_process_group"
        time.sleep(0.05)
    binary = os.path.join(ROOT, "build", "inagg")
    for _ in range(100):  # the switch retires a job once its last rank's LEAVE is read
        text = subprocess.run([binary, "switch", "--stats", switch], capture_output=True,
                              text=True, timeout=30).stdout
        if " slots_used=0/" in text:
            return
        time.sleep(0.05)
    raise AssertionError("jobs still hold slots after destroy_process_group: " + text)


def worker(rank, world, method, timeout_s, case, out):
    import faulthandler
    faulthandler.dump_traceback_later(float(os.environ.get("CASE_WATCHDOG_S", "600")), exit=True)
    init(rank, world, method, timeout_s)
    if case == "collectives":
        res = case_collectives(rank, world)
    elif case == "compressed":
        res = case_compressed(rank, world)
    elif case == "torch2":
        res = case_torch2(rank, world)
    elif case == "cuda":
        res = case_cuda(rank, world)
    elif case == "fallback":
        res = case_fallback(rank, world)
    else:
        res = case_failure(rank, world, timeout_s, case)
    if rank == 0:
        with open(out, "w") as f:
            json.dump(res, f)
    if case in ("collectives", "compressed", "torch2", "cuda", "fallback"):
        import torch.distributed as dist
        held = dist.group.WORLD  # as a DDP model holds its group past destroy
        dist.destroy_process_group()
        if case == "collectives":
            left_after_destroy(rank, world, os.path.dirname(out), res["switch_address"])
        del held
    else:
        os._exit(0)  # the group is broken: leave without its teardown


def main():
    case, world, method = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if case == "cuda" and cuda_skip_reason():
        print(json.dumps({"skipped": cuda_skip_reason()}))
        return
    timeout_s = float(sys.argv[4]) if len(sys.argv) > 4 else 60
    import torch.multiprocessing as mp
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    d = tempfile.mkdtemp(prefix="inagg-torch-case-")
    if method == "tcp":
        method = "tcp://127.0.0.1:%d" % port
    elif method == "file":
        method = "file://" + os.path.join(d, "store")
    else:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    out = os.path.join(d, "out.json")
    mp.spawn(worker, args=(world, method, timeout_s, case, out), nprocs=world)
    print(open(out).read())


if __name__ == "__main__":
    main()
