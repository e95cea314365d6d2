# mk/e2e_swap.mk: end-to-end acceptance of memory oversubscription by swap
# (issue 5) on the simulated GPU: a real cushared, several cs_job processes
# under the real libcushare.so, and swap_probe, a small driver-API helper
# (free device memory without the hook; the poison checks). The scripts are
# tests/e2e/swap_*.sh; tests/e2e/swap_lib.sh is their common part.

SWAP_TDIR  := $(BUILD)/tests/e2e
SWAP_PROBE := $(SWAP_TDIR)/swap_probe

$(SWAP_PROBE): $(OBJ)/tests/e2e/swap_probe.o $(FCK_OBJS) | $(FC_LINK)
	@mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(FC_PROG_LIBS) -ldl

# The scripts run the daemon, the tools, the hook and cs_job of the tree.
$(SWAP_PROBE): | $(CUSHARED) $(BUILD)/bin/cusharectl $(HOOK_LIB) $(CS_JOB)

TEST_BINS += $(SWAP_PROBE)

# Optimized and AddressSanitizer trees (TESTS), ~55 s each on 2 cores. The
# acceptance bound on the makespan (1.15 x the solo runs) is the optimized
# tree's; the sanitizer tree runs shorter jobs and holds the ratio to 1.3
# (see swap_jobs.sh). Not under ThreadSanitizer: the hook's swap threading
# is covered there by hook_swap, the daemon's by test_daemon.
SWAP_TESTS := tests/e2e/swap_poison.sh tests/e2e/swap_kill.sh tests/e2e/swap_jobs.sh \
              tests/e2e/swap_pauses.sh tests/e2e/swap_hostreserve.sh
TESTS += $(SWAP_TESTS)
# swap_hostreserve's refused pinning and lost ACQUIRE run under ASan in
# hook_hostguard and the hook's lease tests; the optimized tree runs it.
ASAN_SKIP += tests/e2e/swap_hostreserve.sh
