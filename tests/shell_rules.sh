#!/usr/bin/env bash
# shell_rules.sh - the project's bash scripts parse (`bash -n`) and, where they set pipefail,
# never end a pipeline with an early-exiting reader whose status decides anything: `grep -q`
# stops at its first match, the writer then dies of SIGPIPE, and pipefail turns a matching
# text into a failure that depends on timing. Test a variable with a here-string
# (`grep -q PAT <<<"$text"`), or let grep read all of a command's output (`cmd | grep PAT
# >/dev/null`), which keeps the command's own status under pipefail.
# One check per script; prints each failure with the file and line, then "N passed, N failed".
#
#   bash tests/shell_rules.sh [FILE...]    (default: every bash script the tree tracks)
set -u
cd "$(dirname "$0")/.."
passed=0 failed=0
err=$(mktemp)
trap 'rm -f "$err"' EXIT
if [ $# -gt 0 ]; then
    files=("$@")
else
    mapfile -t files < <(git ls-files 2>/dev/null | while read -r f; do
        [ -f "$f" ] && head -n 1 "$f" | grep -qE '^#!.*\bbash\b' && echo "$f"; done)
fi
for f in "${files[@]}"; do
    why=""
    bash -n "$f" 2>"$err" || why="does not parse: $(head -c 300 "$err")"
    if grep -qE '^\s*set -[a-z]*o pipefail' "$f"; then
        # `| grep -q`, `| grep -qE`, `| grep -E -q` ...: a pipe into grep whose flags include q.
        hits=$(grep -nE '\|\s*grep(\s+-[a-zA-Z]+)*\s+(-[a-zA-Z]*q[a-zA-Z]*|--quiet)\b' "$f" | grep -vE '^[0-9]+:\s*#' |
            cut -d: -f1 | tr '\n' ' ')
        [ -n "$hits" ] && why="$why pipefail and a pipe into grep -q at line(s) $hits"
    fi
    if [ -z "$why" ]; then passed=$((passed + 1)); else echo "FAIL $f:$why"; failed=$((failed + 1)); fi
done
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
