#!/usr/bin/env bash
# tests/cli_train.sh - black-box tests of `inagg train`: help and usage errors, the default
# run (the project's main job) within its time budget, the JSON report and its keys, the plot,
# a malformed data file, hostile data files, data-parallel and MPI runs, and ranks started one by one against a
# running switch (multi-host style, rank from flags and from a launcher's environment).
# Every command runs under `timeout`.
set -uo pipefail
cd "$(dirname "$0")/.."
INAGG=./build/inagg
pass=0 fail=0 skip=0
ok()   { echo "ok      $1"; pass=$((pass + 1)); }
bad()  { echo "FAIL    $1: $2"; fail=$((fail + 1)); }
skp()  { echo "skip    $1: $2"; skip=$((skip + 1)); }
# A test whose tool is missing: a failure in CI (CI=true, where tools/setup installs it), a
# skip that says what to install on a developer's machine.
missing() { if [ "${CI:-}" = true ]; then bad "$1" "$2 is missing in CI (tools/setup installs it)"
            else skp "$1" "$2 not installed (Debian: apt-get install $3)"; fi; }
json_get() { python3 -c "import json,sys; d=json.load(sys.stdin); print(eval('d' + sys.argv[1]))" "$1"; }
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
SMALL="--synthetic sparse:2000x300:0.05 --epochs 3"

t=train_help_teaches
out=$(timeout 10 $INAGG train --help); rc=$?
if [ $rc -eq 0 ] && echo "$out" | grep -c >/dev/null -- "--micro-batch" && echo "$out" | grep -c >/dev/null "Algorithm 1" &&
   echo "$out" | grep -c >/dev/null "examples:" && echo "$out" | grep -c >/dev/null -- "--backend" &&
   timeout 5 $INAGG --help | grep -c >/dev/null "train"; then ok $t; else bad $t "rc $rc or text incomplete"; fi

t=train_usage_errors_exit_2
rcs=""
for args in "--mode bogus" "--workers 0" "--workers 65" "--batch x" "--precision 16" \
            "--batch 10 --micro-batch 100" "--data a --synthetic b" "--rank 1" \
            "--mode single --workers 3" "--bogus" "--objective foo" "--backend tcp" "extra" \
            "--lr -1" "--l2 abc" "--epochs 0" "--protocol nope" "--backend mpi --protocol p4sgd" \
            "--mode data --no-pipeline" "--switch 127.0.0.1:1" "--switch 127.0.0.1:1 --rank 2 --world 2" \
            "--timeout 5" "--lr-schedule cubic" "--epochs" "--optimizer rmsprop --mode data" \
            "--optimizer adam" "--mode data --in-switch" "--mode data --optimizer adam --in-switch --backend mpi" \
            "--mode data --optimizer adam --eps-place middle" "--switch-threads 0" \
            "--switch-threads 65" "--mode single --switch-threads 2" "--backend mpi --switch-threads 2"; do
    timeout 10 $INAGG train $args >/dev/null 2>"$tmp/err"; rc=$?
    [ $rc -eq 2 ] && [ -s "$tmp/err" ] || rcs="$rcs [$args]=$rc"
done
[ -z "$rcs" ] && ok $t || bad $t "wrong exit codes or no message:$rcs"

t=train_default_run_under_60s
start=$(date +%s.%N)
timeout 120 $INAGG train >"$tmp/out" 2>"$tmp/err"; rc=$?
secs=$(python3 -c "import sys; print('%.1f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$start" "$(date +%s.%N)")
if [ $rc -eq 0 ] && grep -q "^summary" "$tmp/out" && grep -q "final objective" "$tmp/out" &&
   grep -q "epoch  20/20" "$tmp/out" && python3 -c "import sys; sys.exit(float(sys.argv[1]) >= 60)" "$secs"; then
    ok "$t ($secs s)"
