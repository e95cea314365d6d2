# mk/hook.mk: libcushare.so, the injected interposer.
#
# Linked with -Bsymbolic-functions so that a wrapper's address taken inside
# the library (the real-pointer -> hook map) is always our own definition,
# with a version script exporting only the driver entry points, the client
# API and dlsym, and with nothing but libc/libdl/libpthread (checked below).
HOOK_SRCS := $(wildcard src/hook/*.c) src/common/log.c src/common/util.c src/common/proto.c \
             src/common/fsafe.c
HOOK_OBJS := $(patsubst %.c,$(OBJ)/hook/%.o,$(HOOK_SRCS))
HOOK_LIB  := $(BUILD)/lib/libcushare.so
HOOK_ARCH := $(shell uname -m)
HOOK_MAP  := src/hook/cushare-$(HOOK_ARCH).map

# The hook's own copy of the objects (a separate directory: same flags
# today, but the hook must never pick up daemon-only code by accident).
$(OBJ)/hook/%.o: %.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

$(HOOK_LIB): $(HOOK_OBJS) $(HOOK_MAP)
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ $(HOOK_OBJS) $(LDFLAGS) -Wl,--version-script=$(HOOK_MAP) \
	  -Wl,-Bsymbolic-functions -Wl,-z,now -Wl,-z,relro -Wl,--no-undefined -ldl -lpthread
	@bad=$$(readelf -d $@ | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | \
	  grep -vE '^(libc\.so|libdl\.so|libpthread\.so|ld-linux|libasan|libubsan|libtsan)'); \
	  if [ -n "$$bad" ]; then echo "$@ must depend on libc/libdl/libpthread only; found: $$bad" >&2; rm -f $@; exit 1; fi

ALL_TARGETS += $(HOOK_LIB)

# ---- tests/hook ---------------------------------------------------------------
# Each test program re-executes itself under libcushare.so (hooktest.c) and
# runs against the simulated driver; scheduler behaviour comes from an
# in-process mock (mock_sched.c) or a real cushared.
HOOK_TDIR   := $(BUILD)/tests/hook
HOOK_TUTIL  := $(OBJ)/tests/hook/hooktest.o $(OBJ)/tests/hook/mock_sched.o $(FCK_OBJS)
HOOK_TESTS  := hook_routes hook_quota hook_swap hook_peer hook_addr hook_gate_stress hook_fork hook_pinkeep hook_pinpiece hook_idle hook_ctxroom \
               hook_tsg_preload hook_hostguard hook_oldcaps hook_ipc hook_vmm hook_terms \
               hook_refused
HOOK_TBINS  := $(HOOK_TESTS:%=$(HOOK_TDIR)/%)

$(HOOK_TBINS) $(HOOK_TDIR)/hook_faults: $(HOOK_TDIR)/%: $(OBJ)/tests/hook/%.o $(HOOK_TUTIL) $(COMMON_LIB) | $(FC_LINK) $(HOOK_LIB)
	@mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $(filter %.o %.a,$^) $(LDFLAGS) $(FC_PROG_LIBS) -lcmocka -ldl

# RTLD_NEXT through the dlsym override: two libraries defining one symbol.
$(HOOK_TDIR)/librtld%.so: tests/hook/rtld_next_lib.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -DWHICH="'$*'" -shared -o $@ $< $(LDFLAGS) -ldl
$(HOOK_TDIR)/hook_rtld_next: $(OBJ)/tests/hook/hook_rtld_next.o $(HOOK_TUTIL) $(COMMON_LIB) $(HOOK_TDIR)/librtldA.so $(HOOK_TDIR)/librtldB.so | $(FC_LINK) $(HOOK_LIB)
	$(Q)$(CC) -o $@ $(filter %.o %.a,$^) -L$(HOOK_TDIR) -Wl,-rpath,'$$ORIGIN' -Wl,--no-as-needed \
	  -lrtldA -lrtldB $(LDFLAGS) $(FC_PROG_LIBS) -lcmocka -ldl

# Channel-group control (tsg.c) against a model of the RM replaying a
# recorded ioctl sequence: linked directly, with the model standing in for
# the real ioctl (hooks_ioctl.c is not linked), no preload. Threaded.
$(HOOK_TDIR)/hook_tsg: $(OBJ)/tests/hook/hook_tsg.o $(OBJ)/hook/src/hook/tsg.o \
                       $(OBJ)/hook/src/hook/config.o $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) -lcmocka

# The hook's settings against hostile environments: config.c linked in
# directly, no preload.
$(HOOK_TDIR)/hook_config: $(OBJ)/tests/hook/hook_config.o $(OBJ)/hook/src/hook/config.o \
                          $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) -lcmocka

# CUSHARE_REAL_LIBCUDA naming the hook (reallib.sh): a probe that links
# libcuda.so.1 by name only, so that the name can lead to the hook itself.
$(HOOK_TDIR)/reallib_probe: $(OBJ)/tests/hook/reallib_probe.o | $(FC_LINK) $(HOOK_LIB) $(CS_JOB)
	@mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(FC_PROG_LIBS) -ldl

TEST_BINS  += $(HOOK_TBINS) $(HOOK_TDIR)/hook_rtld_next $(HOOK_TDIR)/hook_tsg $(HOOK_TDIR)/hook_config \
              $(HOOK_TDIR)/reallib_probe $(HOOK_TDIR)/hook_faults
