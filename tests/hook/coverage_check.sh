#!/bin/sh
# Every entry point of the installed cuda.h is classified in
# src/hook/api_classes.txt, every one that takes a device address has an
# address class in src/hook/api_addresses.txt that agrees with its class,
# and the generated wrappers, symbol list and docs/coverage.md are up to
# date with them. A new CUDA release that adds a work-submitting or
# address-taking call fails here until someone decides what it is.
#
# Then the address checks are shown to fail: each case puts one wrong line
# first in a copy of api_addresses.txt (the first match wins, so it
# overrides the real one) and expects gen-hooks to refuse it for that reason.
set -eu
cd "$(dirname "$0")/../.."
python3 scripts/gen-hooks.py --check
python3 scripts/gen-nvml.py --check
tmp=$(mktemp -d "${TEST_TMP:-/tmp}/coverage.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

refuses() { # LINE MESSAGE
    { echo "$1"; cat src/hook/api_addresses.txt; } >"$tmp/addresses.txt"
    if python3 scripts/gen-hooks.py --check --addresses "$tmp/addresses.txt" 2>"$tmp/err"; then
        echo "gen-hooks accepted '$1'"
        return 1
    fi
    grep -qF "gen-hooks: $2" "$tmp/err" && return 0
    echo "'$1': expected 'gen-hooks: $2', got:"
    cat "$tmp/err"
    return 1
}

fail=0
# NVML: a memory or process entry point left without a class is refused.
grep -v '^nvmlDeviceGetMemoryInfo_v2 ' src/hook/nvml_classes.txt >"$tmp/nvml_classes.txt"
if python3 scripts/gen-nvml.py --check --classes "$tmp/nvml_classes.txt" 2>"$tmp/err"; then
    echo "gen-nvml accepted nvmlDeviceGetMemoryInfo_v2 without a class"; fail=1
elif ! grep -q "gen-nvml: nvmlDeviceGetMemoryInfo_v2 describes memory" "$tmp/err"; then
    echo "gen-nvml refused the classes for another reason:"; cat "$tmp/err"; fail=1
fi
# an address-taking call left without an address class, found through a
# CUdeviceptr, a struct holding one, kernel arguments, a struct holding them
refuses "cuMemsetD8 -" "cuMemsetD8 takes a device address but has no address class" || fail=1
refuses "cuTexObjectCreate -" "cuTexObjectCreate takes a device address but has no address class" || fail=1
refuses "cuLaunchKernel -" "cuLaunchKernel takes a device address but has no address class" || fail=1
refuses "cuGraphAddKernelNode -" "cuGraphAddKernelNode takes a device address but has no address class" || fail=1
# address classes that contradict the API's class
refuses "cuGraphAddMemcpyNode mapping" "cuGraphAddMemcpyNode has address class mapping but class placed" || fail=1
refuses "cuGraphAddKernelNode placed" "cuGraphAddKernelNode has address class placed but class exempt" || fail=1
refuses "cuGraphAddMemsetNode placed" "cuGraphAddMemsetNode has address class placed but class retried" || fail=1
refuses "cuTexObjectCreate work" "cuTexObjectCreate has address class work but class passthrough" || fail=1
refuses "cuMemcpyDtoD mapping" "cuMemcpyDtoD is gated but has address class mapping" || fail=1
refuses "cuTexObjectCreate answered" "cuTexObjectCreate has address class answered but is not hooked" || fail=1
refuses "cuPointerSetAttribute unchecked" "cuPointerSetAttribute is retried but has address class unchecked" || fail=1
refuses "cuCtxSynchronize unchecked" "cuCtxSynchronize takes no device address but has address class unchecked" || fail=1
[ $fail -eq 0 ] && echo "coverage: classes and address classes complete and consistent; 12 wrong address lines refused"
exit $fail
