#!/bin/sh
# libcushare.so exports only the driver entry points it wraps, the NVML
# entry points it answers for (classed job, filtered or refused in
# src/hook/nvml_classes.txt), the client API, dlsym and ioctl (under glibc's base version, the one libcuda binds to), depends on libc alone (plus the sanitizer runtime in
# sanitizer builds), and every wrapper listed in hook_symbols.h is there.
set -eu
cd "$(dirname "$0")/../.."
lib=${CUSHARE_BUILD:-build}/lib/libcushare.so
fail=0
bad=$(nm -D --defined-only "$lib" | awk '{print $3}' | sed 's/@.*//' |
      grep -vE '^(cu[A-Z][A-Za-z0-9_]*|cushare_[a-z_]+|dlsym|ioctl|GLIBC_[0-9.]+|CUSHARE_[0-9.]+)$' || true)
nvml_ok=$(awk '!/^#/ && NF >= 2 && $2 != "pass" {print $1}' src/hook/nvml_classes.txt)
bad=$(for s in $bad; do printf '%s\n' "$nvml_ok" | grep -qx "$s" || echo "$s"; done)
if [ -n "$bad" ]; then echo "unexpected exports: $bad"; fail=1; fi
missing=$(for s in $nvml_ok; do nm -D --defined-only "$lib" | awk '{print $3}' | grep -qx "$s@@CUSHARE_1.0" || echo "$s"; done)
if [ -n "$missing" ]; then echo "NVML wrappers not exported: $missing"; fail=1; fi
case $(uname -m) in aarch64) base=GLIBC_2.17 ;; *) base=GLIBC_2.2.5 ;; esac
for v in GLIBC_2.34 $base; do
    nm -D --defined-only "$lib" | grep -q "dlsym@.*$v" || { echo "dlsym@$v is not exported"; fail=1; }
done
# libcuda's reference is ioctl@$base: only that version (the default one) binds it.
nm -D --defined-only "$lib" | grep -q " ioctl@@$base\$" || { echo "ioctl@@$base is not exported"; fail=1; }
missing=$(sed -n 's/^CS_HOOK(\(.*\))$/\1/p' src/hook/hook_symbols.h | while read -r s; do
    nm -D --defined-only "$lib" | awk '{print $3}' | grep -qx "$s@@CUSHARE_1.0" || echo "$s"; done)
if [ -n "$missing" ]; then echo "wrappers not exported: $missing"; fail=1; fi
# Sanitizer builds add their runtimes; nothing else is allowed.
allowed='libc\.so\.6'
[ -n "${CUSHARE_SAN:-}" ] && allowed="$allowed|libasan\.so.*|libubsan\.so.*|libtsan\.so.*"
needed=$(readelf -d "$lib" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | grep -vE "^($allowed)\$" || true)
if [ -n "$needed" ]; then echo "unexpected dependencies: $needed"; fail=1; fi
[ $fail -eq 0 ] && echo "exports: $(nm -D --defined-only "$lib" | grep -c ' T ') functions, all expected"
exit $fail
