# mk/common.mk: src/common, linked into the hook, the daemon and the tools.
COMMON_SRCS := $(wildcard src/common/*.c)
COMMON_OBJS := $(COMMON_SRCS:%.c=$(OBJ)/%.o)
COMMON_LIB  := $(BUILD)/lib/libcscommon.a

$(COMMON_LIB): $(COMMON_OBJS)
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

# ---- tests/common --------------------------------------------------------------
# fsafe.c's checks and refusals (the cases needing another owner run as root).
CM_TDIR := $(BUILD)/tests/common
$(CM_TDIR)/test_fsafe: $(OBJ)/tests/common/test_fsafe.o $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) -lcmocka

TEST_BINS += $(CM_TDIR)/test_fsafe
