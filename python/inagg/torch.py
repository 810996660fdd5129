"""inagg.torch - a PyTorch DDP communication hook that averages gradient buckets through an
inagg switch, leaving everything else (parameter broadcast, buffers, barriers) to the process
group DDP was built on (Gloo).

    import torch.distributed as dist, inagg.torch
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
the switch and narrowed back. compression="fp16" / "bf16" / "zfp" (python3-zfpy) round each
rank's gradient through that format before it is summed and the average after it, as
torch's compress hooks do; inagg's wire carries 32-bit elements, so this changes the numbers
the model sees, not the bytes on the wire.
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


class State:
    """What the hook needs: an inagg communicator and the completion thread.

    State(comm=None, *, switch=None, job=None, process_group=None, compression=None,
          zfp_rate=16, **comm_options)

    Without `comm`, joins the switch `switch` (default $INAGG_SWITCH) as this process's rank
    of `process_group` (default the world group), with a job name rank 0 picks and
    broadcasts; comm_options go to inagg.Comm (float_mode, slots, threads, timeout_ms, ...).
    """

    def __init__(self, comm=None, *, switch=None, job=None, process_group=None,
                 compression=None, zfp_rate=16, **comm_options):
        if compression not in (None, "fp16", "bf16", "zfp"):
            raise ValueError("inagg.torch: compression must be None, 'fp16', 'bf16' or 'zfp'")
        self.compression = compression
        self.zfp_rate = zfp_rate
        if compression == "zfp":
            try:
                import zfpy  # noqa: F401
            except ImportError:
                raise ImportError("inagg.torch: compression='zfp' needs zfpy "
                                  "(Debian: apt-get install python3-zfpy)") from None
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

    def _round(self, t):
        """Round a float32 tensor through the compression format, in place."""
        if self.compression == "fp16":
            t.copy_(t.to(torch.float16))
        elif self.compression == "bf16":
            t.copy_(t.to(torch.bfloat16))
        elif self.compression == "zfp":
            import zfpy
            a = t.numpy()
            a[...] = zfpy.decompress_numpy(zfpy.compress_numpy(a, rate=self.zfp_rate))
        return t

    def allreduce_avg(self, tensor):
        """Average `tensor` (a CPU tensor) over the ranks; returns a Future of the result."""
        fut = torch.futures.Future()
        narrow = tensor.dtype in (torch.float16, torch.bfloat16)
        work = tensor.float() if narrow else tensor
        if not work.is_contiguous():
            raise ValueError("inagg.torch: the bucket is not contiguous")
        if self.compression and work.dtype == torch.float32:
            self._round(work)

        def finish():
            if self.compression and work.dtype == torch.float32:
                self._round(work)
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
