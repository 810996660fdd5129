#!/usr/bin/env python3
"""run_distributed_test.py - PyTorch's own distributed test base
(torch/testing/_internal/distributed/distributed_test.py, shipped with python3-torch) on one
backend, as PyTorch's test/distributed/test_distributed_spawn.py runs it: one spawned process
per rank and test, initialised through a file store (INIT_METHOD / TEMP_DIR as upstream).

    BACKEND=inagg WORLD_SIZE=3 python3 run_distributed_test.py [-k all_reduce] [-v]
    BACKEND=inagg INAGG_GLOO_TESTS=1 ...    (the tests written for Gloo by name too: they run
                                             as for Gloo, on a world group that is inagg's)
    INAGG_DIST_START=fork ...                (ranks forked, not spawned: much faster)

For BACKEND=inagg the backend is registered (import inagg.torch) in every rank and named in
the base's capability sets where Gloo is (DDP, subgroups, the plugin list: the base's
"plugin" backends run its group-override tests against Gloo); the tests that name Gloo
itself (`BACKEND == "gloo"`) skip, as they do for every backend but Gloo.
"""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # expecttest stand-in
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))

os.environ.setdefault("BACKEND", "inagg")
os.environ.setdefault("WORLD_SIZE", "3")
os.environ.setdefault("TEMP_DIR", tempfile.mkdtemp(prefix="inagg-dist-test-"))

import torch  # noqa: E402
from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402
from torch.testing._internal.common_utils import run_tests  # noqa: E402

BACKEND = os.environ["BACKEND"]
if BACKEND == "inagg":
    import inagg.torch  # noqa: F401,E402  registers "inagg" (spawned ranks import this file)
    for feature in ("ddp", "subgroup", "plugin"):
        DistTestCases.backend_feature[feature].add("inagg")

# INAGG_GLOO_TESTS=1: also run the tests the base reserves for Gloo by name (its decorators
# read BACKEND once, at import): they are imported as for Gloo, then run on inagg, which hands
# those calls to its Gloo group. Without it they skip, as for any backend but Gloo.
AS_GLOO = BACKEND == "inagg" and os.environ.get("INAGG_GLOO_TESTS") == "1"
if AS_GLOO:
    os.environ["BACKEND"] = "gloo"
from torch.testing._internal.distributed import distributed_test  # noqa: E402
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest, TestDistBackend)
if AS_GLOO and int(torch.__version__.split(".")[0]) < 2:
    os.environ["BACKEND"] = BACKEND
    distributed_test.BACKEND = BACKEND  # what init_process_group and the test bodies use
elif AS_GLOO:
    # torch 2.x: the test bodies keep reading BACKEND == "gloo" (they have branches for Gloo
    # by name that leave a test without its model otherwise); the groups they make as Gloo's
    # are inagg's.
    os.environ["BACKEND"] = BACKEND
    import torch.distributed as dist  # noqa: E402
    _init_process_group = dist.init_process_group

    def _init_as_inagg(*args, **kwargs):
        if kwargs.get("backend") == "gloo":
            kwargs["backend"] = "inagg"
        return _init_process_group(*args, **kwargs)

    dist.init_process_group = _init_as_inagg


# INAGG_DIST_START=fork starts the ranks with fork instead of spawn (as PyTorch's former
# test_distributed_fork.py did): no re-import of torch per rank and test, which makes the whole
# base several times faster on a small machine. Compare backends under the same start method.
START = os.environ.get("INAGG_DIST_START", "spawn")
if START not in ("spawn", "fork"):
    sys.exit(f"INAGG_DIST_START={START}: expected spawn or fork")


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        if START == "fork":
            self._start_processes(torch.multiprocessing.get_context("fork").Process)
        else:
            self._spawn_processes()
        torch.backends.cudnn.flags(enabled=True, allow_tf32=False).__enter__()


if __name__ == "__main__":
    run_tests()
