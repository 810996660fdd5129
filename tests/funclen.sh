#!/usr/bin/env bash
# funclen.sh - keeps functions short: every function of src/ longer than MAX lines (default
# 120, counted from the line of its opening brace to its closing brace) is listed as
# "FAIL file:line name: N lines", except the data tables allowed by name below. The tree's
# style puts a function's braces alone in column 0 ("{" ... "}"), which is what this matches;
# an initializer's braces never stand alone there. Ends with "N passed, N failed".
#
#   bash tests/funclen.sh [ROOT] [MAX]   (ROOT: the tree to check, default this one)
set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
max=${2:-120}

# Functions that are data, not steps: "path:function".
allowed=(
    "src/apps/cli/train_args.c:usage" # the help text of `inagg train`: one printf of its flags
)

passed=0 failed=0
while IFS=' ' read -r rel line name len; do
    key="$rel:$name"
    ok=0
    for a in ${allowed[@]+"${allowed[@]}"}; do [ "$a" = "$key" ] && ok=1; done
    if [ "$len" -gt "$max" ] && [ "$ok" = 0 ]; then
        echo "FAIL $rel:$line $name: $len lines (at most $max)"
        failed=$((failed + 1))
    else
        passed=$((passed + 1))
    fi
done < <(cd "$root" && find src -name '*.[ch]' | sort | xargs awk '
    FNR == 1 { depth = 0; prev = ""; name = "" }
    /^\{[[:space:]]*$/ {
        # the name: the last identifier before "(" on the signature line(s) above
        sig = prev
        if (match(sig, /[A-Za-z_][A-Za-z_0-9]*[[:space:]]*\(/) == 0) sig = prev2 " " prev
        if (match(sig, /[A-Za-z_][A-Za-z_0-9]*[[:space:]]*\(/)) {
            name = substr(sig, RSTART, RLENGTH); sub(/[[:space:]]*\($/, "", name)
        } else name = "?"
        start = FNR; next
    }
    /^\}/ && start {
        print FILENAME, start, name, FNR - start + 1
        start = 0; next
    }
    /[^[:space:]]/ { prev2 = prev; prev = $0 }
')
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
