#!/bin/sh
# scripts/gpu-bundle.sh [BUILD]: copies the shared libraries the daemon, the
# tools and the test programs link against (cmocka, libmicrohttpd and its
# TLS stack, inih; gRPC, abseil and protobuf-c for the device plugin and its
# test kubelet) into BUILD/gpu-libs, so that a build made here runs on a
# GPU machine that has the NVIDIA driver but not these Debian packages.
# bench/gpu/run.sh puts BUILD/gpu-libs on LD_LIBRARY_PATH for our binaries
# only. libcushare.so needs none of them (libc only).
set -eu
B=${1:-build}
dst=$B/gpu-libs
rm -rf "$dst"
mkdir -p "$dst"
for bin in "$B"/bin/cushared "$B"/bin/cusharectl "$B"/tests/hook/hook_routes \
    "$B"/bin/cushare-device-plugin "$B"/tests/k8s/tkubelet; do
    [ -e "$bin" ] || continue
    ldd "$bin" | awk '/=> \// {print $3}' | while read -r lib; do
        case "$(basename "$lib")" in
        libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libcuda.so*) ;;
        *) cp -Ln "$lib" "$dst/" ;;
        esac
    done
done
ls "$dst"
