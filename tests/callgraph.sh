#!/usr/bin/env bash
# callgraph.sh - no circle of calls among the switch's control-plane files (docs/ARCHITECTURE.md,
# src/switchd/server/): for each object of src/switchd/server/, the other objects that define
# a symbol it leaves undefined are the files it calls; those edges must form no cycle (tsort
# finds one and names its files). The packet path's files (dataplane.c, proto*.c, slot.c,
# p4slot.c) are left out: a protocol hands its results back to the dataplane's send by design.
# A second check plants a cycle in two small objects and sees it found, so the check cannot go
# blind. Prints one line per check and ends with "N passed, N failed".
#
#   bash tests/callgraph.sh [BUILD_DIR]   (default build/; built first when missing)
set -u
cd "$(dirname "$0")/.."
build=${1:-build}
passed=0 failed=0
ok() { echo "ok   $*"; passed=$((passed + 1)); }
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
finish() { echo "$passed passed, $failed failed"; [ "$failed" = 0 ]; exit; }

tmp=$(mktemp -d /tmp/inagg-callgraph-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# "A B" for every object A (of those named) that calls a function object B defines.
edges() {
    local a b
    for b in "$@"; do
        nm -g --defined-only "$b" | awk 'NF == 3 { print $3 }' | sort -u >"$tmp/def.$(basename "$b")"
    done
    for a in "$@"; do
        nm -u "$a" | awk '{ print $NF }' | sort -u >"$tmp/undef"
        for b in "$@"; do
            [ "$a" = "$b" ] && continue
            if [ -n "$(comm -12 "$tmp/undef" "$tmp/def.$(basename "$b")" | head -n 1)" ]; then
                echo "$(basename "$a" .o) $(basename "$b" .o)"
            fi
        done
    done
}

# The files of a cycle in the edges on stdin ("a -> b -> a"), or nothing when there is none.
cycle() {
    tsort >/dev/null 2>"$tmp/tsort.err"
    if grep -q 'loop' "$tmp/tsort.err"; then
        grep -v 'loop' "$tmp/tsort.err" | sed 's/^tsort: //' | tr '\n' ' ' | sed 's/ $//; s/ / -> /g'
    fi
}

dir=$build/src/switchd/server
if ! compgen -G "$dir/*.o" >/dev/null; then
    make -s -j2 BUILD="$build" >/dev/null || { fail "build: make failed"; finish; }
fi
objs=()
for o in "$dir"/*.o; do
    case $(basename "$o") in dataplane.o | proto.o | proto_*.o | slot.o | p4slot.o) continue ;; esac
    objs+=("$o")
done
edges "${objs[@]}" >"$tmp/edges"
loop=$(cycle <"$tmp/edges")
if [ "${#objs[@]}" -lt 8 ] || ! grep -q '^switch control$' "$tmp/edges"; then
    fail "control_plane_has_no_call_cycle: no call graph read from $dir (${#objs[@]} objects)"
elif [ -n "$loop" ]; then
    fail "control_plane_has_no_call_cycle: $loop (edges: $(grep -E "^(${loop// -> /|}) " "$tmp/edges" | tr '\n' ';'))"
else
    ok "control_plane_has_no_call_cycle (${#objs[@]} files, $(wc -l <"$tmp/edges") calls between them)"
fi

# The check finds a planted cycle: a.o calls b.o, which calls a.o back.
mkdir -p "$tmp/planted"
echo 'int planted_b(int); int planted_a(int x) { return x ? planted_b(x - 1) : 0; }' >"$tmp/planted/a.c"
echo 'int planted_a(int); int planted_b(int x) { return planted_a(x); }' >"$tmp/planted/b.c"
echo 'int planted_a(int); int planted_c(int x) { return planted_a(x); }' >"$tmp/planted/c.c"
for f in a b c; do cc -c -o "$tmp/planted/$f.o" "$tmp/planted/$f.c" || { fail "planted: cc"; finish; }; done
planted=$(edges "$tmp/planted/a.o" "$tmp/planted/b.o" "$tmp/planted/c.o" | cycle)
case $planted in
    *a*b* | *b*a*) ok "planted_cycle_is_found ($planted)" ;;
    *) fail "planted_cycle_is_found: a.o and b.o call each other, found '${planted}'" ;;
esac
finish
