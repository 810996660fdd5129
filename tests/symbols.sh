#!/usr/bin/env bash
# symbols.sh - what the installed libraries show an application: libinagg.a and libinagg.so
# define no global symbol but the public API (inagg_*), libinagg holds nothing of the switch or
# the fabric, and a program that defines functions with the names of inagg's internals (a
# `log_init` or `sha256` of its own) links against libinagg.a without a clash. The Makefile
# builds libinagg.a as one object whose internal symbols are local (see its comment).
# Prints one line per check and ends with "N passed, N failed".
#
#   bash tests/symbols.sh [BUILD_DIR]   (default build/; built first when missing)
set -u
cd "$(dirname "$0")/.."
build=${1:-build}
passed=0 failed=0
ok() { echo "ok   $*"; passed=$((passed + 1)); }
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
finish() { echo "$passed passed, $failed failed"; [ "$failed" = 0 ]; exit; }

if [ ! -f "$build/libinagg.a" ] || [ ! -f "$build/internal/libworker.a" ]; then
    make -s -j2 "$build/libinagg.a" "$build/internal/libworker.a" "$build/internal/libswitch.a" \
        "$build/libinagg.so" >/dev/null || { fail "build: make failed"; finish; }
fi
tmp=$(mktemp -d /tmp/inagg-symbols-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

globals() { nm -g --defined-only "$1" 2>/dev/null | awk 'NF == 3 { print $3 }' | sed 's/@.*//' | sort -u; }

globals "$build/libinagg.a" >"$tmp/a"
bad=$(grep -vc '^inagg_' "$tmp/a")
if [ ! -s "$tmp/a" ]; then
    fail "libinagg_a_exports_only_the_api: nm shows no global symbol at all"
elif [ "$bad" = 0 ]; then
    ok "libinagg_a_exports_only_the_api ($(wc -l <"$tmp/a") inagg_* symbols)"
else
    fail "libinagg_a_exports_only_the_api: $bad globals without inagg_: $(grep -v '^inagg_' "$tmp/a" | head -5 | tr '\n' ' ')"
fi

if [ -f "$build/libinagg.so" ]; then
    nm -D --defined-only "$build/libinagg.so" | awk 'NF == 3 { print $3 }' | sed 's/@.*//' |
        grep -v '^INAGG_' | sort -u >"$tmp/so"
    if [ -s "$tmp/so" ] && ! grep -qv '^inagg_' "$tmp/so"; then
        ok "libinagg_so_exports_only_the_api"
    else
        fail "libinagg_so_exports_only_the_api: $(grep -v '^inagg_' "$tmp/so" | head -5 | tr '\n' ' ')"
    fi
    if cmp -s "$tmp/a" "$tmp/so"; then ok "static_and_shared_export_the_same_api"
    else fail "static_and_shared_export_the_same_api: $(diff "$tmp/a" "$tmp/so" | grep '^[<>]' | head -4 | tr '\n' ' ')"; fi
fi

# nothing of the switch side: no symbol (global or local) that libswitch.a defines
nm --defined-only "$build/libinagg.a" | awk 'NF == 3 { print $3 }' | sort -u >"$tmp/all"
globals "$build/internal/libswitch.a" >"$tmp/switch"
shared=$(comm -12 "$tmp/all" "$tmp/switch" | head -5 | tr '\n' ' ')
if [ -s "$tmp/switch" ] && [ -z "$shared" ]; then ok "libinagg_holds_no_switch_or_fabric_code"
else fail "libinagg_holds_no_switch_or_fabric_code: ${shared:-libswitch.a defines nothing}"; fi

# an application with functions named like inagg's internals links and runs
globals "$build/internal/libworker.a" | grep -v '^inagg_' | grep -E '^[a-z_][a-z0-9_]*$' |
    grep -vE '^(main|_.*)$' | head -40 >"$tmp/internal"
{
    echo '#include <inagg.h>'
    echo '#include <stdio.h>'
    while read -r name; do echo "int $name(void); int $name(void) { return 7; }"; done <"$tmp/internal"
    echo 'int main(void) { inagg_comm_t *c = NULL; (void)c; printf("%s\n", inagg_strerror(INAGG_OK)); return 0; }'
} >"$tmp/app.c"
if ! grep -q '^int ' "$tmp/app.c"; then
    fail "application_names_do_not_clash: no internal names found in libworker.a"
elif cc -std=c11 -Iinclude -o "$tmp/app" "$tmp/app.c" "$build/libinagg.a" -pthread \
        -lzfp -lisal -lsodium -lcrypto -lm 2>"$tmp/ld.err" && "$tmp/app" >/dev/null; then
    ok "application_names_do_not_clash ($(wc -l <"$tmp/internal") internal names defined by the application)"
else
    fail "application_names_do_not_clash: $(grep -m3 -E 'multiple definition|error' "$tmp/ld.err" | tr '\n' ' ')"
fi
finish
