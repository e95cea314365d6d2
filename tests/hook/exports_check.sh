#!/bin/sh
# libcushare.so exports only the driver entry points it wraps, the NVML
# entry points it answers for (classed job, filtered or refused in
# src/hook/nvml_classes.txt), the client API, dlsym and ioctl (under glibc's base version, the one libcuda binds to), depends on libc alone (plus the sanitizer runtime in
# sanitizer builds), and every wrapper listed in hook_symbols.h is there.
set -eu
cd "$(dirname "$0")/../.."
lib=${CUSHARE_BUILD:-build}/lib/libcushare.so
fail=0
# The dynamic symbol table is read once, and lists are compared with one
# awk each: nm and grep per symbol checked took 22 s on a 2-core VM whose
# process starts cost 3.4 ms each (2026-12-01).
tmp=$(mktemp -d "${TEST_TMP:-/tmp}/exports.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
nm -D --defined-only "$lib" >"$tmp/dyn"
awk '{print $3}' "$tmp/dyn" >"$tmp/names"
# absent LIST FILE: the words of FILE that are not lines of LIST.
absent() { awk 'NR == FNR { x[$1] = 1; next } NF && !($1 in x)' "$1" "$2"; }
# not_exported FILE: the names of FILE not exported as NAME@@CUSHARE_1.0.
not_exported() { sed 's/$/@@CUSHARE_1.0/' "$1" | absent "$tmp/names" - | sed 's/@@CUSHARE_1.0$//'; }

awk '!/^#/ && NF >= 2 && $2 != "pass" {print $1}' src/hook/nvml_classes.txt >"$tmp/nvml_ok"
sed 's/@.*//' "$tmp/names" |
    grep -vE '^(cu[A-Z][A-Za-z0-9_]*|cushare_[a-z_]+|dlsym|ioctl|GLIBC_[0-9.]+|CUSHARE_[0-9.]+)$' \
        >"$tmp/odd" || true
bad=$(absent "$tmp/nvml_ok" "$tmp/odd")
if [ -n "$bad" ]; then echo "unexpected exports: $bad"; fail=1; fi
missing=$(not_exported "$tmp/nvml_ok")
if [ -n "$missing" ]; then echo "NVML wrappers not exported: $missing"; fail=1; fi
case $(uname -m) in aarch64) base=GLIBC_2.17 ;; *) base=GLIBC_2.2.5 ;; esac
for v in GLIBC_2.34 $base; do
    grep -q "dlsym@.*$v" "$tmp/dyn" || { echo "dlsym@$v is not exported"; fail=1; }
done
# libcuda's reference is ioctl@$base: only that version (the default one) binds it.
grep -q " ioctl@@$base\$" "$tmp/dyn" || { echo "ioctl@@$base is not exported"; fail=1; }
sed -n 's/^CS_HOOK(\(.*\))$/\1/p' src/hook/hook_symbols.h >"$tmp/hooks"
[ -s "$tmp/hooks" ] || { echo "no CS_HOOK lines in src/hook/hook_symbols.h"; fail=1; }
missing=$(not_exported "$tmp/hooks")
if [ -n "$missing" ]; then echo "wrappers not exported: $missing"; fail=1; fi
# Sanitizer builds add their runtimes; nothing else is allowed.
allowed='libc\.so\.6'
[ -n "${CUSHARE_SAN:-}" ] && allowed="$allowed|libasan\.so.*|libubsan\.so.*|libtsan\.so.*"
needed=$(readelf -d "$lib" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | grep -vE "^($allowed)\$" || true)
if [ -n "$needed" ]; then echo "unexpected dependencies: $needed"; fail=1; fi
[ $fail -eq 0 ] && echo "exports: $(grep -c ' T ' "$tmp/dyn") functions, all expected"
exit $fail
