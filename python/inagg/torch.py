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

2. A DDP communication hook for a model whose process group is another backend's (Gloo):
   a thin wrapper over the backend above, which it needs (compiled on first use as there).

    dist.init_process_group("gloo", ...)
    model = torch.nn.parallel.DistributedDataParallel(net)
    state = inagg.torch.State(switch="10.0.0.1:7000")     # or $INAGG_SWITCH
    model.register_comm_hook(state, inagg.torch.allreduce_hook)
    ...                                                    # train as usual
    state.close()

State makes an `inagg` process group of the same ranks (dist.new_group, collective: every rank
constructs its State); the hook hands each bucket to that group's asynchronous all_reduce
(average) and returns its future, so buckets aggregate while backward goes on, with
everything the backend does: CUDA buckets staged through pinned memory, float16 and bfloat16
buckets summed as float32, the fall-back to Gloo when the switch is lost, backend_stats().
compression="fp16", "zfp" (zfp at zfp_rate bits per value) or any codec of the library
("zfp:rate=8", "zfp:precision=16", ...) is the group's codec (the switch decodes, sums,
re-encodes: docs/COMPRESSION.md), without error feedback (DDP's buckets differ from call to
call).
"""

try:
    import torch
    import torch.distributed as dist
except ImportError as _e:
    raise ImportError("inagg.torch needs PyTorch with torch.distributed (%s); on Debian: "
                      "apt-get install python3-torch libtorch-dev ninja-build, and run "
                      "/usr/bin/python3" % _e) from None

from inagg._backend import Options, backend_stats, register as _register

__all__ = ["State", "allreduce_hook", "Options", "backend_stats"]

_register()


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
    """What the hook needs: an `inagg` process group of the model's ranks.

    State(*, switch=None, process_group=None, compression=None, zfp_rate=16, timeout_ms=None,
          float_mode=None, protocol=None, slots=0, threads=0, packet_elems=0)

    switch: "HOST:PORT" (default $INAGG_SWITCH, else the backend's embedded switch).
    compression: None, "fp16", "zfp" (zfp:rate=zfp_rate) or a codec string: the group's codec.
    process_group: whose ranks the group has (default the world). The other arguments are
    inagg.torch.Options' (the job's float mode, protocol, window, engine threads, packet
    size); timeout_ms the group's timeout (default torch's).
    """

    def __init__(self, comm=None, *, switch=None, process_group=None, compression=None,
                 zfp_rate=16, timeout_ms=None, **options):
        if comm is not None:
            raise TypeError("inagg.torch: State(comm=...) is gone: the hook runs through the "
                            "inagg backend's process group; name the switch (switch=) instead")
        allowed = ("float_mode", "protocol", "slots", "threads", "packet_elems")
        unknown = sorted(set(options) - set(allowed))
        if unknown:
            raise TypeError("inagg.torch: State() got %s; its options are switch, "
                            "process_group, compression, zfp_rate, timeout_ms, %s"
                            % (", ".join(unknown), ", ".join(allowed)))
        self.compression = _codec_of(compression, zfp_rate)
        opts = Options(switch=switch, compress=self.compression or "none",
                       error_feedback=False, **options)
        base = process_group or dist.group.WORLD
        ranks = _ranks_of(base)
        kw = {}
        if timeout_ms is not None:
            import datetime
            kw["timeout"] = datetime.timedelta(milliseconds=timeout_ms)
        self.group = dist.new_group(ranks, backend="inagg", pg_options=opts, **kw)
        self.world = len(ranks)
        self.buckets = 0

    def allreduce_avg(self, tensor):
        """Average `tensor` over the ranks through the switch; a Future of the result."""
        if self.group is None:
            raise RuntimeError("inagg.torch: this State is closed")
        self.buckets += 1
        work = dist.all_reduce(tensor, op=dist.ReduceOp.AVG, group=self.group, async_op=True)
        return work.get_future().then(lambda fut: tensor)

    def stats(self):
        """backend_stats() of the hook's group: calls through the switch and to Gloo, the
        wire's packet and byte counters ("wire"), fall-backs."""
        return backend_stats(self.group)

    def close(self):
        """Leave the switch job (destroys the hook's process group)."""
        if self.group is not None:
            dist.destroy_process_group(self.group)
            self.group = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _ranks_of(group):
    """The global ranks of `group`, on torch 1.13 and 2.x."""
    if group is None or group is dist.group.WORLD:
        return list(range(dist.get_world_size()))
    get = getattr(dist, "get_process_group_ranks", None)
    if get is not None:
        return list(get(group))
    return sorted(dist.distributed_c10d._pg_group_ranks[group].keys())


def allreduce_hook(state, bucket):
    """DDP communication hook: average the bucket through the switch (see State); PyTorch's
    fp16_compress_wrapper and bf16_compress_wrapper wrap it as any hook."""
    return state.allreduce_avg(bucket.buffer())