else bad $t "rc $rc after $secs s: $(tail -n 3 "$tmp/err") $(tail -n 3 "$tmp/out")"; fi
# It learned: accuracy and objective improved from the first epoch to the last.
t=train_default_run_learns
first=$(grep -m1 "epoch   1/" "$tmp/out" | awk '{print $4}'); last=$(grep "final objective" "$tmp/out" | awk '{print $3}')
if [ -n "$first" ] && [ -n "$last" ] && python3 -c "import sys; sys.exit(not float(sys.argv[2]) < float(sys.argv[1]) - 0.02)" "$first" "$last"; then ok $t
else bad $t "objective $first -> $last"; fi

# It says how good that is: the optimum of the same problem (liblinear-train) and the gap.
t=train_default_run_says_its_reference_and_gap
want_src="the optimum: liblinear-train"
command -v liblinear-train >/dev/null || want_src="the same training in one process"
if grep -q "^  reference          objective [0-9.]*, accuracy [0-9.]*%  ($want_src" "$tmp/out" &&
   grep -q "^  gap                objective [-+][0-9.]* ([-+][0-9.]*% of the reference's), accuracy [-+][0-9.]* points$" "$tmp/out"; then ok $t
else bad $t "$(grep -A1 reference "$tmp/out")"; fi

# The reference is real: liblinear's optimum is at or below what any SGD run reaches (the
# distributed one and the single process), and --reference single is the single-process run
# itself (the same data, rate and shuffles: the same final objective, bit for bit).
t=train_reference_is_the_optimum_or_the_single_process_run
if ! command -v liblinear-train >/dev/null; then missing $t "liblinear-train" liblinear-tools
else
    for r in auto single none; do
        timeout 120 $INAGG train $SMALL --workers 3 --reference $r --json "$tmp/ref_$r.json" >/dev/null 2>"$tmp/ref_$r.err" ||
            echo "rc $?: $(tail -n 2 "$tmp/ref_$r.err")" >>"$tmp/ref.fail"
    done
    timeout 120 $INAGG train $SMALL --mode single --json "$tmp/ref_one.json" >/dev/null 2>&1 || echo "single rc $?" >>"$tmp/ref.fail"
    timeout 120 $INAGG train $SMALL --workers 2 --objective hinge --json "$tmp/ref_hinge.json" >/dev/null 2>&1 || echo "hinge rc $?" >>"$tmp/ref.fail"
    timeout 120 $INAGG train $SMALL --workers 2 --objective squared --json "$tmp/ref_sq.json" >/dev/null 2>&1 || echo "squared rc $?" >>"$tmp/ref.fail"
    timeout 120 $INAGG train $SMALL --workers 2 --objective squared --reference liblinear --json "$tmp/ref_sqll.json" >/dev/null 2>&1 || echo "squared liblinear rc $?" >>"$tmp/ref.fail"
    timeout 10 $INAGG train --reference best >/dev/null 2>"$tmp/ref_bad.err"; brc=$?
    if [ -s "$tmp/ref.fail" ]; then bad $t "$(cat "$tmp/ref.fail")"
    elif [ $brc -ne 2 ] || ! grep -q "reference must be auto, liblinear, single or none" "$tmp/ref_bad.err"; then
        bad $t "--reference best: rc $brc, $(cat "$tmp/ref_bad.err")"
    elif ! python3 - "$tmp" <<'EOF2'
import json, sys
d = lambda n: json.load(open('%s/ref_%s.json' % (sys.argv[1], n)))
auto, single, none, one, hinge, sq, sqll = map(d, ['auto', 'single', 'none', 'one', 'hinge', 'sq', 'sqll'])
for run in (auto, hinge):
    ref = run['reference']
    assert ref['source'] == 'liblinear', ref
    assert ref["objective"] <= run["final_objective"] + 1e-9, (ref, run["final_objective"])
    assert abs(run['objective_gap'] - (run['final_objective'] - ref['objective'])) < 1e-9, run
    assert abs(run['relative_objective_gap'] * ref['objective'] - run['objective_gap']) < 1e-9, run
    assert abs(run['accuracy_gap'] - (run['final_accuracy'] - ref['accuracy'])) < 1e-9, run
    assert 0.5 < ref['accuracy'] <= 1 and ref['seconds'] > 0, ref
