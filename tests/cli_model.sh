#!/usr/bin/env bash
# tests/cli_model.sh - `inagg model`: usage errors exit 2 with a message, help teaches,
# predict's numbers and JSON (hand-checked cases: the ring at its slowest link, INA at the
# link rate), the presets, the plot when gnuplot is there, a calibration file read back, and
# (as root, when testbeds can be built) a quick validate smoke run, whose calibration carries
# the MPI route's measured threshold. Commands run under timeout.
set -uo pipefail
cd "$(dirname "$0")/.."
INAGG=./build/inagg
pass=0 fail=0 skip=0
ok()   { echo "ok      $1"; pass=$((pass + 1)); }
bad()  { echo "FAIL    $1: $2"; fail=$((fail + 1)); }
skp()  { echo "skip    $1: $2"; skip=$((skip + 1)); }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

t=model_usage_errors_exit_2
rcs=""
for args in "model" "model bogus" "model predict" "model predict --workers 4" \
            "model predict --size 1M" "model predict --workers 0 --size 1M" \
            "model predict --workers 2000 --size 1M" "model predict --workers 4 --size 1X" \
            "model predict --workers 4 --size 1M --link-rate fast" \
            "model predict --workers-range 8-4 --size 1M" "model predict --workers 4 --size 1M --levels 9" \
            "model predict --workers 4 --size 1M --overlap maybe" \
            "model predict --workers 4 --size 1M --systems ina,bus" \
            "model predict --workers 4 --size 1M --plot x.png" \
            "model predict --workers 4 --size 1M --slow-link 200mbit --link-rate 100mbit" \
            "model predict --preset nope" "model predict --preset gcow-vit --workers 4" \
            "model predict --workers 4 --size 1M --compress zfp:rate=8 --params /nonexistent" \
            "model calibrate --bogus" "model calibrate extra" "model calibrate --link-rate fast" \
            "model validate --bogus"; do
    timeout 10 $INAGG $args >/dev/null 2>"$tmp/err"; rc=$?
    if [ "$args" = "model predict --workers 4 --size 1M --compress zfp:rate=8 --params /nonexistent" ]; then
        [ $rc -eq 1 ] && grep -q "calibrate" "$tmp/err" || rcs="$rcs [$args]=$rc"
        continue
    fi
    [ $rc -eq 2 ] && [ -s "$tmp/err" ] || rcs="$rcs [$args]=$rc"
done
[ -z "$rcs" ] && ok $t || bad $t "wrong exit codes or no message:$rcs"

t=model_help_teaches
if timeout 5 $INAGG model --help | grep "validate" >/dev/null &&
   timeout 5 $INAGG model predict --help | grep -- "--workers-range" >/dev/null &&
   timeout 5 $INAGG model calibrate --help | grep "switch_pkt_s" >/dev/null &&
   timeout 5 $INAGG model calibrate --help | grep "route_min_bytes the MPI route's threshold" >/dev/null &&
   timeout 5 $INAGG model validate --help | grep "max_rel_error" >/dev/null; then ok $t; else bad $t "help incomplete"; fi

# 4 hosts, 12 MB, one link at 50 Mbit/s of 100: the ring at n B_min / 2(n-1) = 2.88 s on an
# ideal machine (5 us per message: 6 steps, 30 us more); INA at the slow link: 12 MB + headers.
t=model_predict_slowest_link
timeout 10 $INAGG model predict --params none --workers 4 --size 12000000 --link-rate 100mbit \
    --slow-link 50mbit --systems ina,ring --json - 2>/dev/null >"$tmp/p.json"
