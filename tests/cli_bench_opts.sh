#!/usr/bin/env bash
# tests/cli_bench_opts.sh - the flags every benchmark shares (cli/bench_opts.c), parsed once
# for `inagg bench allreduce|latency|optimizer|udp|compress` and `inagg train`: each command
# takes exactly the shared flags it lists (a valid value is accepted, a bad one refused with
# exit 2 and a message naming the command and the flag, one it does not take refused as an
# unknown option), teaches each in --help, and a shared flag is refused in the same words by
# every command; a stray argument is refused by each. Parsing only: nothing runs. A few
# seconds.
set -uo pipefail
cd "$(dirname "$0")/.."
INAGG=./build/inagg
pass=0 fail=0 skip=0
ok()  { echo "ok      $1"; pass=$((pass + 1)); }
bad() { echo "FAIL    $1: $2"; fail=$((fail + 1)); }
finish() { echo "$pass passed, $fail failed, $skip skipped"; [ $fail -eq 0 ]; exit $?; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
[ -x $INAGG ] || make -s -j2 >/dev/null || { bad build "make failed"; finish; }

# A valid value and a refused one per shared flag ("-": the flag takes any text).
declare -A good=([workers]=2 [world]=2 [rank]=0 [job]=j [switch]=127.0.0.1:1 [iters]=3
    [warmup]=1 [seed]=5 [timeout-ms]=1000 [timeout]=1000 [json]=- [plot]=x.png
    [protocol]=p4sgd [loss]=0.1 [faults]=drop=0.1 [baseline]=none [testbed]=2
    [link-rate]=1gbit [link-delay]=1ms [fabric]=bridge [switch-threads]=2 [poll]=busy
    [transport]=udp)
declare -A refused=([workers]=0 [world]=0 [rank]=x [job]="" [switch]=- [iters]=0 [warmup]=x
    [seed]=x [timeout-ms]=0 [timeout]=0 [json]=- [plot]=- [protocol]=tcp [loss]=2 [faults]=-
    [baseline]=x [testbed]=0 [link-rate]=5x [link-delay]=- [fabric]=x [switch-threads]=0
    [poll]=fast [transport]=tcp)
all="workers world rank job switch iters warmup seed timeout-ms timeout json plot protocol
    loss faults baseline testbed link-rate link-delay fabric switch-threads poll transport"

# What each command takes (its own --plot and --baseline count: they are its flags).
declare -A takes=(
    ["bench allreduce"]="workers world rank job switch iters warmup seed timeout-ms json plot
        protocol loss faults baseline testbed link-rate link-delay fabric switch-threads
        transport"
    ["bench latency"]="workers rank job switch iters warmup seed timeout-ms json protocol loss
        faults baseline testbed link-rate link-delay fabric poll"
    ["bench optimizer"]="workers warmup seed timeout-ms json switch protocol loss faults
        baseline"
    ["bench udp"]="json"
    ["bench compress"]="seed json plot"
    ["train"]="workers world rank job switch seed timeout json plot protocol testbed link-rate
        link-delay fabric switch-threads")

in_list() { case " $(echo $2) " in *" $1 "*) return 0 ;; esac; return 1; }

t=shared_flags_accepted_refused_and_taught
errs=""
for cmd in "${!takes[@]}"; do
    $INAGG $cmd --help >"$tmp/help" 2>&1
    for f in $all; do
        if in_list "$f" "${takes[$cmd]}"; then
            # accepted: parsing goes on to the unknown flag after it
            timeout 10 $INAGG $cmd --$f "${good[$f]}" --zz-no-such-flag >/dev/null 2>"$tmp/err"
            rc=$?
            [ $rc -eq 2 ] && grep -q "unknown option '--zz-no-such-flag'" "$tmp/err" ||
                errs+=" [$cmd --$f ${good[$f]}: rc $rc: $(head -c 120 "$tmp/err")]"
            grep -q -- "--$f\b" "$tmp/help" || errs+=" [$cmd --help lacks --$f]"
            [ "${refused[$f]}" = "-" ] && continue
            timeout 10 $INAGG $cmd --$f "${refused[$f]}" >/dev/null 2>"$tmp/err"
            rc=$?
            [ $rc -eq 2 ] && grep -q "^inagg $cmd: .*--$f" "$tmp/err" &&
                ! grep -q "unknown option" "$tmp/err" ||
                errs+=" [$cmd --$f '${refused[$f]}': rc $rc: $(head -c 120 "$tmp/err")]"
        else
            # getopt_long takes an unambiguous prefix: --timeout is --timeout-ms where it is taken
            [ "$f" = timeout ] && in_list timeout-ms "${takes[$cmd]}" && continue
            timeout 10 $INAGG $cmd --$f "${good[$f]}" >/dev/null 2>"$tmp/err"
            rc=$?
            [ $rc -eq 2 ] && grep -q "^inagg $cmd: unknown option '--$f' (see --help)" "$tmp/err" ||
                errs+=" [$cmd takes --$f: rc $rc]"
        fi
    done
done
[ -z "$errs" ] && ok $t || bad $t "$errs"

t=one_wording_for_a_shared_flag
errs=""
for args in "--fabric x" "--link-rate 5x" "--testbed 0" "--rank x" "--job="; do
    want=""
    for cmd in "bench allreduce" "bench latency" "train"; do
        timeout 10 $INAGG $cmd $args >/dev/null 2>"$tmp/err"
        got=$(sed -n "s/^inagg $cmd: //p" "$tmp/err")
        [ -n "$got" ] || errs+=" [$cmd $args: no message]"
        [ -z "$want" ] && want=$got
        [ "$got" = "$want" ] || errs+=" [$cmd $args: '$got' != '$want']"
    done
done
[ -z "$errs" ] && ok $t || bad $t "$errs"

t=stray_arguments_refused
errs=""
for cmd in "${!takes[@]}"; do
    timeout 10 $INAGG $cmd stray >/dev/null 2>"$tmp/err"
    rc=$?
    [ $rc -eq 2 ] && grep -q "^inagg $cmd: unexpected argument 'stray'" "$tmp/err" ||
        errs+=" [$cmd stray: rc $rc]"
done
timeout 10 $INAGG bench allreduce --sizes 64K >/dev/null 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] && grep -q "\-\-sizes takes its value after '=' (--sizes=VALUE), got '64K'" "$tmp/err" ||
    errs+=" [--sizes 64K: rc $rc: $(cat "$tmp/err")]"
[ -z "$errs" ] && ok $t || bad $t "$errs"

t=checks_between_shared_flags_still_apply
errs=""
for c in "bench latency --link-delay 1ms:describe the testbed" \
    "bench allreduce --fabric inagg:describe the testbed" \
    "bench allreduce --xdp on:describe the testbed" \
    "train --link-rate 1gbit:describe the testbed" \
    "bench latency --testbed 2 --workers 2:--workers does not apply" \
    "bench latency --switch-poll busy:goes with --testbed N" \
    "bench allreduce --rank 0:--rank runs one rank of a job" \
    "train --rank 0:go with --switch"; do
    args=${c%%:*} want=${c#*:}
    timeout 10 $INAGG $args >/dev/null 2>"$tmp/err"
    rc=$?
    [ $rc -eq 2 ] && grep -q -- "$want" "$tmp/err" || errs+=" [$args: rc $rc]"
done
[ -z "$errs" ] && ok $t || bad $t "$errs"

finish