# the optimum: below the single process's SGD too, and not far (SGD gets close on this data)
assert auto['reference']['objective'] <= one['final_objective'] < auto['reference']['objective'] * 1.05, (auto['reference'], one['final_objective'])
assert one['reference'] is not None and one['reference']['source'] == 'liblinear', one['reference']
ref = single['reference']
assert ref['source'] == 'single' and ref['objective'] == one['final_objective'], (ref, one['final_objective'])
assert ref['accuracy'] == one['final_accuracy'], (ref, one['final_accuracy'])
assert abs(single['relative_objective_gap']) < 1e-3, single['relative_objective_gap']
assert none['reference'] is None and 'reference_missing' not in none and 'objective_gap' not in none, none
assert sq['reference']['source'] == 'single', sq['reference']          # liblinear: no squared loss
assert sqll['reference'] is None and 'liblinear solves logistic and hinge' in sqll['reference_missing'], sqll
EOF2
    then bad $t "see the assertion above"
    else ok "$t (gap $(json_get "['objective_gap']" <"$tmp/ref_auto.json"))"; fi
fi

# The embedded switch's thread count shares the slots out differently; the sums (float32 in
# rank order) and so the whole run must not change.
t=train_switch_threads_change_nothing_but_speed
o1=$(timeout 120 $INAGG train $SMALL --workers 3 --switch-threads 1 --json - 2>"$tmp/err1"); rc1=$?
o3=$(timeout 120 $INAGG train $SMALL --workers 3 --switch-threads 3 --json - 2>"$tmp/err3"); rc3=$?
if [ $rc1 -eq 0 ] && [ $rc3 -eq 0 ] && python3 -c "
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
assert a['switch_threads'] == 1 and b['switch_threads'] == 3, (a['switch_threads'], b['switch_threads'])
assert [e['objective'] for e in a['epochs']] == [e['objective'] for e in b['epochs']], 'objectives differ'
" "$o1" "$o3" && grep -q "embedded switch with 3 threads" "$tmp/err3"; then ok $t
else bad $t "rc $rc1/$rc3: $(tail -n 2 "$tmp/err1") $(tail -n 2 "$tmp/err3")"; fi

t=train_json_has_every_key
out=$(timeout 120 $INAGG train $SMALL --workers 3 --json - 2>"$tmp/err"); rc=$?
if [ $rc -ne 0 ]; then bad $t "rc $rc: $(tail -n 3 "$tmp/err")"
elif ! echo "$out" | python3 -c "
import json, sys
d = json.load(sys.stdin)   # stdout must be pure JSON
for k in ['mode', 'workers', 'backend', 'protocol', 'objective', 'batch', 'micro_batch', 'pipeline',
          'epochs', 'final_objective', 'final_accuracy', 'total_seconds']:
    assert k in d, k
assert d['mode'] == 'model' and d['workers'] == 3 and d['backend'] == 'inagg'
assert d['protocol'] == 'p4sgd' and d['objective'] == 'logistic' and d['pipeline'] is True
assert d['batch'] == 64 and d['micro_batch'] == 8 and len(d['epochs']) == 3
for i, e in enumerate(d['epochs']):
    for k in ['epoch', 'objective', 'accuracy', 'seconds', 'comm_share']:
        assert k in e, k
    assert e['epoch'] == i + 1 and 0 <= e['comm_share'] <= 1 and e['seconds'] > 0
    assert 'test_accuracy' not in e
assert d['final_objective'] == d['epochs'][-1]['objective'] < d['epochs'][0]['objective']
assert 0.5 < d['final_accuracy'] <= 1 and d['total_seconds'] > 0
"; then bad $t "keys or values wrong: $out"
elif ! grep -q "^summary" "$tmp/err"; then bad $t "no summary on stderr with --json -"
else ok $t; fi

t=train_test_data_and_data_mode
python3 - "$tmp" <<'EOF'
import random, sys
random.seed(3)
for name, n in (("train.svm", 600), ("test.svm", 200)):
    with open(sys.argv[1] + "/" + name, "w") as f:
        for _ in range(n):
            x = {j: random.random() for j in sorted(random.sample(range(1, 41), 6))}
            y = 1 if x.get(1, 0) + x.get(2, 0) - x.get(3, 0) > 0.3 else -1
            f.write(("%+d " % y) + " ".join("%d:%.4f" % (j, v) for j, v in x.items()) + "\n")
