/* test_dp_plugin.c: cushare-device-plugin, the real program, against a test
 * kubelet speaking the v1beta1 API over unix sockets (tkubelet.c,
 * tclient.c), with NVML simulated by tests/k8s/fake_nvml.c (two 16 GiB GPUs
 * on NUMA nodes 0 and 1, health set through a state file).
 *
 * Covered: registration (version, endpoints, resource names, options),
 * GetDevicePluginOptions, ListAndWatch (every ID, health, topology, updates
 * when a GPU is lost, comes back, or raises a critical Xid), Allocate field
 * by field for each resource kind and injection mode, errors for foreign or
 * unhealthy IDs, GetPreferredAllocation, PreStartContainer with and without
 * a daemon, a kubelet that restarts (with and without clearing the
 * directory), starts late or refuses a registration, the plugin's own
 * restart and SIGTERM, and NVML absent, failing or old (unversioned names,
 * found through LD_LIBRARY_PATH). Most tests run with --endpoints off (the
 * fields of today's answer); the endpoint tests start a real cushared and
 * check that each container of a slots resource gets its own endpoint, and
 * the pod-resources tests that the pod the test kubelet lists as its holder
 * reaches cushared's status and metrics for a client already connected
 * (after a delay, a failed call, an answer too large), that a hostile name
 * is not applied, and that without the socket (or with --pod-resources off)
 * Allocate works as before, said once in the log.
 *
 * No timing is asserted: every wait is for an event, with a 20 s limit
 * that only a hang reaches. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>
#include <grpc/grpc.h>

#include "../sched/jsmall.h"
#include "../sched/thttp.h"
#include "common/proto.h"
#include "k8s/dp_grpc.h"
#include "tclient.h"
#include "tkubelet.h"
#include "tutil.h"

#define WAIT_MS 20000
#define R_GPU "cushare.io/gpu"
#define R_HIGH "cushare.io/gpu-high"
#define R_MEM "cushare.io/gpu-memory"
#define R_LOW "cushare.io/gpu-low"
#define CTR_LIB "/usr/local/lib/cushare/libcushare.so"

struct fx {
    char tmp[512], dir[600], sys[600], lib[600], run[600], sock[600], state[600], preload[600],
        errlog[600];
    struct tk *k;
    pid_t pid;
    int daemon_fd;
    bool endpoints; /* start the plugin with endpoints on (the default) */
    pid_t dpid;     /* a real cushared */
    char dlog[600];
    bool node;      /* cushared with the fake NVML's GPUs as its node, and metrics */
    char podres[600]; /* where the plugin looks for the kubelet's pod-resources socket */
};
static struct fx F;

/* ---- helpers -------------------------------------------------------------------- */

static const char *id(unsigned gpu, const char *k)
{
    static char buf[64][80]; /* enough for every ID one test holds at once */
    static unsigned n;
    char *b = buf[n++ % 64];
    snprintf(b, sizeof buf[0], "GPU-00000000-0000-0000-0000-%012u::%s", gpu, k);
    return b;
}

static const char *uuid(unsigned gpu)
{
    static char buf[2][64];
    snprintf(buf[gpu], sizeof buf[0], "GPU-00000000-0000-0000-0000-%012u", gpu);
    return buf[gpu];
}

static void sock_of(char *out, size_t cap, const char *endpoint)
{
    snprintf(out, cap, "%s/%s", F.dir, endpoint);
}

static void fixture_dirs(void)
{
    memset(&F, 0, sizeof F);
    F.daemon_fd = -1;
    tu_tmpdir(F.tmp, sizeof F.tmp, "dp");
    snprintf(F.dir, sizeof F.dir, "%s/plugins", F.tmp);
    snprintf(F.sys, sizeof F.sys, "%s/sys", F.tmp);
    snprintf(F.lib, sizeof F.lib, "%s/lib/libcushare.so", F.tmp);
    snprintf(F.run, sizeof F.run, "%s/run", F.tmp);
    snprintf(F.sock, sizeof F.sock, "%s/run/cushared.sock", F.tmp);
    snprintf(F.state, sizeof F.state, "%s/nvml-state", F.tmp);
    snprintf(F.preload, sizeof F.preload, "%s/ld.so.preload", F.tmp);
    snprintf(F.errlog, sizeof F.errlog, "%s/plugin.err", F.tmp);
    snprintf(F.dlog, sizeof F.dlog, "%s/cushared.log", F.tmp);
    /* Never the node's own: absent unless a test serves it. */
    snprintf(F.podres, sizeof F.podres, "%s/pod-resources/kubelet.sock", F.tmp);
    tu_mkdirs(F.dir);
    tu_mkdirs(F.run);
    char p[700];
    for (unsigned g = 0; g < 2; g++) {
        snprintf(p, sizeof p, "%s/bus/pci/devices/0000:%02x:00.0", F.sys, g + 1);
        tu_mkdirs(p);
        strcat(p, "/numa_node");
        tu_write(p, g ? "1\n" : "0\n");
    }
    snprintf(p, sizeof p, "%s/lib", F.tmp);
    tu_mkdirs(p);
    tu_write(F.lib, "not really a library\n");
    tu_write(F.state, "");
}

