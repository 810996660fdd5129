#!/usr/bin/env bash
# tests/cli_torch.sh - the `inagg` torch.distributed backend (python/inagg/csrc,
# python/inagg/_backend.py) end to end on loopback: collectives and their counters
# (tests/torch_backend_cases.py), the codec's bytes on the wire, failures raising within the
# group's timeout, unmodified DDP under torchrun with the embedded switch against Gloo, the
# DDP comm hook against Gloo, an elastic restart resuming from a checkpoint, a job whose
# external switch is killed (SIGKILL) mid-run finishing on Gloo and, when it is restarted,
# returning to it (CLI_TORCH_ONLY=fallback runs these two alone), and the README's
# venv install and torch command run as written (the package's own switch, no second
# compile of the backend). Skips with the reason when torch, libtorch-dev or ninja are
# missing. Every command runs under `timeout`. Ends "N passed, N failed, N skipped".
# Both torch lines: Debian's torch 1.13 (/usr/bin/python3, the default) and, with
# INAGG_TORCH_PYTHON=build/venv-torch2/bin/python (tools/setup --torch2), PyPI's torch 2.x: the
# same cases, the README's venv case for the line it describes, and the 2.x-only cases
# (tests/torch_backend_cases.py torch2: hooks on the backend's futures, ZeRO, torch.compile under
# DDP, FSDP, checkpoints).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
pass=0 fail=0 skip=0
ok()   { echo "ok      $1"; pass=$((pass + 1)); }
bad()  { echo "FAIL    $1: $2"; fail=$((fail + 1)); }
skp()  { echo "skip    $1: $2"; skip=$((skip + 1)); }
tmp=$(mktemp -d)
swpid=""
trap '[ -n "$swpid" ] && kill $swpid 2>/dev/null; [ -n "$fbpid" ] && { kill -9 $fbpid; wait $fbpid; } 2>/dev/null; rm -rf "$tmp"' EXIT
fbpid=""
PY=${INAGG_TORCH_PYTHON:-/usr/bin/python3}
[ -x "$PY" ] || { echo "cli_torch.sh: INAGG_TORCH_PYTHON=$PY is not an executable (tools/setup --torch2 makes build/venv-torch2)" >&2; exit 2; }
TORCHRUN=("$PY" -m torch.distributed.run --redirects 2 --tee 2)
major=$("$PY" -c "import torch; print(torch.__version__.split('.')[0])" 2>/dev/null || echo none)
echo "torch line: $("$PY" -c "import torch; print(torch.__version__)" 2>/dev/null || echo none) ($PY)"
CASES=tests/torch_backend_cases.py
EX=examples/ddp_backend.py
export PYTHONPATH=$ROOT/python${PYTHONPATH:+:$PYTHONPATH}
export INAGG_TORCH_EXT_DIR=${INAGG_TORCH_EXT_DIR:-$ROOT/build/torch-ext}
unset INAGG_SWITCH INAGG_COMPRESS INAGG_PROTOCOL INAGG_FLOAT_MODE
jget() { "$PY" -c "import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(eval('d' + sys.argv[1]))" "$1"; }
lastjson() { grep '^{' "$1" | tail -n 1; }
free_port() { "$PY" -c "import socket; s=socket.socket(); s.bind(('127.0.0.1',0)); print(s.getsockname()[1])"; }

why=""
if ! "$PY" -c "import torch.distributed as d; assert d.is_gloo_available()" >/dev/null 2>&1; then
    why="torch with Gloo is not installed (apt-get install python3-torch)"
elif [ ! -f /usr/include/torch/csrc/distributed/c10d/ProcessGroup.hpp ] &&
     ! "$PY" -c "import os,torch.utils.cpp_extension as c; assert os.path.isfile(os.path.join(c.include_paths()[0],'torch/csrc/distributed/c10d/ProcessGroup.hpp'))" >/dev/null 2>&1; then
    why="the c10d headers are missing (apt-get install libtorch-dev)"
elif ! command -v ninja >/dev/null 2>&1; then
    why="ninja is missing (apt-get install ninja-build)"
