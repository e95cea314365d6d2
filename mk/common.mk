# mk/common.mk: src/common, linked into the hook, the daemon and the tools.
COMMON_SRCS := $(wildcard src/common/*.c)
COMMON_OBJS := $(COMMON_SRCS:%.c=$(OBJ)/%.o)
COMMON_LIB  := $(BUILD)/lib/libcscommon.a

$(COMMON_LIB): $(COMMON_OBJS)
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^
