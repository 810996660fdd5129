"""inagg - allreduce through an inagg aggregation switch, from Python.

    import numpy as np, inagg
    with inagg.Comm("127.0.0.1:7000", rank, world, job="demo") as comm:
        grad = np.ones(1_000_000, dtype=np.float32)
        comm.allreduce(grad, op="avg")          # in place, no copy
        req = comm.iallreduce(grad)             # asynchronous; the buffer is kept alive
        ...                                     # compute meanwhile
        req.wait()

Buffers: numpy arrays, torch tensors (CPU) and any writable buffer-protocol object of int32 or
float32 elements, in one contiguous block. Anything else raises TypeError (wrong kind or dtype)
or ValueError (not contiguous, read-only, not on the CPU). The library is libinagg.so, found
through $INAGG_LIBRARY, then next to this package, then in the source tree's build/, then by the
system loader. The calls release the GIL.
"""
import ctypes
import ctypes.util
import os
import threading
import warnings
import weakref

__all__ = ["Comm", "Request", "InaggError", "library", "version", "SUM", "AVG", "INT32",
           "FLOAT32"]

__version__ = "0.1.0"

# inagg.h: result codes, dtypes, ops, modes.
OK = 0
_CODES = {
    0: "OK", -1: "INVALID", -2: "SYSTEM", -3: "NOMEM", -4: "TIMEOUT", -5: "REFUSED",
    -6: "VERSION", -7: "JOB_FAILED", -8: "CONNECTION", -9: "PROTOCOL", -10: "OVERFLOW",
    -11: "NONFINITE", -12: "UNSUPPORTED",
}
ERR_OVERFLOW = -10
ERR_NONFINITE = -11
INT32, FLOAT32 = 0, 1
SUM, AVG = 0, 1
_OPS = {"sum": SUM, "avg": AVG, "mean": AVG, SUM: SUM, AVG: AVG}
_FLOAT_MODES = {"fixed": 0, "native": 1}
_PROTOCOLS = {"switchml": 0, "p4sgd": 1}
MAX_PACKET_ELEMS = 16360  # INAGG_MAX_PACKET_ELEMS: (65507 - 36 - 28) / 4


class InaggError(RuntimeError):
    """A failed inagg call: .code (negative int), .name ("TIMEOUT", ...), .detail."""

    def __init__(self, code, detail=""):
        self.code = code
        self.name = _CODES.get(code, str(code))
        self.detail = detail
        text = _lib().inagg_strerror(code).decode(errors="replace") if _LIB else self.name
        super().__init__("inagg: %s%s" % (text, ": " + detail if detail else ""))


class _Options(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32), ("slots", ctypes.c_uint32),
        ("packet_elems", ctypes.c_uint32), ("threads", ctypes.c_uint32),
        ("float_mode", ctypes.c_int), ("protocol", ctypes.c_int),
        ("rto_us", ctypes.c_uint32), ("rto_min_us", ctypes.c_uint32),
        ("rto_max_us", ctypes.c_uint32), ("timeout_ms", ctypes.c_uint32),
        ("socket_buffer", ctypes.c_uint32), ("faults", ctypes.c_char_p),
        ("optimizer", ctypes.c_void_p), ("compress", ctypes.c_char_p),
        ("no_error_feedback", ctypes.c_uint32),
        ("secret", ctypes.c_char_p), ("secret_file", ctypes.c_char_p),
    ]


class _Stats(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in (
        "packets_sent", "packets_received", "retransmissions", "duplicates_ignored",
        "invalid_dropped", "bytes_sent", "bytes_received")] + [
        ("srtt_us", ctypes.c_uint32), ("rto_us", ctypes.c_uint32)]


class _CodecStats(ctypes.Structure):
    _fields_ = [("size", ctypes.c_uint32), ("rto_code_floor_us", ctypes.c_uint32)] + [
        (n, ctypes.c_uint64) for n in (
            "chunks_encoded", "chunks_decoded", "encode_ns", "decode_ns", "overlap_ns",
            "chunks_ahead")] + [("codec_threads", ctypes.c_uint32), ("reserved", ctypes.c_uint32)]


_LIB = None
_LIB_PATH = None
_LIB_LOCK = threading.Lock()


def _candidates():
    env = os.environ.get("INAGG_LIBRARY")
    if env:
        yield env
    here = os.path.dirname(os.path.abspath(__file__))
    for name in ("libinagg.so.0", "libinagg.so"):
        yield os.path.join(here, name)
    tree = os.path.join(here, os.pardir, os.pardir, "build")  # python/inagg -> build/
    for name in ("libinagg.so.0", "libinagg.so"):
        yield os.path.normpath(os.path.join(tree, name))
    found = ctypes.util.find_library("inagg")
    yield found or "libinagg.so.0"


