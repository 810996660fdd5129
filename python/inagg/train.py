"""inagg.train - one rank of data-parallel (DDP) Fashion-MNIST training, as `inagg bench train`
(bench/train_ddp.py) starts it on every host:

    python3 -m inagg.train --rank R --world W --master HOST:PORT --backend gloo|inagg
        [--compress none|fp16|zfp:rate=8] [--switch HOST:PORT] [--ifname IF] --model cnn|large
        [--epochs E] [--train-samples S] [--test-samples T] [--batch B] [--lr LR] [--seed S]

The process group: dist.init_process_group(BACKEND, init_method="env://") with MASTER_ADDR and
MASTER_PORT from --master. For backend inagg the switch is passed as $INAGG_SWITCH, the
compression as $INAGG_COMPRESS, and the packet options as $INAGG_PACKET_ELEMS, $INAGG_SLOTS,
$INAGG_RTO_MIN_US and $INAGG_RTO_MAX_US. When torch.distributed has no backend "inagg" registered
(inagg.torch does not provide one), the run falls back to the DDP communication hook
inagg.torch.allreduce_hook over a Gloo group (State joins the same switch with the same
compression); the report names the mechanism: "backend" or "hook".

Data order: every epoch draws one permutation of the training subset from (seed, epoch); each
global batch is the next W*B samples of it and rank R takes the R-th B of them, so every backend
sees the same batches in the same order. The test subset is split over the ranks and the
correct counts summed (dist.all_reduce), so every rank knows the accuracy.

Time in communication: every DDP bucket goes through a communication hook wrapped with a timer
(for gloo and the inagg backend torch's default allreduce_hook, for the fallback inagg's hook):
a bucket's interval runs from the moment DDP hands it over to the moment its future completes
(a callback on the future). Per step, the union of its buckets' intervals is the time during
which at least one allreduce of that step was in flight or waited for; an epoch's comm_s is the
sum over its steps. It overlaps with backward where DDP overlaps buckets with backward: it is
the time the network part of the step took, not only the part the step waited for
(wait_s, the time from the end of backward's own arithmetic - the last bucket handed over - to
the last future done, is reported beside it).

Output: JSON lines on stdout (rank 0: "start", one "epoch" per epoch, "end"; other ranks only
"end"); errors on stderr, one line starting "inagg.train:". Exit 0, 1 on a failure during
training, 2 bad usage, 3 dataset or torch missing.
"""
import argparse
import datetime
import hashlib
import json
import os
import sys
import threading
import time

__all__ = ["main"]

MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST's pixel mean and standard deviation (of x / 255)


def emit(obj):
    print(json.dumps(obj), flush=True)


class CommTimer:
    """Wraps a DDP communication hook; records each bucket's (handed over, completed) times."""

    def __init__(self):
        self._lock = threading.Lock()
        self._spans = []
        self.buckets = 0

    def wrap(self, hook):
        def timed(state, bucket):
            t0 = time.perf_counter()
            fut = hook(state, bucket)
            box = [t0, None]
            with self._lock:
                self._spans.append(box)
                self.buckets += 1

            def done(f):
                box[1] = time.perf_counter()
                return f.value()
            return fut.then(done)
        return timed

    def take(self):
        """(union of this step's bucket intervals, from the last hand-over to the last
        completion) in seconds; resets for the next step."""
        with self._lock:
            spans, self._spans = self._spans, []
        if not spans:
            return 0.0, 0.0
        now = time.perf_counter()
        spans = sorted((a, b if b is not None else now) for a, b in spans)
        busy, cur_a, cur_b = 0.0, spans[0][0], spans[0][1]
        for a, b in spans[1:]:
            if a > cur_b:
                busy += cur_b - cur_a
                cur_a, cur_b = a, b
            else:
                cur_b = max(cur_b, b)
        busy += cur_b - cur_a
        last_start = max(a for a, _ in spans)
        last_end = max(b for _, b in spans)
        return busy, max(0.0, last_end - last_start)


