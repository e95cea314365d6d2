# mk/bench.mk: benchmark programs (bench/). Built by `make` so that a GPU
# machine can run them from a copied build tree; run by bench/*/run.sh.
CS_OVERHEAD := $(BUILD)/bin/cs_overhead

$(CS_OVERHEAD): $(OBJ)/bench/overhead/cs_overhead.o $(FCK_OBJS) | $(FC_LINK)
	@mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(FC_PROG_LIBS)

ALL_TARGETS += $(CS_OVERHEAD)