def _loaded_path(name):
    """The file the loader opened for `name` (a bare soname is found by the loader: the
    path is in /proc/self/maps), so library() is always a path."""
    if os.sep in name:
        return name
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split(None, 5)[-1].strip()
                if os.path.basename(path).startswith("libinagg.so"):
                    return path
    except OSError:
        pass
    return name


def _lib():
    global _LIB, _LIB_PATH
    if _LIB is not None:
        return _LIB
    with _LIB_LOCK:
        if _LIB is not None:
            return _LIB
        tried = []
        for path in _candidates():
            if os.sep in path and not os.path.exists(path):
                tried.append(path)
                continue
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                tried.append("%s (%s)" % (path, e))
                if path == os.environ.get("INAGG_LIBRARY"):
                    raise ImportError("INAGG_LIBRARY=%s cannot be loaded: %s" % (path, e))
                continue
            _declare(lib)
            _LIB, _LIB_PATH = lib, _loaded_path(path)
            return lib
        raise ImportError("inagg: libinagg.so not found; build it (make) or set INAGG_LIBRARY. "
                          "Tried: " + ", ".join(tried))


def _declare(lib):
    P, U32, SZ, I = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_size_t, ctypes.c_int
    sig = {
        "inagg_comm_create": (I, [ctypes.POINTER(P), ctypes.c_char_p, ctypes.c_char_p, U32, U32,
                                  ctypes.POINTER(_Options), ctypes.c_char_p, SZ]),
        "inagg_comm_destroy": (I, [P]),
        "inagg_comm_rank": (U32, [P]),
        "inagg_comm_world": (U32, [P]),
        "inagg_comm_packet_elems": (U32, [P]),
        "inagg_allreduce": (I, [P, P, P, SZ, I, I]),
        "inagg_iallreduce": (I, [P, P, P, SZ, I, I, ctypes.POINTER(P)]),
        "inagg_test": (I, [P, ctypes.POINTER(I)]),
        "inagg_wait": (I, [P]),
        "inagg_barrier": (I, [P]),
        "inagg_get_stats": (I, [P, ctypes.POINTER(_Stats)]),
        "inagg_strerror": (ctypes.c_char_p, [I]),
        "inagg_last_error": (ctypes.c_char_p, [P]),
        "inagg_version": (U32, []),
    }
    for name, (res, args) in sig.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    if hasattr(lib, "inagg_get_codec_stats"):  # newer libraries only
        lib.inagg_get_codec_stats.restype = I
        lib.inagg_get_codec_stats.argtypes = [P, ctypes.POINTER(_CodecStats)]


def library():
    """The path of the libinagg that was loaded."""
    _lib()
    return _LIB_PATH


def version():
    """The library's version number (major*10000 + minor*100 + patch)."""
    return _lib().inagg_version()


def _buffer_of(obj):
    """(address, element count, inagg dtype, keep-alive object) of a tensor-like buffer."""
    mod = type(obj).__module__.split(".")[0]
    if mod == "torch":
        import torch
        if not isinstance(obj, torch.Tensor):
            raise TypeError("inagg: expected a tensor, got %s" % type(obj).__name__)
        dt = {torch.float32: FLOAT32, torch.int32: INT32}.get(obj.dtype)
        if dt is None:
            raise TypeError("inagg: torch dtype %s is not supported (int32 or float32)"
                            % obj.dtype)
        if obj.device.type != "cpu":
            raise ValueError("inagg: the tensor is on %s; inagg reads CPU memory" % obj.device)
        if not obj.is_contiguous():
            raise ValueError("inagg: the tensor is not contiguous (call .contiguous() on a copy "
                             "and copy the result back)")
        return obj.data_ptr(), obj.numel(), dt, obj
    if mod == "numpy":
        import numpy as np
        if not isinstance(obj, np.ndarray):
            raise TypeError("inagg: expected an ndarray, got %s" % type(obj).__name__)
        if obj.dtype == np.float32:
            dt = FLOAT32
        elif obj.dtype == np.int32:
            dt = INT32
        else:
            raise TypeError("inagg: numpy dtype %s is not supported (int32 or float32)"
                            % obj.dtype)
        if not (obj.flags.c_contiguous or obj.flags.f_contiguous):
            raise ValueError("inagg: the array is not contiguous (use np.ascontiguousarray on "
                             "a copy and copy the result back)")
        if not obj.flags.writeable:
            raise ValueError("inagg: the array is read-only; allreduce writes the result in place")
        return obj.ctypes.data, obj.size, dt, obj
    try:
        mv = memoryview(obj)
    except TypeError:
        raise TypeError("inagg: %s is not a numpy array, torch tensor or buffer"
                        % type(obj).__name__) from None
    fmt = mv.format.lstrip("@=<")
    if fmt == "f" and mv.itemsize == 4:
        dt = FLOAT32
    elif fmt in ("i", "l") and mv.itemsize == 4:
        dt = INT32
    else:
        raise TypeError("inagg: buffer format %r is not supported (int32 or float32)" % mv.format)
    if not mv.contiguous:
        raise ValueError("inagg: the buffer is not contiguous")
    if mv.readonly:
        raise ValueError("inagg: the buffer is read-only; allreduce writes the result in place")
    n = mv.nbytes // 4
    if n == 0:
        return None, 0, dt, obj
    addr = ctypes.addressof((ctypes.c_char * mv.nbytes).from_buffer(mv))
    return addr, n, dt, (obj, mv)


