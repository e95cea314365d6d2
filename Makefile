# cushare: share one NVIDIA GPU among many CUDA processes.
#
#   make            optimized build of everything under build/
#   make test       every test: optimized, then AddressSanitizer+UBSan, then
#                   ThreadSanitizer for the daemon and the hook's threading
#   make demo       the daemon and two jobs sharing the GPU (the simulated GPU
#                   when no NVIDIA driver is present)
#   make print-tests  the tests `make check` runs in this tree (BUILD, SAN),
#                   in order, from tests/registry
#   make model-verify  every Spin check of the lease model (model/check_*.sh)
#                   searched again, and model/verified rewritten on a full
#                   pass (run it after changing model/ or Spin; docs/model.md)
#   make install PREFIX=/usr/local
#   make clean
#
# Each module keeps its rules in mk/<module>.mk and appends its outputs to
# ALL_TARGETS and its test programs to TEST_BINS. Which tests each tree runs,
# and why not the others, is tests/registry (read by mk/tests.mk).

.DEFAULT_GOAL := all
# Builds use every core unless the caller chose a -j; the suites still run
# one test at a time (tests/run-suite.sh), so timing tests are not crowded
# (but the ThreadSanitizer tree's: SUITE_JOBS, below).
ifeq ($(filter -j%,$(MAKEFLAGS)),)
MAKEFLAGS += -j$(shell nproc)
endif
.SUFFIXES:
.DELETE_ON_ERROR:

ALL_TARGETS :=
TEST_BINS   :=

include mk/config.mk
include mk/deps.mk
include mk/common.mk
include mk/fakecuda.mk
include mk/hook.mk
include mk/sched.mk
include mk/tools.mk
include mk/k8s.mk
include mk/bench.mk
include mk/e2e_swap.mk
include mk/e2e.mk
include mk/tests.mk

PREFIX ?= /usr/local
DESTDIR ?=

.PHONY: all test check build-tests demo install clean deps model-verify

all: $(DEPS_STAMP) $(ALL_TARGETS)

# `check` runs the tests tests/registry lists for one build tree (BUILD, SAN);
# `build-tests` builds what they need.
build-tests: all $(TEST_BINS)

# Tests run one at a time, so that timing bounds are not crowded, except in
# the ThreadSanitizer tree, whose tests check no tight timing (its runs are
# several times slower whatever the load; e2e_kill and e2e_lcgate check
# their bounds outside it only, and hook_idle's has 2.5 times the period):
# four at a time there, which on CI's 2 cores took its suite from 231 s to
# 83 s, the slowest test (hook_swap, 45-47 s) no slower. The rows marked
# `early` (PART=early: no timing at all, tests/registry) run two at a time.
# SUITE_JOBS=N overrides these.
SUITE_JOBS ?= $(if $(filter tsan,$(SAN)),4,$(if $(filter early,$(PART)),2,1))

check: build-tests
	@tests=$$($(TEST_LIST)) && \
	  CUSHARE_BUILD=$(BUILD) CUSHARE_SAN=$(SAN) SAN_RUNTIME=$(SAN_RUNTIME) SUITE_JOBS=$(SUITE_JOBS) \
	  SUITE_PART=$(PART) tests/run-suite.sh $$tests