EOF
out=$(timeout 120 $INAGG train --data "$tmp/train.svm" --test-data "$tmp/test.svm" --mode data --workers 2 --epochs 3 --json - 2>"$tmp/err"); rc=$?
if [ $rc -eq 0 ] && echo "$out" | python3 -c "
import json, sys
d = json.load(sys.stdin)
assert d['mode'] == 'data' and d['protocol'] == 'switchml' and d['pipeline'] is False
assert all(0 <= e['test_accuracy'] <= 1 for e in d['epochs'])
assert d['epochs'][-1]['test_accuracy'] > 0.6
"; then ok $t; else bad $t "rc $rc: $(tail -n 3 "$tmp/err") $out"; fi

t=train_plot_writes_png
if command -v gnuplot >/dev/null; then
    timeout 120 $INAGG train $SMALL --workers 2 --plot "$tmp/curve.png" >/dev/null 2>"$tmp/err"; rc=$?
    if [ $rc -eq 0 ] && [ -s "$tmp/curve.png" ] && head -c 4 "$tmp/curve.png" | grep -c >/dev/null "PNG"; then ok $t
    else bad $t "rc $rc: $(tail -n 3 "$tmp/err")"; fi
else skp $t "gnuplot not installed"; fi

t=train_malformed_libsvm_exit_1_with_file_line
printf '+1 1:1 2:0.5\n-1 3:1\n+1 2:x\n' >"$tmp/bad.svm"
timeout 60 $INAGG train --data "$tmp/bad.svm" --workers 2 >/dev/null 2>"$tmp/err"; rc=$?
if [ $rc -eq 1 ] && grep -q "$tmp/bad.svm:3:" "$tmp/err"; then ok $t
else bad $t "rc $rc: $(cat "$tmp/err")"; fi

# Hostile inputs: a 27-byte file naming feature 2000000000, /dev/zero and a 1 MB line each end
# within seconds with exit 1 and a clear message (no gigabytes allocated, no endless read).
t=train_hostile_inputs_refused
printf '+1 2000000000:1 # far away\n' >"$tmp/far.svm"
python3 -c "import sys; sys.stdout.write('+1 1:1\\n-1 ' + '9' * 1100000 + '\\n')" >"$tmp/long.svm"
msgs=""
for spec in "far.svm:INAGG_MAX_FEATURES" "/dev/zero:NUL byte" "long.svm:long.svm:2: line longer"; do
    f=${spec%%:*}; want=${spec#*:}; [ "${f#/}" = "$f" ] && f="$tmp/$f"
    timeout 20 $INAGG train --data "$f" --mode single >/dev/null 2>"$tmp/err"; rc=$?
    [ $rc -eq 1 ] && grep -q "$want" "$tmp/err" || msgs="$msgs [$f rc $rc: $(head -c 300 "$tmp/err")]"
done
[ -z "$msgs" ] && ok $t || bad $t "$msgs"

t=train_missing_file_exit_1
timeout 60 $INAGG train --data "$tmp/nonexistent.svm" --mode single >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] && grep -q "nonexistent.svm" "$tmp/err" && ok $t || bad $t "rc $rc: $(cat "$tmp/err")"

t=train_mpi_backend
if command -v mpirun >/dev/null && [ -x build/inagg-mpi-train ]; then
    out=$(timeout 200 $INAGG train $SMALL --workers 2 --backend mpi --json - 2>"$tmp/err"); rc=$?
    ref=$(timeout 60 $INAGG train $SMALL --mode single --json - 2>/dev/null)
    if [ $rc -eq 0 ] && python3 -c "
import json, sys
m, s = json.loads(sys.argv[1]), json.loads(sys.argv[2])
assert m['backend'] == 'mpi' and m['protocol'] == 'none' and len(m['epochs']) == 3
for a, b in zip(m['epochs'], s['epochs']):
    assert abs(a['objective'] - b['objective']) < 1e-5 * b['objective'], (a, b)
