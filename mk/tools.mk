# mk/tools.mk: cusharectl and cushare-run (src/tools). Their tests live in
# tests/sched/test_daemon.c, next to the daemon they talk to.
TOOLS_OBJS  := $(OBJ)/src/tools/ctl_client.o $(OBJ)/src/tools/ctl_print.o
CUSHARECTL  := $(BUILD)/bin/cusharectl
CUSHARE_RUN := $(BUILD)/bin/cushare-run

$(CUSHARECTL): $(OBJ)/src/tools/cusharectl.o $(TOOLS_OBJS) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS)

$(CUSHARE_RUN): $(OBJ)/src/tools/cushare_run.o $(OBJ)/src/tools/ctl_client.o $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS)

ALL_TARGETS += $(CUSHARECTL) $(CUSHARE_RUN)
