#!/usr/bin/env bash
# callgraph.sh - no circle of calls among the switch's control-plane files (docs/ARCHITECTURE.md,
# src/switchd/server/), nor among the L2 fabric's files (src/switchd/fabric/: its stages hand
# frames on through queues or a verdict, never by calling back into the stage that called):
# for each object of the folder, the other objects that define a symbol it leaves undefined
# are the files it calls; those edges must form no cycle (tsort finds one and names its
# files). The server's packet path files (dataplane.c, proto*.c, slot.c, p4slot.c) are left
# out: a protocol hands its results back to the dataplane's send by design. A last check
# plants a cycle in two small objects and sees it found, so the check cannot go blind. Prints
# one line per check and ends with "N passed, N failed".
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

# The files of each cycle tsort finds in the edges on stdin ("a -> b; c -> d -> e"), or nothing
# when there is none.
cycle() {
    tsort >/dev/null 2>"$tmp/tsort.err"
    awk '/loop/ { if (c) printf "; "; c = 1; n = 0; next }
         { sub(/^tsort: /, ""); printf "%s%s", n++ ? " -> " : "", $0 }' "$tmp/tsort.err"
}

# One folder's objects (those not excluded) must call each other in no cycle: NAME DIR MIN
# EDGE [EXCLUDED...], where MIN objects and the call EDGE ("a b") must be found, or the graph
# was not read.
check_dir() {
    local name=$1 dir=$2 min=$3 edge=$4 o x skip
    shift 4
    local objs=()
    for o in "$dir"/*.o; do
        skip=0
        for x in "$@"; do [[ $(basename "$o") == $x ]] && skip=1; done
        [ $skip = 1 ] || objs+=("$o")
    done
    edges "${objs[@]}" >"$tmp/edges"
    local loop
    loop=$(cycle <"$tmp/edges")
    if [ "${#objs[@]}" -lt "$min" ] || ! grep -q "^$edge\$" "$tmp/edges"; then
        fail "$name: no call graph read from $dir (${#objs[@]} objects)"
    elif [ -n "$loop" ]; then
        local names=${loop//; /|}
        fail "$name: $loop (edges: $(grep -E "^(${names// -> /|}) " "$tmp/edges" | tr '\n' ';'))"
    else
        ok "$name (${#objs[@]} files, $(wc -l <"$tmp/edges") calls between them)"
    fi
}

if ! compgen -G "$build/src/switchd/server/*.o" >/dev/null ||
    ! compgen -G "$build/src/switchd/fabric/*.o" >/dev/null; then
    make -s -j2 BUILD="$build" >/dev/null || { fail "build: make failed"; finish; }
fi
check_dir control_plane_has_no_call_cycle "$build/src/switchd/server" 8 "switch control" \
    dataplane.o proto.o 'proto_*.o' slot.o p4slot.o
check_dir fabric_stages_have_no_call_cycle "$build/src/switchd/fabric" 20 "rxstage forward"

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
