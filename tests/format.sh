#!/usr/bin/env bash
# format.sh - the C sources follow the tree's .clang-format: every .c and .h under src/,
# include/, tests/ and examples/ is checked with `clang-format --dry-run -Werror` (nothing is
# changed). One line per file that would change, then "N passed, N failed". Without
# clang-format it says what to install and fails under CI=true (tests/run sets the rule).
#
#   bash tests/format.sh          check
#   bash tests/format.sh --fix    reformat the files in place (then review and commit)
set -u
cd "$(dirname "$0")/.."
cf=$(command -v clang-format || command -v clang-format-14 || true)
if [ -z "$cf" ]; then
    echo "skip format: clang-format is not installed (apt-get install clang-format)"
    if [ "${CI:-}" = true ]; then echo "0 passed, 1 failed"; exit 1; fi
    echo "0 passed, 0 failed"; exit 0
fi
mapfile -t files < <(git ls-files 'src/*.[ch]' 'include/*.h' 'tests/*.[ch]' 'examples/*.[ch]' 2>/dev/null ||
    find src include tests examples -name '*.[ch]')
if [ "${1:-}" = --fix ]; then "$cf" -i "${files[@]}"; echo "formatted ${#files[@]} files"; exit 0; fi
passed=0 failed=0
for f in "${files[@]}"; do
    if "$cf" --dry-run -Werror "$f" >/dev/null 2>&1; then passed=$((passed + 1))
    else
        echo "FAIL $f: not formatted (clang-format -i $f; first difference at line $("$cf" --dry-run "$f" 2>&1 | sed -n 's/^[^:]*:\([0-9]*\):.*/\1/p' | head -1))"
        failed=$((failed + 1))
    fi
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
