"""inagg._torch_ext - builds (once) and loads the C++ extension behind the `inagg`
torch.distributed backend (python/inagg/csrc), with torch.utils.cpp_extension and ninja.

The extension is compiled on first use into a cache directory: $INAGG_TORCH_EXT_DIR, else
$XDG_CACHE_HOME/inagg/torch-ext (default ~/.cache/inagg/torch-ext), one subdirectory per torch
and Python version and nothing else: every copy of the package (the source tree's python/, a
venv's, Debian's python3-inagg) builds the same sources with the same command there, so it is
compiled once. For that the sources and inagg.h are copied into the subdirectory (only when
their content changed: ninja then rebuilds what depends on them) and the extension links
libinagg by its soname through a link there to the library `inagg.library()` loaded (which
the dynamic loader reuses). Compiling takes up to 3 minutes on 2 cores (measured: 22 s in a
fresh root, 72 s with the machine idle, 110-168 s under load) and says so on stderr, then the
time it took; later imports load the built module at once. Every process stages and
compiles under an flock(2) on the subdirectory's `inagg.lock`, which the kernel drops when its
holder dies: so where torch's cpp_extension guards its builds with a FileBaton (torch 1.x: a
file created with O_EXCL, which a killed compile leaves behind and torch waits for forever), a
`lock` found there is stale and is removed with a warning. Torch 2.x's FileLock is an flock
on that file, which stays between builds and needs nothing. No network is used. It needs libtorch-dev (the c10d headers),
ninja-build, g++ and setuptools (which cpp_extension imports).
"""
import glob
import hashlib
import os
import sys
import time

import inagg

_HERE = os.path.dirname(os.path.abspath(__file__))
_SOURCES = ["process_group_inagg.cpp", "process_group_fallback.cpp", "bindings.cpp"]
_MODULE = None


def _include_dir(libpath):
    """The directory holding inagg.h: $INAGG_INCLUDE, the package's own copy, the source
    tree's, or the installed library's prefix."""
    cands = [os.environ.get("INAGG_INCLUDE"),
             os.path.join(_HERE, "include"),  # what `pip install ./python` bundles
             os.path.normpath(os.path.join(_HERE, os.pardir, os.pardir, "include")),
             os.path.normpath(os.path.join(os.path.dirname(libpath), os.pardir, "include")),
             "/usr/local/include", "/usr/include"]
    for d in cands:
        if d and os.path.isfile(os.path.join(d, "inagg.h")):
            return d
    raise ImportError("inagg.torch: inagg.h not found (tried %s); install libinagg-dev or "
                      "set INAGG_INCLUDE" % ", ".join(d for d in cands if d))


def _cache_dir(torch):
    """The build directory: one per torch and Python version (their ABIs), whichever copy of
    the package and of libinagg asks."""
    root = os.environ.get("INAGG_TORCH_EXT_DIR")
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(xdg, "inagg", "torch-ext")
    tag = hashlib.sha256(("%s|%s" % (torch.__version__, sys.version)).encode()).hexdigest()[:12]
    path = os.path.join(root, "torch-%s-%s" % (torch.__version__.replace("+", "_"), tag))
    os.makedirs(path, exist_ok=True)
    return path


def _same_content(a, b):
    try:
        with open(a, "rb") as fa, open(b, "rb") as fb:
            return fa.read() == fb.read()
    except OSError:
        return False


def _sync(src, dest):
    """Copy src to dest unless dest already holds the same bytes (its mtime then stays, so
    ninja rebuilds nothing); atomic, as every rank of a job does this at once."""
    if _same_content(src, dest):
        return
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    tmp = "%s.%d.tmp" % (dest, os.getpid())
    with open(src, "rb") as fi, open(tmp, "wb") as fo:
        fo.write(fi.read())
    os.replace(tmp, dest)


def _point(link, target):
    """Make `link` a symbolic link to `target` (atomically; unchanged when it already is)."""
    if os.path.islink(link) and os.readlink(link) == target:
        return
    os.makedirs(os.path.dirname(link), exist_ok=True)
    tmp = "%s.%d.tmp" % (link, os.getpid())
    os.symlink(target, tmp)
    os.replace(tmp, link)


def _stage(build, libpath):
    """The sources, inagg.h and a link to the loaded libinagg under `build`: the paths the
    compile and link commands name, the same for every copy of the package."""
    src = os.path.join(build, "src")
    csrc = os.path.join(_HERE, "csrc")
    for pattern in ("*.cpp", "*.hpp"):
        for f in sorted(glob.glob(os.path.join(csrc, pattern))):
            _sync(f, os.path.join(src, os.path.basename(f)))
    inc = _include_dir(libpath)
    for name in ("inagg.h", os.path.join("inagg", "version.h")):
        if os.path.isfile(os.path.join(inc, name)):
            _sync(os.path.join(inc, name), os.path.join(src, "include", name))
    _point(os.path.join(build, "lib", "libinagg.so.0"), libpath)
    return src


