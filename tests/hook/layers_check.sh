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
defs=$(mktemp)
trap 'rm -f "$defs"' EXIT
for o in "$OBJDIR"/*.o; do
    m=$(basename "$o" .o)
    nm --defined-only "$o" | awk -v m="$m" '$2 ~ /^[TDBRVWtdbr]$/ && $2 ~ /[A-Z]/ {print $3, m}'
done | sort -u >"$defs"

edges=0
for o in "$OBJDIR"/*.o; do
    m=$(basename "$o" .o)
    [ -n "${rank[$m]:-}" ] || continue
    while read -r sym def; do
        [ "$def" = "$m" ] && continue
        edges=$((edges + 1))
        [ $verbose = 1 ] && echo "  $m -> $def ($sym)"
        if [ -z "${rank[$def]:-}" ] || [ "${rank[$def]}" -ge "${rank[$m]}" ]; then
            echo "call: $m -> $def ($sym)"
            bad=1
        fi
    done < <(nm -u "$o" | awk '{print $2}' | sort -u | join - "$defs")
done

n=$(echo "$layers" | wc -l)
if [ $bad -ne 0 ]; then
    echo "FAIL: src/hook goes against the order in $DOC"
    exit 1
fi
echo "ok: ${#rank[@]} modules in $n layers, $edges uses between modules, all downward"

# The check must be able to fail: with the device layer moved to the top
# (every layer uses it), the same objects must be refused.
if [ -z "${CS_LAYERS_DOC:-}" ]; then
    doc=$(mktemp)
    trap 'rm -f "$defs" "$doc"' EXIT
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