if python3 - "$tmp/p.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
r = d["rows"][0]
ring, ina = r["ring"]["time_s"], r["ina"]["time_s"]
want_ring = 12e6 * 8 / (4 * 50e6 / 6) + 6 * 5e-6
pk = -(-3000000 // 2048)
want_link = (12e6 + pk * 74) * 8 / 50e6
assert abs(ring - want_ring) < 1e-9, (ring, want_ring)
assert abs(r["ina"]["link_s"] - want_link) < 1e-9, (r["ina"]["link_s"], want_link)
assert r["ina"]["bound"] == "link" and abs(r["ring"]["ina_speedup"] - ring / ina) < 1e-9
p = d["params"]  # the parameters as used, each field under its name and as its type
assert (p["link_bps"], p["slow_bps"], p["hop_s"], p["msg_s"]) == (1e8, 5e7, 1e-6, 5e-6), p
assert (p["packet_elems"], p["overhead_bytes"], p["levels"], p["buckets"]) == (2048, 74, 1, 1), p
assert p["code_overlap"] is True and p["overlap"] is True and p["ring_step_s"] == 0, p
assert len(p) == 22, p
PY
then ok $t; else bad $t "predict JSON differs from the hand-computed values"; fi

t=model_presets_print_paper_numbers
if timeout 20 $INAGG model predict --preset gcow-resnet50 | grep "7.5x" >/dev/null &&
   timeout 20 $INAGG model predict --preset gcow-vit | grep "14.8x" >/dev/null &&
   timeout 20 $INAGG model predict --preset switchml | grep "paper 93%" >/dev/null; then ok $t
else bad $t "a preset lacks the paper's numbers"; fi

t=model_plot_png
if command -v gnuplot >/dev/null; then
    timeout 60 $INAGG model predict --workers-range 2-1024 --size 100M --link-rate 100gbit \
        --levels 2 --plot "$tmp/s.png" >/dev/null 2>&1
    if [ -s "$tmp/s.png" ] && head -c 8 "$tmp/s.png" | grep PNG >/dev/null; then ok $t; else bad $t "no PNG"; fi
else skp $t "gnuplot is not installed"; fi

t=model_params_file_read_back
cat >"$tmp/params.json" <<'JS'
{"switch_pkt_s":1e-05,"switch_threads":2,"worker_elem_s":1e-09,"hop_s":5e-05,"msg_s":1e-05,
 "stream_eff":0.99,"packet_elems":2048,"overhead_bytes":74,
 "codecs":[{"mode":"zfp:rate=8","ratio":4,"enc_Bps":1e8,"dec_Bps":1e8}]}
JS
if timeout 10 $INAGG model predict --params "$tmp/params.json" --workers 4 --size 16M \
       --link-rate 100mbit --compress zfp:rate=8 --json - 2>/dev/null | grep '"ratio":4' >/dev/null &&
   ! timeout 10 $INAGG model predict --params "$tmp/params.json" --workers 4 --size 16M \
       --compress fp16 >/dev/null 2>&1; then ok $t; else bad $t "params file not applied"; fi
# the ring's calibrated step: 6 steps of 4 hosts, each 5 ms more than the same file without it
t=model_params_ring_step_read_back
sed 's/"msg_s":1e-05,/"msg_s":1e-05,"ring_step_s":0.005,/' "$tmp/params.json" >"$tmp/step.json"
ring_time() {
    timeout 10 $INAGG model predict --params "$1" --workers 4 --size 12000000 \
        --link-rate 100mbit --systems ring --json - 2>/dev/null |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["rows"][0]["ring"]["time_s"])'
}
without=$(ring_time "$tmp/params.json") with=$(ring_time "$tmp/step.json")
if python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); assert abs(b - a - 0.03) < 1e-9, (a, b)" \
       "$without" "$with" 2>/dev/null; then ok $t
else bad $t "ring with ring_step_s 0.005: $with s, without: $without s (want 0.03 s more)"; fi
# validate says when its calibration lacks the ring's step (before any run: --keep fails)
t=model_validate_notes_missing_ring_step
timeout 10 $INAGG model validate --params "$tmp/params.json" --keep /proc/nonexistent/k >/dev/null 2>"$tmp/n1"
rc1=$?
timeout 10 $INAGG model validate --params "$tmp/step.json" --keep /proc/nonexistent/k >/dev/null 2>"$tmp/n2"
if [ $rc1 -eq 3 ]; then skp $t "validate cannot build testbeds here"
elif [ $rc1 -eq 1 ] && grep -q "has no ring_step_s" "$tmp/n1" && ! grep -q "ring_step_s" "$tmp/n2"; then ok $t
else bad $t "rc=$rc1: $(head -n 2 "$tmp/n1")"; fi
echo '{"switch_pkt_s":-1}' >"$tmp/bad.json"
t=model_params_file_bad_rejected
timeout 10 $INAGG model predict --params "$tmp/bad.json" --workers 4 --size 1M >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "switch_pkt_s" "$tmp/err" && ok $t || bad $t "a bad params file was accepted"
t=model_params_bad_ring_step_rejected
sed 's/"ring_step_s":0.005/"ring_step_s":-0.005/' "$tmp/step.json" >"$tmp/badstep.json"
timeout 10 $INAGG model predict --params "$tmp/badstep.json" --workers 4 --size 1M >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && grep -q '"ring_step_s" must be' "$tmp/err" && ok $t || bad $t "a negative ring_step_s was accepted"

t=model_validate_quick_smoke
if [ "${INAGG_MODEL_SMOKE:-0}" != 1 ]; then
    skp $t "set INAGG_MODEL_SMOKE=1 (about 4 min, root, testbeds)"
elif [ "$(id -u)" != 0 ] || ! tools/testbed check >/dev/null 2>&1; then
    skp $t "testbeds cannot be built here"
else
    # no calibration file yet: validate calibrates first, saying so
    timeout 600 $INAGG model validate --quick --params "$tmp/cal.json" --json "$tmp/v.json" >/dev/null 2>"$tmp/val.err"
    rc=$?
    if [ $rc -eq 0 ] && grep -q "no calibration at $tmp/cal.json: calibrating first" "$tmp/val.err" &&
       [ -s "$tmp/cal.json" ] && python3 -c "
import json,sys; d=json.load(open('$tmp/v.json'))
assert d['measured_rows'] >= 3 and d['max_rel_error'] >= 0
assert any(r['skipped'] is False for r in d['rows'])
# the calibration's MPI route threshold: one of the sizes measured, or 8 GiB where the switch won at none
c = json.load(open('$tmp/cal.json'))
sizes = [r['bytes'] for r in c['route_sizes']]
assert len(sizes) == 6 and all(r['switch_s'] > 0 and r['mpi_s'] > 0 for r in c['route_sizes'])
assert c['route_min_bytes'] in sizes + [8589934592] and c['route_link_bps'] == 1e9"; then ok $t; else bad $t "validate rc=$rc: $(tail -n 3 "$tmp/val.err")"; fi
fi

echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
