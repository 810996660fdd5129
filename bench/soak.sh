#!/usr/bin/env bash
# bench/soak.sh - a long run of one switch daemon under mixed traffic, to see that it stays
# correct and does not leak. For DURATION seconds it keeps starting jobs against one
# `inagg switch` (2 dataplane threads, with duplication and reordering injected on receive):
# `inagg bench allreduce` jobs of both protocols, int32 and float32, 2..6 workers, with and
# without 1% loss in the workers, several at a time, each joining, running verified
# allreduces and leaving; and every fourth job has one of its worker processes killed
# (SIGKILL) mid-run, which must fail that job (and only that job). The run is cut in rounds of
# ROUND_S seconds (default 60); after each round no job is started until the running ones end,
# and the idle switch's resident memory and open descriptors are sampled (idle, so the samples
# compare like with like). At the end it checks: every job that was not killed exited 0 with
# verified=true, the idle switch answers STATS with no job and no slot in use, it stops cleanly
# on SIGTERM (exit 0), descriptors are the same at every idle point, and memory is flat over
# the second half of the run (the last idle sample within 1 MiB + 2% of the middle one; the
# allocator settles in the first half, a leak grows throughout).
# Usage: bash bench/soak.sh [DURATION_S (default 3600)] [OUT_DIR (default a temp dir)]
# Environment: SOAK_PARALLEL (jobs at once, 3), SOAK_ROUND_S (60), SOAK_WORKER_TIMEOUT_MS (3000),
# SOAK_INAGG (the inagg binary, ./build/inagg).
# Prints one summary line and exits 0 when every check holds. Loopback only.
set -uo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-3600}
OUT=${2:-$(mktemp -d /tmp/inagg-soak-XXXXXX)}
mkdir -p "$OUT"
INAGG=${SOAK_INAGG:-./build/inagg} # SOAK_INAGG=./build-san/inagg: an ASan switch, leaks fail its exit
[ -x $INAGG ] || { echo "soak: build first (make)"; exit 2; }
PARALLEL=${SOAK_PARALLEL:-3}
ROUND_S=${SOAK_ROUND_S:-60}
# The switch's failure detector (and join window): a rank silent this long fails its job. On a
# machine that other work keeps busy, a starved rank can be silent for seconds; raise it there.
WORKER_TIMEOUT_MS=${SOAK_WORKER_TIMEOUT_MS:-3000}

exec 3>"$OUT/ready"
$INAGG switch --listen 127.0.0.1:0 --threads 2 --worker-timeout "$WORKER_TIMEOUT_MS" \
    --faults-in dup=0.002,reorder=0.002,seed=11 --ready-fd 3 >"$OUT/switch.out" 2>"$OUT/switch.err" &
swpid=$!
exec 3>&-
for _ in $(seq 600); do [ -s "$OUT/ready" ] && break; sleep 0.05; done
port=$(head -n1 "$OUT/ready" 2>/dev/null)
[ -n "$port" ] || { echo "soak: the switch did not start: $(cat "$OUT/switch.err")"; exit 1; }
cleanup() { kill $(jobs -p) 2>/dev/null; }
trap cleanup EXIT

sample() { # time rss_kib fds
    local rss fds
    rss=$(awk '/^VmRSS:/ {print $2}' /proc/$swpid/status 2>/dev/null)
    fds=$(ls /proc/$swpid/fd 2>/dev/null | wc -l)
    echo "$(date +%s) ${rss:-0} $fds" >>"$OUT/samples"
}

# One job: index k. Writes $OUT/job.k.{json,err,rc,kind}.
run_job() {
    local k=$1 proto dtype workers loss elems kill_one iters
    proto=$([ $((k % 2)) -eq 0 ] && echo switchml || echo p4sgd)
    dtype=$([ $((k % 3)) -eq 0 ] && echo float32 || echo int32)
    workers=$((2 + k % 5))
    loss=$([ $((k % 5)) -lt 2 ] && echo 0.01 || echo 0)
    elems=$([ "$proto" = p4sgd ] && echo 20000 || echo 200000)
    kill_one=$([ $((k % 4)) -eq 3 ] && echo 1 || echo 0)
    iters=$([ $kill_one -eq 1 ] && echo 400 || echo 20) # long enough to be killed midway
    echo "$proto $dtype workers=$workers loss=$loss kill=$kill_one" >"$OUT/job.$k.kind"
    timeout 300 $INAGG bench allreduce --switch 127.0.0.1:$port --workers $workers \
        --elems $elems --dtype $dtype --protocol $proto --loss $loss --iters $iters \
        --timeout-ms 10000 --json "$OUT/job.$k.json" >/dev/null 2>"$OUT/job.$k.err" &
    local bpid=$!
    if [ $kill_one -eq 1 ]; then
        sleep 1.$((RANDOM % 9))
        local bench victim # timeout -> inagg bench -> one process per worker
        bench=$(pgrep -P $bpid | head -n 1)
        victim=$([ -n "$bench" ] && pgrep -P "$bench" | tail -n 1)
        [ -n "$victim" ] && kill -KILL "$victim" 2>/dev/null
    fi
    wait $bpid
    echo $? >"$OUT/job.$k.rc"
}

