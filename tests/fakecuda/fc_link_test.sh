#!/usr/bin/env bash
# fc_link_test.sh: the simulated driver as a shared object. SONAME
# libcuda.so.1 with a libcuda.so link beside it; depends on libc,
# libpthread and librt only (and the sanitizer runtime in sanitizer
# trees); exports cu* and nothing else, every entry point of the generated
# API table among them; the implemented ones are strong definitions that
# override the weak NOT_SUPPORTED stubs at link time.
set -euo pipefail
B=${CUSHARE_BUILD:-build}
LIB=$B/fakecuda/libcuda.so.1
TABLE=src/common/cuda_api_table.h
fail() { echo "FAIL: $*" >&2; exit 1; }

[ -f "$LIB" ] || fail "$LIB missing"
[ "$(readlink "$B/fakecuda/libcuda.so")" = libcuda.so.1 ] || fail "libcuda.so is not a link to libcuda.so.1"

soname=$(readelf -d "$LIB" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ "$soname" = libcuda.so.1 ] || fail "SONAME is '$soname'"

extra=$(readelf -d "$LIB" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' |
        grep -vE '^(libc\.so|libpthread\.so|librt\.so|ld-linux|libasan|libubsan|libtsan)' || true)
[ -z "$extra" ] || fail "unexpected dependencies: $extra"

defined=$(nm -D --defined-only "$LIB" | awk '{ print $2, $3 }')
others=$(echo "$defined" | awk '$2 !~ /^cu/' )
[ -z "$others" ] || fail "exports beyond cu*: $others"

# Every entry point of the API table is exported.
want=$(sed -n 's/^CS_API_SYMBOL(\(.*\))$/\1/p' "$TABLE" | sort -u)
have=$(echo "$defined" | awk '{ print $2 }' | sort -u)
missing=$(comm -23 <(echo "$want") <(echo "$have"))
[ -z "$missing" ] || fail "not exported: $missing"
[ "$(echo "$want" | wc -l)" -gt 600 ] || fail "the API table looks truncated"

kind() { echo "$defined" | awk -v s="$1" '$2 == s { print $1 }'; }
for s in cuInit cuMemAlloc_v2 cuMemcpyHtoD_v2_ptds cuLaunchKernel cuLaunchKernel_ptsz \
         cuGetProcAddress cuGetProcAddress_v2 cuMemMap cuStreamBeginCapture_v2_ptsz \
         cuGraphLaunch cuGraphAddKernelNode_v2 cuTexObjectCreate cuCtxSynchronize_v2 \
         cuGetExportTable; do
    [ "$(kind "$s")" = T ] || fail "$s is not a strong definition ($(kind "$s"))"
done
for s in cuArrayCreate_v2 cuTexRefSetAddress_v2 cuIpcOpenMemHandle_v2 cuGraphAddHostNode; do
    [ "$(kind "$s")" = W ] || fail "$s should be a weak stub ($(kind "$s"))"
done
strong=$(echo "$defined" | awk '$1 == "T"' | wc -l)
echo "fc_link_test: ok ($strong entry points implemented, $(echo "$want" | wc -l) exported)"
