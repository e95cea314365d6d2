# mk/k8s.mk: cushare-device-plugin (src/k8s), the kubelet device plugin, and
# its tests (tests/k8s): unit tests, the plugin against a test kubelet that
# speaks the real v1beta1 API over unix sockets with NVML simulated by a
# fake libnvidia-ml.so.1, and the Kubernetes manifests/Helm chart check.
#
# gRPC's C core (libgrpc-dev) carries the APIs; protobuf-c encodes them. The
# message code is generated from src/k8s/api.proto (the device plugin API)
# and src/k8s/podresources.proto (the kubelet's pod-resources API) at build
# time into $(BUILD)/gen/k8s (never committed). The plugin's modules go into
# a static library so that the tests link exactly the code the plugin runs.

K8S_LIBS  := -lgrpc -lgpr -lprotobuf-c -ldl
PROTOC_C  ?= protoc-c
K8S_GEN   := $(BUILD)/gen/k8s
K8S_PB_C  := $(K8S_GEN)/api.pb-c.c $(K8S_GEN)/podresources.pb-c.c
K8S_PB_H  := $(K8S_PB_C:.c=.h)
K8S_PB_O  := $(patsubst $(K8S_GEN)/%.c,$(OBJ)/gen/k8s/%.o,$(K8S_PB_C))

K8S_SRCS  := $(filter-out src/k8s/dp_main.c,$(wildcard src/k8s/*.c))
# The control client of cusharectl asks the daemon for endpoints (dp_endpoint.c).
K8S_OBJS  := $(K8S_SRCS:%.c=$(OBJ)/%.o) $(K8S_PB_O) $(OBJ)/src/tools/ctl_client.o
K8S_LIB   := $(BUILD)/lib/libdp.a
K8S_DP    := $(BUILD)/bin/cushare-device-plugin

# protoc-c names a service's function pointers after its methods, and the
# kubelet's Registration.Register becomes a member called `register`, a C
# keyword (protobuf-c 1.4). We use gRPC, not protobuf-c's service stubs, so
# the member is only renamed; the wire names come from the .proto unchanged.
$(K8S_PB_C): $(K8S_GEN)/%.pb-c.c: src/k8s/%.proto
	@mkdir -p $(K8S_GEN)
	$(PROTOC_C) --c_out=$(K8S_GEN) --proto_path=src/k8s $<
	sed -i 's/(\*register)(/(*register_)(/; s/## register  }/## register_  }/' $(@:.c=.h)
$(K8S_PB_H): %.h: %.c

# Generated code: our flags, but its own include directory.
$(K8S_PB_O): $(OBJ)/gen/k8s/%.o: $(K8S_GEN)/%.c $(K8S_GEN)/%.h
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CPPFLAGS) -I$(K8S_GEN) $(CFLAGS) -MMD -MP -c $< -o $@

K8S_TOBJS := $(patsubst %.c,$(OBJ)/%.o,$(wildcard tests/k8s/*.c))
$(K8S_OBJS) $(OBJ)/src/k8s/dp_main.o $(K8S_TOBJS): CPPFLAGS += -I$(BUILD)/gen
$(K8S_OBJS) $(OBJ)/src/k8s/dp_main.o $(K8S_TOBJS): $(K8S_PB_H)

$(K8S_LIB): $(K8S_OBJS)
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

$(K8S_DP): $(OBJ)/src/k8s/dp_main.o $(K8S_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS) $(K8S_LIBS)

ALL_TARGETS += $(K8S_DP)

.PHONY: install-k8s
install: install-k8s
install-k8s: $(K8S_DP)
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(K8S_DP) $(DESTDIR)$(PREFIX)/bin/

# ---- tests ---------------------------------------------------------------------
K8S_TDIR  := $(BUILD)/tests/k8s
# The fake NVML: every entry point (versioned names included), and a legacy
# build with only the unversioned names and no event API, for the fallbacks.
K8S_NVML  := $(K8S_TDIR)/nvml/libnvidia-ml.so.1 $(K8S_TDIR)/nvml-legacy/libnvidia-ml.so.1

$(K8S_TDIR)/nvml/libnvidia-ml.so.1: tests/k8s/fake_nvml.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -fvisibility=default -shared -Wl,-soname,libnvidia-ml.so.1 \
	  -o $@ $< $(LDFLAGS)
$(K8S_TDIR)/nvml-legacy/libnvidia-ml.so.1: tests/k8s/fake_nvml.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -DFAKE_NVML_LEGACY -fvisibility=default -shared \
	  -Wl,-soname,libnvidia-ml.so.1 -o $@ $< $(LDFLAGS)

K8S_TKUBE := $(OBJ)/tests/k8s/tkubelet.o $(OBJ)/tests/k8s/tclient.o $(OBJ)/tests/k8s/tutil.o

$(K8S_TDIR)/test_dp_unit: $(OBJ)/tests/k8s/test_dp_unit.o $(OBJ)/tests/k8s/tutil.o $(K8S_LIB) $(COMMON_LIB) | $(K8S_NVML)
	@mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $(filter %.o %.a,$^) $(LDFLAGS) -lcmocka $(K8S_LIBS)

# cushared's status (cusharectl status --json, read with tests/sched's JSON
# parser) and its metrics page show what the plugin told it.
$(K8S_TDIR)/test_dp_plugin: $(OBJ)/tests/k8s/test_dp_plugin.o $(K8S_TKUBE) $(OBJ)/tests/sched/jsmall.o \
                            $(OBJ)/tests/sched/thttp.o $(K8S_LIB) $(COMMON_LIB) \
                            | $(K8S_NVML) $(K8S_DP) $(CUSHARED) $(BUILD)/bin/cusharectl
	@mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $(filter %.o %.a,$^) $(LDFLAGS) -lcmocka $(K8S_LIBS)

# The kubelet stand-in as a program, for bench/gpu/k8s_check.sh.
$(K8S_TDIR)/tkubelet: $(OBJ)/tests/k8s/tkubelet_main.o $(K8S_TKUBE) $(K8S_LIB) $(COMMON_LIB) | $(K8S_DP)
	@mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $(filter %.o %.a,$^) $(LDFLAGS) $(K8S_LIBS)

K8S_TBINS := $(K8S_TDIR)/test_dp_unit $(K8S_TDIR)/test_dp_plugin $(K8S_TDIR)/tkubelet
TEST_BINS += $(K8S_TBINS) $(K8S_NVML)
