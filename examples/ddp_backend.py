#!/usr/bin/env python3
"""ddp_backend.py - an unmodified DistributedDataParallel training loop on the `inagg`
torch.distributed backend: no comm hook, no switch setting. (--backend gloo: the same on Gloo;
--backend hook: on Gloo with inagg.torch.allreduce_hook and a switch named by --switch.) `import inagg.torch` registers the
backend; rank 0 starts an embedded switch and DDP's gradient buckets go through it.

    ~/.venvs/inagg/bin/python -m torch.distributed.run --redirects 2 --tee 2 \
        --nproc_per_node 4 examples/ddp_backend.py
    python3 examples/ddp_backend.py --nproc 3 --init file --steps 30 --json out.json

(`--redirects 2 --tee 2`: Debian's torchrun on Python 3.11 crashes with its default redirects.)
Under torchrun it reads the usual RANK / WORLD_SIZE / MASTER_ADDR (env://); with --nproc it
spawns the ranks itself and initialises them through tcp:// or file://.

Checkpoints: with --checkpoint DIR, rank 0 saves the model, the optimizer and the step every
--checkpoint-every steps (written to a temporary file, then renamed), and every rank resumes
from the newest one at start. Under `torchrun --max-restarts N` a worker that dies is restarted
with the others; the new group joins a fresh switch job and carries on from the checkpoint.
--die-at-step S makes rank --die-rank exit at step S on the first attempt (to try that).

At the end every rank's parameters are compared (they must be identical: DDP averaged every
bucket) and rank 0 writes --json: the backend's counters (inagg.torch.backend_stats), the
final loss, the step it resumed from, and --params FILE gets the final parameters (torch.save)
to compare runs.
"""
import argparse
import datetime
import importlib.util
import json
import os
import socket
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if importlib.util.find_spec("inagg") is None:  # not installed (a venv's, Debian's): the tree's
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))


def make_data(seed, n=4096, dim=32, classes=10):
    import torch
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(classes * 2, dim, generator=g) * 0.8
    y = torch.randint(classes, (n,), generator=g)
    x = centers[y * 2 + torch.randint(2, (n,), generator=g)] + torch.randn(n, dim, generator=g)
    return x, y


def save_checkpoint(path, model, opt, step):
    import torch
    tmp = path + ".tmp"
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, tmp)
    os.replace(tmp, path)


