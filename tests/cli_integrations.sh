#!/usr/bin/env bash
# tests/cli_integrations.sh - the three ways into inagg, end to end: link (make install, then a
# program built with pkg-config against the installed copy), import (the Python package on numpy
# and torch, installed offline; the DDP hook against Gloo; the Gloo baseline), and preload
# (libinagg-pmpi.so under unmodified C and Fortran MPI programs and Debian's ScaLAPACK/BLACS
# test programs: the same pass counts as without it). Every command runs under `timeout`; a
# case whose dependency is missing is skipped with the reason. Ends "N passed, N failed, N skipped".
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
pass=0 fail=0 skip=0
ok()   { echo "ok      $1"; pass=$((pass + 1)); }
bad()  { echo "FAIL    $1: $2"; fail=$((fail + 1)); }
skp()  { echo "skip    $1: $2"; skip=$((skip + 1)); }
# A test whose tool is missing: a failure in CI (CI=true, where tools/setup installs it), a
# skip that says what to install on a developer's machine.
missing() { if [ "${CI:-}" = true ]; then bad "$1" "$2 is missing in CI (tools/setup installs it)"
            else skp "$1" "$2 not installed (Debian: apt-get install $3)"; fi; }
tmp=$(mktemp -d)
swpid=""
trap '[ -n "$swpid" ] && kill $swpid 2>/dev/null; rm -rf "$tmp"' EXIT

# A Python that has numpy (Debian's /usr/bin/python3 carries python3-numpy and python3-torch).
PY=""
for p in /usr/bin/python3 python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c "import numpy" >/dev/null 2>&1; then PY=$p; break; fi
done
have_torch=0
[ -n "$PY" ] && "$PY" -c "import torch.distributed as d; assert d.is_gloo_available()" >/dev/null 2>&1 && have_torch=1

# One switch on loopback for every case, logging at info: a case reads the jobs it admitted
# from its log (tests/run sets INAGG_LOG=warn for everything else).
exec 3>"$tmp/ready"
INAGG_LOG=info timeout 1200 ./build/inagg switch --listen 127.0.0.1:0 --ready-fd 3 >"$tmp/sw.out" 2>"$tmp/sw.err" &
swpid=$!
exec 3>&-
for _ in $(seq 100); do [ -s "$tmp/ready" ] && break; sleep 0.05; done
port=$(head -n1 "$tmp/ready" 2>/dev/null)
if [ -z "$port" ]; then echo "FAIL    the switch did not start: $(cat "$tmp/sw.err")"; echo "0 passed, 1 failed, 0 skipped"; exit 1; fi
SW=127.0.0.1:$port

