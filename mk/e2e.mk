# mk/e2e.mk: end-to-end acceptance tests of the scheduler (issue 4) on the
# simulated GPU: a real cushared, several cs_job processes under the real
# libcushare.so, cusharectl, and the kernel trace (FAKECUDA_TRACE) as the
# ground truth. The scripts are tests/e2e/*.sh; two small C helpers do what
# a shell should not: trace analysis (trace_check) and monotonic
# timestamps, SIGKILL with a timestamp, status JSON parsing (e2e_util).
# The adversarial tests (issue 17, tests/e2e/adv_*.sh) add cs_attack, a
# hostile tenant speaking the wire protocol directly.

E2E_TDIR := $(BUILD)/tests/e2e
E2E_BINS := $(E2E_TDIR)/trace_check $(E2E_TDIR)/e2e_util $(E2E_TDIR)/cs_attack

$(E2E_TDIR)/trace_check: $(OBJ)/tests/e2e/trace_check.o
	@mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS)

$(E2E_TDIR)/e2e_util: $(OBJ)/tests/e2e/e2e_util.o $(OBJ)/tests/sched/jsmall.o
	@mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS)

$(E2E_TDIR)/cs_attack: $(OBJ)/tests/e2e/cs_attack.o $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) -ldl

# The scripts run the daemon, the tools, the hook and cs_job of the tree.
$(E2E_BINS): | $(CUSHARED) $(CUSHARECTL) $(CUSHARE_RUN) $(HOOK_LIB) $(CS_JOB)

TEST_BINS += $(E2E_BINS)

# e2e_files.sh runs its programs from a copy the test users can reach, with
# libempty.so standing in for the hook behind cushare-run.
$(E2E_BINS): | $(BUILD)/tests/sched/libempty.so
