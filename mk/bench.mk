# mk/bench.mk: benchmark programs (bench/). Built by `make` so that a GPU
# machine can run them from a copied build tree; run by bench/*/run.sh.
CS_OVERHEAD := $(BUILD)/bin/cs_overhead

$(CS_OVERHEAD): $(OBJ)/bench/overhead/cs_overhead.o $(FCK_OBJS) | $(FC_LINK)
	@mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(FC_PROG_LIBS)

ALL_TARGETS += $(CS_OVERHEAD)

CS_PINBENCH  := $(BUILD)/bin/cs_pinbench
CS_SWAPBENCH := $(BUILD)/bin/cs_swapbench

$(CS_PINBENCH): $(OBJ)/bench/swap/cs_pinbench.o | $(FC_LINK)
	@mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(FC_PROG_LIBS)

$(CS_SWAPBENCH): $(OBJ)/bench/swap/cs_swapbench.o $(OBJ)/tests/hook/mock_sched.o $(FCK_OBJS) $(COMMON_LIB) | $(FC_LINK)
	@mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(FC_PROG_LIBS) -ldl

ALL_TARGETS += $(CS_PINBENCH) $(CS_SWAPBENCH)