fi
if [ -n "$why" ]; then
    for t in import_without_torch_says_what_to_install backend_without_setuptools_says_what_to_install \
             backend_builds collectives_and_counters collectives_p4sgd \
             codec_bytes_on_the_wire failures_raise_within_timeout ddp_torchrun_embedded_switch_vs_gloo \
             readme_venv_torch_backend_as_written ddp_hook_vs_gloo elastic_restart_resumes_from_checkpoint; do
        skp $t "$why"
    done
    echo "$pass passed, $fail failed, $skip skipped"; exit 0
fi

t=import_without_torch_says_what_to_install
out=$(timeout 60 "$PY" -c "import sys; sys.modules['torch'] = None; import inagg.torch" 2>&1); rc=$?
if [ $rc -ne 0 ] && echo "$out" | tail -n1 | grep "^ImportError: inagg.torch needs PyTorch.*apt-get install python3-torch" >/dev/null; then ok $t
else bad $t "rc $rc: $(echo "$out" | tail -n 2)"; fi

# torch.utils.cpp_extension imports setuptools, which Debian's python3-torch does not bring
t=backend_without_setuptools_says_what_to_install
out=$(timeout 60 "$PY" -c "import sys; sys.modules['setuptools'] = None; import inagg._torch_ext as e; e.load()" 2>&1); rc=$?
if [ $rc -ne 0 ] && echo "$out" | tail -n1 | grep "^ImportError: inagg.torch: compiling the backend needs setuptools (apt-get install python3-setuptools)" >/dev/null; then ok $t
else bad $t "rc $rc: $(echo "$out" | tail -n 2)"; fi

t=backend_builds
out=$(timeout 600 "$PY" -c "import inagg.torch, inagg._torch_ext as e; e.load(); print('built')" 2>&1); rc=$?
if [ $rc -eq 0 ] && [ "$(echo "$out" | tail -n1)" = built ]; then ok $t
else bad $t "rc $rc: $(echo "$out" | grep -E 'error|Error' | head -n 5)"; fi