# ------------------------------------------------------------------------------------ link
t=install_then_pkg_config_build_of_example
inst=$tmp/prefix
if ! command -v pkg-config >/dev/null 2>&1; then skp $t "pkg-config is not installed (apt-get install pkg-config)"
elif ! timeout 300 make -s install PREFIX="$inst" >"$tmp/install.log" 2>&1; then bad $t "make install failed: $(tail -n 3 "$tmp/install.log")"
else
    export PKG_CONFIG_PATH=$inst/lib/pkgconfig
    soname=$(readelf -d "$inst/lib/libinagg.so" 2>/dev/null | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
    flags=$(pkg-config --cflags --libs inagg 2>&1)
    if [ ! -f "$inst/include/inagg.h" ] || [ ! -f "$inst/lib/libinagg.a" ] || [ "$soname" != libinagg.so.0 ]; then
        bad $t "install tree incomplete or soname '$soname' is not libinagg.so.0"
    elif ! timeout 60 cc examples/allreduce.c $flags -Wl,-rpath,"$inst/lib" -o "$tmp/example" 2>"$tmp/cc.err"; then
        bad $t "cc \$(pkg-config --cflags --libs inagg) failed ($flags): $(head -n 3 "$tmp/cc.err")"
    elif ! ldd "$tmp/example" | grep -c >/dev/null "$inst/lib/libinagg.so.0"; then
        bad $t "the example does not load the installed libinagg.so.0: $(ldd "$tmp/example" | grep inagg)"
    else
        pids=()
        for r in 0 1 2; do timeout 60 "$tmp/example" "$SW" example $r 3 >"$tmp/ex.$r" 2>&1 & pids+=($!); done
        wait "${pids[@]}"
        if [ "$(cat "$tmp"/ex.? | grep -c ': ok ')" = 3 ]; then ok $t
        else bad $t "$(cat "$tmp"/ex.?)"; fi
    fi
    # A static link of the installed archive, as docs/INTEGRATIONS.md says, with the libraries
    # the docs list being what pkg-config --static gives.
    t=static_link_of_installed_archive_via_pkg_config
    documented=$(sed -n 's/.*`pkg-config --static --libs inagg` adds `\([^`]*\)`.*/\1/p' docs/INTEGRATIONS.md)
    given=$(pkg-config --static --libs inagg | sed "s|-L$inst/lib ||; s|-linagg ||; s/ *$//")
    if [ -z "$documented" ] || [ "$documented" != "$given" ]; then
        bad $t "docs/INTEGRATIONS.md says '$documented', pkg-config --static gives '$given'"
    elif ! timeout 60 cc examples/allreduce.c $(pkg-config --cflags inagg) -Wl,-Bstatic $(pkg-config --libs inagg) \
            -Wl,-Bdynamic $(pkg-config --static --libs inagg) -o "$tmp/example_static" 2>"$tmp/cc.err"; then
        bad $t "static link failed: $(head -n 5 "$tmp/cc.err")"
    elif ldd "$tmp/example_static" | grep libinagg >/dev/null; then
        bad $t "the static example still loads libinagg: $(ldd "$tmp/example_static" | grep inagg)"
    else
        pids=()
        for r in 0 1; do timeout 60 "$tmp/example_static" "$SW" example-static $r 2 >"$tmp/exs.$r" 2>&1 & pids+=($!); done
        wait "${pids[@]}"
        if [ "$(cat "$tmp"/exs.? | grep -c ': ok (library 0\.1\.0,')" = 2 ]; then ok $t
        else bad $t "$(cat "$tmp"/exs.?)"; fi
    fi
    unset PKG_CONFIG_PATH
fi

# ---------------------------------------------------------------------------------- import
cat >"$tmp/py_api.py" <<'EOF'
import array, sys, warnings
import numpy as np
import inagg
sw, rank, world = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
try:
    import torch
except ImportError:
    torch = None
with inagg.Comm(sw, rank, world, job=sys.argv[4]) as c:
    assert (c.rank, c.world) == (rank, world)
    a = np.arange(200000, dtype=np.float32) + rank
    ptr = a.ctypes.data
    assert c.allreduce(a) is a and a.ctypes.data == ptr                  # in place, no copy
    assert np.array_equal(a, world * np.arange(200000, dtype=np.float32) + sum(range(world)))
    m = np.full((30, 40), rank + 1, dtype=np.int32, order="F")              # any contiguous order
    c.allreduce(m, op="avg")
    assert (m == (world + 1) // 2).all()
    req = c.iallreduce(np.full(50000, 2.0, dtype=np.float32))              # handle keeps it alive
    assert (req.wait() == 2.0 * world).all() and req.done and req.test()
    b = array.array("f", [0.5] * 9)
    c.allreduce(b)
    assert b[3] == 0.5 * world
    refused = 0
    for obj, exc in ((np.ones(4), TypeError), (np.ones((8, 8), np.float32)[:, 2], ValueError),
                     (np.ones(3, np.float32)[::-1].copy().view(np.int16), TypeError), ([1.0], TypeError)):
        try:
            c.allreduce(obj)
        except exc:
            refused += 1
    ro = np.ones(3, np.float32); ro.setflags(write=False)
    try:
        c.allreduce(ro)
    except ValueError:
        refused += 1
    assert refused == 5, refused
    if torch is not None:
        t = torch.full((300, 7), float(rank))
        p = t.data_ptr()
        with c.iallreduce(t, op="avg") as r:
            pass                                                           # waits on exit
        assert t.data_ptr() == p and torch.allclose(t, torch.full((300, 7), (world - 1) / 2))
        i = torch.arange(1000, dtype=torch.int32)
        c.allreduce(i)
        assert torch.equal(i, torch.arange(1000, dtype=torch.int32) * world)
        for obj, exc in ((torch.ones(5, dtype=torch.float64), TypeError),
                         (torch.ones(6, 6).t(), ValueError)):
            try:
                c.allreduce(obj); raise SystemExit("accepted %r" % obj)
            except exc:
                pass
assert c.closed
try:
    c.allreduce(np.ones(2, np.float32)); raise SystemExit("closed communicator accepted a call")
except ValueError:
    pass
try:
    inagg.Comm("127.0.0.1:1", 0, 1, job="nobody", timeout_ms=500)
    raise SystemExit("joined a switch that does not exist")
except inagg.InaggError as e:
    assert e.name in ("CONNECTION", "TIMEOUT"), e.name
print("ok", rank, "torch" if torch is not None else "numpy only")
EOF

t=python_comm_numpy_torch_in_place_async_errors
if [ -z "$PY" ]; then skp $t "no python3 with numpy (apt-get install python3-numpy)"
else
    pids=()
    for r in 0 1 2; do PYTHONPATH=$ROOT/python timeout 120 "$PY" "$tmp/py_api.py" "$SW" $r 3 pyapi >"$tmp/py.$r" 2>&1 & pids+=($!); done
    wait "${pids[@]}"
    if [ "$(cat "$tmp"/py.? | grep -c '^ok ')" = 3 ]; then
        ok "$t ($(head -n1 "$tmp/py.0" | cut -d' ' -f3-))"
    else bad $t "$(cat "$tmp"/py.? | tail -n 20)"; fi
fi

t=python_comm_compress_passes_through
cat >"$tmp/py_zfp.py" <<'EOF'
import sys
import numpy as np
import inagg
sw, rank, world = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with inagg.Comm(sw, rank, world, job="pyzfp", compress="zfp:reversible",
                packet_elems=4096) as c:
    a = (np.arange(100000, dtype=np.float32) % 977) / 64 + rank
    c.allreduce(a)
    want = world * ((np.arange(100000, dtype=np.float32) % 977) / 64) + sum(range(world))
    assert np.array_equal(a, want)
    cs = c.codec_stats()
    assert cs["chunks_encoded"] == 25 and cs["codec_threads"] == 2, cs  # 100000 / 4096
with inagg.Comm(sw, rank, world, job="pyzfp8", compress="zfp:rate=8") as c:
    try:
        c.allreduce(np.ones(10, dtype=np.int32)); raise SystemExit("lossy int32 accepted")
    except inagg.InaggError as e:
        assert "int32" in str(e), e
try:
    inagg.Comm(sw, 0, 1, job="pybad", compress="zfp:rate=99")
    raise SystemExit("bad mode accepted")
except inagg.InaggError as e:
    assert "compress" in str(e), e
print("ok", rank)
EOF
if [ -z "$PY" ]; then skp $t "no python3 with numpy (apt-get install python3-numpy)"
else
    pids=()
    for r in 0 1; do PYTHONPATH=$ROOT/python timeout 120 "$PY" "$tmp/py_zfp.py" "$SW" $r 2 >"$tmp/pz.$r" 2>&1 & pids+=($!); done
    wait "${pids[@]}"
    if [ "$(cat "$tmp"/pz.? | grep -c '^ok ')" = 2 ]; then ok $t
    else bad $t "$(cat "$tmp"/pz.? | tail -n 20)"; fi
fi

t=python_package_installs_offline_and_finds_its_library
if [ -z "$PY" ]; then skp $t "no python3 with numpy"
elif ! "$PY" -m pip --version >/dev/null 2>&1; then skp $t "pip is not installed for $PY (apt-get install python3-pip)"
elif ! timeout 300 "$PY" -m pip install -q --no-build-isolation --no-index --target "$tmp/site" ./python >"$tmp/pip.log" 2>&1; then
    bad $t "pip install --no-index failed: $(grep -v WARNING "$tmp/pip.log" | tail -n 5)"
else
    lib=$(cd "$tmp" && PYTHONPATH=$tmp/site timeout 30 "$PY" -c "import inagg; print(inagg.library(), inagg.version())" 2>&1)
    case "$lib" in
        "$tmp/site/inagg/libinagg.so.0 "*) ok $t ;;
        *) bad $t "the installed package did not load its bundled library: $lib" ;;
    esac
