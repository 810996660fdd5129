#!/usr/bin/env python3
"""ddp_mlp.py - PyTorch DistributedDataParallel training of an MLP on generated data, with
gradients averaged either by Gloo (torch's own allreduce) or through an inagg switch by the
communication hook inagg.torch.allreduce_hook (Gloo still does everything else).

    python3 examples/ddp_mlp.py --backend both --workers 4 --epochs 3 --json -

Same seed, same data, same model, same batches for both backends. Rank 0 reports the test
accuracy at the end (the last epoch runs at a tenth of the learning rate) and the time per
training iteration (forward, backward with the gradient
allreduce, optimizer step; median over the run without the first 10). After training every
rank's parameters are compared: DDP keeps replicas identical only if every bucket was averaged.

The data: 10 classes in 32 dimensions, each class two overlapping Gaussian blobs (so no
linear model separates them and the best accuracy is below 100%), 16000 training and 4000 test points, generated from --data-seed.
With --backend inagg (or both) and no --switch / $INAGG_SWITCH, an `inagg switch` on loopback is
started from build/ for the run.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_data(seed, n_train=16000, n_test=4000, dim=32, classes=10):
    import torch
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(classes * 2, dim, generator=g) * 0.8
    n = n_train + n_test
    y = torch.randint(classes, (n,), generator=g)
    blob = y * 2 + torch.randint(2, (n,), generator=g)
    x = centers[blob] + torch.randn(n, dim, generator=g)
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]


def worker(rank, args, port, switch, out_path):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                            world_size=args.workers)
    xtr, ytr, xte, yte = make_data(args.data_seed)
    torch.manual_seed(args.seed)
    model = nn.Sequential(nn.Linear(xtr.shape[1], args.hidden), nn.ReLU(),
                          nn.Linear(args.hidden, args.hidden), nn.ReLU(),
                          nn.Linear(args.hidden, 10))
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=args.bucket_mb)
    state = None
    if args.run == "inagg":
        sys.path.insert(0, os.path.join(ROOT, "python"))
        import inagg.torch
        state = inagg.torch.State(switch=switch, compression=args.compression,
                                  float_mode=args.float_mode)
        ddp.register_comm_hook(state, inagg.torch.allreduce_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    lossf = nn.CrossEntropyLoss()
    times = []
    gen = torch.Generator().manual_seed(args.seed + 1)
    per_rank = args.batch
    for epoch in range(args.epochs):
        if epoch == args.epochs - 1 and args.epochs > 1:  # a calmer last epoch: a stable end
            for group in opt.param_groups:
                group["lr"] = args.lr * 0.1
        perm = torch.randperm(xtr.shape[0], generator=gen)
        step = per_rank * args.workers
        for start in range(0, xtr.shape[0] - step + 1, step):
            idx = perm[start + rank * per_rank:start + (rank + 1) * per_rank]
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            loss = lossf(ddp(xtr[idx]), ytr[idx])
            loss.backward()
            opt.step()
            times.append(time.perf_counter() - t0)
    with torch.no_grad():
        acc = (model(xte).argmax(1) == yte).float().mean().item() * 100
        flat = torch.cat([p.reshape(-1) for p in model.parameters()])
        lo, hi = flat.clone(), flat.clone()
        dist.all_reduce(lo, op=dist.ReduceOp.MIN)
        dist.all_reduce(hi, op=dist.ReduceOp.MAX)
        spread = (hi - lo).abs().max().item()
    buckets = state.buckets if state else 0
    if state:
        state.close()
    if rank == 0:
        steady = times[10:] if len(times) > 20 else times
        res = {"backend": args.run, "workers": args.workers, "accuracy": round(acc, 3),
               "iters": len(times), "iter_ms_median": round(statistics.median(steady) * 1e3, 3),
               "iter_ms_mean": round(statistics.mean(steady) * 1e3, 3),
               "params": sum(p.numel() for p in model.parameters()),
               "buckets_via_switch": buckets, "replica_spread": spread,
               "replicas_identical": spread == 0.0, "compression": args.compression,
               "float_mode": args.float_mode if args.run == "inagg" else None,
               "seed": args.seed}
        with open(out_path, "w") as f:
            json.dump(res, f)
    dist.barrier()
    dist.destroy_process_group()


def start_switch():
    r, w = os.pipe()
    binary = os.path.join(ROOT, "build", "inagg")
    proc = subprocess.Popen([binary, "switch", "--listen", "127.0.0.1:0", "--ready-fd", str(w)],
                            pass_fds=(w,), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    os.close(w)
    with os.fdopen(r) as f:
        line = f.readline().strip()
    if not line:
        proc.kill()
        raise SystemExit("ddp_mlp.py: the switch did not start: %s" % proc.stderr.read().decode())
    return proc, "127.0.0.1:" + line


def run_one(args, run, switch):
    import torch.multiprocessing as mp
    import tempfile
    args.run = run
    with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
        t0 = time.perf_counter()
        mp.spawn(worker, args=(args, free_port(), switch, tmp.name), nprocs=args.workers)
        res = json.load(open(tmp.name))
        res["seconds"] = round(time.perf_counter() - t0, 2)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=["gloo", "inagg", "both"], default="both")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--batch", type=int, default=32, help="examples per rank per iteration")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data-seed", type=int, default=7)
    ap.add_argument("--bucket-mb", type=float, default=0.25, help="DDP bucket_cap_mb")
    ap.add_argument("--compression", default=None,
                    help="the hook's codec on the wire: fp16, zfp, zfp:rate=8, ...")
    ap.add_argument("--float-mode", choices=["fixed", "native"], default="fixed")
    ap.add_argument("--switch", default=os.environ.get("INAGG_SWITCH"))
    ap.add_argument("--json", metavar="FILE|-")
    args = ap.parse_args()

    results, proc = [], None
    try:
        for run in (["gloo", "inagg"] if args.backend == "both" else [args.backend]):
            switch = args.switch
            if run == "inagg" and not switch:
                proc, switch = start_switch()
            results.append(run_one(args, run, switch))
    finally:
        if proc:
            proc.terminate()
            proc.wait()
    for r in results:
        print("%-5s  accuracy %6.2f%%  %5d iterations  %7.2f ms/iteration (median)  %s" % (
            r["backend"], r["accuracy"], r["iters"], r["iter_ms_median"],
            "replicas identical" if r["replicas_identical"] else
            "REPLICAS DIFFER by %g" % r["replica_spread"]), file=sys.stderr)
    out = {"runs": results}
    if len(results) == 2:
        g, i = results
        out["accuracy_diff_points"] = round(i["accuracy"] - g["accuracy"], 3)
        out["time_ratio_inagg_over_gloo"] = round(i["iter_ms_median"] / g["iter_ms_median"], 3)
        print("accuracy difference %+.2f points, time per iteration inagg/gloo %.2f" % (
            out["accuracy_diff_points"], out["time_ratio_inagg_over_gloo"]), file=sys.stderr)
    if args.json:
        text = json.dumps(out, indent=1)
        if args.json == "-":
            print(text)
        else:
            with open(args.json, "w") as f:
                f.write(text + "\n")
    ok = all(r["replicas_identical"] for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