# A job outlives its switch without another switch: 2 ranks on an external `inagg switch`
# (the library's fail-over off), 300 rounds of an int32 and a float32 all_reduce in flight
# together, every element checked in the ranks (torch_backend_cases.py fallback), the switch
# killed with SIGKILL in round 50, while rank 0's calls are in flight and rank 1 is idle:
#   - never restarted: the calls in flight are finished over Gloo, every later one runs there,
#     each rank logs one fall-back line, rank 0 sums up 1 fall-back and 0 returns;
#   - restarted on the same port 0.5 s later: the same, then every rank returns to the switch
#     (INAGG_TORCH_RETRY_MS=200) at the same call, logs one return line, the restarted switch
#     admits the job's "-r1", and the later calls go through it (the counters show it).
# fb_switch LISTEN LOG: the switch itself in the background (its pid in fbpid, for SIGKILL)
fb_switch() {
    exec 3>"$tmp/fbready"
    INAGG_LOG=info ./build/inagg switch --listen "$1" --ready-fd 3 >/dev/null 2>"$2" &
    fbpid=$!
    exec 3>&-
    for _ in $(seq 100); do [ -s "$tmp/fbready" ] && break; sleep 0.05; done
}
# fb_job NAME RESTART: the job, its output in $tmp/NAME
fb_job() {
    local name=$1 restart=$2 port job
    rm -f "$tmp/fbready" "$tmp/$name.progress"
    fb_switch 127.0.0.1:0 "$tmp/$name.sw1"
    port=$(head -n1 "$tmp/fbready" 2>/dev/null)
    [ -n "$port" ] || { echo "the switch did not start: $(cat "$tmp/$name.sw1")" >"$tmp/$name"; return 1; }
    INAGG_SWITCH=127.0.0.1:$port INAGG_FAILOVER=0 INAGG_TORCH_RETRY_MS=200 CASE_OPS=300 \
        CASE_KILL_AT=50 CASE_PROGRESS="$tmp/$name.progress" CASE_WANT_RETURN=$restart \
        CASE_WATCHDOG_S=100 timeout 120 "$PY" $CASES fallback 2 tcp 20 >"$tmp/$name" 2>&1 &
    job=$!
    for _ in $(seq 1200); do [ -s "$tmp/$name.progress" ] && break; sleep 0.05; done
    kill -9 "$fbpid" 2>/dev/null
    wait "$fbpid" 2>/dev/null
    fbpid=""
    : >"$tmp/$name.progress.killed"
    if [ "$restart" = 1 ]; then
        sleep 0.5
        rm -f "$tmp/fbready"
        fb_switch "127.0.0.1:$port" "$tmp/$name.sw2"
    fi
    wait $job
    local rc=$?
    [ -n "$fbpid" ] && { kill "$fbpid"; wait "$fbpid"; } 2>/dev/null
    fbpid=""
    return $rc
}
fb_lines() { grep -c "$2" "$1"; }
fallback_tests() {
    local t rc j
    t=switch_killed_job_finishes_on_gloo
    fb_job fbkilled 0; rc=$?
    j=$(lastjson "$tmp/fbkilled")
    if [ $rc -eq 0 ] && [ "$(echo "$j" | jget '["checked"]' 2>/dev/null)" = 600 ] &&
       [ "$(echo "$j" | jget '["fallback"]["fallbacks"]')" = 1 ] &&
       [ "$(echo "$j" | jget '["switch"] + d["fallback"]["all_reduce_on_gloo"] + d["fallback"]["salvaged"]')" = 600 ] &&
       [ "$(fb_lines "$tmp/fbkilled" '^inagg-torch: rank [01]: fall-back to Gloo: job .* lost the switch 127.0.0.1:')" = 2 ] &&
       [ "$(fb_lines "$tmp/fbkilled" '^inagg-torch: rank 0: fall-back to Gloo: .*; 2 all_reduce in flight')" = 1 ] &&
       [ "$(fb_lines "$tmp/fbkilled" '^inagg-torch: rank 1: fall-back to Gloo: .*; 0 all_reduce in flight')" = 1 ] &&
       [ "$(fb_lines "$tmp/fbkilled" 'return to the switch')" = 0 ] &&
       grep -q '^inagg-torch: 1 fall-backs to Gloo, 0 returns to the switch' "$tmp/fbkilled"; then
        ok "$t (600 results checked; $(echo "$j" | jget '["switch"]') through the switch, $(echo "$j" | jget '["fallback"]["salvaged"]') salvaged, $(echo "$j" | jget '["fallback"]["all_reduce_on_gloo"]') on Gloo; $(grep -m1 'fall-back to Gloo' "$tmp/fbkilled" | sed 's/.*); //'))"
    else bad $t "rc $rc: $(grep -v -e Warning -e CUDA "$tmp/fbkilled" | tail -n 8)"; fi

    t=switch_restarted_job_returns_to_it
    fb_job fbback 1; rc=$?
    j=$(lastjson "$tmp/fbback")
    if [ $rc -eq 0 ] && [ "$(echo "$j" | jget '["checked"]' 2>/dev/null)" = 600 ] &&
       [ "$(echo "$j" | jget '["fallback"]["returns"]')" = 1 ] &&
       [ "$(echo "$j" | jget '["switch"] > 2 * 49 + d["fallback"]["all_reduce_on_gloo"]')" = True ] &&
       [ "$(fb_lines "$tmp/fbback" '^inagg-torch: rank [01]: fall-back to Gloo')" = 2 ] &&
       [ "$(fb_lines "$tmp/fbback" '^inagg-torch: rank [01]: return to the switch .*-r1 after')" = 2 ] &&
       grep -q '^inagg-torch: 1 fall-backs to Gloo, 1 returns to the switch' "$tmp/fbback" &&
       grep -q -- '-r1' "$tmp/fbback.sw2"; then
        ok "$t ($(grep '^inagg-torch: 1 fall-backs' "$tmp/fbback"); $(echo "$j" | jget '["switch"]') all_reduce through the switch)"
    else bad $t "rc $rc: $(grep -v -e Warning -e CUDA "$tmp/fbback" | tail -n 8); switch: $(tail -n 3 "$tmp/fbback.sw2" 2>/dev/null)"; fi
}
# A dead rank, a silent one, and a dead switch with the fall-back off: every surviving rank
# raises within the group's timeout
failures_test() {
    local t res how fo rc j
    t=failures_raise_within_timeout
    res=""
    for how in killed stalled switch; do
        # the switch case without fail-over (INAGG_FAILOVER=0: with it, the ranks wait for the
        # switch to come back, tests/cli_failover.sh) and without the fall-back to Gloo
        # (INAGG_TORCH_FALLBACK=0): the error names the lost switch
        fo=1; [ $how = switch ] && fo=0
        INAGG_FAILOVER=$fo INAGG_TORCH_FALLBACK=$fo timeout 120 "$PY" $CASES $how 3 tcp 4 >"$tmp/fail" 2>&1; rc=$?
        j=$(lastjson "$tmp/fail")
        if [ $rc -ne 0 ] || [ -z "$j" ]; then res="$res FAIL($how: rc $rc $(grep -v CUDA "$tmp/fail" | tail -n 3))"
        elif [ $how = switch ] && ! echo "$j" | jget '["error"]' | grep 'through switch 127.0.0.1:[0-9]* .*connection to the switch lost' >/dev/null; then
            res="$res FAIL(switch: the error does not name the lost switch: $(echo "$j" | jget '["error"]'))"
        else res="$res $how $(echo "$j" | jget '["raised_after_s"]') s"; fi
    done
    case "$res" in *FAIL*) bad $t "$res" ;; *) ok "$t (timeout 4 s, every surviving rank raised:$res)" ;; esac
}
if [ "${CLI_TORCH_ONLY:-}" = fallback ]; then
    fallback_tests
    failures_test
    echo "$pass passed, $fail failed, $skip skipped"
    [ $fail -eq 0 ]
    exit
