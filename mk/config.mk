# mk/config.mk: toolchain, flags and build directories shared by every module.
#
# Variables a caller may set:
#   BUILD   output tree (default: build). Sanitizer builds use their own tree
#           so that `make test` can keep an optimized and an instrumented build
#           side by side.
#   SAN     empty | asan | tsan  (asan means AddressSanitizer + UBSan)
#   CUDA_HOME  where cuda.h lives (include/cuda.h under it)

BUILD ?= build
SAN   ?=
# V=1 shows full command lines.
V ?= 0
Q := $(if $(filter 1,$(V)),,@)
CC    ?= cc
ifeq ($(origin CC),default)
CC := gcc
endif

# ---- cuda.h: CUDA_HOME, then /usr/local/cuda, then /usr ---------------------
ifneq ($(wildcard $(CUDA_HOME)/include/cuda.h),)
CUDA_INC := $(CUDA_HOME)/include
else ifneq ($(wildcard /usr/local/cuda/include/cuda.h),)
CUDA_INC := /usr/local/cuda/include
else ifneq ($(wildcard /usr/include/cuda.h),)
CUDA_INC := /usr/include
else
$(error cuda.h not found: set CUDA_HOME to a CUDA toolkit (13.x) or install the CUDA headers (Debian: nvidia-cuda-toolkit-dev, or NVIDIA's cuda-cudart-dev-13-0 / cuda-driver-dev-13-0))
endif

NVCC ?= $(firstword $(wildcard $(CUDA_HOME)/bin/nvcc /usr/local/cuda/bin/nvcc) $(shell command -v nvcc 2>/dev/null))

# ---- flags ------------------------------------------------------------------
WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
            -Wno-unused-parameter -Wformat=2 -Wvla
OPT      := -O2 -g
CPPFLAGS := -D_GNU_SOURCE -Iinclude -Isrc -isystem $(CUDA_INC)
CFLAGS   := -std=c11 $(OPT) $(WARN) -pthread -fno-common -fvisibility=hidden
LDFLAGS  := -pthread
SANFLAGS :=

ifeq ($(SAN),asan)
SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
else ifeq ($(SAN),tsan)
SANFLAGS := -fsanitize=thread -fno-omit-frame-pointer
else ifneq ($(SAN),)
$(error SAN must be empty, asan or tsan (got '$(SAN)'))
endif

CFLAGS  += $(SANFLAGS)
LDFLAGS += $(SANFLAGS)

# Position-independent code for everything: the hook and the simulated driver
# are shared objects, and the small static helpers link into both kinds.
CFLAGS += -fPIC

OBJ := $(BUILD)/obj

# Generic compile rule; each module adds its own objects to a list and may add
# target-specific flags (e.g. `$(HOOK_OBJS): CFLAGS += ...`).
$(OBJ)/%.o: %.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

# The run-time path of a sanitizer runtime, for LD_PRELOAD ahead of the hook
# when an uninstrumented program (python, a shell) loads instrumented objects.
SAN_RUNTIME := $(if $(filter asan,$(SAN)),$(shell $(CC) -print-file-name=libasan.so),$(if $(filter tsan,$(SAN)),$(shell $(CC) -print-file-name=libtsan.so)))