# `test` runs the three trees and fails if any fails. The sanitizer trees
# are built at nice 19 while the optimized suite runs: that suite mostly
# waits on the simulated GPU (on CI's 2 cores it keeps about a third of the
# machine busy), so the builds take the idle cores and yield them whenever
# a test wants one. The background is, in turn: the AddressSanitizer
# tree's build; that tree's rows marked `early` in tests/registry (tests
# that check no timing: its unit programs, the fault sweep, the static
# checks; half of that suite's time); the ThreadSanitizer tree's build. The
# rest of the AddressSanitizer suite starts once the optimized suite is
# done and that tree is built, beside whatever of the background is left;
# the ThreadSanitizer suite runs last, alone, once the background is done.
# (Until 2026-12-02 the late AddressSanitizer rows waited for the early
# ones, with the ThreadSanitizer build before them: the foreground stood
# idle 1-3 of its 16-18 minutes.)
# The background is one process at a time (make -j1, SUITE_JOBS=1,
# FAULTS_JOBS=1), so that it never takes more than one core from the
# timing tests: with the builds at -j2, swap_jobs' makespan came out 1.329 x
# its solo runs (then its bound was 1.3).
# Its rows get 600 s each, not run-suite's 300 (TEST_TIME_LIMIT): one
# process at a time, the fault sweep took 225 s alone and over 300 beside
# the optimized suite on a 2-core VM of 2026-12-01 whose first writes of
# fresh pages cost 1.3 ms/MiB (AddressSanitizer's runs fault in 18,000
# pages each).
# The optimized suite runs its own early rows first, two at a time, then
# the others one at a time. The background's output goes to
# build/sanitizer-build.log (shown if a build fails) and build/asan-early.log
# (shown once the background is done); build/asan-built says the
# AddressSanitizer tree is built, build/asan-early.rc how its early rows
# went (0 passed, 1 failed; 2: the build failed).
test: $(DEPS_STAMP)
	@mkdir -p build; rm -f build/asan-early.log build/asan-early.rc build/asan-built; \
	( nice -n 19 $(MAKE) -j1 --no-print-directory BUILD=build/asan SAN=asan build-tests \
	    >build/sanitizer-build.log 2>&1 || { echo 2 >build/asan-early.rc; exit 2; }; \
	  touch build/asan-built; \
	  FAULTS_JOBS=1 TEST_TIME_LIMIT=600 nice -n 19 $(MAKE) --no-print-directory BUILD=build/asan SAN=asan PART=early \
	    SUITE_JOBS=1 check >build/asan-early.log 2>&1; \
	  [ $$? -eq 0 ] && echo 0 >build/asan-early.rc || echo 1 >build/asan-early.rc; \
	  nice -n 19 $(MAKE) -j1 --no-print-directory BUILD=build/tsan SAN=tsan build-tests \
	    >>build/sanitizer-build.log 2>&1 || exit 2 ) & bg=$$!; \
	$(MAKE) --no-print-directory PART=early check && \
	  $(MAKE) --no-print-directory PART=late check; rc=$$?; \
	while [ ! -e build/asan-built ] && kill -0 $$bg 2>/dev/null; do sleep 1; done; \
	arc=1; \
	if [ $$rc -eq 0 ] && [ -e build/asan-built ]; then \
	  $(MAKE) --no-print-directory BUILD=build/asan SAN=asan PART=late check; arc=$$?; \
	fi; \
	wait $$bg; bgrc=$$?; \
	[ -s build/asan-early.log ] && cat build/asan-early.log; \
	if [ ! -e build/asan-built ] || [ $$bgrc -eq 2 ]; then \
	  echo "make test: building the sanitizer trees failed (build/sanitizer-build.log):"; \
	  tail -n 40 build/sanitizer-build.log; exit 1; \
	fi; \
	[ $$rc -eq 0 ] && [ $$arc -eq 0 ] && [ "$$(cat build/asan-early.rc)" = 0 ] || exit 1; \
	$(MAKE) --no-print-directory BUILD=build/tsan SAN=tsan check && \
	echo "make test: all suites passed"

# The checks' lines, each recorded by the check itself on a full pass; the
# file's comment lines are kept.
model-verify:
	@rm -f model/verified.new; \
	for s in model/check_*.sh; do \
	  echo "== $$s"; \
	  MODEL_RECHECK=1 MODEL_RECORD=$(CURDIR)/model/verified.new $$s || { rm -f model/verified.new; exit 1; }; \
	done; \
	{ grep '^#' model/verified 2>/dev/null; cat model/verified.new; } >model/verified.tmp && \
	  mv model/verified.tmp model/verified && rm -f model/verified.new && \
	  echo "model/verified: $$(grep -vc '^#' model/verified) checks recorded"

demo: all
	@scripts/demo.sh $(BUILD)

install: all
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/include
	install -m 0755 $(BUILD)/lib/libcushare.so $(DESTDIR)$(PREFIX)/lib/libcushare.so
	install -m 0755 $(BUILD)/bin/cushared $(BUILD)/bin/cusharectl $(BUILD)/bin/cushare-run $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 include/cushare.h $(DESTDIR)$(PREFIX)/include/cushare.h

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
