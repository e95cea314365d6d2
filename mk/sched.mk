# mk/sched.mk: cushared (src/sched), its unit and integration tests and the
# protocol fuzzers (tests/sched, tests/fuzz).
#
# The daemon's modules go into a static library so that the unit tests, the
# integration test's helpers and the fuzzers link exactly the code the daemon
# runs. main.c alone is the program.

SCHED_LIBS := $(shell pkg-config --libs libmicrohttpd inih 2>/dev/null || echo -lmicrohttpd -linih)

SCHED_SRCS := $(filter-out src/sched/main.c,$(wildcard src/sched/*.c))
SCHED_OBJS := $(SCHED_SRCS:%.c=$(OBJ)/%.o)
SCHED_LIB  := $(BUILD)/lib/libsched.a
CUSHARED   := $(BUILD)/bin/cushared

$(SCHED_LIB): $(SCHED_OBJS)
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

$(CUSHARED): $(OBJ)/src/sched/main.o $(SCHED_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS) $(SCHED_LIBS) -lm

ALL_TARGETS += $(CUSHARED)

# ---- tests -------------------------------------------------------------------
SD_TDIR := $(BUILD)/tests/sched

# Unit tests (cmocka): pure modules, simulated time; test_endpoint and
# test_access run the server in their own process on sockets (socketpairs, or
# a scratch directory); test_pinner runs the pool's pinning thread.
SD_UNIT := test_policy test_pool test_proto test_config test_lc test_mguard test_access test_endpoint \
           test_node test_server test_pinner test_metrics test_exitwatch
$(SD_UNIT:%=$(SD_TDIR)/%): $(SD_TDIR)/%: $(OBJ)/tests/sched/%.o $(SCHED_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS) -lcmocka $(SCHED_LIBS) -lm
# GPU discovery: NVML through the device plugin's fake, the driver through
# the simulated one.
$(SD_TDIR)/test_node: | $(BUILD)/tests/k8s/nvml/libnvidia-ml.so.1 $(BUILD)/fakecuda/libcuda.so.1
# The pool's pinning thread pins through the simulated driver.
$(SD_TDIR)/test_pinner: | $(BUILD)/fakecuda/libcuda.so.1

# Integration test: real cushared, cusharectl and cushare-run processes
# driven by a scripted protocol client (tclient.c) over the real socket.
SD_ITEST_OBJS := $(OBJ)/tests/sched/test_daemon.o $(OBJ)/tests/sched/tclient.o \
                 $(OBJ)/tests/sched/jsmall.o $(OBJ)/tests/sched/thttp.o
$(SD_TDIR)/test_daemon: $(SD_ITEST_OBJS) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS) -lcmocka

# The metrics endpoint under connection floods (issue 17): a real cushared
# and the same scripted client, plus raw TCP connections.
$(SD_TDIR)/test_metrics_flood: $(OBJ)/tests/sched/test_metrics_flood.o $(OBJ)/tests/sched/tclient.o \
                               $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS) -lcmocka

# A do-nothing shared object: cushare-run's test preloads it in place of
# libcushare.so so that `env` runs clean whether or not the hook is built.
$(SD_TDIR)/libempty.so: tests/sched/empty.c
	@mkdir -p $(dir $@)
	$(CC) -shared -fPIC -o $@ $<

SD_TEST_BINS := $(SD_UNIT:%=$(SD_TDIR)/%) $(SD_TDIR)/test_daemon $(SD_TDIR)/test_metrics_flood \
                $(SD_TDIR)/libempty.so
TEST_BINS += $(SD_TEST_BINS)

# test_daemon runs the programs it tests; they must be built first.
$(SD_TDIR)/test_daemon: | $(CUSHARED) $(BUILD)/bin/cusharectl $(BUILD)/bin/cushare-run
$(SD_TDIR)/test_metrics_flood: | $(CUSHARED)

# ---- fuzzing -----------------------------------------------------------------
# libFuzzer needs clang; the fuzzers build their own instrumented copy of the
# protocol and daemon sources (never the tree's objects, whose flags differ).
FUZZ_CC    ?= clang
FUZZ_DIR   := $(BUILD)/fuzz
FUZZ_FLAGS := -g -O1 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -isystem $(CUDA_INC) \
              -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
FUZZ_SRCS  := $(COMMON_SRCS) $(SCHED_SRCS)
FUZZ_BINS  := $(FUZZ_DIR)/fuzz_proto $(FUZZ_DIR)/fuzz_dispatch $(FUZZ_DIR)/gen_seeds
HAVE_FUZZ_CC := $(shell command -v $(FUZZ_CC) >/dev/null 2>&1 && echo yes)

$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_SRCS) $(wildcard src/common/*.h src/sched/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< $(FUZZ_SRCS) $(SCHED_LIBS) -lm

# Seeds come from the codec itself (an ordinary program, no fuzzer runtime).
$(FUZZ_DIR)/gen_seeds: tests/fuzz/gen_seeds.c src/common/proto.c src/common/util.c                        $(wildcard src/common/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -g -O1 -std=c11 -D_GNU_SOURCE -Isrc -o $@ $< src/common/proto.c src/common/util.c

.PHONY: fuzz fuzz-long
fuzz: $(FUZZ_BINS)
	CUSHARE_BUILD=$(BUILD) tests/fuzz/run.sh short
fuzz-long: $(FUZZ_BINS)
	CUSHARE_BUILD=$(BUILD) tests/fuzz/run.sh long

# The optimized tree builds them for tests/fuzz/short.sh where a fuzzing
# compiler exists (tests/registry: the other trees do not run it).
ifeq ($(SAN)$(HAVE_FUZZ_CC),yes)
TEST_BINS += $(FUZZ_BINS)
endif
