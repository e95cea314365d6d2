#!/usr/bin/env bash
# tests/hook/layers_check.sh: the hook's modules call and include one way.
#
# docs/architecture.md holds the order, lowest layer first, between the
# markers `hook-layers:begin` and `hook-layers:end`: one layer a line, its
# name, then its modules (a module is src/hook/<module>.c with its
# <module>.h). This test holds the code to it:
#   - every src/hook/*.c is in exactly one layer (a new file cannot escape);
#   - calls and data: each symbol an object of the built library uses from
#     another module (nm on CUSHARE_BUILD's hook objects, so inline code
#     from a header counts where it is compiled in) is defined in a strictly
#     lower layer: modules of one layer never use each other;
#   - includes: a module's .c and .h include only headers of strictly lower
#     layers (or its own); headers of no module (hook.h, config.h,
#     hook_symbols.h, ...) are the base every layer may include.
# Prints each violation as `caller -> callee (symbol or header)`; exits 1 if
# there is any. With -v, also prints the module graph it checked.
set -u
export LC_ALL=C
cd "$(dirname "$0")/../.."
BUILD=${CUSHARE_BUILD:-build}
OBJDIR=$BUILD/obj/hook/src/hook
DOC=${CS_LAYERS_DOC:-docs/architecture.md}
verbose=0
[ "${1:-}" = -v ] && verbose=1

layers=$(sed -n '/hook-layers:begin/,/hook-layers:end/p' "$DOC" | sed '1d;$d' |
         sed 's/^[[:space:]]*//' | grep -v '^$' | grep -v '^```')
[ -n "$layers" ] || { echo "no hook-layers block in $DOC"; exit 1; }

declare -A rank
r=0
while read -r name mods; do
    for m in $mods; do
        if [ -n "${rank[$m]:-}" ]; then
            echo "module $m is in two layers"; exit 1
        fi
        rank[$m]=$r
    done
    r=$((r + 1))
done <<<"$layers"

bad=0
for c in src/hook/*.c; do
    m=$(basename "$c" .c)
    if [ -z "${rank[$m]:-}" ]; then
        echo "src/hook/$m.c is in no layer of $DOC"
        bad=1
    fi
done

# ---- includes -------------------------------------------------------------
for f in src/hook/*.c src/hook/*.h; do
    m=$(basename "$f"); m=${m%.*}
    [ -n "${rank[$m]:-}" ] || continue          # a base header
    for h in $(sed -n 's/^#include "hook\/\([a-z0-9_]*\)\.h".*/\1/p' "$f"); do
        [ "$h" = "$m" ] && continue
        [ -n "${rank[$h]:-}" ] || continue      # a base header
        if [ "${rank[$h]}" -ge "${rank[$m]}" ]; then
            echo "include: $m -> $h ($f includes hook/$h.h)"
            bad=1
        fi
    done
done

# ---- symbols --------------------------------------------------------------
[ -d "$OBJDIR" ] || { echo "no objects in $OBJDIR: build first"; exit 1; }
# Two nm runs over every object (nm per object, and a loop in the shell
# per use, took 14 s on a 2-core VM whose process starts cost 3.4 ms each,
# 2026-12-01): the definitions as `symbol module`, the uses as `module
# symbol`; awk judges each use against the ranks.
tmpd=$(mktemp -d "${TEST_TMP:-/tmp}/layers.XXXXXX")
trap 'rm -rf "$tmpd"' EXIT
for m in "${!rank[@]}"; do echo "$m ${rank[$m]}"; done >"$tmpd/ranks"
# nm -A: "DIR/module.o:ADDRESS TYPE symbol", or "DIR/module.o: U symbol".
module_of='{ f = $1; sub(/:.*/, "", f); sub(/.*\//, "", f); sub(/\.o$/, "", f) }'
nm -A --defined-only "$OBJDIR"/*.o |
    awk "$module_of"' $2 ~ /^[TDBRVW]$/ { print $3, f }' | sort -u >"$tmpd/defs"
nm -A -u "$OBJDIR"/*.o | awk "$module_of"' { print f, $NF }' | sort -u >"$tmpd/uses"
awk -v verbose=$verbose '
    FILENAME == ARGV[1] { rank[$1] = $2; next }
    FILENAME == ARGV[2] { def[$1] = def[$1] " " $2; next }
    !($1 in rank) || !($2 in def) { next }
    {
        n = split(def[$2], d, " ")
        for (i = 1; i <= n; i++) {
            if (d[i] == $1)
                continue
            edges++
            if (verbose)
                print "  " $1 " -> " d[i] " (" $2 ")"
            if (!(d[i] in rank) || rank[d[i]] >= rank[$1]) {
                print "call: " $1 " -> " d[i] " (" $2 ")"
                bad = 1
            }
        }
    }
    END { print "edges " edges + 0; exit bad }' "$tmpd/ranks" "$tmpd/defs" "$tmpd/uses" >"$tmpd/out" ||
    bad=1
grep -v '^edges ' "$tmpd/out"
edges=$(sed -n 's/^edges //p' "$tmpd/out")

n=$(echo "$layers" | wc -l)
if [ $bad -ne 0 ]; then
    echo "FAIL: src/hook goes against the order in $DOC"
    exit 1
fi
echo "ok: ${#rank[@]} modules in $n layers, $edges uses between modules, all downward"

# The check must be able to fail: with the device layer moved to the top
# (every layer uses it), the same objects must be refused.
if [ -z "${CS_LAYERS_DOC:-}" ]; then
    doc=$tmpd/doc.md
    awk '/hook-layers:begin/ {inb = 1} /hook-layers:end/ {inb = 0}
         inb && $1 == "device" {held = $0; next}
         inb && /^```$/ && held != "" && seen {print held; held = ""}
         inb && /^```$/ {seen = 1}
         {print}' "$DOC" >"$doc"
    if CS_LAYERS_DOC=$doc "$0" >/dev/null; then
        echo "FAIL: the check passed an order with the device layer on top"
        exit 1
    fi
    echo "ok: an order with the device layer on top is refused"
fi