" "$out" "$ref"; then ok $t; else bad $t "rc $rc: $(tail -n 3 "$tmp/err") $out"; fi
else missing $t "mpirun or build/inagg-mpi-train" "openmpi-bin libopenmpi-dev, then make"; fi

t=train_ranks_against_a_running_switch
exec 3>"$tmp/ready"
timeout 120 $INAGG switch --listen 127.0.0.1:0 --ready-fd 3 >/dev/null 2>"$tmp/sw.err" &
swpid=$!
exec 3>&-
for _ in $(seq 100); do [ -s "$tmp/ready" ] && break; sleep 0.05; done
port=$(head -n1 "$tmp/ready" 2>/dev/null)
if [ -z "$port" ]; then bad $t "switch did not report a port"; else
    # rank 1 from flags, rank 0 from an mpirun-style environment
    timeout 100 $INAGG train $SMALL --switch 127.0.0.1:$port --rank 1 --world 2 >"$tmp/r1.out" 2>"$tmp/r1.err" &
    r1=$!
    OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 timeout 100 $INAGG train $SMALL --switch 127.0.0.1:$port --json - >"$tmp/r0.json" 2>"$tmp/r0.err"
    rc0=$?; wait $r1; rc1=$?
    kill -INT $swpid; wait $swpid
    ref=$(timeout 60 $INAGG train $SMALL --workers 2 --json - 2>/dev/null)
    if [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] && [ ! -s "$tmp/r1.out" ] && python3 -c "
import json, sys
a, b = json.load(open(sys.argv[1])), json.loads(sys.argv[2])
assert a['workers'] == 2 and [e['objective'] for e in a['epochs']] == [e['objective'] for e in b['epochs']]
" "$tmp/r0.json" "$ref"; then ok $t
    else bad $t "rc $rc0/$rc1: $(tail -n 2 "$tmp/r0.err") $(tail -n 2 "$tmp/r1.err")"; fi
fi

t=train_optimizers_local_and_in_switch_agree
local=$(timeout 120 $INAGG train $SMALL --mode data --workers 3 --optimizer adam --json - 2>"$tmp/e1")
inswitch=$(timeout 120 $INAGG train $SMALL --mode data --workers 3 --optimizer adam --in-switch --json - 2>"$tmp/e2")
if python3 -c "
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
assert a['optimizer'] == 'adam' and not a['in_switch'] and b['in_switch']
oa, ob = [e['objective'] for e in a['epochs']], [e['objective'] for e in b['epochs']]
assert oa[-1] < oa[0] and ob[-1] < ob[0]
# the local run's gradients cross the switch in block fixed point: close, not identical
assert all(abs(x - y) <= 1e-3 * abs(x) for x, y in zip(oa, ob)), (oa, ob)
" "$local" "$inswitch"; then ok $t
else bad $t "$(tail -n 2 "$tmp/e1") $(tail -n 2 "$tmp/e2")"; fi

t=train_a9a_in_switch_adam_within_2pct_of_liblinear
a9a=../shared/datasets/a9a
if [ ! -f $a9a ]; then skp $t "../shared/datasets/a9a is not here"
elif ! command -v liblinear-train >/dev/null; then skp $t "liblinear-train (liblinear-tools) is not installed"
else
    liblinear-train -q -s 0 -c 1 -e 0.0001 $a9a "$tmp/a9a.model" >/dev/null
    out=$(timeout 300 $INAGG train --data $a9a --workers 4 --mode data --objective logistic --l2 3.0712e-5 --epochs 20 --optimizer adam --in-switch --json - 2>"$tmp/err")
    if python3 -c "
