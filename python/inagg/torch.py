"""inagg.torch - PyTorch on an inagg switch, two ways.

1. The `inagg` torch.distributed backend, on torch 1.13 (a ProcessGroup) and 2.x (a Backend for
   "cpu" and "cuda"); needs the c10d headers (libtorch-dev, or PyPI's torch) and ninja-build;
   the C++ part in csrc/ is compiled on first use, see inagg/_torch_ext.py. Importing this
   module registers it:

    import torch.distributed as dist, inagg.torch
    dist.init_process_group("inagg")          # env://, tcp://, file://; no switch: embedded
    model = torch.nn.parallel.DistributedDataParallel(net)   # unmodified: no hook

   all_reduce SUM/AVG of CPU float32/int32 (float16, bfloat16, float64 through float32) goes
   through the switch, and of CUDA tensors too when built against a CUDA torch (staged through
   pinned host memory), everything else to a Gloo group on the same store (backend_stats()).
   Options: init_process_group(..., pg_options=Options(switch=..., compress="fp16")) or
   $INAGG_SWITCH, $INAGG_COMPRESS, $INAGG_PROTOCOL, $INAGG_FLOAT_MODE. See _backend.py.

2. A DDP communication hook on any process group (Gloo), without compiling anything:

    dist.init_process_group("gloo", ...)
    model = torch.nn.parallel.DistributedDataParallel(net)
    state = inagg.torch.State(switch="10.0.0.1:7000")     # or $INAGG_SWITCH
    model.register_comm_hook(state, inagg.torch.allreduce_hook)
    ...                                                    # train as usual
    state.close()

The hook starts an asynchronous allreduce (average) of the bucket in place and returns a
torch.futures.Future that a completion thread fulfils once the switch's result is in, so
buckets aggregate while backward goes on. Buckets of float16 or bfloat16 (torch's
fp16_compress_wrapper / bf16_compress_wrapper around this hook) are widened to float32 for
the switch and narrowed back. compression="fp16", "zfp" (zfp at zfp_rate bits per value) or
any codec of the library ("zfp:rate=8", "zfp:precision=16", ...) makes the job's codec
encode what crosses the wire (the switch decodes, sums, re-encodes: docs/COMPRESSION.md),
without error feedback (DDP's buckets differ from call to call).
"""
import os
import queue
import threading

try:
    import torch
    import torch.distributed as dist
except ImportError as _e:
    raise ImportError("inagg.torch needs PyTorch with torch.distributed (%s); on Debian: "
                      "apt-get install python3-torch libtorch-dev ninja-build, and run "
                      "/usr/bin/python3" % _e) from None

import inagg
from inagg._backend import Options, backend_stats, register as _register

__all__ = ["State", "allreduce_hook", "Options", "backend_stats"]

_register()


def _agreed_job(group):
    """A job name every rank agrees on: rank 0 picks it, the process group broadcasts it."""
    import time
    box = ["ddp-%d-%x" % (os.getpid(), int(time.time() * 1e6) & 0xFFFFFFFF)]
    dist.broadcast_object_list(box, src=0, group=group)
    return box[0]


def _codec_of(compression, zfp_rate):
    """The library codec string of the hook's `compression` argument (None: none)."""
    if compression in (None, "none"):
        return None
    if compression == "zfp":
        return "zfp:rate=%d" % zfp_rate
    if compression == "fp16" or str(compression).startswith("zfp:"):
        return compression
    raise ValueError("inagg.torch: compression must be None, 'fp16', 'zfp' or a codec such as "
                     "'zfp:rate=8' (docs/COMPRESSION.md), not %r; for bfloat16 wrap the hook "
                     "in torch's bf16_compress_wrapper" % (compression,))


class State:
    """What the hook needs: an inagg communicator and the completion thread.

    State(comm=None, *, switch=None, job=None, process_group=None, compression=None,
          zfp_rate=16, **comm_options)

    compression: None, "fp16", "zfp" (zfp:rate=zfp_rate) or a codec string: the job's codec.
    Without `comm`, joins the switch `switch` (default $INAGG_SWITCH) as this process's rank
    of `process_group` (default the world group), with a job name rank 0 picks and
    broadcasts; comm_options go to inagg.Comm (float_mode, slots, threads, timeout_ms, ...).
    """

    def __init__(self, comm=None, *, switch=None, job=None, process_group=None,
                 compression=None, zfp_rate=16, **comm_options):
        self.compression = _codec_of(compression, zfp_rate)
        if comm is not None and self.compression:
            raise ValueError("inagg.torch: compression is the job's codec: give it when the "
                             "State joins the switch (no comm=), or create comm with compress=")
        if self.compression:
            comm_options.setdefault("compress", self.compression)
            comm_options.setdefault("error_feedback", False)
        self._own = comm is None
        if comm is None:
            switch = switch or os.environ.get("INAGG_SWITCH")
            if not switch:
                raise ValueError("inagg.torch: name the switch (switch='HOST:PORT' or "
                                 "$INAGG_SWITCH)")
            group = process_group or dist.group.WORLD
            rank = dist.get_rank(group)
            world = dist.get_world_size(group)
            job = job or _agreed_job(group)
            comm = inagg.Comm(switch, rank, world, job=job, **comm_options)
        self.comm = comm
        self.world = comm.world
        self.buckets = 0
        self._queue = queue.Queue()
        self._thread = threading.Thread(target=self._complete, name="inagg-ddp", daemon=True)
        self._thread.start()

    def _complete(self):
        """Wait for the requests in the order they started and fulfil their futures."""
        while True:
            item = self._queue.get()
            if item is None:
                return
            req, fut, finish = item
            try:
                req.wait()
                fut.set_result(finish())
            except Exception as e:  # the future carries the failure to DDP
                fut.set_exception(e)

    def allreduce_avg(self, tensor):
        """Average `tensor` (a CPU tensor) over the ranks; returns a Future of the result."""
        fut = torch.futures.Future()
        narrow = tensor.dtype in (torch.float16, torch.bfloat16)
        work = tensor.float() if narrow else tensor
        if not work.is_contiguous():
            raise ValueError("inagg.torch: the bucket is not contiguous")

        def finish():
            if narrow:
                tensor.copy_(work)
            return tensor

        req = self.comm.iallreduce(work, op="avg")
        self.buckets += 1
        self._queue.put((req, fut, finish))
        return fut

    def close(self):
        """Stop the completion thread and, if this state joined the switch, leave it."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None
        if self._own and self.comm is not None:
            self.comm.close()
            self.comm = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def allreduce_hook(state, bucket):
    """DDP communication hook: average the bucket through the switch (see State)."""
    return state.allreduce_avg(bucket.buffer())