fi

# Torch 1.x guards a compile with a FileBaton: a file created with O_EXCL, which a killed
# compile leaves in the cache directory and torch then waits for forever. The next import must
# remove it (every compile holds inagg.lock's flock, so a baton found under it is stale), say
# so, and load. Torch 2.x's FileLock is an flock on that file, which stays between builds: the
# import must leave it and say nothing.
t=stale_compile_lock_is_removed
cache=$(timeout 60 "$PY" -c "import torch, inagg._torch_ext as e; print(e._cache_dir(torch))" 2>/dev/null | tail -n1)
said="removing $cache/lock, left by a compile that was interrupted"
if [ -d "$cache" ]; then
    : >"$cache/lock"
    out=$(timeout 120 "$PY" -c "import inagg.torch, inagg._torch_ext as e; e.load(); print('built')" 2>&1); rc=$?
    if [ $rc -ne 0 ] || [ "$(echo "$out" | tail -n1)" != built ]; then
        bad $t "rc $rc (124: it waited for the stale lock): $(echo "$out" | tail -n 2)"
    elif [ "$major" = 1 ] && { [ -e "$cache/lock" ] || [[ $out != *"$said"* ]]; }; then
        bad $t "torch 1.x: the baton was not removed, or not said: $(echo "$out" | tail -n 2)"
    elif [ "$major" != 1 ] && [[ $out == *"$said"* ]]; then
        bad $t "torch 2.x: its FileLock's file was taken for a stale baton"
    else ok $t; fi
else bad $t "no cache directory: '$cache'"; fi

