"""setup.py - copies the built libinagg.so next to the package when it is installed, so an
installed `inagg` works without INAGG_LIBRARY, and inagg.h into inagg/include/ for the torch
backend's extension (inagg/csrc), compiled on first use. Install without network:

    make && pip install --no-build-isolation --no-index ./python

INAGG_BUILD_DIR names the build directory (default: ../build beside this file). Without a built
library the package installs alone and finds libinagg through INAGG_LIBRARY or the loader.
"""
import glob
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py


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
        include = os.path.join(here, os.pardir, "include")
        for name in ("inagg.h", os.path.join("inagg", "version.h")):
            src = os.path.join(include, name)
            if os.path.exists(src):
                dest = os.path.join(self.build_lib, "inagg", "include", name)
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                shutil.copyfile(src, dest)


setup(cmdclass={"build_py": BuildPyWithLibrary})
