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

# Optional: installed as root, but nothing fails without them. The tests
# that use them say SKIP (exit 77, tests/run-suite.sh) when they are absent.
want=""
# tests/e2e/prometheus_check.sh: a real Prometheus scraping cushared; promtool
# checks the page, the alerting rules and the Grafana dashboard's queries.
[ -x /usr/bin/prometheus ] && [ -x /usr/bin/promtool ] || want="$want prometheus"

[ -z "$need$want" ] && exit 0

# apt-get install, with an update first if the package lists are stale.
apt_install() {
    apt-get install -y --no-install-recommends "$@" >/dev/null 2>&1 || {
        apt-get update >/dev/null 2>&1 || true
        apt-get install -y --no-install-recommends "$@"
    }
}

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    if [ -n "$need" ]; then
        echo "deps: installing$need" >&2
        apt_install $need
    fi
    if [ -n "$want" ]; then
        echo "deps: installing$want (optional)" >&2
        # Debian's prometheus package starts a node-wide server on :9090; the
        # test runs its own. policy-rc.d (Docker images have one) keeps the
        # package's service from starting.
        rcd=/usr/sbin/policy-rc.d
        ours=""
        if [ ! -e $rcd ]; then
            printf '#!/bin/sh\nexit 101\n' >$rcd && chmod 755 $rcd && ours=1
        fi
        apt_install $want || echo "deps: could not install$want; the tests that need it will SKIP" >&2
        [ -z "$ours" ] || rm -f $rcd
    fi
    exit 0
fi
[ -n "$want" ] &&
    echo "deps: optional, for tests that otherwise SKIP: sudo apt-get install -y$want" >&2
[ -z "$need" ] && exit 0
echo "deps: missing packages. Install them with:" >&2
echo "    sudo apt-get install -y$need" >&2
exit 1
