# mk/fakecuda.mk: the simulated CUDA driver (src/fakecuda -> libcuda.so.1),
# the real-CUDA versions of its kernels (tests/kernels), the driver-API job
# program (tests/progs) and the simulator's tests (tests/fakecuda).
#
# The library links libc/libpthread/librt only (checked after linking),
# exports cu* only (version script), and is linked with -Bsymbolic so that
# cuGetProcAddress hands out its own entry points even under an LD_PRELOAD
# interposer. Programs select it with LD_LIBRARY_PATH=$(BUILD)/fakecuda;
# they are linked against it but carry no rpath, so on a GPU machine the
# same binaries run against the real libcuda.so.1.

FC_DIR  := $(BUILD)/fakecuda
FC_LIB  := $(FC_DIR)/libcuda.so.1
FC_LINK := $(FC_DIR)/libcuda.so
FC_GEN  := $(BUILD)/gen/fakecuda
FC_MAP  := src/fakecuda/fakecuda.map
FC_SRCS := $(wildcard src/fakecuda/*.c)
FC_OBJS := $(FC_SRCS:%.c=$(OBJ)/%.o)

# Every versioned name declared under its own name (see fc_internal.h).
$(FC_OBJS): CPPFLAGS += -D__CUDA_API_VERSION_INTERNAL -I$(FC_GEN)

# One FC_ERR(NAME, "text") per CUresult of the cuda.h in use.
$(FC_GEN)/fc_errors.inc: $(CUDA_INC)/cuda.h mk/fakecuda.mk
	@mkdir -p $(dir $@)
	sed -n '/^typedef enum cudaError_enum/,/} CUresult;/p' $< \
	  | sed -n 's/^[[:space:]]*\(CUDA_[A-Z0-9_]*\)[[:space:]]*=[[:space:]]*[0-9][0-9]*.*/\1/p' \
	  | awk '{ t = tolower($$1); sub(/^cuda_(error_)?/, "", t); gsub(/_/, " ", t); \
	           printf "FC_ERR(%s, \"%s\")\n", $$1, t }' > $@.tmp
	@test -s $@.tmp || { echo "no CUresult values found in $<" >&2; exit 1; }
	mv $@.tmp $@
$(OBJ)/src/fakecuda/fc_error.o: $(FC_GEN)/fc_errors.inc

$(FC_LIB): $(FC_OBJS) $(FC_MAP)
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ $(FC_OBJS) $(LDFLAGS) -Wl,-soname,libcuda.so.1 \
	  -Wl,--version-script=$(FC_MAP) -Wl,-Bsymbolic -Wl,-z,now -Wl,--no-undefined -lrt
	@bad=$$(readelf -d $@ | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | \
	  grep -vE '^(libc\.so|libpthread\.so|librt\.so|ld-linux|libasan|libubsan|libtsan)'); \
	  if [ -n "$$bad" ]; then echo "$@ must depend on libc/libpthread/librt only; found: $$bad" >&2; rm -f $@; exit 1; fi

$(FC_LINK): $(FC_LIB)
	ln -sf libcuda.so.1 $@

# ---- the kernels as real CUDA ------------------------------------------------
# The PTX is committed; it is regenerated only where nvcc exists and the .cu
# is newer. compute_80 PTX is JIT-compiled by any recent GPU's driver.
ifneq ($(NVCC),)
tests/kernels/fc_kernels.ptx: tests/kernels/fc_kernels.cu
	$(NVCC) -ptx -arch=compute_80 -o $@ $<
endif

# ---- tests/progs: the PTX blob, the kernel helper, cs_job ----------------------
FCK_OBJS := $(OBJ)/tests/progs/fckern.o $(OBJ)/tests/progs/fc_kernels_blob.o
FC_PROG_LIBS := -L$(FC_DIR) -lcuda

$(OBJ)/tests/progs/fc_kernels_blob.o: tests/progs/fc_kernels_blob.S tests/kernels/fc_kernels.ptx
	@mkdir -p $(dir $@)
	$(CC) -c -Wa,-I,tests/kernels -o $@ $<

# What the jobs share besides the kernels (clocks, pattern mix, options).
JOBUTIL_OBJ := $(OBJ)/tests/progs/jobutil.o

CS_JOB := $(BUILD)/bin/cs_job
$(CS_JOB): $(OBJ)/tests/progs/cs_job.o $(JOBUTIL_OBJ) $(FCK_OBJS) | $(FC_LINK)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS) $(FC_PROG_LIBS)

# cs_graphjob: graphs built explicitly (issue 19); threaded, finds the
# client API with dlsym.
CS_GRAPHJOB := $(BUILD)/bin/cs_graphjob
$(CS_GRAPHJOB): $(OBJ)/tests/progs/cs_graphjob.o $(JOBUTIL_OBJ) $(FCK_OBJS) | $(FC_LINK)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS) $(FC_PROG_LIBS) -ldl

ALL_TARGETS += $(FC_LIB) $(FC_LINK) $(CS_JOB) $(CS_GRAPHJOB)

# ---- tests/fakecuda ----------------------------------------------------------
FC_TDIR := $(BUILD)/tests/fakecuda
FC_CMOCKA_TESTS := fc_basic_test fc_mem_test fc_vmm_test fc_addr_test fc_exec_test fc_timing_test fc_mp_test \
                   fc_slice_test fc_fault_test
FC_TUTIL := $(OBJ)/tests/fakecuda/fc_testutil.o

# fc_basic_test checks every CUresult name against the generated list.
$(OBJ)/tests/fakecuda/fc_basic_test.o: CPPFLAGS += -I$(FC_GEN)
$(OBJ)/tests/fakecuda/fc_basic_test.o: $(FC_GEN)/fc_errors.inc

$(FC_CMOCKA_TESTS:%=$(FC_TDIR)/%): $(FC_TDIR)/%: $(OBJ)/tests/fakecuda/%.o $(FC_TUTIL) $(FCK_OBJS) | $(FC_LINK)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS) $(FC_PROG_LIBS) -lcmocka

# The conformance test also runs on GPU machines: libc and libcuda only.
$(FC_TDIR)/fc_api_test: $(OBJ)/tests/fakecuda/fc_api_test.o $(FCK_OBJS) | $(FC_LINK)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS) $(FC_PROG_LIBS) -ldl

TEST_BINS += $(FC_CMOCKA_TESTS:%=$(FC_TDIR)/%) $(FC_TDIR)/fc_api_test
