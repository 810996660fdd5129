#!/usr/bin/env bash
# tests/cli_bench_train.sh - black-box tests of `inagg bench train` (bench/train_ddp.py,
# python/inagg/train.py, fmnist.py, models.py): help and usage errors, a tiny DDP run on loopback
# (2 ranks, a few hundred Fashion-MNIST samples, Gloo and inagg with and without compression)
# whose JSON report is checked against its contract, the plot, the loader on gzipped and plain
# IDX files, clear errors for a missing or truncated dataset file, and one run across a testbed
# of network namespaces. Skips, saying why, without torch, the dataset or network namespaces.
# Every command runs under `timeout`; about two minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
INAGG=./build/inagg
PY=/usr/bin/python3
FMNIST=${INAGG_FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
pass=0 fail=0 skip=0
ok()   { echo "ok      $1"; pass=$((pass + 1)); }
bad()  { echo "FAIL    $1: $2"; fail=$((fail + 1)); }
skp()  { echo "skip    $1: $2"; skip=$((skip + 1)); }
finish() { echo "$pass passed, $fail failed, $skip skipped"; [ $fail -eq 0 ]; exit $?; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
TINY="--model cnn --train-samples 256 --test-samples 300 --batch 32 --epochs 2 --seed 7"

t=bench_train_help
out=$(timeout 30 $INAGG bench train --help 2>&1); rc=$?
if [ $rc -eq 0 ] && grep -q -- "--backend" <<<"$out" && grep -q -- "--testbed" <<<"$out" &&
   grep -q "speedup_vs_gloo" <<<"$out" && timeout 5 $INAGG --help | grep "bench train" >/dev/null; then
    ok $t; else bad $t "rc $rc or text incomplete"; fi

t=bench_train_usage_errors_exit_2
rcs=""
for args in "--backend nccl" "--backend inagg:lz4" "--compress zfp:rate" "--backend gloo,gloo" \
            "--epochs 0" "--testbed 1" "--workers 0" "--train-samples 10" \
            "--target-accuracy 1.5" "--window 0" "--model resnet" "--bogus" "--epochs"; do
    timeout 30 $INAGG bench train $args >/dev/null 2>"$tmp/err"; rc=$?
    [ $rc -eq 2 ] && [ -s "$tmp/err" ] || rcs="$rcs [$args]=$rc"
done
[ -z "$rcs" ] && ok $t || bad $t "wrong exit codes or no message:$rcs"

t=bench_train_switch_fault_usage_names_the_problem
rcs=""
for c in "--switch-fault crash@is kill or restart:SECONDS" "--switch-fault restart:x@is kill or restart:SECONDS" \
         "--switch-fault kill --switch-fault-epoch 1@must be 2..--epochs" \
         "--switch-fault kill --testbed 4@--fabric bridge"; do
    args=${c%@*} want=${c#*@}
    timeout 30 $INAGG bench train --epochs 3 $args >/dev/null 2>"$tmp/err"; rc=$?
    [ $rc -eq 2 ] && grep -q -- "$want" "$tmp/err" || rcs="$rcs [$args]=$rc: $(head -c 200 "$tmp/err")"
done
[ -z "$rcs" ] && ok $t || bad $t "wrong exit code or message:$rcs"

t=bench_train_python_and_hook_usage_names_the_problem
rcs=""
for c in "--python /nonexistent/python@not an executable" "--ddp-hook bf16 --mechanism hook@needs the inagg backend" \
         "--ddp-hook lz4@invalid choice"; do
    args=${c%@*} want=${c#*@}
    timeout 30 $INAGG bench train $args >/dev/null 2>"$tmp/err"; rc=$?
    [ $rc -eq 2 ] && grep -q -- "$want" "$tmp/err" || rcs="$rcs [$args]=$rc: $(head -c 200 "$tmp/err")"
done
[ -z "$rcs" ] && ok $t || bad $t "wrong exit code or message:$rcs"

t=bench_train_in_switch_optimizer_says_not_supported
timeout 30 $INAGG bench train --in-switch-optimizer >/dev/null 2>"$tmp/err"; rc=$?
if [ $rc -eq 2 ] && grep -q "not supported with DDP" "$tmp/err"; then ok $t
else bad $t "rc $rc: $(cat "$tmp/err")"; fi

if ! $PY -c "import torch, torch.distributed as d; assert d.is_available()" 2>/dev/null; then
    skp bench_train_runs "python3-torch is not installed (apt-get install python3-torch)"
    finish
fi
if [ ! -f "$FMNIST/train-images-idx3-ubyte.gz" ]; then
    skp bench_train_runs "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)"
    finish
fi

# The loader reads gzipped and plain IDX files alike (Debian ships them gzipped).
t=fmnist_gzip_and_plain_agree
mkdir -p "$tmp/plain"
for f in "$FMNIST"/*-ubyte.gz; do gunzip -c "$f" >"$tmp/plain/$(basename "$f" .gz)"; done
if timeout 60 env PYTHONPATH=python $PY -c "
import sys, numpy as np
from inagg import fmnist
a, b = fmnist.load(sys.argv[1]), fmnist.load(sys.argv[2])
assert [x.shape for x in a] == [(60000, 28, 28), (60000,), (10000, 28, 28), (10000,)], [x.shape for x in a]
assert all(np.array_equal(x, y) for x, y in zip(a, b))
assert sorted(set(a[1].tolist())) == list(range(10))
" "$FMNIST" "$tmp/plain" 2>"$tmp/err"; then ok $t; else bad $t "$(tail -n 3 "$tmp/err")"; fi

# A missing or truncated file stops the run with exit 3 and a message naming the file.
t=bench_train_missing_dataset_names_the_file
mkdir -p "$tmp/missing"
ln -s "$FMNIST/train-labels-idx1-ubyte.gz" "$FMNIST/t10k-images-idx3-ubyte.gz" \
      "$FMNIST/t10k-labels-idx1-ubyte.gz" "$tmp/missing/"
timeout 120 $INAGG bench train --workers 2 $TINY --backend gloo --data "$tmp/missing" \
    >/dev/null 2>"$tmp/err"; rc=$?
if [ $rc -eq 3 ] && grep -q "$tmp/missing/train-images-idx3-ubyte.gz: no such file" "$tmp/err"; then
    ok $t; else bad $t "rc $rc: $(tail -n 3 "$tmp/err")"; fi

t=bench_train_truncated_dataset_names_the_file
mkdir -p "$tmp/trunc"
cp "$tmp/plain/"* "$tmp/trunc/"
head -c 5000 "$tmp/plain/t10k-labels-idx1-ubyte" >"$tmp/trunc/t10k-labels-idx1-ubyte"
timeout 120 $INAGG bench train --workers 2 $TINY --backend gloo --data "$tmp/trunc" \
    >/dev/null 2>"$tmp/err"; rc=$?
if [ $rc -eq 3 ] && grep -q "t10k-labels-idx1-ubyte: truncated: 4992 of 10000 data bytes" "$tmp/err"
then ok $t; else bad $t "rc $rc: $(tail -n 3 "$tmp/err")"; fi

t=fmnist_truncated_gzip_names_the_file
head -c 20000 "$FMNIST/train-labels-idx1-ubyte.gz" >"$tmp/trunc/train-labels-idx1-ubyte.gz"
out=$(timeout 60 env PYTHONPATH=python $PY -c "
import sys
from inagg import fmnist
try:
    fmnist.load(sys.argv[1])
except fmnist.DatasetError as e:
    print(e)
" "$tmp/trunc" 2>&1)
if grep -q "train-labels-idx1-ubyte.gz: truncated" <<<"$out"; then ok $t
else bad $t "$out"; fi

# The contract: one JSON object; runs with label, epoch_s, final_test_accuracy,
# time_to_accuracy_s and per-epoch wall/communication/accuracy; speedup_vs_gloo per label;
# the same seed and batches for every backend; progress on stderr; a plot.
t=bench_train_loopback_contract
timeout 400 $INAGG bench train --workers 2 $TINY --backend gloo,inagg,inagg:fp16 \
    --target-accuracy 0.5 --json - --plot "$tmp/acc.png" >"$tmp/out" 2>"$tmp/err"; rc=$?
if [ $rc -eq 0 ] && $PY - "$tmp/out" <<'EOF' 2>"$tmp/check"
import json, sys
lines = [x for x in open(sys.argv[1]).read().splitlines() if x.strip()]
assert len(lines) == 1, "stdout holds %d lines, not one JSON object" % len(lines)
r = json.loads(lines[0])
runs = r["runs"]
assert [x["label"] for x in runs] == ["gloo", "inagg", "inagg:fp16"], [x["label"] for x in runs]
assert r["world"] == 2 and r["testbed"] is False and r["target_accuracy"] == 0.5
for x in runs:
    eps = x["epochs"]
    assert len(eps) == 2 and [e["epoch"] for e in eps] == [1, 2], eps
    for e in eps:
        assert e["wall_s"] > 0 and 0 < e["comm_s"] <= e["wall_s"] * 1.05, e
        assert 0 <= e["test_accuracy"] <= 1, e
    assert abs(x["epoch_s"] - sorted(e["wall_s"] for e in eps)[0] / 2 -
               sorted(e["wall_s"] for e in eps)[1] / 2) < 1e-9, "epoch_s is not the median"
    assert 0 <= x["final_test_accuracy"] <= 1 and x["final_test_accuracy"] == eps[-1]["test_accuracy"]
    first = next((e["train_s_total"] for e in eps if e["test_accuracy"] >= 0.5), None)
    assert x["time_to_accuracy_s"] == first, (x["time_to_accuracy_s"], first)
    assert abs(eps[1]["train_s_total"] - eps[0]["wall_s"] - eps[1]["wall_s"]) < 1e-3
    assert x["replicas_agree"] is True, x["label"]
    assert x["final_test_accuracy"] > 0.3, "did not learn: %s" % x["final_test_accuracy"]
assert runs[0]["mechanism"] == "gloo"
assert all(x["mechanism"] in ("backend", "hook") for x in runs[1:])
assert runs[2]["compress"] == "fp16" and runs[1]["compress"] == "none"
assert not runs[0]["error_feedback"] and not runs[1]["error_feedback"]
assert runs[2]["error_feedback"] == (runs[2]["mechanism"] == "backend"), runs[2]
sp = r["speedup_vs_gloo"]
assert set(sp) == {x["label"] for x in runs}, sp
for x in runs:
    assert abs(sp[x["label"]] - runs[0]["epoch_s"] / x["epoch_s"]) < 1e-9
# the same data order and initial weights: Gloo and uncompressed inagg see the same losses
g, i = runs[0]["epochs"], runs[1]["epochs"]
assert abs(g[0]["train_loss"] - i[0]["train_loss"]) < 2e-3, (g[0]["train_loss"], i[0]["train_loss"])
assert abs(g[-1]["test_accuracy"] - i[-1]["test_accuracy"]) <= 0.02
EOF
then
    if grep -q "epoch 2/2" "$tmp/err" && grep -q "inagg:fp16" "$tmp/err"; then ok $t
    else bad $t "no progress on stderr"; fi
else bad $t "rc $rc: $(tail -n 4 "$tmp/check") $(tail -n 3 "$tmp/err")"; fi

# A registered torch.distributed backend "inagg" is used as such ("mechanism": "backend"),
# with the switch and the compression in its environment. A stand-in registered from
# sitecustomize (a Gloo group that records what it was given) takes the place of the real one.
t=bench_train_registered_backend_is_used
mkdir -p "$tmp/site"
cat >"$tmp/site/sitecustomize.py" <<'EOF'
import json, os
if os.environ.get("INAGG_TEST_BACKEND_LOG"):
    import torch.distributed as dist
    def _make(store, rank, world, timeout):
        with open("%s.%d" % (os.environ["INAGG_TEST_BACKEND_LOG"], rank), "w") as f:
            json.dump({k: os.environ.get(k) for k in ("INAGG_SWITCH", "INAGG_COMPRESS",
                                                        "INAGG_ERROR_FEEDBACK")}, f)
        return dist.ProcessGroupGloo(store, rank, world, timeout)
    dist.Backend.register_backend("inagg", _make)
EOF
PYTHONPATH="$tmp/site" INAGG_TEST_BACKEND_LOG="$tmp/backend" timeout 300 $INAGG bench train \
    --workers 2 $TINY --epochs 1 --backend inagg:fp16 --json - >"$tmp/bk" 2>"$tmp/bkerr"; rc=$?
if [ $rc -eq 0 ] && $PY - "$tmp/bk" "$tmp/backend" <<'EOF' 2>"$tmp/check"
import json, sys
r = json.loads(open(sys.argv[1]).read())
assert r["runs"][0]["mechanism"] == "backend", r["runs"][0]["mechanism"]
for rank in (0, 1):
    env = json.load(open("%s.%d" % (sys.argv[2], rank)))
    assert env["INAGG_COMPRESS"] == "fp16" and env["INAGG_SWITCH"].startswith("127.0.0.1:"), env
    assert env["INAGG_ERROR_FEEDBACK"] == "1", env  # lossy through the backend: per bucket
assert r["runs"][0]["error_feedback"] is True, r["runs"][0]
EOF
then ok $t; else bad $t "rc $rc: $(tail -n 3 "$tmp/check") $(tail -n 3 "$tmp/bkerr")"; fi

t=bench_train_plot
if ! command -v gnuplot >/dev/null; then skp $t "gnuplot is not installed"
elif [ -s "$tmp/acc.png" ] && [ "$(head -c 4 "$tmp/acc.png" | tail -c 3)" = PNG ]; then ok $t
else bad $t "no PNG at $tmp/acc.png"; fi

# One run across a testbed: ranks in host namespaces, the switch in the switch namespace,
# and nothing left behind afterwards.
t=bench_train_testbed
if ! timeout 20 tools/testbed check >/dev/null 2>&1; then
    skp $t "testbeds cannot be built here ($(timeout 20 tools/testbed check 2>&1 | tail -n 1))"
else
    timeout 400 $INAGG bench train --testbed 2 --link-rate 200mbit $TINY --epochs 1 \
        --backend gloo,inagg:zfp:rate=8 --json - >"$tmp/tb" 2>"$tmp/tberr"; rc=$?
    name=$(grep -o "building testbed tr[0-9a-f]*" "$tmp/tberr" | grep -o "tr[0-9a-f]*$")
    left=$(ip netns list 2>/dev/null | grep -c "inagg-tb-${name:-none}-")
    if [ $rc -eq 0 ] && [ -n "$name" ] && [ "$left" = 0 ] && $PY - "$tmp/tb" <<'EOF' 2>"$tmp/check"
import json, sys
r = json.loads(open(sys.argv[1]).read())
assert r["testbed"] is True and r["world"] == 2 and r["link_rate"] == "200mbit", r
assert [x["label"] for x in r["runs"]] == ["gloo", "inagg:zfp:rate=8"]
z = r["runs"][1]
assert z["compress"] == "zfp:rate=8" and z["replicas_agree"] and z["epochs"][0]["comm_s"] > 0
assert set(r["speedup_vs_gloo"]) == {"gloo", "inagg:zfp:rate=8"}
EOF
    then ok $t; else bad $t "rc $rc, $left namespaces left: $(tail -n 3 "$tmp/check") $(tail -n 3 "$tmp/tberr")"; fi

    # SIGTERM in the middle of a run: the ranks end, the testbed goes down, exit 130.
    t=bench_train_testbed_sigterm_cleans_up
    timeout 300 $INAGG bench train --testbed 2 --link-rate 200mbit $TINY --epochs 50 \
        --backend gloo >/dev/null 2>"$tmp/sigerr" &
    run=$!
    for _ in $(seq 1 600); do
        grep -q "epoch 1/50" "$tmp/sigerr" && break
        kill -0 $run 2>/dev/null || break
        sleep 0.2
    done
    name=$(grep -o "building testbed tr[0-9a-f]*" "$tmp/sigerr" | grep -o "tr[0-9a-f]*$")
    kill -TERM $run 2>/dev/null
    wait $run; rc=$?
    left=$(ip netns list 2>/dev/null | grep -c "inagg-tb-${name:-none}-")
    ranks=$(pgrep -f "inagg.train --rank .* --epochs 50 " | wc -l)
    if [ $rc -eq 130 ] && [ -n "$name" ] && [ "$left" = 0 ] && [ "$ranks" = 0 ]; then ok $t
    else
        bad $t "rc $rc, testbed '${name}', $left namespaces and $ranks ranks left: $(tail -n 2 "$tmp/sigerr")"
        [ -z "$name" ] || timeout 60 tools/testbed down "$name" >/dev/null 2>&1
    fi
fi
finish