fi
# The README's own lines, run as written (with HOME in the test's directory): a venv that sees
# Debian's packages, pip into it offline; the package loads its bundled library and numpy.
t=python_readme_venv_install_steps_work_as_written
steps=$(grep -E '^(/usr/bin/python3 -m venv |~/\.venvs/inagg/bin/pip install )' README.md)
if [ -z "$PY" ]; then skp $t "no python3 with numpy"
elif [ "$(echo "$steps" | wc -l)" != 2 ]; then bad $t "README.md lacks the two install lines: '$steps'"
elif ! /usr/bin/python3 -c "import ensurepip" >/dev/null 2>&1; then skp $t "python3-venv is not installed (apt-get install python3-venv)"
elif ! (export HOME=$tmp/home; mkdir -p "$HOME"; set -e; eval "$steps") >"$tmp/venv.log" 2>&1; then
    bad $t "$(tail -n 5 "$tmp/venv.log")"
else
    lib=$(cd "$tmp" && timeout 60 "$tmp/home/.venvs/inagg/bin/python" -c "import inagg, numpy; print(inagg.library())" 2>&1)
    case "$lib" in
        "$tmp/home/.venvs/inagg/lib/python3"*"/site-packages/inagg/libinagg.so.0") ok $t ;;
        *) bad $t "the venv's package did not load its bundled library: $lib" ;;
    esac
fi