def inagg_backend_registered():
    """Whether torch.distributed knows a backend "inagg" (after importing inagg.torch)."""
    import torch.distributed as dist
    try:
        import inagg.torch  # noqa: F401  (registers the backend where it provides one)
    except ImportError:
        return False
    b = dist.Backend
    return (hasattr(b, "INAGG") or "inagg" in getattr(b, "backend_list", ()) or
            "INAGG" in getattr(b, "_plugins", {}) or "inagg" in getattr(b, "_plugins", {}))


def parse(argv):
    ap = argparse.ArgumentParser(prog="python3 -m inagg.train",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--master", required=True, help="HOST:PORT of rank 0's rendezvous")
    ap.add_argument("--backend", choices=["gloo", "inagg"], required=True)
    ap.add_argument("--compress", default="none", help="inagg: none, fp16, zfp:rate=R, ...")
    ap.add_argument("--no-error-feedback", action="store_true",
                    help="inagg backend, lossy --compress: no per-bucket error feedback")
    ap.add_argument("--mechanism", choices=["auto", "backend", "hook"], default="auto",
                    help="inagg: the registered backend, the DDP hook, or whichever exists")
    ap.add_argument("--ddp-hook", choices=["allreduce", "fp16", "bf16", "powersgd"],
                    default="allreduce",
                    help="gloo and the inagg backend: PyTorch's DDP communication hook "
                    "(allreduce_hook, fp16_compress_hook, bf16_compress_hook, powerSGD_hook "
                    "of rank 2 after 10 plain steps)")
    ap.add_argument("--switch", help="the inagg switch HOST:PORT (default $INAGG_SWITCH)")
    ap.add_argument("--ifname", help="the interface Gloo uses (GLOO_SOCKET_IFNAME)")
    ap.add_argument("--packet-elems", type=int, help="inagg: elements per packet (default "
                    "the library's; on a testbed one frame's worth)")
    ap.add_argument("--slots", type=int, help="inagg: packets in flight per rank")
    ap.add_argument("--rto-min-us", type=int, help="inagg: retransmission timeout floor")
    ap.add_argument("--rto-max-us", type=int, help="inagg: retransmission timeout ceiling")
    ap.add_argument("--model", choices=["cnn", "large"], default="cnn")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--train-samples", type=int, default=60000)
    ap.add_argument("--test-samples", type=int, default=10000)
    ap.add_argument("--batch", type=int, default=64, help="samples per rank per step")
    ap.add_argument("--lr", type=float, help="Adam's learning rate (default per model)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", help="the Fashion-MNIST directory (default $INAGG_FMNIST_DIR or "
                    "/usr/share/datasets/fashion-mnist)")
    ap.add_argument("--timeout-s", type=float, default=300.0,
                    help="the process group's timeout for one collective")
    a = ap.parse_args(argv)
    if not (1 <= a.world <= 64 and 0 <= a.rank < a.world):
        ap.error("need 1 <= world <= 64 and 0 <= rank < world")
    if a.epochs < 1 or a.batch < 1 or a.train_samples < 1 or a.test_samples < 1:
        ap.error("--epochs, --batch, --train-samples and --test-samples must be positive")
    if a.backend == "gloo" and a.compress != "none":
        ap.error("--compress applies to the inagg backend only")
    return a


def blas_in_use():
    """The BLAS library this process mapped: "openblas", or the file name of another."""
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if "blas" in line.rsplit("/", 1)[-1]}
    except OSError:
        return "unknown"
    if any("openblas" in x for x in libs):
        return "openblas"
    return ",".join(sorted(x.rsplit("/", 1)[-1] for x in libs)) or "none"


