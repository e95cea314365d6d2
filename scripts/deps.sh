#!/bin/sh
# Check (and as root, install) the Debian packages cushare builds against.
# Only the daemon, the tools and the tests use them: the injected library
# depends on libc, libdl and libpthread alone.
set -eu

# header -> package
need=""
check() { [ -e "$1" ] || need="$need $2"; }
check /usr/include/cmocka.h      libcmocka-dev      # unit-test framework
check /usr/include/microhttpd.h  libmicrohttpd-dev  # Prometheus metrics endpoint
check /usr/include/ini.h         libinih-dev        # cushared --config parser
check /usr/include/grpc/grpc.h   libgrpc-dev        # device plugin: kubelet gRPC API
check /usr/include/protobuf-c/protobuf-c.h libprotobuf-c-dev # device plugin: messages
command -v protoc-c >/dev/null 2>&1 || need="$need protobuf-c-compiler"
# manifests check: any python3 with PyYAML (the one on PATH, or Debian's)
python3 -c 'import yaml' 2>/dev/null || /usr/bin/python3 -c 'import yaml' 2>/dev/null ||
    need="$need python3-yaml"
command -v pkg-config >/dev/null 2>&1 || need="$need pkg-config"
command -v spin >/dev/null 2>&1 || need="$need spin" # the lease model (model/check.sh)
# NVML's entry points for scripts/gen-nvml.py when no nvml.h is installed
# (the CUDA toolkit's is optional): Debian's bindings generated from it.
ls /usr/share/cargo/registry/nvml-wrapper-sys-*/src/bindings.rs >/dev/null 2>&1 ||
    [ -e /usr/local/cuda/include/nvml.h ] || need="$need librust-nvml-wrapper-sys-dev"

[ -z "$need" ] && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "deps: installing$need" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends $need >/dev/null 2>&1 || {
        apt-get update >/dev/null 2>&1 || true
        apt-get install -y --no-install-recommends $need
    }
    exit 0
fi
echo "deps: missing packages. Install them with:" >&2
echo "    sudo apt-get install -y$need" >&2
exit 1
