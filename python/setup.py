"""setup.py - copies the built libinagg.so next to the package when it is installed, so an
installed `inagg` works without INAGG_LIBRARY, the built `inagg` command into inagg/bin/ (the
switch the torch backend starts when none is named), and inagg.h into inagg/include/ for the
torch backend's extension (inagg/csrc), compiled on first use. Install without network (Debian 12
refuses pip into its own Python, PEP 668: use a venv that still sees Debian's numpy and torch):

    make && /usr/bin/python3 -m venv --system-site-packages ~/.venvs/inagg
    ~/.venvs/inagg/bin/pip install --no-build-isolation --no-index ./python

The bundled library is machine code, so the wheel is a platform wheel (py3-none-linux_x86_64
on x86-64): the package itself is pure Python (ctypes), hence py3 and no ABI tag.

INAGG_BUILD_DIR names the build directory (default: ../build beside this file). Without a built
library the package installs alone and finds libinagg through INAGG_LIBRARY or the loader, and
`inagg` on PATH.
"""
import glob
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:  # no wheel package: pip installs without building a wheel
    bdist_wheel = None


class BuildPyWithLibrary(build_py):
    def run(self):
        super().run()
        here = os.path.dirname(os.path.abspath(__file__))
        build = os.environ.get("INAGG_BUILD_DIR", os.path.join(here, os.pardir, "build"))
        libs = sorted(glob.glob(os.path.join(build, "libinagg.so.*.*.*")))
        if libs:
            dest = os.path.join(self.build_lib, "inagg", "libinagg.so.0")
            shutil.copyfile(libs[-1], dest)
            print("inagg: bundled %s as %s" % (libs[-1], dest))
        binary = os.path.join(build, "inagg")
        if os.path.isfile(binary):
            dest = os.path.join(self.build_lib, "inagg", "bin", "inagg")
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copy2(binary, dest)  # with its mode: the wheel keeps it executable
            print("inagg: bundled %s as %s" % (binary, dest))
        include = os.path.join(here, os.pardir, "include")
        for name in ("inagg.h", os.path.join("inagg", "version.h")):
            src = os.path.join(include, name)
            if os.path.exists(src):
                dest = os.path.join(self.build_lib, "inagg", "include", name)
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                shutil.copyfile(src, dest)


class BinaryDistribution(Distribution):
    """The package carries a shared library: never a pure (any-platform) distribution."""

    def has_ext_modules(self):
        return True


cmdclass = {"build_py": BuildPyWithLibrary}
if bdist_wheel is not None:

    class PlatformWheel(bdist_wheel):
        """Tag py3-none-PLATFORM: any Python 3 (ctypes, no extension module), this machine."""

        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self):
            _, _, plat = super().get_tag()
            return "py3", "none", plat

    cmdclass["bdist_wheel"] = PlatformWheel

setup(cmdclass=cmdclass, distclass=BinaryDistribution)
