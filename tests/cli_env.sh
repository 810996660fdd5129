#!/usr/bin/env bash
# tests/cli_env.sh - the library's environment variables are read in one place from one table
# (src/lib/base/env.c): no other source file of libinagg calls getenv; `inagg --help` lists every
# variable of that table and docs/PROTOCOL.md's table lists the same ones; and a bad value of
# a number variable is refused naming the variable, through the command a user runs.
set -u
cd "$(dirname "$0")/.."
INAGG=./build/inagg
pass=0 fail=0 skip=0
ok()   { echo "ok      $1"; pass=$((pass + 1)); }
bad()  { echo "FAIL    $1: $2"; fail=$((fail + 1)); }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

t=getenv_only_in_the_table
# libinagg's folders: src/lib/ is the library and nothing else (src/README.md)
folders=$(ls -d src/lib/*/)
others=$(grep -ln 'getenv *(' $(for f in $folders; do ls "$f"*.[ch]; done) | grep -v '^src/lib/base/env\.c$')
if [ -z "$others" ] && grep -q 'getenv *(' src/lib/base/env.c; then ok $t
else bad $t "getenv outside src/lib/base/env.c in libinagg: $others"; fi

t=help_and_docs_list_the_same_variables
table=$(sed -n 's/^ *\[ENV_[A-Z_]*\] = {"\(INAGG_[A-Z_]*\)".*/\1/p' src/lib/base/env.c | sort)
help=$($INAGG --help | sed -n '/^environment variables/,$p' | sed -n 's/^  \(INAGG_[A-Z_]*\) .*/\1/p' | sort)
docs=$(sed -n '/^| variable | type | default | what it does |$/,/^$/p' docs/PROTOCOL.md |
       sed -n 's/^| `\(INAGG_[A-Z_]*\)` | .*/\1/p' | sort)
n=$(echo "$table" | grep -c .)
if [ "$n" -ge 8 ] && [ "$table" = "$help" ] && [ "$table" = "$docs" ]; then ok $t
else bad $t "table [$(echo $table)] help [$(echo $help)] docs [$(echo $docs)]"; fi

t=bad_number_variable_names_itself
INAGG_ROCE_PSN=zz timeout 60 $INAGG bench latency --workers 1 --iters 5 --warmup 1 \
    >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -ne 0 ] && grep -q "INAGG_ROCE_PSN='zz' is not a number" "$tmp/err" "$tmp/out"; then ok $t
else bad $t "exit $rc: $(tail -c 300 "$tmp/err")"; fi

t=roce_mtu_not_an_infiniband_mtu_names_itself
INAGG_ROCE_MTU=3000 timeout 60 $INAGG bench latency --workers 1 --iters 5 --warmup 1 \
    >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -ne 0 ] && grep -q "INAGG_ROCE_MTU=3000 is not one of InfiniBand's path MTUs" "$tmp/err" "$tmp/out"; then ok $t
else bad $t "exit $rc: $(tail -c 300 "$tmp/err")"; fi

echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
