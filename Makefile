# cushare: share one NVIDIA GPU among many CUDA processes.
#
#   make            optimized build of everything under build/
#   make test       every test: optimized, then AddressSanitizer+UBSan, then
#                   ThreadSanitizer for the daemon and the hook's threading;
#                   beside them at SCHED_IDLE, the idle lane (the lease model)
#   make demo       the daemon and two jobs sharing the GPU (the simulated GPU
#                   when no NVIDIA driver is present)
#   make print-tests  the tests `make check` runs in this tree (BUILD, SAN),
#                   in order, from tests/registry
#   make install PREFIX=/usr/local
#   make clean
#
# Each module keeps its rules in mk/<module>.mk and appends its outputs to
# ALL_TARGETS and its test programs to TEST_BINS. Which tests each tree runs,
# and why not the others, is tests/registry (read by mk/tests.mk).

.DEFAULT_GOAL := all
# Builds use every core unless the caller chose a -j; the suites still run
# one test at a time (tests/run-suite.sh), so timing tests are not crowded.
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

.PHONY: all test check check-idle build-tests demo install clean deps

all: $(DEPS_STAMP) $(ALL_TARGETS)

# `check` runs the tests tests/registry lists for one build tree (BUILD, SAN);
# `build-tests` builds what they need.
build-tests: all $(TEST_BINS)

check: build-tests
	@tests=$$($(TEST_LIST)) && \
	  CUSHARE_BUILD=$(BUILD) CUSHARE_SAN=$(SAN) SAN_RUNTIME=$(SAN_RUNTIME) tests/run-suite.sh $$tests

# `test` is tests/make-test.sh: the three trees' suites in turn (it stops at
# the first failing one), with the sanitizer trees built and the idle lane
# run beside them on the CPU the suites leave idle.
test: $(DEPS_STAMP)
	@MAKE="$(MAKE)" tests/make-test.sh

# `check-idle` runs tests/registry's idle rows (CPU-bound, no timing bound:
# the lease model) in the optimized tree; make test runs it under SCHED_IDLE
# beside the suites. The runner's per-test wall limit is raised: the lane
# may wait for CPU, and its tests limit their CPU seconds themselves.
check-idle:
	@tests=$$($(MAKE) --no-print-directory -s print-tests TEST_TREE=idle) && \
	  CUSHARE_BUILD=build TEST_TIME_LIMIT=3600 tests/run-suite.sh $$tests

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
