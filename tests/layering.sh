#!/usr/bin/env bash
# layering.sh - enforces the order of src/ (src/README.md, docs/ARCHITECTURE.md "Folders, one
# job each"): three products, each a folder of folders, and one rule per product on what its
# files may include:
#   src/lib/      the worker library: include/ and src/lib/ only (never the daemon or an app);
#   src/switchd/  the switch daemon: include/, src/lib/ and src/switchd/;
#   src/apps/     the applications: include/, src/lib/, src/apps/, and of the daemon only its
#                 interface, src/switchd/switchd.h (an app starts a switch through it, never
#                 through the daemon's internals); src/apps/nccl/, a plugin loaded into other
#                 programs, uses libinagg only through its public API (include/inagg.h) and
#                 includes nothing of src/ outside its own folder.
# Within the products a folder uses only folders above it in ARCHITECTURE.md's table, and never
# another folder's internals (*_int.h); every folder of src/ has a row; libinagg (the rows
# marked "yes") is exactly src/lib/. One check per source file plus the table checks; prints
# each failure with the file and the include, and ends with "N passed, N failed".
#
#   bash tests/layering.sh [ROOT]    (ROOT: the tree to check, default this one)
# Checking this tree, it also shows that each product rule can fail: on a copy of src/ it plants
# one include each rule forbids and expects that file to be named.
set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
doc=$root/docs/ARCHITECTURE.md
passed=0 failed=0
fail() { echo "FAIL $*"; failed=$((failed + 1)); }

# The table's rows in order: "folder yes|no", folder as "lib/base" ("include" for include/).
mapfile -t rows < <(awk '
    /^## Folders, one job each/ { on = 1; next }
    on && /^## / { exit }
    on && /^\| `(src\/[a-z_\/]+|include\/)`/ {
        n = split($0, cell, "|")
        f = cell[2]; sub(/^ *`/, "", f); sub(/`.*/, "", f); sub(/^src\//, "", f); sub(/\/$/, "", f)
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

# src/ holds the three products and nothing else; every folder in them has its row.
extra=$(cd "$root/src" && ls -A | grep -vxE 'lib|switchd|apps|README\.md' | tr '\n' ' ')
if [ -n "$extra" ]; then fail "src/: [ $extra] is not one of the products lib/, switchd/, apps/"
else passed=$((passed + 1)); fi
missing=""
for d in "$root"/src/*/ "$root"/src/*/*/; do
    f=${d#"$root"/src/}
    f=${f%/}
    case "$f" in */xdp) continue ;; esac # the fabric's BPF program, a part of fabric/
    compgen -G "$d*.[ch]" >/dev/null || continue # a product's folder of folders
    [ -n "${rank[$f]+x}" ] || missing="$missing src/$f/"
done
if [ -n "$missing" ]; then fail "docs/ARCHITECTURE.md: no row for$missing"; else passed=$((passed + 1)); fi

# libinagg holds exactly src/lib/: the rows marked "yes" (include/ aside) are its folders.
yes=$(for f in "${!lib[@]}"; do [ "${lib[$f]}" = yes ] && [ "$f" != include ] && echo "$f"; done |
      sort | tr '\n' ' ')
inlib=$(cd "$root/src" && ls -d lib/*/ | sed 's|/$||' | sort | tr '\n' ' ')
if [ "$yes" != "$inlib" ]; then
    fail "docs/ARCHITECTURE.md marks [ $yes] as in libinagg, but src/lib/ holds [ $inlib]"
else
    passed=$((passed + 1))
fi

# may_include PRODUCT INCLUDE: the product rule of the header comment.
may_include() {
    case "$1:$2" in
        *:lib/*) return 0 ;;
        switchd:switchd/*) return 0 ;;
        apps:apps/* | apps:switchd/switchd.h) return 0 ;;
    esac
    return 1
}

# Each file's includes.
while IFS= read -r file; do
    rel=${file#"$root"/}
    f=$(dirname "${rel#src/}")
    product=${f%%/*}
    f=${f%/xdp} # the fabric's BPF program is a part of fabric/
    if [ -z "${rank[$f]+x}" ]; then # its folder has no row: failed above
        continue
    fi
    bad=0
    while IFS= read -r inc; do
        [ -n "$inc" ] || continue
        case "$inc" in
            inagg.h | inagg/*) continue ;; # include/: the public API, for everyone
            */*) d=$(dirname "$inc"); d=${d%/xdp} ;;
            *) continue ;; # a header beside the file
        esac
        if [ "$d" = "$f" ]; then continue; fi
        if [ "$f" = apps/nccl ]; then # the NCCL plugin: the public API and its own headers
            fail "$rel: #include \"$inc\": src/apps/nccl/ uses libinagg through include/inagg.h only"
            bad=1
            continue
        fi
        # a product's interface header (src/switchd/switchd.h) is its own folders' contract
        if [ "$d" = "$product" ] && [ "${f%%/*}" = "$product" ]; then continue; fi
        if ! may_include "$product" "$inc"; then
            fail "$rel: #include \"$inc\": src/$product/ may not include ${d%%/*}/'s headers (tests/layering.sh's rules)"
            bad=1
        elif [ -z "${rank[$d]+x}" ]; then
            fail "$rel: #include \"$inc\": $d/ is not a folder of docs/ARCHITECTURE.md's table"
            bad=1
        elif [ "${rank[$d]}" -gt "${rank[$f]}" ]; then
            fail "$rel: #include \"$inc\": $d/ comes after $f/ in docs/ARCHITECTURE.md's table"
            bad=1
        elif [[ "$inc" == *_int.h ]]; then
            fail "$rel: #include \"$inc\": another folder's internals"
            bad=1
        fi
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file")
    [ "$bad" = 0 ] && passed=$((passed + 1))
done < <(find "$root/src" -name '*.[ch]' | sort)

# The rules can fail: each include below, planted in a copy, must be reported against its file.
planted() { # FILE INCLUDE: plant INCLUDE in a copy's FILE; the check must name FILE
    local copy
    copy=$(mktemp -d)
    mkdir -p "$copy/docs"
    cp -r "$root/src" "$copy/src"
    cp "$root/docs/ARCHITECTURE.md" "$copy/docs/"
    echo "#include \"$2\"" >>"$copy/$1"
    if bash "$0" "$copy" | grep -F "FAIL $1: #include \"$2\"" >/dev/null; then
        passed=$((passed + 1))
    else
        fail "planted: $1 including $2 was not reported"
    fi
    rm -rf "$copy"
}
if [ $# -eq 0 ]; then
    planted src/lib/base/util.h switchd/server/job.h     # the library includes the daemon
    planted src/lib/worker/comm.c apps/launch/launch.h    # the library includes an app
    planted src/switchd/server/job.c apps/bench/harness.h # the daemon includes an app
    planted src/apps/launch/switch_child.c switchd/server/server.h # an app, the daemon's insides
    planted src/lib/wire/ctlmsg.c lib/kernels/optim.h     # the wire codec depends on a kernel
    planted src/apps/nccl/collnet.c lib/base/log.h        # the NCCL plugin past the public API
    planted src/apps/train/train_run.c apps/cli/train.h  # a command's run includes the command
fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
