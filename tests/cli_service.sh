#!/usr/bin/env bash
# tests/cli_service.sh - the switch run as a service: /metrics (promtool clean, its HTTP
# server's answers and limits, a real Prometheus server scraping it), the log formats, the
# config file and its errors, SIGHUP reloading the limits without dropping a job, `inagg top`
# under tmux, the L2 fabric's per-port metrics (in network namespaces it creates), and the
# systemd unit (systemd-analyze verify). Loopback and its own namespaces only; every command
# runs under `timeout`, and whatever it starts is killed at the end.
# Usage: bash tests/cli_service.sh [case-substring]   (INAGG=build-san/inagg ... for ASan)
set -uo pipefail
cd "$(dirname "$0")/.."
INAGG=${INAGG:-$PWD/build/inagg}  # INAGG=$PWD/build-san/inagg: under the sanitizers
PY=/usr/bin/python3
export INAGG_LOG=info  # the cases read the switch's info lines (metrics address, jobs, reloads)
only=${1:-}
pass=0 fail=0 skip=0
ok()   { echo "ok      $1"; pass=$((pass + 1)); }
bad()  { echo "FAIL    $1: $2"; fail=$((fail + 1)); }
skp()  { echo "skip    $1: $2"; skip=$((skip + 1)); }
want() { [ -z "$only" ] || [[ $1 == *"$only"* ]]; }
tmp=$(mktemp -d)
tmux_sock="inagg-test-$$"
NS=inagg-svc$$
NS=${NS:0:14}
cleanup() {
    for n in "" 80 200; do tmux -L "$tmux_sock$n" kill-server 2>/dev/null; done
    for n in sw h1 h2; do ip netns del "$NS-$n" 2>/dev/null; done
    local p
    for p in $(jobs -p); do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

# start_switch NAME ARGS...: a switch in the background; sets swpid (its `timeout`), swproc
# (the switch), port (control) and
# mport (metrics, when --metrics was given). Its stderr is $tmp/NAME.err.
start_switch() {
    local name=$1
    shift
    rm -f "$tmp/$name.ready"
    exec 3>"$tmp/$name.ready"
    timeout 300 "$INAGG" switch --listen 127.0.0.1:0 --ready-fd 3 "$@" \
        >"$tmp/$name.out" 2>"$tmp/$name.err" &
    swpid=$!
    exec 3>&-
    for _ in $(seq 100); do [ -s "$tmp/$name.ready" ] && break; sleep 0.05; done
    port=$(head -n1 "$tmp/$name.ready" 2>/dev/null)
    # `timeout` forwards one SIGHUP and ignores the next: reloads go to the switch itself.
    swproc=$(pgrep -P "$swpid" | head -n1)
    mport=$(sed -n 's|.*metrics at http://[0-9.]*:\([0-9]*\)/metrics.*|\1|p' "$tmp/$name.err" | head -n1)
}
stop_switch() { kill -INT "$swpid" 2>/dev/null; wait "$swpid" 2>/dev/null; }
bench() { # PORT ELEMS ITERS: a two-worker job on the switch
    timeout 120 "$INAGG" bench allreduce --switch "127.0.0.1:$1" --workers 2 --elems "$2" \
        --dtype int32 --iters "$3" >/dev/null 2>>"$tmp/bench.err"
}
free_port() { $PY -c "import socket; s=socket.socket(); s.bind(('127.0.0.1',0)); print(s.getsockname()[1])"; }
metric() { # FILE NAME{LABELS}: the sample's value
    awk -v m="$2" '$1 == m { print $2 }' "$1"
}

if want metrics_text; then
t=metrics_text_promtool_clean_and_matches_stats
start_switch m --threads 2 --metrics 127.0.0.1:0
if [ -z "$port" ] || [ -z "$mport" ]; then bad $t "switch did not start with metrics: $(cat "$tmp/m.err")"; else
    bench "$port" 100000 3; brc=$?
    curl -s -m 5 "http://127.0.0.1:$mport/metrics" >"$tmp/m.txt"
    timeout 5 "$INAGG" switch --stats "127.0.0.1:$port" >"$tmp/m.stats"
    stats_in=$(sed -n 's/^packets in=\([0-9]*\) .*/\1/p' "$tmp/m.stats")
    got_in=$(metric "$tmp/m.txt" inagg_switch_packets_received_total)
    rounds=$(metric "$tmp/m.txt" inagg_switch_rounds_total)
    if ! command -v promtool >/dev/null; then
        if [ -n "${CI:-}" ]; then bad $t "promtool missing (apt-get install prometheus)"
        else skp $t "promtool missing (apt-get install prometheus; tools/setup does)"; fi
    elif [ $brc -ne 0 ]; then bad $t "bench failed: $(tail -n 3 "$tmp/bench.err")"
    elif ! promtool check metrics <"$tmp/m.txt" >"$tmp/promtool.out" 2>&1; then
        bad $t "promtool: $(head -n 5 "$tmp/promtool.out")"
    elif [ -z "$got_in" ] || [ "$got_in" != "$stats_in" ] || [ "${rounds:-0}" -eq 0 ]; then
        bad $t "packets_received_total '$got_in' vs STATS '$stats_in', rounds '$rounds'"
    elif ! grep -q '^inagg_switch_drops_total{reason="bad_slot"} 0$' "$tmp/m.txt" ||
         ! grep -q '^inagg_switch_control_refusals_total{reason="conn_per_addr"} 0$' "$tmp/m.txt" ||
         ! grep -q '^inagg_switch_jobs{state="active"} 0$' "$tmp/m.txt" ||
         ! grep -q '^# TYPE inagg_switch_received_bytes_total counter$' "$tmp/m.txt"; then
        bad $t "families missing: $(grep -c . "$tmp/m.txt") lines"
    else ok $t; fi
fi

t=metrics_http_answers_and_limits
if [ -n "$mport" ]; then
    c404=$(curl -s -o /dev/null -w '%{http_code}' -m 5 "http://127.0.0.1:$mport/")
    c405=$(curl -s -o /dev/null -w '%{http_code}' -m 5 -X POST "http://127.0.0.1:$mport/metrics")
    # Twenty idle connections (more than the server keeps), a slow client and one sending
    # garbage: a scrape right after still answers at once, and the slow one is closed at its
    # deadline.
    timeout 30 $PY - "$mport" >"$tmp/http.out" 2>&1 <<'EOF'
import socket, sys, time
port = int(sys.argv[1])
idle = [socket.create_connection(('127.0.0.1', port)) for _ in range(20)]
slow = socket.create_connection(('127.0.0.1', port))
slow.sendall(b'GET /met')
junk = socket.create_connection(('127.0.0.1', port))
junk.sendall(b'\x00\x01garbage\r\n\r\n')
print('junk', junk.recv(100).split(b'\r\n')[0].decode())
# A request head of exactly HTTPM_REQUEST_MAX (4096) bytes is answered; one byte more is not.
def head_of(n):
    start, end = b'GET /metrics HTTP/1.0\r\nX-Pad: ', b'\r\n\r\n'
    return start + b'p' * (n - len(start) - len(end)) + end
for n in (4096, 4097):
    big = socket.create_connection(('127.0.0.1', port))
    big.settimeout(5)
    big.sendall(head_of(n))
    try:
        first = big.recv(100).split(b'\r\n')[0].decode() or 'closed'
    except ConnectionResetError:
        first = 'closed'
    print('head', n, first)
    big.close()
t0 = time.time()
s = socket.create_connection(('127.0.0.1', port))
s.sendall(b'GET /metrics HTTP/1.0\r\n\r\n')
data = b''
while True:
    b = s.recv(65536)
    if not b:
        break
    data += b
print('scrape', data.split(b'\r\n')[0].decode(), round(time.time() - t0, 2))
slow.settimeout(10)
t0 = time.time()
try:
    left = slow.recv(100)
except OSError:
    left = b'?'
print('slow_closed', left == b'', round(time.time() - t0, 1))
EOF
    if [ "$c404" != 404 ] || [ "$c405" != 405 ]; then bad $t "/ gave $c404, POST gave $c405"
    elif ! grep -q "^junk HTTP/1.1 400" "$tmp/http.out" ||
         ! grep -q "^head 4096 HTTP/1.1 200 OK" "$tmp/http.out" || ! grep -q "^head 4097 closed" "$tmp/http.out" ||
         ! awk '/^scrape HTTP\/1.1 200 OK/ && $NF < 1.0 {f=1} END {exit !f}' "$tmp/http.out" ||
         ! awk '/^slow_closed True/ && $NF <= 6 {f=1} END {exit !f}' "$tmp/http.out"; then
        bad $t "$(cat "$tmp/http.out")"
    else ok $t; fi
else skp $t "no metrics port"; fi
stop_switch
fi

if want prometheus; then
t=prometheus_scrapes_the_switch
if ! command -v prometheus >/dev/null; then
    if [ -n "${CI:-}" ]; then bad $t "prometheus missing (apt-get install prometheus)"
    else skp $t "prometheus missing (apt-get install prometheus; tools/setup does)"; fi
else
    start_switch p --metrics 127.0.0.1:0
    pport=$(free_port)
    mkdir -p "$tmp/prom"
    cat >"$tmp/prom/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: inagg-switch
    static_configs:
      - targets: ['127.0.0.1:$mport']
EOF
    timeout 120 prometheus --config.file="$tmp/prom/prometheus.yml" \
        --storage.tsdb.path="$tmp/prom/data" --web.listen-address="127.0.0.1:$pport" \
        >"$tmp/prom/log" 2>&1 &
    prompid=$!
    query() { # EXPR: the first result's value, or nothing
        curl -s -m 3 "http://127.0.0.1:$pport/api/v1/query" --data-urlencode "query=$1" |
            $PY -c "import json,sys; r=json.load(sys.stdin)['data']['result']; print(r[0]['value'][1] if r else '')" 2>/dev/null
    }
    up=""
    for _ in $(seq 60); do up=$(query 'up{job="inagg-switch"}'); [ "$up" = 1 ] && break; sleep 0.5; done
    # A job while Prometheus scrapes (a job's own series exist only while it runs). On a fast
    # machine one job can end between two scrapes, so jobs run until a scrape lands during
    # one (at most 5); then, traffic stopped, the counter must reach STATS's.
    during=""; brc=0
    for _ in 1 2 3 4 5; do
        bench "$port" 200000 400 &
        bpid=$!
        for _ in $(seq 400); do
            kill -0 "$bpid" 2>/dev/null || break
            during=$(query 'max(max_over_time(inagg_switch_job_rounds_total[5m]))')
            [ -n "$during" ] && break
            sleep 0.1
        done
        wait "$bpid"; brc=$?
        [ $brc -ne 0 ] && break
        during=$(query 'max(max_over_time(inagg_switch_job_rounds_total[5m]))')
        [ -n "$during" ] && [ "${during%.*}" -gt 0 ] && break
        sleep 1.5
    done
    stats_in=$(timeout 5 "$INAGG" switch --stats "127.0.0.1:$port" | sed -n 's/^packets in=\([0-9]*\) .*/\1/p')
    got=""
    for _ in $(seq 40); do
        got=$(query inagg_switch_packets_received_total)
        [ -n "$got" ] && [ "$got" = "$stats_in" ] && break
        sleep 0.5
    done
    max_rate=$(query 'max_over_time(rate(inagg_switch_packets_received_total[3s])[1m:1s])')
    kill "$prompid" 2>/dev/null; wait "$prompid" 2>/dev/null
    stop_switch
    if [ "$up" != 1 ]; then bad $t "Prometheus never scraped the switch: $(tail -n 5 "$tmp/prom/log")"
    elif [ $brc -ne 0 ]; then bad $t "bench failed: $(tail -n 3 "$tmp/bench.err")"
    elif [ -z "$during" ] || [ "${during%.*}" -le 0 ]; then
        bad $t "no scrape landed during the job (job rounds '$during')"
    elif [ -z "$stats_in" ] || [ "$got" != "$stats_in" ]; then
        bad $t "Prometheus has packets_received_total '$got', STATS says '$stats_in'"
    else ok $t; echo "        (packets $got; during the job: $during rounds; peak rate ${max_rate:-?} packets/s)"; fi
fi
fi

if want log_formats; then
t=log_formats_parse
rm -f "$tmp/lf.fail"
for f in json kv; do
    start_switch "log$f" --log-format "$f"
    bench "$port" 1000 1 || echo "bench with $f" >>"$tmp/lf.fail"
    stop_switch
    $PY - "$f" "$tmp/log$f.err" >>"$tmp/lf.fail" 2>&1 <<'EOF' || true
import json, re, sys
fmt, path = sys.argv[1], sys.argv[2]
lines = open(path).read().splitlines()
assert len(lines) >= 4, ('too few lines', lines)
pair = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|[^ "]+)(?: |$)')
for line in lines:
    if fmt == 'json':
        d = json.loads(line)
    else:
        d, pos = {}, 0
        for m in pair.finditer(line):
            assert m.start() == pos, ('not key=value at', pos, line)
            v = m.group(2)
            d[m.group(1)] = json.loads(v) if v.startswith('"') else v
            pos = m.end()
        assert pos == len(line), ('trailing text', line)
    assert set(d) >= {'ts', 'level', 'program', 'pid', 'msg'}, d
    assert d['level'] in ('error', 'warn', 'info', 'debug'), d
assert any('retired' in (json.loads(l)['msg'] if fmt == 'json' else l) for l in lines), 'no job line'
EOF
done
INAGG_LOG_FORMAT=bogus timeout 5 "$INAGG" switch --listen 127.0.0.1:0 --log-format nope \
    >/dev/null 2>"$tmp/lf.err"; lrc=$?
if [ -s "$tmp/lf.fail" ]; then bad $t "$(head -c 600 "$tmp/lf.fail")"
elif [ $lrc -ne 2 ] || ! grep -q "log-format is text, kv or json" "$tmp/lf.err" ||
     ! grep -q "INAGG_LOG_FORMAT is text, kv or json" "$tmp/lf.err"; then
    bad $t "bad formats not refused (rc $lrc): $(cat "$tmp/lf.err")"
else ok $t; fi
fi

if want config; then
t=config_file_sets_options_and_errors_name_the_line
printf '# the daemon\nthreads = 2   # two queues\n\nslots = 4096\nrequire-secret = false\n' >"$tmp/good.conf"
start_switch cg --config "$tmp/good.conf"
threads=$(timeout 5 "$INAGG" switch --stats "127.0.0.1:$port" | sed -n 's/^switch .* threads=\([0-9]*\) slots_used=[0-9]*\/\([0-9]*\).*/\1 \2/p')
stop_switch
errs=""
check_err() { # NAME CONTENT EXPECTED-TEXT [extra args]
    printf -- "$2" >"$tmp/$1.conf"
    timeout 5 "$INAGG" switch --listen 127.0.0.1:0 --config "$tmp/$1.conf" ${4:-} >/dev/null 2>"$tmp/$1.cerr"
    local rc=$?
    [ $rc -eq 2 ] && grep -qF -- "$3" "$tmp/$1.cerr" || errs="$errs [$1 rc=$rc: $(cat "$tmp/$1.cerr")]"
}
check_err unknown 'threads = 1\nbogus = 3\n' "unknown.conf:2: unknown key 'bogus'"
check_err noeq 'threads 2\n' "noeq.conf:1: expected 'key = value'"
check_err dashes '--threads = 2\n' "dashes.conf:1: keys are written without dashes"
check_err badval '\n\nthreads = abc\n' "badval.conf:3)"
check_err flag 'require-secret = maybe\n' "flag.conf:1: 'require-secret' is true or false"
check_err refused 'stats = 127.0.0.1:1\n' "refused.conf:1: 'stats' is not a setting"
check_err empty 'slots =\n' "empty.conf:1: 'slots' needs a value"
# Out of range: named by file and line, exit 2 (as a usage error), not the daemon's exit 1.
check_err range 'slots = 0\n' "--slots is at least 1, got '0'"
check_err range '# the daemon\nthreads = 100000\n' "(that is $tmp/range.conf:2)"
check_err range 'worker-timeout = 0\n' "(that is $tmp/range.conf:1)"
# A key set twice is refused naming both lines (flags too, false or not), never "last wins".
check_err twice 'threads = 2\nslots = 64\nthreads = 3\n' "twice.conf:3: 'threads' is set again (first on line 1)"
check_err twiceflag 'require-secret = false\n\nrequire-secret = true\n' "twiceflag.conf:3: 'require-secret' is set again (first on line 1)"
# A NUL byte does not cut its line short (it would hide "slots = 5" behind "threads = 2").
check_err nul 'slots = 64\nthreads = 2\0 slots = 5\n' "nul.conf:2: a NUL byte"
# Only a regular file of at most 1 MiB: a device or a FIFO is refused at once, never read.
for f in /dev/zero "$tmp/fifo.conf"; do
    [ "$f" = /dev/zero ] || mkfifo "$f"
    timeout 5 "$INAGG" switch --listen 127.0.0.1:0 --config "$f" >/dev/null 2>"$tmp/special.cerr"; rc=$?
    [ $rc -eq 2 ] && grep -qF "$f: not a regular file" "$tmp/special.cerr" || errs="$errs [$f rc=$rc: $(cat "$tmp/special.cerr")]"
done
yes '# a comment' | head -c 1100000 >"$tmp/big.conf"
timeout 5 "$INAGG" switch --listen 127.0.0.1:0 --config "$tmp/big.conf" >/dev/null 2>"$tmp/big.cerr"; rc=$?
[ $rc -eq 2 ] && grep -qF "big.conf: 1100000 bytes, more than a config file's 1048576" "$tmp/big.cerr" || errs="$errs [big rc=$rc: $(cat "$tmp/big.cerr")]"
timeout 5 "$INAGG" switch --config "$tmp/nonexistent.conf" >/dev/null 2>"$tmp/missing.cerr"
[ $? -eq 2 ] && grep -q "nonexistent.conf: No such file" "$tmp/missing.cerr" || errs="$errs [missing: $(cat "$tmp/missing.cerr")]"
# The command line wins over the file.
printf 'threads = abc\n' >"$tmp/over.conf"
timeout 5 "$INAGG" switch --config "$tmp/over.conf" --threads 1 --listen 127.0.0.1:0 --stats 127.0.0.1:1 \
    >/dev/null 2>"$tmp/over.cerr"
grep -q "over.conf:1)" "$tmp/over.cerr" || errs="$errs [file's bad value not named: $(cat "$tmp/over.cerr")]"
if [ "$threads" != "2 4096" ]; then bad $t "config not applied: '$threads' $(cat "$tmp/cg.err")"
elif [ -n "$errs" ]; then bad $t "$errs"
else ok $t; fi
fi

if want sighup; then
t=sighup_reloads_limits_keeping_jobs
printf 'max-conns-per-addr = 64\nmetrics = 127.0.0.1:0\n' >"$tmp/r.conf"
start_switch r --config "$tmp/r.conf"
if [ -z "$port" ] || [ -z "$mport" ]; then bad $t "no switch: $(cat "$tmp/r.err")"; else
    bench "$port" 200000 100 &
    bpid=$!
    for _ in $(seq 100); do grep -q "active" "$tmp/r.err" && break; sleep 0.05; done
    # A broken file first: logged, nothing changes; then a lower cap.
    printf 'max-conns-per-addr = many\n' >"$tmp/r.conf"
    kill -HUP "$swproc"
    for _ in $(seq 40); do grep -q "reload: .*r.conf:1" "$tmp/r.err" && break; sleep 0.05; done
    printf 'max-conns-per-addr = 3\nmetrics = 127.0.0.1:0\n' >"$tmp/r.conf"
    kill -HUP "$swproc"
    for _ in $(seq 40); do grep -q "limits reloaded" "$tmp/r.err" && break; sleep 0.05; done
    limit=$(curl -s -m 5 "http://127.0.0.1:$mport/metrics" | awk '$1 == "inagg_switch_control_limit{limit=\"max_conns_per_addr\"}" {print $2}')
    wait $bpid; brc=$?
    # Three connections are allowed from 127.0.0.1: the fourth takes the place of the
    # longest-idle one without a job (closed with ERR busy and counted), so one of four goes.
    timeout 20 $PY - "$port" >"$tmp/conns.out" 2>&1 <<'EOF'
import socket, sys, time
port = int(sys.argv[1])
held = [socket.create_connection(('127.0.0.1', port)) for _ in range(4)]
time.sleep(0.5)
for s in held:
    s.setblocking(False)
closed = 0
for s in held:
    try:
        closed += s.recv(100).startswith(b'ERR busy')
    except BlockingIOError:
        pass
print('refused', closed)
EOF
    refused=$(curl -s -m 5 "http://127.0.0.1:$mport/metrics" | awk '$1 == "inagg_switch_control_refusals_total{reason=\"conn_per_addr\"}" || $1 == "inagg_switch_control_refusals_total{reason=\"conn_evicted\"}" {n += $2} END {print n + 0}')
    # The file replaced by a FIFO: the reload refuses it without waiting for a writer, and
    # SIGTERM is still answered.
    rm -f "$tmp/r.conf" && mkfifo "$tmp/r.conf"
    kill -HUP "$swproc"
    for _ in $(seq 40); do grep -q "reload: .*r.conf: not a regular file" "$tmp/r.err" && break; sleep 0.05; done
    kill -TERM "$swproc"
    termed=0
    for _ in $(seq 100); do kill -0 "$swproc" 2>/dev/null || { termed=1; break; }; sleep 0.05; done
    stop_switch
    if ! grep -q "reload: .*r.conf:1: 'max-conns-per-addr' needs a non-negative integer" "$tmp/r.err"; then
        bad $t "broken file not reported: $(grep reload "$tmp/r.err")"
    elif [ "$limit" != 3 ]; then bad $t "limit after reload '$limit': $(grep -i limit "$tmp/r.err")"
    elif ! grep -q "reload: .*r.conf: not a regular file (a FIFO); limits unchanged" "$tmp/r.err"; then
        bad $t "a FIFO in the file's place not refused: $(grep reload "$tmp/r.err")"
    elif [ $termed != 1 ]; then bad $t "SIGTERM unanswered 5 s after a reload met a FIFO"
    elif [ $brc -ne 0 ]; then bad $t "the running job did not survive the reload: $(tail -n 3 "$tmp/bench.err")"
    elif [ "${refused:-0}" -lt 1 ] || ! grep -q "refused 1" "$tmp/conns.out"; then
        bad $t "new cap not enforced: refused '$refused', $(cat "$tmp/conns.out")"
    else ok $t; fi
fi
fi

if want top; then
t=top_under_tmux_shows_the_job_and_quits_on_q
if ! command -v tmux >/dev/null; then skp $t "tmux missing (apt-get install tmux)"; else
    start_switch top
    bench "$port" 500000 1000 &  # long enough to be running under load; stopped below
    bpid=$!
    for _ in $(seq 100); do grep -q "active" "$tmp/top.err" && break; sleep 0.05; done
    tmux -L "$tmux_sock" new-session -d -s top -x 140 -y 30 \
        "$INAGG top 127.0.0.1:$port; echo \"top exited \$?\"; sleep 30"
    seen=""
    for _ in $(seq 40); do
        sleep 0.5
        tmux -L "$tmux_sock" capture-pane -p -t top >"$tmp/pane" 2>/dev/null
        # the job's line: ID NAME active switchml WORLD SLOTS ROUNDS/S ...
        if awk '$3 == "active" && $7 + 0 > 0 {f=1} END {exit !f}' "$tmp/pane"; then seen=1; break; fi
    done
    # The frame fits the terminal: at 80 columns no line wraps (columns are dropped, as top
    # does) and the job's rate is still there; at 200 every column is. Wrapped lines are
    # joined back (-J) so that a line wider than its pane shows. Each on a server of its own:
    # `-t top` would name the top pane of the newest session ("top" is also a pane token).
    for w in 80 200; do
        tmux -L "$tmux_sock$w" new-session -d -s w -x $w -y 30 "$INAGG top 127.0.0.1:$port; sleep 30"
    done
    fits=""
    for _ in $(seq 40); do
        sleep 0.5
        for w in 80 200; do
            tmux -L "$tmux_sock$w" capture-pane -p -J -t w: 2>/dev/null | sed 's/ *$//' >"$tmp/pane$w"
        done
        if awk 'length > 80 {bad = 1} /^ *ID JOB +STATE / && / ROUNDS\/S / && / IN / {h = 1}
                $3 == "active" && $0 ~ /B\/s/ {j = 1} END {exit bad || !h || !j}' "$tmp/pane80" &&
           grep -q '^ *ID JOB \+STATE \+PROTO \+WORLD \+SLOTS \+ROUNDS/S \+PKTS/S \+IN \+DROPS \+DROPS/S$' "$tmp/pane200" &&
           awk '$3 == "active" {j = 1} END {exit !j}' "$tmp/pane200"; then fits=1; break; fi
    done
    # Not a terminal (a pipe): 80 columns.
    timeout 10 "$INAGG" top --once "127.0.0.1:$port" --interval 200 >"$tmp/once" 2>&1
    awk 'length > 80 {bad = 1} END {exit bad || NR < 5}' "$tmp/once" || fits=""
    tmux -L "$tmux_sock" send-keys -t top q
    exited=""
    for _ in $(seq 40); do
        sleep 0.1
        tmux -L "$tmux_sock" capture-pane -p -t top >"$tmp/pane2" 2>/dev/null
        grep -q "top exited 0" "$tmp/pane2" && { exited=1; break; }
    done
    kill "$bpid" 2>/dev/null; wait "$bpid" 2>/dev/null
    # The switch going away ends top with a message.
    timeout 20 "$INAGG" top "127.0.0.1:$port" --interval 200 >/dev/null 2>"$tmp/gone.err" &
    tpid=$!
    sleep 0.6
    stop_switch
    wait $tpid; trc=$?
    for n in "" 80 200; do tmux -L "$tmux_sock$n" kill-server 2>/dev/null; done
    if [ -z "$seen" ]; then bad $t "no active job with a rate: $(cat "$tmp/pane")"
    elif [ -z "$fits" ]; then
        bad $t "frame does not fit its width: 80: $(cat "$tmp/pane80"); 200: $(cat "$tmp/pane200"); piped: $(cat "$tmp/once")"
    elif [ -z "$exited" ]; then bad $t "q did not end it: $(tail -n 5 "$tmp/pane2")"
    elif [ $trc -ne 1 ] || ! grep -q "went away" "$tmp/gone.err"; then
        bad $t "switch gone: rc $trc, $(cat "$tmp/gone.err")"
    else ok $t; fi
fi
fi

if want fabric; then
t=fabric_metrics_per_port
SUB=10.79.$(( $$ % 200 + 20 ))
fab_up() {
    ip netns add "$NS-sw" && ip -n "$NS-sw" link set lo up &&
    ip netns exec "$NS-sw" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 || return 1
    for i in 1 2; do
        ip netns add "$NS-h$i" &&
        ip -n "$NS-sw" link add p$i type veth peer name tb0 netns "$NS-h$i" &&
        ip -n "$NS-sw" link set p$i up &&
        ip netns exec "$NS-h$i" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 &&
        ip -n "$NS-h$i" addr add $SUB.$i/24 dev tb0 &&
        ip -n "$NS-h$i" link set tb0 up || return 1
    done
}
if [ "$(id -u)" != 0 ] || ! fab_up 2>"$tmp/ns.err"; then
    skp $t "cannot build network namespaces here: $(cat "$tmp/ns.err" 2>/dev/null)"
else
    ip netns exec "$NS-sw" timeout 120 "$INAGG" switch --l2 p1,p2 --listen $SUB.254:7000 \
        --metrics 127.0.0.1:0 >"$tmp/fab.out" 2>"$tmp/fab.err" &
    fpid=$!
    fport=""
    for _ in $(seq 100); do
        fport=$(sed -n 's|.*metrics at http://[0-9.]*:\([0-9]*\)/metrics.*|\1|p' "$tmp/fab.err")
        [ -n "$fport" ] && break; sleep 0.05
    done
    timeout 20 ip netns exec "$NS-h1" ping -c 3 -i 0.2 -W 2 $SUB.2 >"$tmp/ping" 2>&1; prc=$?
    timeout 10 ip netns exec "$NS-sw" curl -s -m 5 "http://127.0.0.1:$fport/metrics" >"$tmp/fab.txt"
    kill "$fpid" 2>/dev/null; wait "$fpid" 2>/dev/null
    rx1=$(metric "$tmp/fab.txt" 'inagg_fabric_port_received_frames_total{port="p1"}')
    tx2=$(metric "$tmp/fab.txt" 'inagg_fabric_port_sent_frames_total{port="p2"}')
    fwd=$(metric "$tmp/fab.txt" 'inagg_fabric_frames_total{event="forwarded"}')
    if [ -z "$fport" ]; then bad $t "fabric switch did not start: $(cat "$tmp/fab.err")"
    elif [ $prc -ne 0 ]; then bad $t "ping through the fabric failed: $(tail -n 2 "$tmp/ping")"
    elif command -v promtool >/dev/null && ! promtool check metrics <"$tmp/fab.txt" >"$tmp/fpt" 2>&1; then
        bad $t "promtool: $(head -n 5 "$tmp/fpt")"
    elif [ "${rx1:-0}" -lt 3 ] || [ "${tx2:-0}" -lt 3 ] || [ "${fwd:-0}" -lt 3 ]; then
        bad $t "per-port counters: p1 rx '$rx1', p2 tx '$tx2', forwarded '$fwd'"
    else ok $t; fi
fi
for n in sw h1 h2; do ip netns del "$NS-$n" 2>/dev/null; done
fi

if want systemd; then
t=systemd_unit_verifies
unit=packaging/systemd/inagg-switch.service
if ! command -v systemd-analyze >/dev/null; then skp $t "systemd-analyze missing"
elif [ ! -f "$unit" ]; then bad $t "$unit missing"
else
    # verify wants the ExecStart binary where the unit says: point it at this build; and
    # the man page it names comes with the package, not with the tree.
    sed -e "s|/usr/bin/inagg|$INAGG|g" -e "/^Documentation=man:/d" "$unit" >"$tmp/inagg-switch.service"
    if timeout 60 systemd-analyze verify "$tmp/inagg-switch.service" >"$tmp/verify" 2>&1 &&
       ! grep -v "^$" "$tmp/verify" | grep -v "Failed to .*bus\|No such file or directory.*/etc/inagg" >/dev/null; then
        ok $t
    else bad $t "$(head -n 5 "$tmp/verify")"; fi
fi
fi

echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