# The README's Python lines run as written, in a new venv (HOME in the test's directory): the
# install, then its torchrun line with the venv's Python. Nothing names a switch or a binary and
# no `inagg` is on PATH: rank 0 must start the switch the installed package carries. The build
# cache is the one backend_builds filled from python/: one cache key for every copy of the
# package, so the venv's copy compiles nothing. (PET_MASTER_PORT: torchrun's --master_port, a
# free one, as the suite runs tests side by side.)
if [ "$major" = 1 ]; then
t=readme_venv_torch_backend_as_written
steps=$(grep -E '^(/usr/bin/python3 -m venv |~/\.venvs/inagg/bin/pip install |~/\.venvs/inagg/bin/python -m torch\.distributed\.run )' README.md)
if [ "$(echo "$steps" | wc -l)" != 3 ]; then bad $t "README.md lacks the venv, pip and torch lines: '$steps'"
elif ! "$PY" -c "import ensurepip" >/dev/null 2>&1; then skp $t "python3-venv is not installed (apt-get install python3-venv)"
elif [ -x /usr/bin/inagg ] || [ -x /usr/local/bin/inagg ]; then skp $t "an installed inagg is on PATH: the package's own switch would not be the one tried"
else
    # in a copy of the tree's sources and build/inagg and libinagg (pip builds in ./python: no
    # other test's build there, no stale one reused)
    mkdir -p "$tmp/tree/build"
    tar -cf - --exclude=python/build --exclude='*.egg-info' --exclude=__pycache__ python include examples |
        tar -x -C "$tmp/tree"
    cp -a build/inagg build/libinagg.so* "$tmp/tree/build/"
    (cd "$tmp/tree" && unset PYTHONPATH INAGG_BINARY INAGG_LIBRARY INAGG_SWITCH
     export HOME=$tmp/home PATH=/usr/bin:/bin PET_MASTER_PORT=$(free_port) INAGG_VERBOSE=1
     mkdir -p "$HOME"; set -e; eval "timeout 600 bash -c $(printf %q "set -e; $steps")") >"$tmp/readme" 2>&1; rc=$?
    j=$(lastjson "$tmp/readme")
    pkg=$(echo "$j" | jget '["inagg"]' 2>/dev/null)
    if [ $rc -eq 0 ] && [ "$(echo "$j" | jget '["stats"]["switch"]' 2>/dev/null)" = 200 ] &&
       [ "$(echo "$j" | jget '["replica_spread"]')" = 0.0 ] &&
       [ "${pkg#"$tmp/home/.venvs/inagg/lib/"}" != "$pkg" ] && ! grep -q 'compiling' "$tmp/readme"; then
        ok "$t (the venv's package at ${pkg#"$tmp/"}, its own switch, no second compile)"
    else bad $t "rc $rc, package '$pkg': $(grep -v CUDA "$tmp/readme" | tail -n 8)"; fi
fi
else
# torch 2.x: the README's line for it, as written, with the venv tools/setup --torch2 made:
# the venv's installed inagg (no PYTHONPATH), its own switch, the backend built already.
t=readme_torch2_as_written
line=$(grep -E '^build/venv-torch2/bin/python -m torch\.distributed\.run ' README.md)
if [ -z "$line" ]; then bad $t "README.md lacks the build/venv-torch2 torchrun line"
elif [ "$(realpath "$PY")" != "$(realpath build/venv-torch2/bin/python 2>/dev/null)" ]; then
    skp $t "INAGG_TORCH_PYTHON is not build/venv-torch2/bin/python"
else
    (unset PYTHONPATH INAGG_BINARY INAGG_LIBRARY INAGG_SWITCH
     export PATH=/usr/bin:/bin PET_MASTER_PORT=$(free_port) INAGG_VERBOSE=1
     eval "timeout 300 $line") >"$tmp/readme2" 2>&1; rc=$?
    j=$(lastjson "$tmp/readme2")
    pkg=$(echo "$j" | jget '["inagg"]' 2>/dev/null)
    if [ $rc -eq 0 ] && [ "$(echo "$j" | jget '["stats"]["switch"]' 2>/dev/null)" -gt 0 ] &&
       [ "$(echo "$j" | jget '["replica_spread"]')" = 0.0 ] &&
       [ "${pkg#"$ROOT/build/venv-torch2/lib/"}" != "$pkg" ] && ! grep -q 'compiling' "$tmp/readme2"; then
        ok "$t (the venv's package, its own switch, no compile)"
    else bad $t "rc $rc, package '$pkg': $(grep -v CUDA "$tmp/readme2" | tail -n 8)"; fi