import json, math, sys
d = json.loads(sys.argv[1])
lines = open(sys.argv[2]).read().split('\n')
w = [float(x) for x in lines[lines.index('w') + 1:] if x.strip()]
labels = lines[2].split()[1:]
sign = 1.0 if labels[0] == '1' else -1.0
S, loss = 0, 0.0
for line in open(sys.argv[3]):
    p = line.split()
    if not p: continue
    y = float(p[0]); z = 0.0
    for f in p[1:]:
        i, v = f.split(':'); i = int(i)
        if i <= len(w): z += sign * w[i - 1] * float(v)
    m = -y * z
    loss += (m + math.log1p(math.exp(-m))) if m > 0 else math.log1p(math.exp(m))
    S += 1
ref = loss / S + 0.5 * (1.0 / S) * sum(x * x for x in w)
got = d['final_objective']
assert d['in_switch'] and d['optimizer'] == 'adam'
assert got <= ref * 1.02, (got, ref)
print('%.6f vs liblinear %.6f (%+.3f%%)' % (got, ref, (got / ref - 1) * 100))
" "$out" "$tmp/a9a.model" $a9a >"$tmp/msg" 2>&1; then ok "$t ($(cat "$tmp/msg"))"
    else bad $t "$(tail -n 3 "$tmp/msg") $(tail -n 2 "$tmp/err")"; fi
fi

# The default step size adapts to data scaled unlike a9a: on a generated text-shaped set
# (unnormalised tf-idf values, Zipf features) the old rule ended 21% (logistic) and 10%
# (squared) above liblinear's optimum after 20 epochs; the calibrated default must stay within
# 5% (docs/perf-log/2026-11-23-default-step-size.md has the full-size numbers).
t=train_default_lr_adapts_to_data_scale
if ! command -v liblinear-train >/dev/null; then skp $t "liblinear-train (liblinear-tools) is not installed"
elif ! /usr/bin/python3 -c "import numpy" 2>/dev/null; then skp $t "numpy is not installed"
else
    /usr/bin/python3 tools/gen_textlike.py "$tmp/text.svm" --rows 10000 --features 1000 --seed 3 &&
    timeout 300 /usr/bin/python3 bench/default_lr.py --objectives logistic,squared --tolerance 0.05 "$tmp/text.svm" >"$tmp/lr.out" 2>&1
    rc=$?
    [ $rc -eq 0 ] && ok "$t ($(tail -n 1 "$tmp/lr.out"))" || bad $t "$(cat "$tmp/lr.out")"
fi

# Tail averaging (the default for plain SGD) is what brings the text-shaped set close to the
# optimum: at the same rate, the averaged model's objective must be at least 1% below the last
# iterate's (measured: 0.4401 against 0.4509 at the calibrated rate), the default must say it
# averages, logistic must be within 1.5% of liblinear (measured +1.03%; 3.5% before averaging),
# and a bad --average is a usage error.
t=train_average_tail_beats_last_iterate
if [ ! -f "$tmp/text.svm" ]; then skp $t "no generated text set (see the test above)"
else
    avg=$(timeout 300 $INAGG train --mode single --data "$tmp/text.svm" --json - 2>"$tmp/err")
    lr=$(echo "$avg" | json_get "['lr']")
    last=$(timeout 300 $INAGG train --mode single --data "$tmp/text.svm" --lr "$lr" --average none --json - 2>>"$tmp/err")
    $INAGG train --average sometimes >/dev/null 2>&1; urc=$?
    grep -q "logistic .* gap +0\.[0-9]*%\|logistic .* gap +1\.[0-4][0-9]*%" "$tmp/lr.out"; lrc=$?
    if [ -n "$avg" ] && [ -n "$last" ] && [ $urc -eq 2 ] && [ $lrc -eq 0 ] &&
       [ "$(echo "$avg" | json_get "['average']")" = tail ] &&
       [ "$(echo "$last" | json_get "['average']")" = none ] &&
       python3 -c "import sys; a, l = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if a < 0.99 * l else 1)" \
           "$(echo "$avg" | json_get "['final_objective']")" "$(echo "$last" | json_get "['final_objective']")"; then
        ok "$t ($(echo "$avg" | json_get "['final_objective']") against $(echo "$last" | json_get "['final_objective']"))"
    else bad $t "usage rc $urc, logistic line: $(grep logistic "$tmp/lr.out") $(tail -n 3 "$tmp/err")"; fi