def train(rank, world, args):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    if args.backend in ("inagg", "hook"):
        import inagg.torch  # noqa: F401  registers the backend
    pg_backend = "gloo" if args.backend == "hook" else args.backend
    torch.set_num_threads(1)
    timeout = datetime.timedelta(seconds=args.timeout)
    if args.init_method:
        dist.init_process_group(pg_backend, init_method=args.init_method, rank=rank,
                                world_size=world, timeout=timeout)
    else:
        dist.init_process_group(pg_backend, timeout=timeout)  # env:// (torchrun)
    rank, world = dist.get_rank(), dist.get_world_size()
    x, y = make_data(args.data_seed)
    torch.manual_seed(args.seed)
    model = nn.Sequential(nn.Linear(x.shape[1], args.hidden), nn.ReLU(),
                          nn.Linear(args.hidden, args.hidden), nn.ReLU(),
                          nn.Linear(args.hidden, 10))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    start = 0
    ckpt = os.path.join(args.checkpoint, "ckpt.pt") if args.checkpoint else None
    if ckpt and os.path.exists(ckpt):
        state = torch.load(ckpt)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = state["step"]
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=args.bucket_mb)
    hook_state = None
    if args.backend == "hook":  # Gloo's group, gradient buckets through the DDP comm hook
        hook_state = inagg.torch.State(switch=args.switch, compression=args.compression)
        ddp.register_comm_hook(hook_state, inagg.torch.allreduce_hook)
    lossf = nn.CrossEntropyLoss()
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    loss = torch.tensor(0.0)
    t0 = time.perf_counter()
    for step in range(start, args.steps):
        if step == args.die_at_step and rank == args.die_rank and attempt == 0:
            print("ddp_backend.py: rank %d exits at step %d (--die-at-step)" % (rank, step),
                  file=sys.stderr, flush=True)
            os._exit(17)
        g = torch.Generator().manual_seed(args.seed * 100003 + step)
        idx = torch.randint(x.shape[0], (args.batch * world,), generator=g)
        idx = idx[rank * args.batch:(rank + 1) * args.batch]
        opt.zero_grad(set_to_none=True)
        loss = lossf(ddp(x[idx]), y[idx])
        loss.backward()
        opt.step()
        if ckpt and rank == 0 and (step + 1) % args.checkpoint_every == 0:
            save_checkpoint(ckpt, model, opt, step + 1)
        if args.step_sleep:
            time.sleep(args.step_sleep)
    seconds = time.perf_counter() - t0
    with torch.no_grad():
        flat = torch.cat([p.reshape(-1) for p in model.parameters()])
        everyone = [torch.empty_like(flat) for _ in range(world)]
        dist.all_gather(everyone, flat)  # Gloo's, under inagg
        spread = max((e - flat).abs().max().item() for e in everyone)
        full_loss = lossf(model(x), y).item()
    res = {"backend": args.backend, "world": world, "steps": args.steps, "resumed_from": start,
           "attempt": attempt, "loss": full_loss, "replica_spread": spread,
           "seconds": round(seconds, 3)}
    if args.backend == "inagg":
        import inagg.torch
        st = inagg.torch.backend_stats()
        res["stats"] = {k: st[k] for k in ("switch", "gloo", "gloo_by_op", "switch_address",
                                           "job")}
        res["inagg"] = os.path.dirname(os.path.abspath(inagg.__file__))  # which copy ran
    if hook_state is not None:
        res["buckets_via_switch"] = hook_state.buckets
        hook_state.close()
    if rank == 0:
        if args.params:
            torch.save(flat, args.params)
        text = json.dumps(res)
        if args.json:
            with open(args.json, "w") as f:
                f.write(text + "\n")
        print(text)
    dist.destroy_process_group()
    return 0 if spread == 0.0 else 1


def spawned(rank, world, args):
    sys.exit(train(rank, world, args))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="inagg", choices=["inagg", "gloo", "hook"],
                    help="hook: a Gloo group with inagg.torch.allreduce_hook (needs --switch)")
    ap.add_argument("--switch", default=os.environ.get("INAGG_SWITCH"),
                    help="the switch of --backend hook (default $INAGG_SWITCH)")
    ap.add_argument("--compression", default=None,
                    help="the hook's codec: fp16, zfp, zfp:rate=8 ... (the backend reads "
                         "$INAGG_COMPRESS)")
    ap.add_argument("--nproc", type=int, default=0,
                    help="spawn this many ranks (default: run as one rank under torchrun)")
    ap.add_argument("--init", choices=["tcp", "file"], default="tcp",
                    help="init method of --nproc ranks")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--batch", type=int, default=32, help="examples per rank per step")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data-seed", type=int, default=7)
    ap.add_argument("--bucket-mb", type=float, default=0.05, help="DDP bucket_cap_mb")
    ap.add_argument("--timeout", type=float, default=60, help="process group timeout, seconds")
    ap.add_argument("--checkpoint", metavar="DIR")
    ap.add_argument("--checkpoint-every", type=int, default=10)
    ap.add_argument("--die-at-step", type=int, default=-1)
    ap.add_argument("--die-rank", type=int, default=1)
    ap.add_argument("--step-sleep", type=float, default=0.0, help="seconds after each step")
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--params", metavar="FILE")
    args = ap.parse_args()
    args.init_method = None
    if args.checkpoint:
        os.makedirs(args.checkpoint, exist_ok=True)
    if args.nproc <= 0:
        return train(None, None, args)
    import tempfile
    import torch.multiprocessing as mp
    if args.init == "tcp":
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            args.init_method = "tcp://127.0.0.1:%d" % s.getsockname()[1]
    else:
        fd, path = tempfile.mkstemp(prefix="inagg-ddp-store-")
        os.close(fd)
        os.unlink(path)
        args.init_method = "file://" + path
    mp.spawn(spawned, args=(args.nproc, args), nprocs=args.nproc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
