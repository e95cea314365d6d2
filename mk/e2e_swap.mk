# mk/e2e_swap.mk: end-to-end acceptance of memory oversubscription by swap
# (issue 5) on the simulated GPU: a real cushared, several cs_job processes
# (and cs_graphjob processes: graphs, issue 19) under the real
# libcushare.so, and swap_probe, a small driver-API helper
# (free device memory without the hook; the poison checks). The scripts are
# tests/e2e/swap_*.sh; tests/e2e/swap_lib.sh is their common part.

SWAP_TDIR  := $(BUILD)/tests/e2e
SWAP_PROBE := $(SWAP_TDIR)/swap_probe

$(SWAP_PROBE): $(OBJ)/tests/e2e/swap_probe.o $(FCK_OBJS) | $(FC_LINK)
	@mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(FC_PROG_LIBS) -ldl

# The scripts run the daemon, the tools, the hook and cs_job of the tree.
$(SWAP_PROBE): | $(CUSHARED) $(BUILD)/bin/cusharectl $(HOOK_LIB) $(CS_JOB) $(CS_GRAPHJOB)

TEST_BINS += $(SWAP_PROBE)

# nvml_probe (issue 22): NVML as nvidia-smi and pynvml load it, under the
# hook, against the simulated NVML of the device plugin's tests.
NVML_PROBE := $(SWAP_TDIR)/nvml_probe
$(NVML_PROBE): $(OBJ)/tests/e2e/nvml_probe.o $(FCK_OBJS) | $(FC_LINK)
	@mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(FC_PROG_LIBS) -ldl
$(NVML_PROBE): | $(CUSHARED) $(BUILD)/bin/cusharectl $(HOOK_LIB) $(CS_JOB) $(BUILD)/tests/k8s/nvml/libnvidia-ml.so.1
TEST_BINS += $(NVML_PROBE)