fi
fi

t=collectives_and_counters
timeout 180 "$PY" $CASES collectives 3 tcp >"$tmp/coll" 2>&1; rc=$?
j=$(lastjson "$tmp/coll")
if [ $rc -eq 0 ] && [ "$(echo "$j" | jget '["switch"]')" = 11 ] && [ "$(echo "$j" | jget '["gloo"]')" -ge 8 ]; then
    ok "$t (3 ranks, tcp://: $(echo "$j" | jget '["switch"]') through the switch, $(echo "$j" | jget '["gloo"]') to Gloo)"
else bad $t "rc $rc: $(grep -v CUDA "$tmp/coll" | tail -n 6)"; fi

# The same on a p4sgd job: inagg_iallreduce there, and the waits on its completion signal.
t=collectives_p4sgd
INAGG_PROTOCOL=p4sgd timeout 180 "$PY" $CASES collectives 3 tcp >"$tmp/coll4" 2>&1; rc=$?
j=$(lastjson "$tmp/coll4")
if [ $rc -eq 0 ] && [ "$(echo "$j" | jget '["switch"]')" = 11 ]; then ok "$t (3 ranks)"
else bad $t "rc $rc: $(grep -v CUDA "$tmp/coll4" | tail -n 6)"; fi

# torch 2.x's API, each piece against a Gloo group of the same ranks (torch_backend_cases.py
# torch2): the comm hooks chain then() on the backend's futures (PowerSGD waits on a second
# all_reduce inside its callback), ZeRO, torch.compile (inductor) under DDP, FSDP, checkpoints,
# subgroups, barriers.
t=torch2_api_vs_gloo
if [ "$major" = 1 ]; then skp $t "torch 2.x only (INAGG_TORCH_PYTHON=build/venv-torch2/bin/python)"
else
    CASE_WATCHDOG_S=400 timeout 450 "$PY" $CASES torch2 2 tcp >"$tmp/t2" 2>&1; rc=$?
    j=$(lastjson "$tmp/t2")
    want="future_then fp16_compress_hook bf16_compress_hook powerSGD_hook static_graph zero_redundancy compiled_ddp fsdp checkpoint barrier_device_ids monitored_barrier new_subgroups"
    missing=$(for k in $want; do echo "$j" | jget "['$k']" >/dev/null 2>&1 || echo "$k"; done)
    if [ $rc -eq 0 ] && [ -z "$missing" ] && [ "$(echo "$j" | jget '["switch"]')" -gt 0 ] &&
       [ "$(echo "$j" | jget '["gloo_by_op"].get("all_reduce", 0)')" = 0 ]; then
        ok "$t (2 ranks: hooks, static graph, ZeRO, compiled DDP, FSDP equal Gloo's; $(echo "$j" | jget '["switch"]') all_reduce through the switch)"
    else bad $t "rc $rc, missing '$missing': $(grep -v -e CUDA -e Warning "$tmp/t2" | tail -n 6)"; fi
fi

# CUDA tensors through the switch (a GPU needed: tools/gpu-check runs this case there); here
# the case says why it cannot run, and tools/gpu-check fails saying "no CUDA device".
t=cuda_tensors_through_switch
j=$(CASE_WATCHDOG_S=800 timeout 900 "$PY" $CASES cuda 2 tcp 2>"$tmp/cuda.err" | grep '^{' | tail -n 1)
why=$(echo "$j" | jget '.get("skipped", "")' 2>/dev/null)
if [ -n "$why" ]; then skp $t "$why"
elif [ -n "$j" ] && [ "$(echo "$j" | jget '["switch"]')" = 6 ]; then ok "$t: $j"
else bad $t "$(tail -n 5 "$tmp/cuda.err")"; fi
t=gpu_check_without_gpu_says_so
if [ "$major" = 1 ] || "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    skp $t "torch 2.x on a machine without a GPU only"
else
    out=$(INAGG_TORCH_PYTHON=$PY timeout 120 tools/gpu-check 2>&1); rc=$?
    if [ $rc = 1 ] && [ "$(echo "$out" | tail -n 1)" = "gpu-check: FAIL (no CUDA device: torch $("$PY" -c 'import torch; print(torch.__version__)') sees none)" ]; then ok $t
    else bad $t "rc $rc: $out"; fi