# The wheel bundles machine code: a platform wheel (py3-none-linux_<arch>), not py3-none-any.
t=python_wheel_is_a_platform_wheel
if [ -z "$PY" ] || ! "$PY" -m pip --version >/dev/null 2>&1; then skp $t "no pip for $PY"
elif ! timeout 300 "$PY" -m pip wheel -q --no-build-isolation --no-index --no-deps -w "$tmp/wheel" ./python >"$tmp/wheel.log" 2>&1; then
    bad $t "pip wheel failed: $(tail -n 5 "$tmp/wheel.log")"
else
    whl=$(cd "$tmp/wheel" && ls *.whl)
    names=$("$PY" -c "import sys, zipfile; print(' '.join(zipfile.ZipFile(sys.argv[1]).namelist()))" "$tmp/wheel/$whl" 2>&1)
    if [ "$whl" = "inagg-0.1.0-py3-none-linux_$(uname -m).whl" ] &&
       [[ " $names " == *" inagg/libinagg.so.0 "* ]]; then ok "$t ($whl)"
    else bad $t "wheel '$whl' holds: $names"; fi
fi
rm -rf python/build python/inagg.egg-info

t=gloo_baseline_on_bench_tensor_verifies
if [ $have_torch = 0 ]; then skp $t "torch with Gloo is not installed (apt-get install python3-torch)"
else
    out=$(timeout 300 "$PY" tools/gloo_allreduce.py --workers 2 --elems 200000 --iters 3 --json - 2>"$tmp/gb.err")
    if [ $? -eq 0 ] && echo "$out" | "$PY" -c "import json,sys; d=json.load(sys.stdin); assert d['verified'] and d['tat_ms']['median'] > 0"; then ok $t
    else bad $t "$out $(tail -n 3 "$tmp/gb.err")"; fi
fi

t=ddp_hook_same_accuracy_as_gloo_replicas_identical
if [ $have_torch = 0 ]; then skp $t "torch with Gloo is not installed (apt-get install python3-torch)"
else
    timeout 600 "$PY" examples/ddp_mlp.py --backend both --workers 4 --epochs 2 --hidden 128 \
        --switch "$SW" --json "$tmp/ddp.json" >/dev/null 2>"$tmp/ddp.err"
    rc=$?
    verdict=$("$PY" - "$tmp/ddp.json" <<'EOF' 2>&1
import json, sys
d = json.load(open(sys.argv[1]))
g, i = d["runs"]
assert g["replicas_identical"] and i["replicas_identical"], "replicas differ"
assert i["buckets_via_switch"] > 0, "no bucket went through the switch"
assert abs(d["accuracy_diff_points"]) <= 0.5, "accuracy gloo %.2f inagg %.2f" % (g["accuracy"], i["accuracy"])
print("gloo %.2f%% %.1f ms/it, inagg %.2f%% %.1f ms/it" % (g["accuracy"], g["iter_ms_median"], i["accuracy"], i["iter_ms_median"]))
EOF
)
    if [ $rc -eq 0 ] && [ "${verdict#gloo }" != "$verdict" ]; then ok "$t ($verdict)"
    else bad $t "rc $rc: $verdict $(tail -n 5 "$tmp/ddp.err")"; fi
fi

t=ddp_hook_codec_fp16_zfp_and_torch_fp16_wrapper
if [ $have_torch = 0 ]; then skp $t "torch with Gloo is not installed"
else
    cat >"$tmp/wrap.py" <<'EOF'
import os, sys, torch, torch.distributed as dist, torch.multiprocessing as mp
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
sys.path.insert(0, os.path.join(sys.argv[2], "python"))
import inagg.torch
def run(rank, sw, port, comp):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=2)
    torch.manual_seed(0)
    net = torch.nn.Linear(300, 10)
    ddp = torch.nn.parallel.DistributedDataParallel(net)
    state = inagg.torch.State(switch=sw, compression=comp)
    hook = inagg.torch.allreduce_hook if comp else default_hooks.fp16_compress_wrapper(inagg.torch.allreduce_hook)
    ddp.register_comm_hook(state, hook)
    x = torch.full((4, 300), float(rank + 1))
    ddp(x).sum().backward()
    # d(sum)/dW = column sums of x: rank r gives 4*(r+1); the average over 2 ranks is 6
    g = net.weight.grad
    assert torch.allclose(g, torch.full_like(g, 6.0)), g[0, :4]
    st = state.stats()["wire"]
    # the bytes of first sendings (a retransmission on a loaded machine resends a whole packet)
    sent = st["bytes_sent"] * (st["packets_sent"] - st["retransmissions"]) / st["packets_sent"]
    if comp:  # the codec's bytes cross the wire: fp16 half, zfp:rate=16 half of float32's
        assert sent < 0.7 * 4 * 3010, (comp, sent, st)
    state.close()
    dist.destroy_process_group()
