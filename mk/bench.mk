# mk/bench.mk: benchmark programs (bench/). Built by `make` so that a GPU
# machine can run them from a copied build tree; run by bench/*/run.sh.
CS_OVERHEAD := $(BUILD)/bin/cs_overhead

$(CS_OVERHEAD): $(OBJ)/bench/overhead/cs_overhead.o $(FCK_OBJS) | $(FC_LINK)
	@mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(FC_PROG_LIBS)

ALL_TARGETS += $(CS_OVERHEAD)

CS_PINBENCH  := $(BUILD)/bin/cs_pinbench
CS_SWAPBENCH := $(BUILD)/bin/cs_swapbench
CS_PINCONTEND := $(BUILD)/bin/cs_pincontend

$(CS_PINBENCH): $(OBJ)/bench/swap/cs_pinbench.o | $(FC_LINK)
	@mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(FC_PROG_LIBS)

$(CS_SWAPBENCH): $(OBJ)/bench/swap/cs_swapbench.o $(OBJ)/tests/hook/mock_sched.o $(FCK_OBJS) $(COMMON_LIB) | $(FC_LINK)
	@mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(FC_PROG_LIBS) -ldl

$(CS_PINCONTEND): $(OBJ)/bench/swap/cs_pincontend.o | $(FC_LINK)
	@mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(FC_PROG_LIBS) -pthread

ALL_TARGETS += $(CS_PINBENCH) $(CS_SWAPBENCH) $(CS_PINCONTEND)

# bench/gpu/addr_probe: the real driver's answers for addresses (issue 19's
# ground truth), rerun by bench/gpu/run.sh's graphs section.
ADDR_PROBE := $(BUILD)/bin/addr_probe
$(ADDR_PROBE): $(OBJ)/bench/gpu/addr_probe.o | $(FC_LINK)
	@mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(FC_PROG_LIBS)

ALL_TARGETS += $(ADDR_PROBE)

# bench/swap/cs_allocwait: a tenant's allocations timed while the pool
# grows (bench/gpu/run.sh's pace section, issue 20).
CS_ALLOCWAIT := $(BUILD)/bin/cs_allocwait
$(CS_ALLOCWAIT): $(OBJ)/bench/swap/cs_allocwait.o | $(FC_LINK)
	@mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(FC_PROG_LIBS)

ALL_TARGETS += $(CS_ALLOCWAIT)

# bench/lc: the LC/BE latency benchmark (bench/lc/run.sh on a GPU; smoked on
# the simulated driver by bench/lc/smoke.sh) and nvtrace, the recorder of
# the RM ioctls libcuda makes (what tests/hook/hook_tsg_580.trace came from).
CS_LCBENCH  := $(BUILD)/bin/cs_lcbench
NVTRACE_LIB := $(BUILD)/lib/libnvtrace.so
NVTRACE_MAP := bench/lc/nvtrace-$(shell uname -m).map

$(CS_LCBENCH): $(OBJ)/bench/lc/cs_lcbench.o $(FCK_OBJS) | $(FC_LINK)
	@mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(FC_PROG_LIBS) -lm

$(NVTRACE_LIB): bench/lc/nvtrace.c src/hook/nvrm.h $(NVTRACE_MAP)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -shared -o $@ $< $(LDFLAGS) -Wl,--version-script=$(NVTRACE_MAP) -ldl

ALL_TARGETS += $(CS_LCBENCH) $(NVTRACE_LIB)