fi

t=codec_bytes_on_the_wire
res=""
for spec in "INAGG_COMPRESS fp16 0.002 0.55 0" "CASE_PG_COMPRESS zfp:rate=16 0.01 0.55 0" \
            "INAGG_COMPRESS zfp:rate=8 0.1 0.3 1"; do
    set -- $spec
    env "$1=$2" CASE_REL_BOUND=$3 CASE_MAX_WIRE_RATIO=$4 INAGG_ERROR_FEEDBACK=$5 timeout 180 "$PY" $CASES compressed 2 file >"$tmp/comp" 2>&1; rc=$?
    shift
    j=$(lastjson "$tmp/comp")
    if [ $rc -ne 0 ] || [ -z "$j" ]; then res="$res FAIL($1: rc $rc $(grep -v CUDA "$tmp/comp" | tail -n 3))"
    else res="$res $1 $(echo "$j" | jget '["wire_bytes_per_float32_byte"]')x err $(echo "$j" | jget '["max_rel_err"]' | cut -c1-8)"; fi
done
case "$res" in *FAIL*) bad $t "$res" ;; *) ok "$t:$res" ;; esac

failures_test
fallback_tests

# DDP, 4 ranks: unmodified on the inagg backend under torchrun (no switch named: rank 0
# embeds one), and on Gloo; replicas identical and parameters equal Gloo's within the bound.
STEPS=40
BOUND=1e-4   # after 40 SGD steps: docs/INTEGRATIONS.md "Error bound"
t=ddp_torchrun_embedded_switch_vs_gloo
INAGG_VERBOSE=1 timeout 300 "${TORCHRUN[@]}" --nproc_per_node 4 --master_port "$(free_port)" $EX \
    --steps $STEPS --params "$tmp/p_inagg.pt" >"$tmp/tr" 2>&1; rc=$?
timeout 300 "$PY" $EX --backend gloo --nproc 4 --init file --steps $STEPS --params "$tmp/p_gloo.pt" >"$tmp/gl" 2>&1; rcg=$?
j=$(lastjson "$tmp/tr")
diff=$("$PY" -c "import torch,sys; print((torch.load(sys.argv[1]) - torch.load(sys.argv[2])).abs().max().item())" "$tmp/p_inagg.pt" "$tmp/p_gloo.pt" 2>&1)
# every bucket through the switch: torch 1.13's DDP reduces one bucket a step here, 2.x's
# reduces the first step's parameters in a small bucket of their own (its first_bucket_bytes)
nswitch=$(echo "$j" | jget '["stats"]["switch"]' 2>/dev/null)
lines=$(grep -c "inagg-torch: rank [0-3]: $nswitch all_reduce through the switch, [0-9]* calls passed to Gloo" "$tmp/tr")
if [ $rc -eq 0 ] && [ $rcg -eq 0 ] && [ "$(echo "$j" | jget '["replica_spread"]')" = 0.0 ] &&
   [ "$nswitch" -ge $STEPS ] && [ "$nswitch" -le $((2 * STEPS)) ] && [ "$lines" = 4 ] &&
   [ "$(echo "$j" | jget '["stats"]["gloo_by_op"].get("all_reduce", 0)')" = 0 ] &&
   "$PY" -c "import sys; assert float(sys.argv[1]) <= $BOUND" "$diff" 2>/dev/null; then
    ok "$t (replicas identical, max |inagg - gloo| $diff <= $BOUND, $nswitch all_reduce through the switch, 4 ranks printed their counts)"