if __name__ == "__main__":
    import socket
    for comp in (None, "fp16", "zfp"):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
        mp.spawn(run, args=(sys.argv[1], port, comp), nprocs=2)
    print("ok")
EOF
    out=$(timeout 300 "$PY" "$tmp/wrap.py" "$SW" "$ROOT" 2>&1)
    if [ "$(echo "$out" | tail -n1)" = ok ]; then
        ok "$t (the job's codec: fp16 and zfp:rate=16 on the wire)"
    else bad $t "$(echo "$out" | tail -n 8)"; fi
fi

t=ddp_hook_state_refuses_unknown_arguments
if [ $have_torch = 0 ]; then skp $t "torch with Gloo is not installed"
else
    out=$(PYTHONPATH="$ROOT/python" timeout 120 "$PY" -c '
import inagg.torch as it
for kw in ({"comm": object()}, {"bogus": 1}):
    try:
        it.State(**kw)
        print("accepted", kw)
    except TypeError as e:
        print("refused:", e)
' 2>&1)
    if [ "$(grep -c '^refused:' <<<"$out")" = 2 ] && grep -q "State(comm=...) is gone" <<<"$out" &&
       grep -q "got bogus; its options are" <<<"$out"; then ok $t
    else bad $t "$out"; fi
fi

# --------------------------------------------------------------------------------- preload
MPIRUN=(mpirun --oversubscribe --mca mpi_yield_when_idle 1 --mca btl self,vader,tcp
        --mca btl_tcp_if_include lo -n 4)
[ "$(id -u)" = 0 ] && MPIRUN=(mpirun --allow-run-as-root "${MPIRUN[@]:1}")
PMPI=$ROOT/build/libinagg-pmpi.so
have_mpi=1
if ! command -v mpicc >/dev/null 2>&1 || ! command -v mpirun >/dev/null 2>&1; then have_mpi=0
elif [ ! -f "$PMPI" ]; then timeout 300 make -s pmpi >/dev/null 2>&1 || have_mpi=0; fi
# Every rank here is on one host, where the default route keeps every call with MPI's shared
# memory: these runs send every allreduce the switch can serve through it (INAGG_ONE_HOST=switch,
# no size threshold), as a job across hosts would.
export INAGG_ONE_HOST=switch INAGG_MIN_BYTES=0
MPIRUN+=(-x INAGG_ONE_HOST -x INAGG_MIN_BYTES)
preload() { # preload LOG PROGRAM...: run under the interposer with the switch
    local log=$1; shift
    INAGG_SWITCH=$SW INAGG_VERBOSE=1 timeout 300 "${MPIRUN[@]}" -x INAGG_SWITCH -x INAGG_VERBOSE \
        -x LD_PRELOAD="$PMPI" "$@" >"$log" 2>&1
}
plain() { local log=$1; shift; timeout 300 "${MPIRUN[@]}" "$@" >"$log" 2>&1; }
# (each run is bounded by `timeout 300`; a hang fails its case instead of the suite)
accelerated() { sed -n 's/^inagg-pmpi: \([0-9]*\) allreduce accelerated.*/\1/p' "$1" | tail -n1; }
summary() { grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -n1; }

t=pmpi_c_program_same_results_through_the_switch
if [ $have_mpi = 0 ]; then missing $t "OpenMPI (mpicc, mpirun)" "openmpi-bin libopenmpi-dev"
elif ! timeout 120 mpicc -O2 examples/mpi/allreduce_check.c -o "$tmp/check_c" 2>"$tmp/mpicc.err"; then bad $t "mpicc: $(head -n 3 "$tmp/mpicc.err")"
else
    plain "$tmp/c0" "$tmp/check_c"; rc0=$?
    preload "$tmp/c1" "$tmp/check_c"; rc1=$?
    n=$(accelerated "$tmp/c1")
    if [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] && [ "$(summary "$tmp/c0")" = "$(summary "$tmp/c1")" ] &&
       [ "$(summary "$tmp/c1" | cut -d' ' -f3)" = 0 ] && [ "${n:-0}" -gt 0 ]; then
        ok "$t ($(summary "$tmp/c1"), $n accelerated)"
    else bad $t "plain rc $rc0 '$(summary "$tmp/c0")', preloaded rc $rc1 '$(summary "$tmp/c1")': $(tail -n 5 "$tmp/c1")"; fi
fi

# One float default for the library and the interposer: fixed (block fixed point, the same
# sums bit for bit every run), said by rank 0 when the job joins under INAGG_VERBOSE=1 and
# taken by the switch (its log names each job's float mode); native only when asked for, and
# another value is said and replaced by the default.
t=pmpi_float_default_is_the_librarys_fixed_and_said_at_start
if [ $have_mpi = 0 ] || [ ! -x "$tmp/check_c" ]; then missing $t "OpenMPI (mpicc, mpirun)" "openmpi-bin libopenmpi-dev"
else
    msg=""
    job_in() { sed -n "s/^inagg-pmpi: job \([^ ]*\) on switch [^ ]*: 4 ranks, float $2 .*/\1/p" "$1"; }
    taken() { [ -n "$1" ] && grep -q "job '$1' (id [0-9]*) active: .*, float $2," "$tmp/sw.err"; }
    job=$(job_in "$tmp/c1" fixed)
    taken "$job" fixed || msg="$msg [default: '$(grep '^inagg-pmpi: job' "$tmp/c1")', switch: $(grep -c "float fixed" "$tmp/sw.err") fixed jobs]"
    for mode in native bogus; do
        INAGG_FLOAT_MODE=$mode INAGG_SWITCH=$SW INAGG_VERBOSE=1 timeout 300 "${MPIRUN[@]}" -x INAGG_FLOAT_MODE \
            -x INAGG_SWITCH -x INAGG_VERBOSE -x LD_PRELOAD="$PMPI" "$tmp/check_c" --time 1000 2 >"$tmp/fm.$mode" 2>&1 ||
            msg="$msg [$mode: rc $?: $(tail -n 3 "$tmp/fm.$mode")]"
    done
    taken "$(job_in "$tmp/fm.native" native)" native || msg="$msg [native: $(grep '^inagg-pmpi:' "$tmp/fm.native")]"
    if ! taken "$(job_in "$tmp/fm.bogus" fixed)" fixed ||
       ! grep -q "^inagg-pmpi: INAGG_FLOAT_MODE is fixed or native, got 'bogus': using fixed$" "$tmp/fm.bogus"; then
        msg="$msg [bogus: $(grep '^inagg-pmpi:' "$tmp/fm.bogus")]"
    fi
    [ -z "$msg" ] && ok $t || bad $t "$msg"
fi

# INAGG_VERBOSE=2: every allreduce's route, inagg or MPI with the reason; rank 0's lines add up
# to its end-of-run count of accelerated and passed-through calls.
t=pmpi_verbose_2_logs_each_route_with_its_reason
if [ $have_mpi = 0 ] || [ ! -x "$tmp/check_c" ]; then skp $t "OpenMPI is not installed"
else
    INAGG_SWITCH=$SW INAGG_VERBOSE=2 timeout 300 "${MPIRUN[@]}" -x INAGG_SWITCH -x INAGG_VERBOSE \
        -x LD_PRELOAD="$PMPI" "$tmp/check_c" >"$tmp/v2" 2>&1; rc=$?
    r0=$(grep -c '^inagg-pmpi: rank 0: i\?allreduce of ' "$tmp/v2")
    totals=$(sed -n 's/^inagg-pmpi: \([0-9]*\) allreduce accelerated, \([0-9]*\) passed through$/\1 + \2/p' "$tmp/v2")
    if [ $rc -eq 0 ] && [ -n "$totals" ] && [ "$r0" = "$(( totals ))" ] &&
       grep -q '^inagg-pmpi: rank 0: allreduce of [0-9]* MPI_FLOAT (sum) on MPI_COMM_WORLD -> inagg (' "$tmp/v2" &&
       grep -q '(not sum) on MPI_COMM_WORLD -> MPI (the op is not MPI_SUM)$' "$tmp/v2" &&
       grep -q 'MPI_DOUBLE (sum) on MPI_COMM_WORLD -> MPI (the datatype is not a 4-byte int or float' "$tmp/v2" &&
       grep -q -- '-> MPI (the communicator does not hold every rank of MPI_COMM_WORLD)$' "$tmp/v2"; then
        ok "$t ($r0 lines on rank 0 = $totals)"
    else bad $t "rc $rc, rank 0: $r0 route lines, totals '$totals': $(grep -v '^inagg-pmpi: rank' "$tmp/v2" | tail -n 5)"; fi
fi

# The default route (no INAGG_ONE_HOST, no INAGG_MIN_BYTES): four ranks on one host stay with
# MPI's shared memory, call by call, each saying why.
t=pmpi_default_route_keeps_one_host_with_mpi
if [ $have_mpi = 0 ] || [ ! -x "$tmp/check_c" ]; then skp $t "OpenMPI is not installed"
else
    env -u INAGG_ONE_HOST -u INAGG_MIN_BYTES INAGG_SWITCH=$SW INAGG_VERBOSE=2 timeout 300 \
        "${MPIRUN[@]:0:${#MPIRUN[@]}-4}" -x INAGG_SWITCH -x INAGG_VERBOSE -x LD_PRELOAD="$PMPI" \
        "$tmp/check_c" >"$tmp/dr" 2>&1; rc=$?
    if [ $rc -eq 0 ] && [ "$(accelerated "$tmp/dr")" = 0 ] &&
       [ "$(summary "$tmp/dr")" = "$(summary "$tmp/c0")" ] &&
       grep -q 'MPI_FLOAT (sum) on MPI_COMM_WORLD -> MPI (every rank is on one host' "$tmp/dr" &&
       ! grep -q -- '-> inagg (' "$tmp/dr"; then ok "$t ($(summary "$tmp/dr"))"
    else bad $t "rc $rc: $(grep -v '^inagg-pmpi: rank' "$tmp/dr" | tail -n 5)"; fi
fi

t=pmpi_unreachable_switch_falls_back_with_one_warning
if [ $have_mpi = 0 ] || [ ! -x "$tmp/check_c" ]; then missing $t "OpenMPI (mpicc, mpirun)" "openmpi-bin libopenmpi-dev"
else
    INAGG_SWITCH=127.0.0.1:1 timeout 300 "${MPIRUN[@]}" -x INAGG_SWITCH -x LD_PRELOAD="$PMPI" \
        "$tmp/check_c" >"$tmp/fb" 2>&1; rc=$?
    warnings=$(grep -c '^inagg-pmpi:' "$tmp/fb")
    if [ $rc -eq 0 ] && [ "$warnings" = 1 ] && grep -q 'stays with MPI' "$tmp/fb" &&
       [ "$(summary "$tmp/fb")" = "$(summary "$tmp/c0")" ]; then ok $t
    else bad $t "rc $rc, $warnings warning lines: $(head -n 5 "$tmp/fb")"; fi
fi

t=pmpi_silent_server_bounded_by_connect_ms
# A server that accepts and never answers: MPI_Init gives up within INAGG_PMPI_CONNECT_MS
# (not the job's 30 s timeout) and the program runs on MPI with one warning.
if [ $have_mpi = 0 ] || [ ! -x "$tmp/check_c" ]; then skp $t "OpenMPI is not installed"
elif [ -z "$PY" ]; then skp $t "no python3 for the silent listener"
else
    timeout 120 "$PY" -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(64)
print(s.getsockname()[1], flush=True)
conns, end = [], time.time() + 100
s.settimeout(0.5)
while time.time() < end:
    try: conns.append(s.accept()[0])
    except socket.timeout: pass
' >"$tmp/silent.port" &
    silent=$!
    for _ in $(seq 100); do [ -s "$tmp/silent.port" ] && break; sleep 0.05; done
    t0=$(date +%s%N); plain "$tmp/sl0" "$tmp/check_c"; t1=$(date +%s%N)
    INAGG_SWITCH=127.0.0.1:$(head -n1 "$tmp/silent.port") INAGG_PMPI_CONNECT_MS=1500 timeout 300 \
        "${MPIRUN[@]}" -x INAGG_SWITCH -x INAGG_PMPI_CONNECT_MS -x LD_PRELOAD="$PMPI" \
        "$tmp/check_c" >"$tmp/sl" 2>&1; rc=$?
    t2=$(date +%s%N)
    kill $silent 2>/dev/null; wait $silent 2>/dev/null
    plain_ms=$(( (t1 - t0) / 1000000 )) silent_ms=$(( (t2 - t1) / 1000000 ))
    # the probe's 1.5 s, plus 3 s of slack for mpirun under load (it took 31 s before)
    if [ $rc -eq 0 ] && [ $silent_ms -lt $((plain_ms + 4500)) ] &&
       grep -q 'did not answer within 1500 ms' "$tmp/sl" &&
       [ "$(grep -c '^inagg-pmpi:' "$tmp/sl")" = 1 ] &&
       [ "$(summary "$tmp/sl")" = "$(summary "$tmp/c0")" ]; then
        ok "$t (${silent_ms} ms, plain MPI ${plain_ms} ms)"
    else bad $t "rc $rc, ${silent_ms} ms (plain ${plain_ms} ms): $(head -n 5 "$tmp/sl")"; fi
fi

t=pmpi_without_INAGG_SWITCH_is_silent_pass_through
if [ $have_mpi = 0 ] || [ ! -x "$tmp/check_c" ]; then missing $t "OpenMPI (mpicc, mpirun)" "openmpi-bin libopenmpi-dev"
else
    INAGG_VERBOSE=1 timeout 300 "${MPIRUN[@]}" -x INAGG_VERBOSE -x LD_PRELOAD="$PMPI" "$tmp/check_c" >"$tmp/pt" 2>&1; rc=$?
    if [ $rc -eq 0 ] && [ "$(accelerated "$tmp/pt")" = 0 ] && [ "$(grep -c '^inagg-pmpi:' "$tmp/pt")" = 1 ] &&
       [ "$(summary "$tmp/pt")" = "$(summary "$tmp/c0")" ]; then ok $t
    else bad $t "rc $rc: $(head -n 5 "$tmp/pt")"; fi
fi

t=pmpi_fortran_programs_mpi_and_mpi_f08
if [ $have_mpi = 0 ] || ! command -v mpifort >/dev/null 2>&1; then skp $t "no mpifort (apt-get install gfortran libopenmpi-dev)"
else
    msg="" nacc=0
    for src in allreduce_check allreduce_check_f08; do
        if ! timeout 120 mpifort -O2 examples/mpi/$src.f90 -o "$tmp/$src" 2>"$tmp/fc.err"; then msg="$msg mpifort $src: $(head -n 2 "$tmp/fc.err")"; continue; fi
        plain "$tmp/$src.0" "$tmp/$src"; rc0=$?
        preload "$tmp/$src.1" "$tmp/$src"; rc1=$?
        n=$(accelerated "$tmp/$src.1")
        nacc=$((nacc + ${n:-0}))
        if [ $rc0 -ne 0 ] || [ $rc1 -ne 0 ] || [ "$(summary "$tmp/$src.0")" != "$(summary "$tmp/$src.1")" ] ||
           [ "$(summary "$tmp/$src.1" | cut -d' ' -f3)" != 0 ] || [ "${n:-0}" -eq 0 ]; then
            msg="$msg $src: plain rc $rc0 '$(summary "$tmp/$src.0")', preloaded rc $rc1 '$(summary "$tmp/$src.1")' accelerated ${n:-none}"
        fi
    done
    [ -z "$msg" ] && ok "$t ($nacc accelerated)" || bad $t "$msg"
fi

# Debian's ScaLAPACK test programs (package scalapack-mpi-test): the BLACS tester in C and in
# Fortran (its combine tests: integer and real sums on grids spanning every rank). Each must
# report the same PASSED counts with the interposer. (The LU driver xslu is run by hand for
# docs/INTEGRATIONS.md: it has hung intermittently under the interposer, see there.)
t=pmpi_third_party_scalapack_blacs_tests_same_pass_counts
SCT=/usr/lib/x86_64-linux-gnu/scalapack/openmpi-tests
if [ $have_mpi = 0 ]; then missing $t "OpenMPI (mpicc, mpirun)" "openmpi-bin libopenmpi-dev"
elif [ ! -x $SCT/xCbtest ] || [ ! -d /usr/share/scalapack ]; then skp $t "Debian's ScaLAPACK tests are not installed (apt-get install scalapack-mpi-test)"
else
    mkdir -p "$tmp/sc" && cp /usr/share/scalapack/BLACS/*.dat "$tmp/sc/"
    # bt.dat: run the combine (allreduce) tests; leave out the point-to-point and broadcast
    # tests and the auxiliary test, which ends the program with BLACS_ABORT by design.
    sed -i -e "s/^'T'\( *Run SDRV\)/'F'\1/" -e "s/^'T'\( *Run BSBR\)/'F'\1/" -e "s/^'T'\( *Run AUX\)/'F'\1/" "$tmp/sc/bt.dat"
    counts() { grep -E 'TESTS:.*PASSED|tests completed and passed' "$1" | sed 's/  */ /g'; }
    msg="" nacc=0 npassed=0
    for prog in xCbtest xFbtest; do
        (cd "$tmp/sc" && plain "$tmp/sc/$prog.0" $SCT/$prog); rc0=$?
        (cd "$tmp/sc" && preload "$tmp/sc/$prog.1" $SCT/$prog); rc1=$?
        n=$(accelerated "$tmp/sc/$prog.1")
        nacc=$((nacc + ${n:-0}))
        c0=$(counts "$tmp/sc/$prog.0"); c1=$(counts "$tmp/sc/$prog.1")
        npassed=$((npassed + $(echo "$c1" | grep -oE '[0-9]+ (PASSED|tests completed and passed)' | awk '{s += $1} END {print s + 0}')))
        if [ $rc0 -ne 0 ] || [ $rc1 -ne 0 ] || [ -z "$c0" ] || [ "$c0" != "$c1" ] || grep -cE >/dev/null '[1-9][0-9]* FAILED|[1-9][0-9]* tests completed and failed' "$tmp/sc/$prog.1"; then
            msg="$msg $prog: rc $rc0/$rc1, counts differ or failures: $(diff <(echo "$c0") <(echo "$c1") | head -n 4)"
        fi
    done
    [ -z "$msg" ] && ok "$t ($npassed checks passed both ways, $nacc allreduces accelerated)" || bad $t "$msg"
fi

echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
