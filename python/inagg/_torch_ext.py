"""inagg._torch_ext - builds (once) and loads the C++ extension behind the `inagg`
torch.distributed backend (python/inagg/csrc), with torch.utils.cpp_extension and ninja.

The extension is compiled on first use into a cache directory: $INAGG_TORCH_EXT_DIR, else
$XDG_CACHE_HOME/inagg/torch-ext (default ~/.cache/inagg/torch-ext), one subdirectory per
torch version and libinagg path. Compiling takes about a minute and says so on stderr; later
imports load the built module at once (cpp_extension rebuilds when a source changed). No
network is used. It needs libtorch-dev (the c10d headers) and ninja-build, and links the
libinagg that `inagg.library()` found, with that directory as its run path.
"""
import hashlib
import os
import sys

import inagg

_HERE = os.path.dirname(os.path.abspath(__file__))
_SOURCES = ["process_group_inagg.cpp", "bindings.cpp"]
_HEADERS = ["process_group_inagg.hpp", "inagg_work.hpp"]
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
    raise ImportError("inagg.torch: inagg.h not found (tried %s); set INAGG_INCLUDE"
                      % ", ".join(d for d in cands if d))


def _cache_dir(torch, libpath):
    root = os.environ.get("INAGG_TORCH_EXT_DIR")
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(xdg, "inagg", "torch-ext")
    tag = hashlib.sha256(("%s|%s|%s" % (torch.__version__, os.path.realpath(libpath),
                                        sys.version)).encode()).hexdigest()[:12]
    path = os.path.join(root, "torch-%s-%s" % (torch.__version__.replace("+", "_"), tag))
    os.makedirs(path, exist_ok=True)
    return path


def load():
    """The compiled extension module (compiling it first if needed)."""
    global _MODULE
    if _MODULE is not None:
        return _MODULE
    import contextlib
    import io
    import torch
    with contextlib.redirect_stderr(io.StringIO()):  # "No CUDA runtime is found": CPU only
        from torch.utils import cpp_extension
    major = int(torch.__version__.split(".")[0])
    if major >= 2:  # c10d split ProcessGroup into ProcessGroup + Backend in 2.0
        raise ImportError("inagg.torch: the `inagg` backend is written against torch 1.13's "
                          "c10d::ProcessGroup; torch %s (c10d::Backend) is not supported yet. "
                          "The DDP hook (inagg.torch.allreduce_hook) works there"
                          % torch.__version__)
    if not os.path.isfile(os.path.join(cpp_extension.include_paths()[0], "torch", "csrc",
                                       "distributed", "c10d", "ProcessGroup.hpp")) and \
            not os.path.isfile("/usr/include/torch/csrc/distributed/c10d/ProcessGroup.hpp"):
        raise ImportError("inagg.torch: the c10d headers are missing; install libtorch-dev "
                          "(apt-get install libtorch-dev ninja-build)")
    if not cpp_extension.is_ninja_available():
        raise ImportError("inagg.torch: compiling the backend needs ninja "
                          "(apt-get install ninja-build)")
    libpath = os.path.realpath(inagg.library())
    libdir = os.path.dirname(libpath)
    build = _cache_dir(torch, libpath)
    csrc = os.path.join(_HERE, "csrc")
    name = "inagg_torch_backend"
    built = os.path.join(build, name + ".so")
    newest = max(os.path.getmtime(os.path.join(csrc, f)) for f in _SOURCES + _HEADERS)
    if not os.path.exists(built) or os.path.getmtime(built) < newest:
        print("inagg.torch: compiling the torch.distributed backend into %s (about a minute, "
              "once)" % build, file=sys.stderr, flush=True)
    _MODULE = cpp_extension.load(
        name=name,
        sources=[os.path.join(csrc, f) for f in _SOURCES],
        extra_include_paths=[_include_dir(libpath), csrc],
        extra_cflags=["-O2", "-Wall", "-Wextra", "-Werror"],
        extra_ldflags=[libpath, "-Wl,-rpath," + libdir],
        build_directory=build,
        verbose=bool(os.environ.get("INAGG_TORCH_EXT_VERBOSE")))
    return _MODULE
