#!/usr/bin/env bash
# tests/make-test.sh: `make test`. Three suites one after the other, each one
# test at a time (tests/run-suite.sh) so that timing tests are not crowded:
# the optimized tree's, then AddressSanitizer+UBSan's, then ThreadSanitizer's;
# it stops at the first that fails. Beside them, from the start, two things
# that only use CPU the suites leave idle:
#
#  - the sanitizer trees' builds, at nice 19 (the optimized suite mostly
#    waits on the simulated GPU: on CI's 2 cores it keeps about a third of
#    the machine busy); their output goes to build/sanitizer-build.log, shown
#    if they fail;
#  - the idle lane (tests/registry's `idle` rows: CPU-bound checks with no
#    timing bound, Spin's searches), under the SCHED_IDLE policy: the kernel
#    runs it only on a core nothing else wants and preempts it at once when
#    a test's process wakes (a nice 19 task could still hold a core for its
#    slice). Its limits are CPU seconds, not wall time (model/check.sh), so a
#    starved lane is slow, never failed. Its output is build/idle-suite.log,
#    printed at the end; make test waits for it.
#
# Environment: MAKE (the make that runs us).
set -u
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}
m() { $MAKE --no-print-directory "$@"; }

mkdir -p build
m build-tests || exit 1

# The idle lane in a session of its own, so that an early exit stops it and
# everything it started (Spin's pan processes) with one signal.
rm -f build/idle-suite.rc
setsid bash -c "chrt --idle -p 0 \$\$ >/dev/null 2>&1 || renice -n 19 -p \$\$ >/dev/null
    $MAKE --no-print-directory check-idle >build/idle-suite.log 2>&1
    echo \$? >build/idle-suite.rc" </dev/null &
idle=$!
( nice -n 19 $MAKE --no-print-directory BUILD=build/asan SAN=asan build-tests &&
  nice -n 19 $MAKE --no-print-directory BUILD=build/tsan SAN=tsan build-tests ) \
  >build/sanitizer-build.log 2>&1 &
builds=$!
trap 'kill -- -$idle 2>/dev/null; kill $builds 2>/dev/null' EXIT

m check
rc=$?
if ! wait $builds; then
    echo "make test: building the sanitizer trees failed (build/sanitizer-build.log):"
    tail -n 40 build/sanitizer-build.log
    exit 1
fi
[ $rc -eq 0 ] || exit $rc
m BUILD=build/asan SAN=asan check || exit 1
m BUILD=build/tsan SAN=tsan check || exit 1

echo "make test: waiting for the idle lane (build/idle-suite.log)"
wait $idle
trap - EXIT
cat build/idle-suite.log
[ "$(cat build/idle-suite.rc 2>/dev/null)" = 0 ] || {
    echo "make test: the idle lane failed"
    exit 1
}
echo "make test: all suites passed"