def param_digest(model):
    """sha256 of every parameter's bytes: replicas that DDP kept in step agree exactly."""
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def run(a):
    if a.ifname:
        os.environ["GLOO_SOCKET_IFNAME"] = a.ifname
    try:
        import torch
        import torch.distributed as dist
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        if not dist.is_available() or not dist.is_gloo_available():
            raise ImportError("this torch has no torch.distributed with Gloo")
    except ImportError as e:
        print("inagg.train: %s (apt-get install python3-torch)" % e, file=sys.stderr)
        return 3
    from inagg import fmnist, models
    try:
        tr_x, tr_y, te_x, te_y = fmnist.load(a.data)
    except fmnist.DatasetError as e:
        print("inagg.train: Fashion-MNIST: %s" % e, file=sys.stderr)
        return 3
    if a.train_samples > len(tr_x) or a.test_samples > len(te_x):
        print("inagg.train: --train-samples is at most %d and --test-samples at most %d"
              % (len(tr_x), len(te_x)), file=sys.stderr)
        return 2
    torch.set_num_threads(1)  # one rank per core or fewer cores than ranks: no oversubscription

    def tensors(x, y, n):
        xs = torch.from_numpy(x[:n].astype("float32") / 255.0).sub_(MEAN).div_(STD)
        return xs.unsqueeze(1), torch.from_numpy(y[:n].astype("int64"))
    train_x, train_y = tensors(tr_x, tr_y, a.train_samples)
    test_x, test_y = tensors(te_x, te_y, a.test_samples)

    switch = a.switch or os.environ.get("INAGG_SWITCH")
    mechanism = None
    error_feedback = False
    backend = a.backend
    comm_options = {}
    if a.backend == "inagg":
        if not switch:
            print("inagg.train: backend inagg needs --switch or $INAGG_SWITCH", file=sys.stderr)
            return 2
        registered = inagg_backend_registered()
        mechanism = a.mechanism if a.mechanism != "auto" else \
            ("backend" if registered else "hook")
        if mechanism == "backend" and not registered:
            print("inagg.train: torch.distributed has no backend 'inagg' (inagg.torch does not "
                  "register one); use --mechanism hook", file=sys.stderr)
            return 2
        os.environ["INAGG_SWITCH"] = switch
        for name in ("packet_elems", "slots", "rto_min_us", "rto_max_us"):
            if getattr(a, name) is not None:
                os.environ["INAGG_" + name.upper()] = str(getattr(a, name))
                comm_options[name] = getattr(a, name)
        if a.compress != "none":
            os.environ["INAGG_COMPRESS"] = a.compress
        else:
            os.environ.pop("INAGG_COMPRESS", None)
        # the backend keeps a residual per gradient bucket (a codec that rounds nothing
        # leaves it untouched); the hook has no error feedback
        error_feedback = mechanism == "backend" and a.compress not in ("none", "zfp:reversible") \
            and not a.no_error_feedback
        os.environ["INAGG_ERROR_FEEDBACK"] = "1" if error_feedback else "0"
        if mechanism == "hook":
            if a.ddp_hook != "allreduce":
                print("inagg.train: --ddp-hook %s needs the inagg backend (--mechanism backend): "
                      "the inagg DDP hook is a hook of its own" % a.ddp_hook, file=sys.stderr)
                return 2
            backend = "gloo"
    host, port = a.master.rsplit(":", 1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = host, port
    timeout = datetime.timedelta(seconds=a.timeout_s)
    dist.init_process_group(backend, init_method="env://", rank=a.rank, world_size=a.world,
                            timeout=timeout)

    net = models.build(a.model, a.seed)
    lr = a.lr if a.lr is not None else models.DEFAULT_LR[a.model]
    if a.ddp_hook == "powersgd":
        # PowerSGD starts its second and third all_reduce of a bucket from callbacks, on the
        # thread that completed the first: with two buckets in flight the ranks may start them
        # in different orders (Gloo aborts on the mismatch, any backend would sum wrong
        # tensors). One bucket keeps every rank's order the same.
        dist._DEFAULT_FIRST_BUCKET_BYTES = 1 << 30
        model = torch.nn.parallel.DistributedDataParallel(net, bucket_cap_mb=1024)
    else:
        model = torch.nn.parallel.DistributedDataParallel(net)
    timer = CommTimer()
    state = None
    if mechanism == "hook":
        import inagg.torch
        # the hook is the backend's group: its options, not the retransmission bounds
        state = inagg.torch.State(switch=switch, compression=None if a.compress == "none"
                                  else a.compress, timeout_ms=int(a.timeout_s * 1000),
                                  **{k: v for k, v in comm_options.items()
                                     if k in ("slots", "packet_elems")})
        model.register_comm_hook(state, timer.wrap(inagg.torch.allreduce_hook))
    elif a.ddp_hook == "powersgd":
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
        psgd_state = psgd.PowerSGDState(process_group=None, matrix_approximation_rank=2,
                                        start_powerSGD_iter=10, random_seed=a.seed)
        model.register_comm_hook(psgd_state, timer.wrap(psgd.powerSGD_hook))
    else:
        hook = {"allreduce": default_hooks.allreduce_hook,
                "fp16": default_hooks.fp16_compress_hook,
                "bf16": default_hooks.bf16_compress_hook}[a.ddp_hook]
        model.register_comm_hook(None, timer.wrap(hook))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = torch.nn.CrossEntropyLoss()

    per_step = a.batch * a.world
    steps = a.train_samples // per_step
    if steps < 1:
        print("inagg.train: --train-samples %d is less than one global batch (%d ranks x %d)"
              % (a.train_samples, a.world, a.batch), file=sys.stderr)
        return 2
    if a.rank == 0:
        torch.mm(torch.ones(2, 2), torch.ones(2, 2))  # BLAS is loaded by now
        emit({"event": "start", "blas": blas_in_use(), "backend": a.backend,
              "mechanism": mechanism or "gloo", "ddp_hook": a.ddp_hook,
              "compress": a.compress, "error_feedback": error_feedback, "model": a.model,
              "params": sum(
                  p.numel() for p in net.parameters()), "grad_bytes": models.grad_bytes(net),
              "world": a.world, "batch_per_rank": a.batch, "steps_per_epoch": steps, "lr": lr,
              "torch": torch.__version__})

    def evaluate():
        # Every rank scores the whole test set itself, with no collective: the replicas are
        # identical (param_digest checks it), and a compressed job's allreduce is lossy (under
        # zfp:rate=8 the summed counts came back rounded: an accuracy of exactly 13/19 out of
        # 10,000 samples), so counts must not pass through it.
        model.eval()
        correct = 0
        with torch.no_grad():
            for off in range(0, len(test_x), 1000):
                out = net(test_x[off:off + 1000])
                correct += int((out.argmax(1) == test_y[off:off + 1000]).sum())
        model.train()
        return correct / len(test_x)

    total_train_s = 0.0
    for epoch in range(1, a.epochs + 1):
        gen = torch.Generator().manual_seed(a.seed * 100003 + epoch)
        order = torch.randperm(a.train_samples, generator=gen)
        comm_s = wait_s = loss_sum = 0.0
        t0 = time.perf_counter()
        for s in range(steps):
            idx = order[s * per_step + a.rank * a.batch: s * per_step + (a.rank + 1) * a.batch]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(train_x[idx]), train_y[idx])
            loss.backward()
            busy, wait = timer.take()
            comm_s += busy
            wait_s += wait
            opt.step()
            loss_sum += float(loss)
        wall = time.perf_counter() - t0
        total_train_s += wall
        t1 = time.perf_counter()
        acc = evaluate()
        eval_s = time.perf_counter() - t1
        if a.rank == 0:
            ev = {"event": "epoch", "epoch": epoch, "wall_s": round(wall, 4),
                  "comm_s": round(comm_s, 4), "wait_s": round(wait_s, 4),
                  "eval_s": round(eval_s, 4), "train_s_total": round(total_train_s, 4),
                  "train_loss": round(loss_sum / steps, 5), "test_accuracy": acc}
            if mechanism == "backend":
                # where this rank's all_reduce went so far (a fail-over or a fall-back shows);
                # none when the registered "inagg" is another implementation
                from inagg._backend import backend_stats, inagg_backend_of
                if inagg_backend_of(dist.group.WORLD) is not None:
                    ev["backend_stats"] = backend_stats()
            emit(ev)
    digest = param_digest(net)
    buckets = timer.buckets
    if state is not None:
        state.close()
    dist.barrier()
    dist.destroy_process_group()
    emit({"event": "end", "rank": a.rank, "params_digest": digest, "buckets": buckets,
          "mechanism": mechanism or "gloo"})
    return 0


def main(argv=None):
    a = parse(sys.argv[1:] if argv is None else argv)
    try:
        return run(a)
    except Exception as e:  # a failed collective, a switch that went away, ...
        print("inagg.train: rank %d: %s: %s" % (a.rank, type(e).__name__, e), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