def _cuda_build(torch, cpp_extension):
    """Whether the backend stages CUDA tensors: a CUDA build of torch and the CUDA toolkit's
    headers (cpp_extension's CUDA_HOME, e.g. /usr/local/cuda) to compile against. No GPU is
    needed to build; without either, CUDA tensors are Gloo's (counted)."""
    home = getattr(cpp_extension, "CUDA_HOME", None)
    return bool(torch.version.cuda and home and
                os.path.isfile(os.path.join(home, "include", "cuda_runtime.h")))


def load():
    """The compiled extension module (compiling it first if needed)."""
    global _MODULE
    if _MODULE is not None:
        return _MODULE
    import contextlib
    import importlib.util
    import io
    import torch
    if importlib.util.find_spec("setuptools") is None:  # torch.utils.cpp_extension imports it
        raise ImportError("inagg.torch: compiling the backend needs setuptools "
                          "(apt-get install python3-setuptools)")
    with contextlib.redirect_stderr(io.StringIO()):  # "No CUDA runtime is found": CPU only
        from torch.utils import cpp_extension
    if not os.path.isfile(os.path.join(cpp_extension.include_paths()[0], "torch", "csrc",
                                       "distributed", "c10d", "ProcessGroup.hpp")) and \
            not os.path.isfile("/usr/include/torch/csrc/distributed/c10d/ProcessGroup.hpp"):
        raise ImportError("inagg.torch: the c10d headers are missing; install libtorch-dev "
                          "(apt-get install libtorch-dev ninja-build)")
    if not cpp_extension.is_ninja_available():
        raise ImportError("inagg.torch: compiling the backend needs ninja "
                          "(apt-get install ninja-build)")
    # loaded first: the extension's DT_NEEDED libinagg.so.0 is then this very library
    libpath = os.path.realpath(inagg.library())
    build = _cache_dir(torch)
    baton = hasattr(cpp_extension, "FileBaton") and not hasattr(cpp_extension, "FileLock")
    with _build_lock(build, baton):
        _MODULE = _build(torch, cpp_extension, build, libpath)
    return _MODULE


def _build_lock(build, baton):
    """An exclusive flock on build/inagg.lock (blocking: another process's compile finishes
    first); with `baton` (torch's FileBaton guards its builds), a baton file found once the
    flock is held is stale and removed."""
    import contextlib
    import fcntl

    @contextlib.contextmanager
    def held():
        with open(os.path.join(build, "inagg.lock"), "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            stale = os.path.join(build, "lock")
            if baton and os.path.exists(stale):
                print("inagg.torch: removing %s, left by a compile that was interrupted "
                      "(torch.utils.cpp_extension would wait for it forever)" % stale,
                      file=sys.stderr, flush=True)
                os.remove(stale)
            yield
    return held()


def _build(torch, cpp_extension, build, libpath):
    """Stage the sources under `build` and compile (if needed) and load the extension."""
    src = _stage(build, libpath)
    libdir = os.path.join(build, "lib")
    name = "inagg_torch_backend"
    built = os.path.join(build, name + ".so")
    newest = max(os.path.getmtime(os.path.join(d, f)) for d, _, fs in os.walk(src) for f in fs)
    before = os.path.getmtime(built) if os.path.exists(built) else None
    t0 = time.monotonic()
    if before is None or before < newest:
        print("inagg.torch: compiling the torch.distributed backend into %s (once per torch "
              "version: up to 3 minutes on a loaded 2-core machine)" % build,
              file=sys.stderr, flush=True)
    cuda = _cuda_build(torch, cpp_extension)
    # No .cu source is compiled, but cpp_extension derives nvcc's arch flags all the same, from
    # the GPUs it sees: on a machine without one, name an arch for it (restored after)
    arch_unset = cuda and not os.environ.get("TORCH_CUDA_ARCH_LIST")
    if arch_unset:
        os.environ["TORCH_CUDA_ARCH_LIST"] = "8.0"
    module = cpp_extension.load(
        name=name,
        sources=[os.path.join(src, f) for f in _SOURCES + (["cuda_stage.cpp"] if cuda else [])],
        extra_include_paths=[os.path.join(src, "include"), src],
        extra_cflags=["-O2", "-Wall", "-Wextra", "-Werror"] + (["-DINAGG_WITH_CUDA"] if cuda else []),
        with_cuda=cuda,
        extra_ldflags=["-L" + libdir, "-l:libinagg.so.0", "-Wl,-rpath," + libdir],
        build_directory=build,
        verbose=bool(os.environ.get("INAGG_TORCH_EXT_VERBOSE")))
    if arch_unset:
        del os.environ["TORCH_CUDA_ARCH_LIST"]
    if os.path.getmtime(built) != before:
        print("inagg.torch: compiled the backend in %.0f s" % (time.monotonic() - t0),
              file=sys.stderr, flush=True)
    return module
