#!/usr/bin/env bash
# tests/mutate/applies.sh - is tests/mutate/mutations in step with the code? Checks, without
# building anything, that each mutation's sed expression still changes its file (a reformatted
# or rewritten line leaves a mutation that `make mutate` can only report as stale). One line per
# stale mutation, then "N passed, N failed". Run by tests/run; `make mutate` runs them for real.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
passed=0 failed=0
trim() { local s=$1; s=${s#"${s%%[![:space:]]*}"}; s=${s%"${s##*[![:space:]]}"}; printf '%s' "$s"; }
while IFS= read -r line; do
    [[ -z "${line// }" || "$line" == \#* ]] && continue
    IFS=$'\x1f' read -r id file expr _ <<<"${line//@@/$'\x1f'}"
    id=$(trim "$id") file=$(trim "$file") expr=$(trim "$expr")
    if [ ! -f "$file" ]; then
        echo "FAIL $id: $file does not exist"; failed=$((failed + 1))
    elif sed -E -e "$expr" "$file" | cmp -s - "$file"; then
        echo "FAIL $id: '$expr' changes nothing in $file"; failed=$((failed + 1))
    else
        passed=$((passed + 1))
    fi
done <tests/mutate/mutations
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
