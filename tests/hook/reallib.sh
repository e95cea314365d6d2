#!/bin/sh
# CUSHARE_REAL_LIBCUDA naming libcushare.so itself (or a copy of it) used to
# crash the job: every "real" call was a wrapper calling itself (SIGSEGV).
# The hook must say so once, naming the variable, and use libcuda.so.1; a
# job then runs correctly. And if even libcuda.so.1 resolves to the hook,
# the wrapped calls fail with CUDA_ERROR_NOT_INITIALIZED (3) and cuInit is
# not there (500, not found: the hook does not export it), without a crash.
set -eu
B=${CUSHARE_BUILD:-build}
T=${TEST_TMP:-/tmp}
hook=$(realpath "$B/lib/libcushare.so")
pre="${SAN_RUNTIME:+$SAN_RUNTIME }$hook"
probe=$B/tests/hook/reallib_probe
export CUSHARE_SOCKET=$T/nobody-listens.sock
fail() { echo "FAIL: reallib: $*"; for f in "$T"/*.err; do echo "--- $f"; cat "$f"; done; exit 1; }

# run NAME CMD...: under the hook, output in $T/NAME.out/.err; status in $T/NAME.rc
run() {
    name=$1
    shift
    set +e
    LD_PRELOAD="$pre" timeout 60 "$@" >"$T/$name.out" 2>"$T/$name.err"
    echo $? >"$T/$name.rc"
    set -e
    cat "$T/$name.out" "$T/$name.err"
}

# 1. The library itself, by its path: one error naming the variable, then
#    the simulated driver; a whole job checks its data.
CUSHARE_REAL_LIBCUDA=$hook run self "$B/bin/cs_job" --mem-mb 8 --iters 3 --kernel-ns 100000
[ "$(cat "$T/self.rc")" = 0 ] || fail "job with CUSHARE_REAL_LIBCUDA=libcushare.so: exit $(cat "$T/self.rc")"
grep -q '^cs_job: ok' "$T/self.out" || fail "job did not finish correctly"
n=$(grep -c "CUSHARE_REAL_LIBCUDA=$hook is libcushare.so, not the CUDA driver: using libcuda.so.1" "$T/self.err" || true)
[ "$n" -eq 1 ] || fail "expected one error naming CUSHARE_REAL_LIBCUDA, got $n"

# 2. A copy of the library elsewhere (its own symbols, same client API).
mkdir -p "$T/copy"
cp "$hook" "$T/copy/libcushare-copy.so"
CUSHARE_REAL_LIBCUDA=$T/copy/libcushare-copy.so run copy "$probe"
[ "$(cat "$T/copy.rc")" = 0 ] || fail "probe with a copy: exit $(cat "$T/copy.rc")"
grep -q '^cuInit=0 totalmem=0 bytes=[1-9]' "$T/copy.out" || fail "probe with a copy: $(cat "$T/copy.out")"
grep -q "libcushare-copy.so is libcushare.so, not the CUDA driver" "$T/copy.err" ||
    fail "no error for the copy"

# 3. libcuda.so.1 itself resolves to the hook: no driver at all, no crash.
mkdir -p "$T/selfdrv"
ln -sf "$hook" "$T/selfdrv/libcuda.so.1"
LD_LIBRARY_PATH=$T/selfdrv run nodrv "$probe"
[ "$(cat "$T/nodrv.rc")" = 0 ] || fail "probe without a driver: exit $(cat "$T/nodrv.rc") (crashed?)"
grep -q '^cuInit=500 totalmem=3 ' "$T/nodrv.out" ||
    fail "the driver call should fail with NOT_INITIALIZED: $(cat "$T/nodrv.out")"
grep -q "resolves to libcushare.so itself" "$T/nodrv.err" || fail "no error naming the cause"
echo "reallib: ok"