def _op(op):
    try:
        return _OPS[op.lower() if isinstance(op, str) else op]
    except (KeyError, AttributeError):
        raise ValueError("inagg: op must be 'sum' or 'avg', not %r" % (op,)) from None


class Request:
    """An allreduce in flight. test() says whether it finished; wait() finishes it (raising
    InaggError on failure) and returns the buffer. The buffer is kept alive until then."""

    __slots__ = ("_comm", "_req", "_buf", "_result", "__weakref__")

    def __init__(self, comm, handle, buf):
        self._comm, self._req, self._buf, self._result = comm, handle, buf, None

    def test(self):
        if self._req is None:
            return True
        done = ctypes.c_int(0)
        rc = _lib().inagg_test(self._req, ctypes.byref(done))
        if rc != OK:
            raise InaggError(rc)
        return bool(done.value)

    def wait(self):
        if self._req is not None:
            handle, self._req = self._req, None
            rc = _lib().inagg_wait(handle)
            self._comm._requests.discard(self)
            self._result = self._comm._check(rc)
        return self._buf

    @property
    def done(self):
        return self._req is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.wait()

    def __del__(self):
        if getattr(self, "_req", None) is not None:
            try:
                self.wait()
            except Exception:
                pass


class Comm:
    """One rank of a job on an inagg switch: inagg_comm_create with the given options.

    Comm(switch, rank, world, job="inagg", *, slots=16, packet_elems=0, threads=1,
         float_mode="fixed"|"native", protocol="switchml"|"p4sgd", timeout_ms=30000,
         rto_us=2000, rto_min_us=1000, rto_max_us=50000, socket_buffer=0, faults=None,
         compress=None, error_feedback=True, secret=None, secret_file=None)

    compress: None, or "zfp:rate=R" | "zfp:precision=P" | "zfp:accuracy=A" | "zfp:reversible"
    | "fp16" (float32 through a codec in the switch; docs/COMPRESSION.md). Variable-size modes
    need a smaller packet_elems (the error says how many fit). error_feedback=False keeps no
    residual with a lossy mode.
    packet_elems: 0 sizes packets to the path MTU toward the switch (one frame each; loopback:
    MAX_PACKET_ELEMS); a larger value than the path carries whole is refused.
    secret / secret_file: the job secret its ranks share (default: $INAGG_JOB_SECRET, else the
    file $INAGG_JOB_SECRET_FILE names); see PROTOCOL.md "Authentication".

    Blocks until every rank of the job has joined (or timeout_ms). Use as a context manager,
    or call close(); both wait for requests still in flight."""

    def __init__(self, switch, rank, world, job="inagg", *, slots=None, packet_elems=None,
                 threads=None, float_mode="fixed", protocol="switchml", timeout_ms=None,
                 rto_us=None, rto_min_us=None, rto_max_us=None, socket_buffer=None,
                 faults=None, compress=None, error_feedback=True, secret=None,
                 secret_file=None):
        lib = _lib()
        o = _Options(ctypes.sizeof(_Options), 16, 0, 1, 0, 0, 2000, 1000, 50000,
                     30000, 0, None, None, None, 0, None, None)
        for name, val in (("slots", slots), ("packet_elems", packet_elems),
                          ("threads", threads), ("timeout_ms", timeout_ms), ("rto_us", rto_us),
                          ("rto_min_us", rto_min_us), ("rto_max_us", rto_max_us),
                          ("socket_buffer", socket_buffer)):
            if val is not None:
                setattr(o, name, int(val))
        try:
            o.float_mode = _FLOAT_MODES[float_mode]
            o.protocol = _PROTOCOLS[protocol]
        except KeyError as e:
            raise ValueError("inagg: unknown option value %s" % e) from None
        self._faults = faults.encode() if faults else None
        o.faults = self._faults
        self._compress = str(compress).encode() if compress else None
        o.compress = self._compress
        o.no_error_feedback = 0 if error_feedback else 1
        self._secret = secret.encode() if isinstance(secret, str) else secret
        self._secret_file = str(secret_file).encode() if secret_file else None
        o.secret = self._secret
        o.secret_file = self._secret_file
        self._opts = o
        self._handle = None
        self._requests = weakref.WeakSet()
        handle = ctypes.c_void_p()
        detail = ctypes.create_string_buffer(512)
        rc = lib.inagg_comm_create(ctypes.byref(handle), str(switch).encode(), str(job).encode(),
                                   int(rank), int(world), ctypes.byref(o), detail, len(detail))
        if rc != OK:
            raise InaggError(rc, detail.value.decode(errors="replace"))
        self._handle = handle

    @property
    def rank(self):
        return _lib().inagg_comm_rank(self._live())

    @property
    def world(self):
        return _lib().inagg_comm_world(self._live())

    @property
    def packet_elems(self):
        """Elements per packet as sent: the one asked for, or what one frame of the path
        carries when packet_elems was 0."""
        return _lib().inagg_comm_packet_elems(self._live())

    @property
    def closed(self):
        return self._handle is None

    def _live(self):
        if self._handle is None:
            raise ValueError("inagg: the communicator is closed")
        return self._handle

    def _check(self, rc):
        if rc == OK:
            return rc
        detail = _lib().inagg_last_error(self._handle).decode(errors="replace") \
            if self._handle is not None else ""
        if rc == ERR_OVERFLOW:
            warnings.warn("inagg: int32 sum wrapped around (the wrapped result was delivered)",
                          RuntimeWarning, stacklevel=3)
            return rc
        if rc == ERR_NONFINITE:
            warnings.warn("inagg: a float32 input held NaN or Inf; its chunks are NaN in the "
                          "result", RuntimeWarning, stacklevel=3)
            return rc
        raise InaggError(rc, detail)

    def allreduce(self, buf, op="sum"):
        """Sum (or average) `buf` over all ranks, in place; returns `buf`."""
        h = self._live()
        addr, n, dt, _ = _buffer_of(buf)
        if n:
            self._check(_lib().inagg_allreduce(h, addr, addr, n, dt, _op(op)))
        return buf

    def iallreduce(self, buf, op="sum"):
        """Start an in-place allreduce of `buf`; returns a Request (wait() it)."""
        h = self._live()
        addr, n, dt, keep = _buffer_of(buf)
        req = ctypes.c_void_p()
        if n == 0:
            return Request(self, None, buf)
        self._check(_lib().inagg_iallreduce(h, addr, addr, n, dt, _op(op), ctypes.byref(req)))
        r = Request(self, req, buf)
        r._result = keep  # holds buffer views alive too
        self._requests.add(r)
        return r

    def barrier(self):
        self._check(_lib().inagg_barrier(self._live()))

    def stats(self):
        s = _Stats()
        self._check(_lib().inagg_get_stats(self._live(), ctypes.byref(s)))
        return {name: getattr(s, name) for name, _ in _Stats._fields_}

    def codec_stats(self):
        """Coding counters of a compressed communicator (inagg_get_codec_stats): chunks and
        nanoseconds encoded and decoded, overlap_ns, chunks_ahead, rto_code_floor_us."""
        lib = _lib()
        if not hasattr(lib, "inagg_get_codec_stats"):
            raise InaggError(-1, "this libinagg has no inagg_get_codec_stats")
        s = _CodecStats()
        s.size = ctypes.sizeof(s)
        self._check(lib.inagg_get_codec_stats(self._live(), ctypes.byref(s)))
        return {name: getattr(s, name) for name, _ in _CodecStats._fields_
                if name not in ("size", "reserved")}

    def close(self):
        """Wait for requests in flight, leave the job, free the communicator."""
        if self._handle is None:
            return
        for r in list(self._requests):
            try:
                r.wait()
            except InaggError:
                pass
        h, self._handle = self._handle, None
        rc = _lib().inagg_comm_destroy(h)
        if rc != OK:
            raise InaggError(rc)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_handle", None) is not None:
            try:
                self.close()
            except Exception:
                pass

    def __repr__(self):
        if self._handle is None:
            return "<inagg.Comm closed>"
        return "<inagg.Comm rank %d of %d>" % (self.rank, self.world)