/* The plugin with the common flags, then `extra` (NULL-terminated). */
static pid_t start_plugin_env(const char *nvml, char *const *env, const char *const *extra,
                              const char *errfile)
{
    static char bin[600], nv[600];
    snprintf(bin, sizeof bin, "%s/bin/cushare-device-plugin", tu_build());
    if (nvml && nvml[0] != '/')
        snprintf(nv, sizeof nv, "%s/tests/k8s/%s/libnvidia-ml.so.1", tu_build(), nvml);
    else
        snprintf(nv, sizeof nv, "%s", nvml ? nvml : "libnvidia-ml.so.1");
    const char *argv[64] = {bin,       "--plugin-dir", F.dir,   "--nvml",
                            nv,        "--sysfs",      F.sys,   "--lib",
                            F.lib,     "--socket",     F.sock,  "--health-interval",
                            "20",      "--pod-resources", F.podres};
    size_t n = 15;
    if (!F.endpoints) {
        argv[n++] = "--endpoints";
        argv[n++] = "off";
    }
    for (size_t i = 0; extra && extra[i] && n < 62; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    return tu_spawn((char *const *)argv, env, errfile);
}

static char *const env2[] = {"FAKE_NVML_GPUS=2", "FAKE_NVML_MEM_MB=16384", NULL};

static void set_state_env(void)
{
    static char st[700];
    snprintf(st, sizeof st, "FAKE_NVML_STATE=%s", F.state);
    putenv(st); /* inherited by the plugin */
}

static const char *const res_a[] = {"--resource", "gpu:slots=3",
                                    "--resource", "gpu-high:slots=2,priority=high,weight=4",
                                    "--resource", "gpu-memory:kind=memory,unit=4G", NULL};

static int setup_a(void **state)
{
    fixture_dirs();
    set_state_env();
    F.k = tk_start(F.dir, "kubelet.sock");
    F.pid = start_plugin_env("nvml", env2, res_a, NULL);
    return 0;
}

static int teardown(void **state)
{
    int rc = F.pid > 0 ? tu_stop(F.pid) : 0;
    if (F.dpid > 0)
        assert_int_equal(tu_stop(F.dpid), 0);
    if (F.k)
        tk_stop(F.k, false);
    if (F.daemon_fd >= 0)
        close(F.daemon_fd);
    F.k = NULL;
    assert_int_equal(rc, 0); /* SIGTERM: a clean exit */
    return 0;
}

static const V1beta1__RegisterRequest *registered(const char *res, unsigned n)
{
    const V1beta1__RegisterRequest *r = tk_wait_register(F.k, res, n, WAIT_MS);
    if (!r)
        fail_msg("no registration #%u for %s", n, res);
    return r;
}

static void register_all_a(void)
{
    registered(R_GPU, 0);
    registered(R_HIGH, 0);
    registered(R_MEM, 0);
}

static struct tc *client(const char *endpoint)
{
    char p[800];
    sock_of(p, sizeof p, endpoint);
    return tc_open(p);
}

/* Allocate of one container with ids (NULL-terminated). */
static grpc_status_code allocate1(const char *endpoint, const char *const *ids,
                                  V1beta1__AllocateResponse **out, char *msg, size_t cap)
{
    V1beta1__ContainerAllocateRequest c = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
    V1beta1__ContainerAllocateRequest *cs[1] = {&c};
    V1beta1__AllocateRequest rq = V1BETA1__ALLOCATE_REQUEST__INIT;
    while (ids[c.n_devices_ids])
        c.n_devices_ids++;
    c.devices_ids = (char **)ids;
    rq.n_container_requests = 1;
    rq.container_requests = cs;
    struct tc *t = client(endpoint);
    grpc_status_code st = tc_call(t, DP_M_ALLOCATE, &rq.base, &v1beta1__allocate_response__descriptor,
                                  (ProtobufCMessage **)out, msg, cap);
    tc_close(t);
    return st;
}

/* The next list from s in which pred holds. */
static V1beta1__ListAndWatchResponse *list_until(struct tc_stream *s,
                                                 bool (*pred)(const V1beta1__ListAndWatchResponse *))
{
    for (;;) {
        V1beta1__ListAndWatchResponse *l = tc_list_next(s, WAIT_MS);
        if (!l)
            fail_msg("ListAndWatch: no (matching) update");
        if (pred(l))
            return l;
        protobuf_c_message_free_unpacked(&l->base, NULL);
    }
}

static void free_msg(void *m)
{
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
}

static void expect_mount(const V1beta1__ContainerAllocateResponse *r, const char *host,
                         const char *ctr)
{
    for (size_t i = 0; i < r->n_mounts; i++)
        if (!strcmp(r->mounts[i]->host_path, host)) {
            assert_string_equal(r->mounts[i]->container_path, ctr);
            assert_true(r->mounts[i]->read_only);
            return;
        }
    fail_msg("no mount of %s", host);
}

/* ---- registration, options, lists --------------------------------------------------- */

static void test_register(void **state)
{
    const V1beta1__RegisterRequest *g = registered(R_GPU, 0);
    const V1beta1__RegisterRequest *h = registered(R_HIGH, 0);
    const V1beta1__RegisterRequest *m = registered(R_MEM, 0);
    assert_string_equal(g->version, "v1beta1");
    assert_string_equal(g->endpoint, "cushare-gpu.sock");
    assert_string_equal(h->endpoint, "cushare-gpu-high.sock");
    assert_string_equal(m->endpoint, "cushare-gpu-memory.sock");
    assert_non_null(g->options);
    assert_true(g->options->pre_start_required);
    assert_true(g->options->get_preferred_allocation_available);
    assert_false(m->options->pre_start_required); /* nothing to check for memory */
    assert_true(m->options->get_preferred_allocation_available);
    char p[800];
    sock_of(p, sizeof p, g->endpoint);
    assert_true(tu_exists(p));
    assert_int_equal(tk_register_count(F.k, NULL), 3);
}

static void test_options(void **state)
{
    register_all_a();
    V1beta1__Empty e = V1BETA1__EMPTY__INIT;
    V1beta1__DevicePluginOptions *o = NULL;
    char msg[256];
    struct tc *t = client("cushare-gpu.sock");
    assert_int_equal(tc_call(t, DP_M_OPTIONS, &e.base, &v1beta1__device_plugin_options__descriptor,
                             (ProtobufCMessage **)&o, msg, sizeof msg),
                     GRPC_STATUS_OK);
    assert_true(o->pre_start_required);
    assert_true(o->get_preferred_allocation_available);
    free_msg(o);
    /* A method the service does not have. */
    assert_int_equal(tc_call(t, "/v1beta1.DevicePlugin/NoSuchMethod", &e.base,
                             &v1beta1__empty__descriptor, (ProtobufCMessage **)&o, msg, sizeof msg),
                     GRPC_STATUS_UNIMPLEMENTED);
    tc_close(t);
}

static void test_list(void **state)
{
    register_all_a();
    struct tc *t = client("cushare-gpu.sock");
    struct tc_stream *s = tc_list_open(t);
    V1beta1__ListAndWatchResponse *l = tc_list_next(s, WAIT_MS);
    assert_non_null(l);
    assert_int_equal(l->n_devices, 6); /* 2 GPUs x 3 slots */
    for (unsigned i = 0; i < 6; i++) {
        V1beta1__Device *d = l->devices[i];
        char k[8];
        snprintf(k, sizeof k, "%u", i % 3);
        assert_string_equal(d->id, id(i / 3, k));
        assert_string_equal(d->health, "Healthy");
        assert_non_null(d->topology);
        assert_int_equal(d->topology->n_nodes, 1);
        assert_int_equal(d->topology->nodes[0]->id, i / 3); /* from sysfs */
    }
    free_msg(l);
    tc_list_close(s);
    tc_close(t);

    t = client("cushare-gpu-memory.sock");
    s = tc_list_open(t);
    l = tc_list_next(s, WAIT_MS);
    assert_non_null(l);
    assert_int_equal(l->n_devices, 8); /* 16 GiB / 4 GiB per GPU */
    assert_string_equal(l->devices[0]->id, id(0, "m0"));
    assert_string_equal(l->devices[7]->id, id(1, "m3"));
    free_msg(l);
    tc_list_close(s);
    tc_close(t);
}

static bool gpu1_down(const V1beta1__ListAndWatchResponse *l)
{
    return !strcmp(tc_health(l, id(1, "0")), "Unhealthy");
}
static bool gpu1_up(const V1beta1__ListAndWatchResponse *l)
{
    return !strcmp(tc_health(l, id(1, "2")), "Healthy");
}
static bool gpu0_down(const V1beta1__ListAndWatchResponse *l)
{
    return !strcmp(tc_health(l, id(0, "0")), "Unhealthy");
}

/* A lost GPU: its IDs turn Unhealthy, Allocate and PreStart refuse them,
 * the other GPU is untouched; back when NVML finds it again. */
static void test_health(void **state)
{
    register_all_a();
    struct tc *t = client("cushare-gpu.sock");
    struct tc_stream *s = tc_list_open(t);
    free_msg(tc_list_next(s, WAIT_MS));
    tu_write(F.state, "lost 1\n");
    V1beta1__ListAndWatchResponse *l = list_until(s, gpu1_down);
    for (unsigned k = 0; k < 3; k++) {
        char ks[4];
        snprintf(ks, sizeof ks, "%u", k);
        assert_string_equal(tc_health(l, id(1, ks)), "Unhealthy");
        assert_string_equal(tc_health(l, id(0, ks)), "Healthy");
    }
    free_msg(l);
    char msg[256];
    V1beta1__AllocateResponse *a = NULL;
    assert_int_equal(allocate1("cushare-gpu.sock", (const char *[]){id(1, "1"), NULL}, &a, msg,
                               sizeof msg),
                     GRPC_STATUS_FAILED_PRECONDITION);
    assert_non_null(strstr(msg, "unhealthy"));
    tu_write(F.state, "");
    free_msg(list_until(s, gpu1_up));
    tc_list_close(s);
    tc_close(t);
}

/* A critical Xid makes a GPU unhealthy for good; an application's Xid
 * (13: graphics engine exception) does not. */
static void test_xid(void **state)
{
    register_all_a();
    struct tc *t = client("cushare-gpu-high.sock");
    struct tc_stream *s = tc_list_open(t);
    free_msg(tc_list_next(s, WAIT_MS));
    tu_write(F.state, "xid 1 13\nxid 0 79\n");
    V1beta1__ListAndWatchResponse *l = list_until(s, gpu0_down);
    assert_string_equal(tc_health(l, id(1, "0")), "Healthy");
    free_msg(l);
    tu_write(F.state, "lost 1\n"); /* any later change: GPU 0 stays down */
    l = list_until(s, gpu1_down);
    assert_string_equal(tc_health(l, id(0, "1")), "Unhealthy");
    free_msg(l);
    tc_list_close(s);
    tc_close(t);
}

/* ---- Allocate ------------------------------------------------------------------------ */

static void test_allocate_gpu(void **state)
{
    register_all_a();
    V1beta1__ContainerAllocateRequest c1 = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
    V1beta1__ContainerAllocateRequest c2 = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
    const char *ids1[] = {id(0, "1")};
    const char *ids2[] = {id(1, "2"), id(0, "0")};
    c1.n_devices_ids = 1;
    c1.devices_ids = (char **)ids1;
    c2.n_devices_ids = 2;
    c2.devices_ids = (char **)ids2;
    V1beta1__ContainerAllocateRequest *cs[2] = {&c1, &c2};
    V1beta1__AllocateRequest rq = V1BETA1__ALLOCATE_REQUEST__INIT;
    rq.n_container_requests = 2;
    rq.container_requests = cs;
    V1beta1__AllocateResponse *a = NULL;
    char msg[256];
    struct tc *t = client("cushare-gpu.sock");
    assert_int_equal(tc_call(t, DP_M_ALLOCATE, &rq.base, &v1beta1__allocate_response__descriptor,
                             (ProtobufCMessage **)&a, msg, sizeof msg),
                     GRPC_STATUS_OK);
    tc_close(t);
    assert_int_equal(a->n_container_responses, 2);
    V1beta1__ContainerAllocateResponse *r = a->container_responses[0];
    assert_int_equal(r->n_envs, 4);
    assert_string_equal(tc_env(r, "NVIDIA_VISIBLE_DEVICES"), uuid(0));
    assert_string_equal(tc_env(r, "CUSHARE_SOCKET"), F.sock);
    assert_string_equal(tc_env(r, "LD_PRELOAD"), CTR_LIB);
    assert_string_equal(tc_env(r, "CUSHARE_REQUIRE_DAEMON"), "1");
    assert_null(tc_env(r, "CUSHARE_PRIORITY")); /* the container decides */
    assert_null(tc_env(r, "CUSHARE_MEM_LIMIT"));
    assert_int_equal(r->n_mounts, 2);
    expect_mount(r, F.lib, CTR_LIB);
    expect_mount(r, F.run, F.run);
    assert_int_equal(r->n_devices, 0);
    assert_int_equal(r->n_annotations, 1);
    assert_string_equal(r->annotations[0]->key, "cushare.io/gpus");
    assert_string_equal(r->annotations[0]->value, uuid(0));
    /* Two GPUs: both visible, in node order. */
    r = a->container_responses[1];
    char both[160];
    snprintf(both, sizeof both, "%s,%s", uuid(0), uuid(1));
    assert_string_equal(tc_env(r, "NVIDIA_VISIBLE_DEVICES"), both);
    free_msg(a);
}

static void test_allocate_class(void **state)
{
    register_all_a();
    V1beta1__AllocateResponse *a = NULL;
    char msg[256];
    assert_int_equal(allocate1("cushare-gpu-high.sock", (const char *[]){id(1, "1"), NULL}, &a,
                               msg, sizeof msg),
                     GRPC_STATUS_OK);
    V1beta1__ContainerAllocateResponse *r = a->container_responses[0];
    assert_int_equal(r->n_envs, 6);
    assert_string_equal(tc_env(r, "CUSHARE_PRIORITY"), "high");
    assert_string_equal(tc_env(r, "CUSHARE_WEIGHT"), "4");
    assert_string_equal(tc_env(r, "NVIDIA_VISIBLE_DEVICES"), uuid(1));
    free_msg(a);
    /* gpu-high has 2 slots per GPU: a third is not one of its IDs. */
    assert_int_equal(allocate1("cushare-gpu-high.sock", (const char *[]){id(1, "2"), NULL}, &a,
                               msg, sizeof msg),
                     GRPC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(msg, "unknown device ID"));
}

static void test_allocate_memory(void **state)
{
    register_all_a();
    V1beta1__AllocateResponse *a = NULL;
    char msg[256];
    assert_int_equal(allocate1("cushare-gpu-memory.sock",
                               (const char *[]){id(0, "m0"), id(0, "m1"), id(0, "m3"), NULL}, &a,
                               msg, sizeof msg),
                     GRPC_STATUS_OK);
    V1beta1__ContainerAllocateResponse *r = a->container_responses[0];
    assert_int_equal(r->n_envs, 1);
    assert_string_equal(tc_env(r, "CUSHARE_MEM_LIMIT"), "12G");
    assert_int_equal(r->n_mounts, 0);
    free_msg(a);
    /* A slot ID is not a memory ID, nor is a GPU that is not there. */
    assert_int_equal(allocate1("cushare-gpu-memory.sock", (const char *[]){id(0, "1"), NULL}, &a,
                               msg, sizeof msg),
                     GRPC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(allocate1("cushare-gpu.sock", (const char *[]){id(7, "0"), NULL}, &a, msg,
                               sizeof msg),
                     GRPC_STATUS_INVALID_ARGUMENT);
}

/* ld.so.preload injection, device nodes, a class with a memory limit. */
static void test_allocate_preload(void **state)
{
    fixture_dirs();
    set_state_env();
    F.k = tk_start(F.dir, "kubelet.sock");
    const char *extra[] = {"--resource", "gpu-low:priority=low,mem-limit=8G", "--inject",
                           "preload", "--preload-file", F.preload, "--device-nodes", "on",
                           "--container-lib", "/opt/cushare/libcushare.so", NULL};
    F.pid = start_plugin_env("nvml", env2, extra, NULL);
    registered(R_LOW, 0);
    char *text = tu_read(F.preload);
    assert_non_null(text);
    assert_string_equal(text, "/opt/cushare/libcushare.so\n");
    free(text);
    V1beta1__AllocateResponse *a = NULL;
    char msg[256];
    assert_int_equal(allocate1("cushare-gpu-low.sock", (const char *[]){id(1, "3"), NULL}, &a, msg,
                               sizeof msg),
                     GRPC_STATUS_OK);
    V1beta1__ContainerAllocateResponse *r = a->container_responses[0];
    assert_null(tc_env(r, "LD_PRELOAD"));
    assert_string_equal(tc_env(r, "CUSHARE_PRIORITY"), "low");
    assert_string_equal(tc_env(r, "CUSHARE_MEM_LIMIT"), "8G");
    assert_int_equal(r->n_mounts, 3);
    expect_mount(r, F.lib, "/opt/cushare/libcushare.so");
    expect_mount(r, F.preload, "/etc/ld.so.preload");
    assert_int_equal(r->n_devices, 4);
    const char *want[] = {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                          "/dev/nvidia1"};
    for (int i = 0; i < 4; i++) {
        assert_string_equal(r->devices[i]->host_path, want[i]);
        assert_string_equal(r->devices[i]->container_path, want[i]);
        assert_string_equal(r->devices[i]->permissions, "rw");
    }
    free_msg(a);
}

/* ---- GetPreferredAllocation, PreStartContainer ------------------------------------------- */

static char **prefer(const char *endpoint, const char *const *avail, const char *const *must,
                     int size, size_t *n, V1beta1__PreferredAllocationResponse **keep)
{
    V1beta1__ContainerPreferredAllocationRequest c =
        V1BETA1__CONTAINER_PREFERRED_ALLOCATION_REQUEST__INIT;
    while (avail[c.n_available_deviceids])
        c.n_available_deviceids++;
    while (must && must[c.n_must_include_deviceids])
        c.n_must_include_deviceids++;
    c.available_deviceids = (char **)avail;
    c.must_include_deviceids = (char **)must;
    c.allocation_size = size;
    V1beta1__ContainerPreferredAllocationRequest *cs[1] = {&c};
    V1beta1__PreferredAllocationRequest rq = V1BETA1__PREFERRED_ALLOCATION_REQUEST__INIT;
    rq.n_container_requests = 1;
    rq.container_requests = cs;
    char msg[256];
    struct tc *t = client(endpoint);
    assert_int_equal(tc_call(t, DP_M_PREFER, &rq.base,
                             &v1beta1__preferred_allocation_response__descriptor,
                             (ProtobufCMessage **)keep, msg, sizeof msg),
                     GRPC_STATUS_OK);
    tc_close(t);
    assert_int_equal((*keep)->n_container_responses, 1);
    *n = (*keep)->container_responses[0]->n_deviceids;
    return (*keep)->container_responses[0]->deviceids;
}

static void test_preferred(void **state)
{
    register_all_a();
    V1beta1__PreferredAllocationResponse *k;
    size_t n;
    const char *all[] = {id(0, "0"), id(0, "1"), id(0, "2"), id(1, "0"), id(1, "1"), id(1, "2"),
                         NULL};
    char **got = prefer("cushare-gpu.sock", all, NULL, 1, &n, &k);
    assert_int_equal(n, 1);
    assert_string_equal(got[0], id(0, "0"));
    free_msg(k);
    /* spread: the GPU with more free slots */
    got = prefer("cushare-gpu.sock", (const char *[]){id(0, "2"), id(1, "0"), id(1, "1"), NULL},
                 NULL, 1, &n, &k);
    assert_int_equal(n, 1);
    assert_string_equal(got[0], id(1, "0"));
    free_msg(k);
    /* two slots: two GPUs; the required one first */
    got = prefer("cushare-gpu.sock", all, (const char *[]){id(1, "2"), NULL}, 2, &n, &k);
    assert_int_equal(n, 2);
    assert_string_equal(got[0], id(1, "2"));
    assert_string_equal(got[1], id(0, "0"));
    free_msg(k);
    /* memory: one GPU */
    const char *mem[] = {id(0, "m0"), id(1, "m0"), id(1, "m1"), id(0, "m1"), id(1, "m2"), NULL};
    got = prefer("cushare-gpu-memory.sock", mem, NULL, 3, &n, &k);
    assert_int_equal(n, 3);
    assert_string_equal(got[0], id(1, "m0"));
    assert_string_equal(got[1], id(1, "m1"));
    assert_string_equal(got[2], id(1, "m2"));
    free_msg(k);
}

static grpc_status_code prestart(const char *endpoint, const char *dev, char *msg, size_t cap)
{
    V1beta1__PreStartContainerRequest rq = V1BETA1__PRE_START_CONTAINER_REQUEST__INIT;
    const char *ids[] = {dev};
    rq.n_devices_ids = 1;
    rq.devices_ids = (char **)ids;
    ProtobufCMessage *out = NULL;
    struct tc *t = client(endpoint);
    grpc_status_code st = tc_call(t, DP_M_PRESTART, &rq.base,
                                  &v1beta1__pre_start_container_response__descriptor, &out, msg, cap);
    tc_close(t);
    free_msg(out);
    return st;
}

/* A listening SEQPACKET socket where cushared's would be. */
static void fake_daemon(void)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    assert_true(strlen(F.sock) < sizeof sa.sun_path);
    memcpy(sa.sun_path, F.sock, strlen(F.sock) + 1);
    F.daemon_fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    assert_int_equal(bind(F.daemon_fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(F.daemon_fd, 16), 0);
}

static void test_prestart(void **state)
{
    register_all_a();
    char msg[256];
    assert_int_equal(prestart("cushare-gpu.sock", id(0, "0"), msg, sizeof msg),
                     GRPC_STATUS_FAILED_PRECONDITION);
    assert_non_null(strstr(msg, "cushared does not answer"));
    fake_daemon();
    assert_int_equal(prestart("cushare-gpu.sock", id(0, "0"), msg, sizeof msg), GRPC_STATUS_OK);
    assert_int_equal(prestart("cushare-gpu.sock", "GPU-nope::0", msg, sizeof msg),
                     GRPC_STATUS_INVALID_ARGUMENT);
}

/* ---- restarts ------------------------------------------------------------------------------ */

static void restart_kubelet(bool wipe)
{
    register_all_a();
    tk_stop(F.k, wipe);
    F.k = tk_start(F.dir, "kubelet.sock");
    register_all_a(); /* a new kubelet: counts start at 0 again */
    V1beta1__AllocateResponse *a = NULL;
    char msg[256];
    assert_int_equal(allocate1("cushare-gpu.sock", (const char *[]){id(0, "0"), NULL}, &a, msg,
                               sizeof msg),
                     GRPC_STATUS_OK);
    free_msg(a);
}

static void test_kubelet_restart_wipe(void **state) { restart_kubelet(true); }
static void test_kubelet_restart_keep(void **state) { restart_kubelet(false); }

/* The ListAndWatch stream of a kubelet that restarts ends; the new one
 * gets a list again. */
static void test_kubelet_restart_stream(void **state)
{
    register_all_a();
    struct tc *t = client("cushare-gpu.sock");
    struct tc_stream *s = tc_list_open(t);
    free_msg(tc_list_next(s, WAIT_MS));
    tk_stop(F.k, true);
    F.k = tk_start(F.dir, "kubelet.sock");
    registered(R_GPU, 0);
    assert_true(tc_list_ended(s, WAIT_MS, NULL));
    tc_list_close(s);
    tc_close(t);
    t = client("cushare-gpu.sock");
    s = tc_list_open(t);
    V1beta1__ListAndWatchResponse *l = tc_list_next(s, WAIT_MS);
    assert_non_null(l);
    assert_int_equal(l->n_devices, 6);
    free_msg(l);
    tc_list_close(s);
    tc_close(t);
}

static void test_kubelet_late_and_refusing(void **state)
{
    fixture_dirs();
    set_state_env();
    F.pid = start_plugin_env("nvml", env2, (const char *[]){"--resource", "gpu", NULL}, NULL);
    char p[800];
    sock_of(p, sizeof p, "cushare-gpu.sock");
    /* The plugin serves before any kubelet exists... */
    for (int i = 0; i < 2000 && !tu_exists(p); i++)
        usleep(10000);
    assert_true(tu_exists(p));
    /* ...and registers when one appears; a refusal is retried. */
    F.k = tk_start(F.dir, "kubelet.sock");
    tk_reject(F.k, 1);
    const V1beta1__RegisterRequest *r = registered(R_GPU, 0);
    assert_int_equal(r->options->pre_start_required, 1);
}

static void test_plugin_restart(void **state)
{
    register_all_a();
    struct tc *t = client("cushare-gpu.sock");
    struct tc_stream *s = tc_list_open(t);
    free_msg(tc_list_next(s, WAIT_MS));
    assert_int_equal(tu_stop(F.pid), 0);
    grpc_status_code st = GRPC_STATUS_UNKNOWN;
    assert_true(tc_list_ended(s, WAIT_MS, &st));
    tc_list_close(s);
    tc_close(t);
    char p[800];
    sock_of(p, sizeof p, "cushare-gpu.sock");
    assert_false(tu_exists(p)); /* removed on the way out */
    F.pid = start_plugin_env("nvml", env2, res_a, NULL);
    registered(R_GPU, 1);
    registered(R_HIGH, 1);
    registered(R_MEM, 1);
    V1beta1__AllocateResponse *a = NULL;
    char msg[256];
    assert_int_equal(allocate1("cushare-gpu-high.sock", (const char *[]){id(0, "1"), NULL}, &a,
                               msg, sizeof msg),
                     GRPC_STATUS_OK);
    free_msg(a);
}

/* ---- NVML ---------------------------------------------------------------------------------- */

static void expect_start_failure(const char *nvml, char *const *env, const char *text)
{
    fixture_dirs();
    pid_t pid = start_plugin_env(nvml, env, NULL, F.errlog);
    assert_int_equal(tu_wait_exit(pid, WAIT_MS), 1);
    char *err = tu_read(F.errlog);
    assert_non_null(err);
    if (!strstr(err, text))
        fail_msg("expected '%s' in: %s", text, err);
    free(err);
}

static void test_nvml_absent(void **state)
{
    expect_start_failure("/nonexistent/libnvidia-ml.so.1", NULL, "NVML not found");
    char *fail[] = {"FAKE_NVML_INIT_FAIL=1", NULL};
    expect_start_failure("nvml", fail, "nvmlInit failed: Driver Not Loaded");
    char *none[] = {"FAKE_NVML_GPUS=0", NULL};
    expect_start_failure("nvml", none, "no GPU");
}

/* An old NVML: no _v2 names, no event API, no PCI info (so no topology),
 * found by its soname through LD_LIBRARY_PATH as on a node. */
static void test_nvml_legacy(void **state)
{
    fixture_dirs();
    set_state_env();
    F.k = tk_start(F.dir, "kubelet.sock");
    static char llp[700];
    snprintf(llp, sizeof llp, "LD_LIBRARY_PATH=%s/tests/k8s/nvml-legacy", tu_build());
    char *env[] = {"FAKE_NVML_GPUS=2", llp, NULL};
    F.pid = start_plugin_env(NULL, env, (const char *[]){"--resource", "gpu", NULL}, F.errlog);
    registered(R_GPU, 0);
    struct tc *t = client("cushare-gpu.sock");
    struct tc_stream *s = tc_list_open(t);
    V1beta1__ListAndWatchResponse *l = tc_list_next(s, WAIT_MS);
    assert_non_null(l);
    assert_int_equal(l->n_devices, 8); /* the default 4 slots */
    assert_null(l->devices[0]->topology);
    free_msg(l);
    tu_write(F.state, "lost 0\n"); /* health still works, by unversioned names */
    free_msg(list_until(s, gpu0_down));
    tc_list_close(s);
    tc_close(t);
    char *err = tu_read(F.errlog);
    assert_non_null(strstr(err, "nvmlInit_v2 not found, using nvmlInit"));
    assert_non_null(strstr(err, "nvmlDeviceGetHandleByUUID_v2 not found, using nvmlDeviceGetHandleByUUID"));
    free(err);
}

/* ---- endpoints ---------------------------------------------------------------------------- */

/* A HELLO and its WELCOME on path: a daemon serves there. */
static bool served(const char *path)
{
    int fd = cs_connect(path);
    if (fd < 0)
        return false;
    struct cs_msg h = {.type = CS_MSG_HELLO}, w;
    h.u.hello.priority = CS_PRIO_NORMAL;
    h.u.hello.weight = 1;
    h.u.hello.proto_min = 1;
    bool ok = cs_send(fd, &h) == 0 && cs_recv(fd, &w, NULL) == 1 && w.type == CS_MSG_WELCOME;
    close(fd);
    return ok;
}

static void start_daemon(void)
{
    static char bin[600], conf[700];
    snprintf(bin, sizeof bin, "%s/bin/cushared", tu_build());
    char *argv[] = {bin, "--socket", F.sock, NULL, NULL, NULL, NULL, NULL};
    if (F.node) {
        char text[300];
        snprintf(text, sizeof text, "gpus = %s:16G\ngpus = %s:16G\n", uuid(0), uuid(1));
        snprintf(conf, sizeof conf, "%s/cushared.conf", F.tmp);
        tu_write(conf, text);
        argv[3] = "--config";
        argv[4] = conf;
        argv[5] = "--metrics";
        argv[6] = "127.0.0.1:0";
    }
    F.dpid = tu_spawn(argv, NULL, F.dlog);
    for (int i = 0; i < 2000 && !served(F.sock); i++)
        usleep(10000);
    if (!served(F.sock))
        fail_msg("cushared did not start; see %s", F.dlog);
}

static int setup_ep(void **state)
{
    fixture_dirs();
    F.endpoints = true;
    set_state_env();
    start_daemon();
    F.k = tk_start(F.dir, "kubelet.sock");
    F.pid = start_plugin_env("nvml", env2, res_a, NULL);
    register_all_a();
    return 0;
}

/* The host directory mounted where the daemon's socket directory would be. */
static const char *ep_mount(const V1beta1__ContainerAllocateResponse *r)
{
    for (size_t i = 0; i < r->n_mounts; i++)
        if (!strcmp(r->mounts[i]->container_path, F.run)) {
            assert_true(r->mounts[i]->read_only);
            return r->mounts[i]->host_path;
        }
    fail_msg("no mount at %s", F.run);
    return NULL;
}

static void allocate_ok(const char *endpoint, const char *const *ids, char *dir, size_t cap)
{
    V1beta1__AllocateResponse *a = NULL;
    char msg[256];
    grpc_status_code st = allocate1(endpoint, ids, &a, msg, sizeof msg);
    if (st != GRPC_STATUS_OK)
        fail_msg("Allocate: %d %s", st, msg);
    V1beta1__ContainerAllocateResponse *r = a->container_responses[0];
    assert_string_equal(tc_env(r, "CUSHARE_SOCKET"), F.sock);
    snprintf(dir, cap, "%s", ep_mount(r));
    free_msg(a);
}

static bool ep_served(const char *dir)
{
    char p[800];
    snprintf(p, sizeof p, "%s/cushared.sock", dir);
    return served(p);
}

/* A slots container gets its own endpoint, under the daemon's endpoint
 * directory, with the resource's terms; the same IDs again (in another
 * order) get the same one. */
static void test_endpoint_allocate(void **state)
{
    char dir[600], again[600], prefix[700];
    allocate_ok("cushare-gpu-high.sock", (const char *[]){id(0, "1"), id(1, "0"), NULL}, dir,
                sizeof dir);
    snprintf(prefix, sizeof prefix, "%s/endpoints/dp-", F.run);
    assert_memory_equal(dir, prefix, strlen(prefix));
    assert_int_equal(strlen(dir), strlen(prefix) + 16);
    assert_true(ep_served(dir));
    allocate_ok("cushare-gpu-high.sock", (const char *[]){id(1, "0"), id(0, "1"), NULL}, again,
                sizeof again);
    assert_string_equal(again, dir);
    /* The daemon's record of it: class high (0), weight 4, both GPUs. */
    char st[700], line[300];
    snprintf(st, sizeof st, "%s/endpoints/endpoints.state", F.run);
    char *text = tu_read(st);
    assert_non_null(text);
    snprintf(line, sizeof line, "ep %s 0 4 0 0 %s,%s - -\n", strrchr(dir, '/') + 1, uuid(0),
             uuid(1));
    if (!strstr(text, line))
        fail_msg("no '%s' in %s:\n%s", line, st, text);
    unsigned eps = 0;
    for (const char *p = text; (p = strstr(p, "\nep ")); p++)
        eps++;
    assert_int_equal(eps, 1); /* the retry made no second one */
    free(text);
    /* A memory resource's Allocate has no endpoint (its quota comes with
     * the slots resource's). */
    V1beta1__AllocateResponse *a = NULL;
    char msg[256];
    assert_int_equal(allocate1("cushare-gpu-memory.sock", (const char *[]){id(0, "m0"), NULL}, &a,
                               msg, sizeof msg),
                     GRPC_STATUS_OK);
    assert_int_equal(a->container_responses[0]->n_mounts, 0);
    free_msg(a);
}

/* A device ID given to a new container: the endpoint that held it goes. */
static void test_endpoint_reallocate(void **state)
{
    char first[600], second[600], other[600];
    allocate_ok("cushare-gpu.sock", (const char *[]){id(0, "0"), id(0, "1"), NULL}, first,
                sizeof first);
    allocate_ok("cushare-gpu.sock", (const char *[]){id(1, "2"), NULL}, other, sizeof other);
    allocate_ok("cushare-gpu.sock", (const char *[]){id(0, "1"), NULL}, second, sizeof second);
    assert_string_not_equal(first, second);
    assert_false(tu_exists(first));
    assert_true(ep_served(second));
    assert_true(ep_served(other)); /* not one of the IDs: untouched */
}

/* Endpoints on and no daemon: Allocate fails and says why, never mounting
 * the daemon's own socket directory instead. */
static void test_endpoint_daemon_down(void **state)
{
    assert_int_equal(tu_stop(F.dpid), 0);
    F.dpid = 0;
    V1beta1__AllocateResponse *a = NULL;
    char msg[256];
    assert_int_equal(allocate1("cushare-gpu.sock", (const char *[]){id(0, "0"), NULL}, &a, msg,
                               sizeof msg),
                     GRPC_STATUS_FAILED_PRECONDITION);
    if (!strstr(msg, "cannot ask cushared"))
        fail_msg("message: %s", msg);
    assert_int_equal(allocate1("cushare-gpu-memory.sock", (const char *[]){id(0, "m1"), NULL}, &a,
                               msg, sizeof msg),
                     GRPC_STATUS_OK);
    free_msg(a);
}

/* ---- pod-resources: who holds an endpoint ----------------------------------------------- */

static const char *const res_pr_quick[] = {"--resource", "gpu:slots=3",
                                           "--resource", "gpu-high:slots=2,priority=high,weight=4",
                                           "--resource", "gpu-memory:kind=memory,unit=4G",
                                           "--pod-resources-timeout", "1", NULL};
static const char *const res_pr_off[] = {"--resource", "gpu:slots=3",
                                         "--resource", "gpu-high:slots=2,priority=high,weight=4",
                                         "--resource", "gpu-memory:kind=memory,unit=4G",
                                         "--pod-resources", "off", NULL};

/* cushared with GPUs and metrics, the test kubelet (serving pod-resources
 * on F.podres when serve), the plugin with extra flags, its log in
 * F.errlog. */
static void setup_pr_with(const char *const *extra, bool serve)
{
    fixture_dirs();
    F.endpoints = true;
    F.node = true;
    set_state_env();
    start_daemon();
    if (serve) {
        char d[700];
        snprintf(d, sizeof d, "%s/pod-resources", F.tmp);
        tu_mkdirs(d);
    }
    F.k = tk_start_podres(F.dir, "kubelet.sock", serve ? F.podres : NULL);
    F.pid = start_plugin_env("nvml", env2, extra, F.errlog);
    register_all_a();
}

static int setup_pr(void **state)
{
    setup_pr_with(res_a, true);
    return 0;
}

static int setup_pr_missing(void **state)
{
    setup_pr_with(res_pr_quick, false);
    return 0;
}

static int setup_pr_off(void **state)
{
    setup_pr_with(res_pr_off, true);
    return 0;
}

/* How often needle is in the plugin's log. */
static unsigned log_count(const char *needle)
{
    char *text = tu_read(F.errlog);
    unsigned n = 0;
    for (const char *p = text; p && (p = strstr(p, needle)); p++)
        n++;
    free(text);
    return n;
}

/* Waits for needle in file; false after WAIT_MS. */
static bool wait_text(const char *file, const char *needle)
{
    for (int i = 0; i < WAIT_MS / 20; i++) {
        char *text = tu_read(file);
        bool in = text && strstr(text, needle);
        free(text);
        if (in)
            return true;
        usleep(20000);
    }
    return false;
}

static const char *state_file(void)
{
    static char st[700];
    snprintf(st, sizeof st, "%s/endpoints/endpoints.state", F.run);
    return st;
}

/* cushared's status, as cusharectl status --json prints it. */
static struct js *daemon_status(void)
{
    static char out[1 << 16];
    char cmd[1600];
    snprintf(cmd, sizeof cmd, "%s/bin/cusharectl --socket %s status --json", tu_build(), F.sock);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    assert_int_equal(pclose(p), 0);
    size_t at = 0;
    struct js *j = js_parse(out, &at);
    if (!j)
        fail_msg("status --json is not JSON (offset %zu):\n%s", at, out);
    return j;
}

static void js_done(struct js *j)
{
    js_free(j);
    free(j);
}

/* The pod, namespace and container status shows for the one client of
 * GPU 0 (64 bytes each). */
static void shown(char *pod, char *ns, char *ctr)
{
    struct js *j = daemon_status();
    const struct js *cl = js_get(js_at(js_get(j, "gpus"), 0), "clients");
    assert_non_null(cl);
    assert_int_equal(cl->n, 1);
    snprintf(pod, 64, "%s", js_get(js_at(cl, 0), "pod")->str);
    snprintf(ns, 64, "%s", js_get(js_at(cl, 0), "namespace")->str);
    snprintf(ctr, 64, "%s", js_get(js_at(cl, 0), "container")->str);
    js_done(j);
}

static void expect_type(int fd, uint16_t type)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    struct cs_msg m;
    if (poll(&p, 1, WAIT_MS) != 1 || cs_recv(fd, &m, NULL) != 1 || m.type != type)
        fail_msg("no %s from cushared", cs_msg_name(type));
}

/* A job in the container of endpoint dir: it says a pod in HELLO and a
 * container in LABELS, as the hook does from its environment (claims the
 * daemon does not take from a container), and holds GPU 0's lease. */
static int ep_client(const char *dir, const char *container)
{
    char p[800];
    snprintf(p, sizeof p, "%s/cushared.sock", dir);
    int fd = cs_connect(p);
    assert_true(fd >= 0);
    struct cs_msg m = {.type = CS_MSG_HELLO};
    m.u.hello.flags = CS_HELLO_LABELS;
    m.u.hello.priority = CS_PRIO_NORMAL;
    m.u.hello.weight = 1;
    m.u.hello.proto_min = CS_PROTO_VERSION;
    strcpy(m.u.hello.name, "job");
    strcpy(m.u.hello.pod, "claimed-pod");
    strcpy(m.u.hello.ns, "claimed-ns");
    assert_int_equal(cs_send(fd, &m), 0);
    expect_type(fd, CS_MSG_WELCOME);
    m = (struct cs_msg){.type = CS_MSG_LABELS};
    strcpy(m.u.labels.container, container);
    assert_int_equal(cs_send(fd, &m), 0);
    m = (struct cs_msg){.type = CS_MSG_ATTACH};
    assert_int_equal(cs_uuid_parse(uuid(0), m.u.attach.uuid), 0);
    m.u.attach.total_mem = 16ull << 30;
    assert_int_equal(cs_send(fd, &m), 0);
    m = (struct cs_msg){.type = CS_MSG_ACQUIRE};
    assert_int_equal(cs_send(fd, &m), 0);
    expect_type(fd, CS_MSG_GRANT);
    return fd;
}

/* The endpoint's line in endpoints.state ends with text (no match: the
 * file, for the message). */
static bool state_says(const char *dir, const char *text)
{
    char line[300];
    snprintf(line, sizeof line, "ep %s ", strrchr(dir, '/') + 1);
    char *all = tu_read(state_file()), *l = all ? strstr(all, line) : NULL;
    bool ok = false;
    if (l) {
        char *end = strchr(l, '\n');
        size_t n = strlen(text);
        ok = end && (size_t)(end - l) >= n && !memcmp(end - n, text, n);
    }
    free(all);
    return ok;
}

/* The kubelet lists the pod only after the job connected, and a few List
 * calls: its client shows the pod, namespace and container from then on,
 * in status and in the metrics (the container pod-resources names, not
 * the one the job claims), and the next daemon would recreate it. */
static void test_podres_labels(void **state)
{
    char dir[600], pod[64], ns[64], ctr[64];
    const char *ids[] = {id(0, "1"), NULL};
    allocate_ok("cushare-gpu.sock", ids, dir, sizeof dir);
    int fd = ep_client(dir, "claimed");
    shown(pod, ns, ctr);
    assert_string_equal(pod, ""); /* nothing of its claims */
    assert_string_equal(ns, "");
    assert_string_equal(ctr, "");
    assert_true(tk_podres_calls(F.k, 2, WAIT_MS) >= 2); /* asked again: not listed yet */
    tk_podres_add(F.k, &(struct tk_ctr){.ns = "team-a", .pod = "trainer-0", .container = "main",
                                        .resource = R_GPU, .ids = ids});
    for (int i = 0; i < WAIT_MS / 20 && !pod[0]; i++) {
        usleep(20000);
        shown(pod, ns, ctr);
    }
    assert_string_equal(pod, "trainer-0");
    assert_string_equal(ns, "team-a");
    assert_string_equal(ctr, "main");
    struct js *j = daemon_status();
    uint16_t port = (uint16_t)js_get(js_get(j, "daemon"), "metrics_port")->num;
    js_done(j);
    static char page[1 << 17];
    th_get(port, "/metrics", page, sizeof page);
    char want[300];
    snprintf(want, sizeof want,
             "cushare_client_slices_total{gpu=\"%s\",client=\"job\",pid=\"%d\",uid=\"%u\","
             "priority=\"normal\",pod=\"trainer-0\",namespace=\"team-a\",container=\"main\"} ",
             uuid(0), (int)getpid(), (unsigned)geteuid());
    if (!strstr(page, want))
        fail_msg("no '%s' in the metrics page", want);
    assert_true(state_says(dir, " trainer-0 team-a main"));
    assert_true(wait_text(F.errlog, "pod team-a/trainer-0, container main"));
    assert_int_equal(log_count("pod team-a/trainer-0, container main"), 1);
    assert_int_equal(log_count("endpoints name no pod"), 0);
    close(fd);
}

/* A List that fails, then answers naming the holder of one allocation with
 * a NUL in its pod name, and a container holding another allocation's ID
 * and an unknown one: the hostile name is not applied (said why), the
 * good holder is; the failure is said once, the recovery once. */
static void test_podres_hostile(void **state)
{
    const char *bad[] = {id(0, "2"), NULL}, *good[] = {id(1, "1"), NULL};
    const char *mixed[] = {id(1, "1"), "GPU-ffffffff-0000-0000-0000-000000000000::0", NULL};
    tk_podres_fail(F.k, 1, GRPC_STATUS_UNAVAILABLE);
    tk_podres_add(F.k, &(struct tk_ctr){.ns = "team-x", .pod = "evil\0pod", .pod_len = 8,
                                        .container = "main", .resource = R_GPU, .ids = bad});
    tk_podres_add(F.k, &(struct tk_ctr){.ns = "team-x", .pod = "stranger", .container = "main",
                                        .resource = R_GPU, .ids = mixed});
    tk_podres_add(F.k, &(struct tk_ctr){.ns = "team-a", .pod = "good-0", .container = "worker",
                                        .resource = R_GPU, .ids = good});
    char d1[600], d2[600];
    allocate_ok("cushare-gpu.sock", bad, d1, sizeof d1);
    allocate_ok("cushare-gpu.sock", good, d2, sizeof d2);
    for (int i = 0; i < WAIT_MS / 20 && !state_says(d2, " good-0 team-a worker"); i++)
        usleep(20000);
    assert_true(state_says(d2, " good-0 team-a worker"));
    assert_true(wait_text(F.errlog, "pod 'evil?pod'"));
    assert_true(state_says(d1, " - -"));
    assert_int_equal(log_count("failed: status 14"), 1);
    assert_int_equal(log_count("kubelet.sock answers"), 1);
}

/* An answer over 16 MiB is not read (said why); once the kubelet's answer
 * is small again, the pod is named. */
static void test_podres_oversized(void **state)
{
    const char *ids[] = {id(0, "0"), NULL};
    tk_podres_pad(F.k, 17u << 20);
    tk_podres_add(F.k, &(struct tk_ctr){.ns = "team-a", .pod = "big-0", .container = "main",
                                        .resource = R_GPU, .ids = ids});
    char dir[600];
    allocate_ok("cushare-gpu.sock", ids, dir, sizeof dir);
    assert_true(wait_text(F.errlog, "answers over 16 MiB are not read"));
    assert_true(state_says(dir, " - -"));
    tk_podres_pad(F.k, 0);
    for (int i = 0; i < WAIT_MS / 20 && !state_says(dir, " big-0 team-a main"); i++)
        usleep(20000);
    assert_true(state_says(dir, " big-0 team-a main"));
}

/* No pod-resources socket (not mounted, an old kubelet): Allocate works as
 * before, the endpoint names no pod, the plugin says so once, then gives
 * up on each endpoint after --pod-resources-timeout. */
static void test_podres_missing(void **state)
{
    char d1[600], d2[600];
    allocate_ok("cushare-gpu.sock", (const char *[]){id(0, "0"), NULL}, d1, sizeof d1);
    allocate_ok("cushare-gpu.sock", (const char *[]){id(1, "0"), NULL}, d2, sizeof d2);
    assert_true(ep_served(d1));
    assert_true(ep_served(d2));
    assert_true(wait_text(F.errlog, "no container of pod-resources holds"));
    char want[700];
    snprintf(want, sizeof want, "endpoint %s: no container", strrchr(d2, '/') + 1);
    assert_true(wait_text(F.errlog, want));
    assert_int_equal(log_count("no socket at"), 1);
    assert_true(state_says(d1, " - -"));
}

/* --pod-resources off: nothing asked, nothing said, Allocate as before. */
static void test_podres_off(void **state)
{
    const char *ids[] = {id(0, "0"), NULL};
    tk_podres_add(F.k, &(struct tk_ctr){.ns = "team-a", .pod = "p-0", .container = "main",
                                        .resource = R_GPU, .ids = ids});
    char dir[600];
    allocate_ok("cushare-gpu.sock", ids, dir, sizeof dir);
    assert_true(ep_served(dir));
    assert_int_equal(tk_podres_calls(F.k, 1, 500), 0);
    assert_int_equal(log_count("pod-resources"), 0);
    assert_true(state_says(dir, " - -"));
}

static int teardown_none(void **state)
{
    return 0;
}

int main(void)
{
    grpc_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_register, setup_a, teardown),
        cmocka_unit_test_setup_teardown(test_options, setup_a, teardown),
        cmocka_unit_test_setup_teardown(test_list, setup_a, teardown),
        cmocka_unit_test_setup_teardown(test_health, setup_a, teardown),
        cmocka_unit_test_setup_teardown(test_xid, setup_a, teardown),
        cmocka_unit_test_setup_teardown(test_allocate_gpu, setup_a, teardown),
        cmocka_unit_test_setup_teardown(test_allocate_class, setup_a, teardown),
        cmocka_unit_test_setup_teardown(test_allocate_memory, setup_a, teardown),
        cmocka_unit_test_teardown(test_allocate_preload, teardown),
        cmocka_unit_test_setup_teardown(test_preferred, setup_a, teardown),
        cmocka_unit_test_setup_teardown(test_prestart, setup_a, teardown),
        cmocka_unit_test_setup_teardown(test_kubelet_restart_wipe, setup_a, teardown),
        cmocka_unit_test_setup_teardown(test_kubelet_restart_keep, setup_a, teardown),
        cmocka_unit_test_setup_teardown(test_kubelet_restart_stream, setup_a, teardown),
        cmocka_unit_test_teardown(test_kubelet_late_and_refusing, teardown),
        cmocka_unit_test_setup_teardown(test_plugin_restart, setup_a, teardown),
        cmocka_unit_test_teardown(test_nvml_absent, teardown_none),
        cmocka_unit_test_teardown(test_nvml_legacy, teardown),
        cmocka_unit_test_setup_teardown(test_endpoint_allocate, setup_ep, teardown),
        cmocka_unit_test_setup_teardown(test_endpoint_reallocate, setup_ep, teardown),
        cmocka_unit_test_setup_teardown(test_endpoint_daemon_down, setup_ep, teardown),
        cmocka_unit_test_setup_teardown(test_podres_labels, setup_pr, teardown),
        cmocka_unit_test_setup_teardown(test_podres_hostile, setup_pr, teardown),
        cmocka_unit_test_setup_teardown(test_podres_oversized, setup_pr, teardown),
        cmocka_unit_test_setup_teardown(test_podres_missing, setup_pr_missing, teardown),
        cmocka_unit_test_setup_teardown(test_podres_off, setup_pr_off, teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    grpc_shutdown();
    return rc;
}
