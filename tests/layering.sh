#!/usr/bin/env bash
# layering.sh - enforces the folder order of docs/ARCHITECTURE.md ("Folders, one job each"):
# a file in src/F/ includes only headers of F itself, of include/, and of folders listed above
# F in that table, never another folder's internals (*_int.h); every folder of src/ is in the
# table; and libinagg (the Makefile's WORKER_SRC) is built from exactly the folders the table
# marks "yes". One check per source file plus the two table checks; prints each failure with
# the file and the include, and ends with "N passed, N failed".
#
#   bash tests/layering.sh [ROOT]    (ROOT: the tree to check, default this one)
set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
doc=$root/docs/ARCHITECTURE.md
passed=0 failed=0
fail() { echo "FAIL $*"; failed=$((failed + 1)); }

# The table's rows in order: "folder yes|no" (include/ is "include").
mapfile -t rows < <(awk '
    /^## Folders, one job each/ { on = 1; next }
    on && /^## / { exit }
    on && /^\| `(src\/[a-z_]+\/|include\/)`/ {
        n = split($0, cell, "|")
        f = cell[2]; gsub(/[ `]/, "", f); sub(/^src\//, "", f); sub(/\/$/, "", f)
        lib = cell[n - 1]; gsub(/^ +/, "", lib)
        print f, (lib ~ /^yes/ ? "yes" : "no")
    }' "$doc")
if [ "${#rows[@]}" -lt 5 ]; then
    echo "FAIL $doc: no folder table found under '## Folders, one job each'"
    echo "0 passed, 1 failed"
    exit 1
fi
declare -A rank lib
for i in "${!rows[@]}"; do
    read -r f l <<<"${rows[$i]}"
    rank[$f]=$i
    lib[$f]=$l
done

# Every folder of src/ has its row.
missing=""
for d in "$root"/src/*/; do
    f=$(basename "$d")
    [ -n "${rank[$f]+x}" ] || missing="$missing src/$f/"
done
if [ -n "$missing" ]; then fail "docs/ARCHITECTURE.md: no row for$missing"; else passed=$((passed + 1)); fi

# libinagg holds exactly the "yes" folders.
worker=$(awk '/^WORKER_SRC :=/ { on = 1 } on { print } on && !/\\$/ { exit }' "$root/Makefile" |
         grep -o 'src/[a-z_]*/' | sed 's|src/||; s|/||' | sort | tr '\n' ' ')
yes=$(for f in "${!lib[@]}"; do [ "${lib[$f]}" = yes ] && [ "$f" != include ] && echo "$f"; done |
      sort | tr '\n' ' ')
if [ "$worker" != "$yes" ]; then
    fail "Makefile: WORKER_SRC builds libinagg from [ $worker] but docs/ARCHITECTURE.md marks [ $yes] as in libinagg"
else
    passed=$((passed + 1))
fi

# Each file's includes.
while IFS= read -r file; do
    rel=${file#"$root"/}
    f=$(echo "$rel" | cut -d/ -f2)
    if [ -z "${rank[$f]+x}" ]; then # its folder has no row: failed above
        continue
    fi
    bad=0
    while IFS= read -r inc; do
        [ -n "$inc" ] || continue
        case "$inc" in
            inagg.h | inagg/*) d=include ;;
            */*) d=${inc%%/*} ;;
            *) continue ;; # a header beside the file
        esac
        if [ "$d" = "$f" ]; then continue; fi
        if [ -z "${rank[$d]+x}" ]; then
            fail "$rel: #include \"$inc\": $d/ is not a folder of docs/ARCHITECTURE.md's table"
            bad=1
        elif [ "${rank[$d]}" -gt "${rank[$f]}" ]; then
            fail "$rel: #include \"$inc\": $d/ comes after $f/ in docs/ARCHITECTURE.md's table"
            bad=1
        elif [[ "$inc" == *_int.h ]]; then
            fail "$rel: #include \"$inc\": another folder's internals"
            bad=1
        elif [ "${lib[$f]}" = yes ] && [ "${lib[$d]}" = no ]; then
            fail "$rel: #include \"$inc\": libinagg's $f/ uses $d/, which is not in libinagg"
            bad=1
        fi
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file")
    [ "$bad" = 0 ] && passed=$((passed + 1))
done < <(find "$root/src" -name '*.[ch]' | sort)

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