fi

# The diagonal step scaling (--precondition diag) closes the rest of the small text set's gap
# (measured: logistic +0.11%, squared +0.05%; without it +1.03% and +4.59%), and model- and
# data-parallel runs with it follow the single-process run.
t=train_precondition_diag_close_and_modes_agree
if [ ! -f "$tmp/text.svm" ]; then skp $t "no generated text set (see the tests above)"
else
    timeout 300 /usr/bin/python3 bench/default_lr.py --objectives logistic,squared --tolerance 0.005 "$tmp/text.svm" -- --precondition diag >"$tmp/pc.out" 2>&1
    brc=$?
    objs=""
    for m in "--mode single" "--mode model --workers 2" "--mode data --workers 2"; do
        objs="$objs $(timeout 120 $INAGG train $SMALL $m --precondition diag --json - 2>>"$tmp/err" | json_get "['final_objective']")"
    done
    $INAGG train --precondition sometimes >/dev/null 2>&1; urc=$?
    if [ $brc -eq 0 ] && [ $urc -eq 2 ] && python3 -c "
import sys
o = [float(x) for x in sys.argv[1:]]
sys.exit(0 if len(o) == 3 and all(abs(x / o[0] - 1) < 1e-4 for x in o) else 1)" $objs; then
        ok "$t ($(tail -n 1 "$tmp/pc.out"); single, model, data:$objs)"
    else bad $t "bench rc $brc, usage rc $urc, objectives:$objs $(cat "$tmp/pc.out") $(tail -n 3 "$tmp/err")"; fi
fi

t=train_mpi_backend_with_optimizer
if command -v mpirun >/dev/null && [ -x build/inagg-mpi-train ]; then
    out=$(timeout 120 $INAGG train $SMALL --mode data --workers 2 --backend mpi --optimizer smorms3 --json - 2>"$tmp/err")
    if [ $? -eq 0 ] && [ "$(echo "$out" | json_get "['optimizer']")" = smorms3 ]; then ok $t
    else bad $t "$(tail -n 3 "$tmp/err")"; fi
else missing $t "mpirun or build/inagg-mpi-train" "openmpi-bin libopenmpi-dev, then make"; fi

t=train_compress_reversible_exact_lossy_close_usage
A9A=../shared/datasets/a9a
if [ ! -f "$A9A" ]; then skp $t "dataset $A9A is absent"
else
    ref=$(timeout 120 $INAGG train --mode data --data "$A9A" --epochs 2 --json - 2>"$tmp/err" | json_get "['final_objective']")
    rev=$(timeout 120 $INAGG train --mode data --data "$A9A" --epochs 2 --compress zfp:reversible --json - 2>>"$tmp/err" | json_get "['final_objective']")
    r8=$(timeout 120 $INAGG train --mode data --data "$A9A" --epochs 2 --compress zfp:rate=8 --json - 2>>"$tmp/err" | json_get "['final_objective']")
    rcs=""
    for args in "--compress zfp:rate=0" "--compress zfp:rate=8 --mode model" "--no-error-feedback" \
                "--compress fp16 --mode data --in-switch" "--compress fp16 --backend mpi --mode data"; do
        timeout 10 $INAGG train --data "$A9A" $args >/dev/null 2>"$tmp/uerr"; rc=$?
        [ $rc -eq 2 ] && [ -s "$tmp/uerr" ] || rcs="$rcs [$args]=$rc"
    done
    # the uncompressed run sums block fixed point, the reversible one float32 in arrival
    # order: equal to the printed digits, not to the last bit
    if [ -z "$ref" ] || ! python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(a - b) / b > 1e-7)" "$rev" "$ref"; then
        bad $t "reversible $rev != uncompressed $ref: $(tail -n 3 "$tmp/err")"
    elif ! python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(a - b) / b > 0.02)" "$r8" "$ref"; then
        bad $t "zfp:rate=8 objective $r8 not within 2% of $ref"
    elif [ -n "$rcs" ]; then bad $t "wrong exit codes or no message:$rcs"
    else ok $t; fi
fi

echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