# Wait for every job of this script (not the switch) to end, at most 10 minutes.
wait_jobs() {
    for _ in $(seq 1200); do
        [ "$(jobs -rp | grep -vx $swpid | wc -l)" -eq 0 ] && return 0
        sleep 0.5
    done
    return 1
}
start=$(date +%s)
k=0
round=0
while [ $(( $(date +%s) - start )) -lt "$DURATION" ]; do
    round_end=$(( $(date +%s) + ROUND_S ))
    while [ "$(date +%s)" -lt "$round_end" ] && [ $(( $(date +%s) - start )) -lt "$DURATION" ]; do
        while [ "$(jobs -rp | grep -vx $swpid | wc -l)" -ge "$PARALLEL" ]; do sleep 0.2; done
        run_job $k &
        k=$((k + 1))
        kill -0 $swpid 2>/dev/null || break 2
        sleep 0.1
    done
    wait_jobs
    sleep 4 # a killed job fails after the worker timeout (3 s) and gives its slots back
    round=$((round + 1))
    sample
done
$INAGG switch --stats 127.0.0.1:$port --json >"$OUT/stats.json" 2>"$OUT/stats.err"; src=$?
kill -TERM $swpid; wait $swpid; swrc=$?
trap - EXIT

/usr/bin/python3 - "$OUT" "$k" "$src" "$swrc" "$DURATION" <<'PY'
import json, os, sys
out, n, src, swrc, duration = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
why = []
ok = killed_failed = killed_ok = 0
for k in range(n):
    kind = open(os.path.join(out, "job.%d.kind" % k)).read().split()
    rcf = os.path.join(out, "job.%d.rc" % k)
    rc = int(open(rcf).read()) if os.path.exists(rcf) else -1
    killed = "kill=1" in kind
    verified = False
    try:
        verified = json.load(open(os.path.join(out, "job.%d.json" % k)))["verified"]
    except Exception:
        pass
    if killed:
        if rc != 0: killed_failed += 1
        else: killed_ok += 1  # the kill came after the last iteration: fine
    elif rc == 0 and verified:
        ok += 1
    else:
        why.append("job %d (%s) rc %d verified %s: %s" % (k, " ".join(kind), rc, verified,
                   open(os.path.join(out, "job.%d.err" % k)).read().strip()[-300:]))
samples = [tuple(map(int, l.split())) for l in open(os.path.join(out, "samples")) if l.strip()]
if len(samples) < 3:
    why.append("only %d idle samples: run longer than two rounds" % len(samples))
    samples = samples or [(0, 0, 0)]
# Memory: the allocator settles during the first half (thread arenas, the retired-job ring);
# a leak keeps growing, so the second half must be flat.
ref = samples[len(samples) // 2]
rss_early, rss_late = ref[1], samples[-1][1]
if rss_late > rss_early * 1.02 + 1024:
    why.append("switch memory grew over the second half: %d KiB -> %d KiB" % (rss_early, rss_late))
if len(set(s[2] for s in samples)) != 1:
    why.append("switch descriptors differ between idle points: %s" % [s[2] for s in samples])
if src != 0:
    why.append("the switch did not answer STATS at the end")
else:
    st = json.load(open(os.path.join(out, "stats.json")))
    if st["slots_used"] != 0:
        why.append("%d slots still in use at the end" % st["slots_used"])
    if st["jobs"]:
        why.append("%d jobs still registered at the end" % len(st["jobs"]))
if swrc != 0:
    why.append("the switch exited %d on SIGTERM" % swrc)
print("soak %ss: %d jobs, %d verified, %d killed (%d failed as they should, %d finished first), "
      "idle switch rss %s KiB, fds %s: %s"
      % (duration, n, ok, killed_failed + killed_ok, killed_failed, killed_ok,
         [s[1] for s in samples], [s[2] for s in samples], "OK" if not why else "FAILED"))
for w in why[:20]:
    print("  " + w)
sys.exit(1 if why else 0)
PY