else bad $t "rc $rc/$rcg, diff '$diff', $lines count lines: $(grep -v CUDA "$tmp/tr" | tail -n 5)"; fi

t=ddp_hook_vs_gloo
start_switch() { # an external switch on loopback: $port, $swpid
    exec 3>"$tmp/ready"
    timeout 600 ./build/inagg switch --listen 127.0.0.1:0 --ready-fd 3 >/dev/null 2>"$tmp/sw.err" &
    swpid=$!
    exec 3>&-
    for _ in $(seq 200); do [ -s "$tmp/ready" ] && break; sleep 0.05; done
    port=$(head -n1 "$tmp/ready" 2>/dev/null)
}
stop_switch() { kill $swpid 2>/dev/null; wait $swpid 2>/dev/null; swpid=""; }
start_switch
timeout 300 "$PY" $EX --backend hook --switch "127.0.0.1:$port" --nproc 4 --init tcp --steps $STEPS \
    --params "$tmp/p_hook.pt" >"$tmp/hk" 2>&1; rc=$?
stop_switch
j=$(lastjson "$tmp/hk")
diff=$("$PY" -c "import torch,sys; print((torch.load(sys.argv[1]) - torch.load(sys.argv[2])).abs().max().item())" "$tmp/p_hook.pt" "$tmp/p_gloo.pt" 2>&1)
if [ $rc -eq 0 ] && [ "$(echo "$j" | jget '["replica_spread"]')" = 0.0 ] &&
   [ "$(echo "$j" | jget '["buckets_via_switch"]')" -ge $STEPS ] &&
   "$PY" -c "import sys; assert float(sys.argv[1]) <= $BOUND" "$diff" 2>/dev/null; then
    ok "$t (replicas identical, max |hook - gloo| $diff)"
else bad $t "rc $rc, diff '$diff': $(grep -v CUDA "$tmp/hk" | tail -n 5)"; fi

# Elastic: rank 1 dies at step 25 of the first attempt; torchrun restarts the workers, the new
# group joins a fresh job on the (external) switch and resumes from the step-20 checkpoint; the
# failed job's slots are freed.
t=elastic_restart_resumes_from_checkpoint
start_switch
rdzv=$(free_port)
INAGG_SWITCH=127.0.0.1:$port timeout 300 "${TORCHRUN[@]}" --nnodes 1:4 --nproc_per_node 3 \
    --max_restarts 2 --rdzv_backend c10d --rdzv_endpoint 127.0.0.1:$rdzv --rdzv_conf last_call_timeout=1 \
    --monitor_interval 1 $EX --steps 60 --checkpoint "$tmp/ck" --checkpoint-every 10 \
    --die-at-step 25 --die-rank 1 --json "$tmp/el.json" >"$tmp/el" 2>&1; rc=$?
for _ in $(seq 50); do  # the switch retires a job once it has read its last rank's leave
    stats=$(timeout 30 ./build/inagg switch --stats 127.0.0.1:$port 2>&1)
    grep -q " slots_used=0/" <<<"$stats" && break
    sleep 0.1
done
stop_switch
retired=$(echo "$stats" | grep -c "^retired job .*name=torch-")
if [ $rc -eq 0 ] && [ -f "$tmp/el.json" ] && [ "$(jget '["attempt"]' <"$tmp/el.json")" = 1 ] &&
   [ "$(jget '["resumed_from"]' <"$tmp/el.json")" = 20 ] && [ "$(jget '["replica_spread"]' <"$tmp/el.json")" = 0.0 ] &&
   grep -q "rank 1 exits at step 25" "$tmp/el" && grep -q " slots_used=0/" <<<"$stats" && [ "$retired" = 2 ]; then
    ok "$t (attempt 1 resumed at step 20 of 60 in a new job, replicas identical; both jobs retired, no slot held)"
else bad $t "rc $rc, $retired jobs retired: $(grep -v CUDA "$tmp/el" | grep -v '^\[' | tail -n 5) $(cat "$tmp/el.json" 2>/dev/null) $(echo "$stats" | head -n 3)"; fi

echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
