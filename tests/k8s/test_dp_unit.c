/* test_dp_unit.c: the device plugin's pure modules: settings (flags,
 * environment, resource specs, cross checks), device IDs, the replies
 * (ListAndWatch, Allocate, GetPreferredAllocation), NVML loading with
 * its fallbacks against the fake libnvidia-ml.so.1 (full and legacy), and
 * the holder of an allocation in a pod-resources answer (exact IDs only,
 * hostile names refused, two holders). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/log.h"
#include "k8s/dp_build.h"
#include "k8s/dp_config.h"
#include "k8s/dp_endpoint.h"
#include "k8s/dp_ids.h"
#include "k8s/dp_nvml.h"
#include "k8s/dp_podres.h"
#include "tutil.h"

static char err[512];

static int parse(struct dp_config *c, int argc, const char **argv)
{
    enum dp_action act;
    dp_config_defaults(c);
    if (dp_config_env(c, err, sizeof err) < 0)
        return -1;
    if (dp_config_args(c, argc, (char **)argv, &act, err, sizeof err) < 0)
        return -1;
    int rc = dp_config_finish(c, err, sizeof err);
    if (rc < 0)
        print_message("config: %s\n", err);
    return rc;
}

#define PARSE(c, ...)                                                                              \
    parse((c), (int)(sizeof((const char *[]){"dp", __VA_ARGS__}) / sizeof(char *)),               \
          (const char *[]){"dp", __VA_ARGS__})

static void test_config_defaults(void **state)
{
    struct dp_config c;
    assert_int_equal(parse(&c, 1, (const char *[]){"dp"}), 0);
    assert_int_equal(c.nres, 1);
    assert_string_equal(c.res[0].name, "cushare.io/gpu");
    assert_string_equal(c.res[0].endpoint, "cushare-gpu.sock");
    assert_int_equal(c.res[0].slots, 4);
    assert_int_equal(c.res[0].priority, -1);
    assert_string_equal(c.plugin_dir, "/var/lib/kubelet/device-plugins");
    assert_string_equal(c.daemon_socket, "/run/cushare/cushared.sock");
    assert_int_equal(c.inject, DP_INJECT_ENV);
    assert_true(c.require_daemon);
    assert_true(c.prestart);
    assert_false(c.device_nodes);
    assert_true(c.endpoints);
    assert_string_equal(c.pod_resources, "/var/lib/kubelet/pod-resources/kubelet.sock");
    assert_int_equal(c.pod_resources_timeout_s, 60);
    assert_int_equal(PARSE(&c, "--pod-resources", "off", "--pod-resources-timeout", "5"), 0);
    assert_string_equal(c.pod_resources, "");
    assert_int_equal(c.pod_resources_timeout_s, 5);
    setenv("CUSHARE_DP_POD_RESOURCES", "/run/pr/kubelet.sock", 1);
    assert_int_equal(PARSE(&c, "--slots", "2"), 0);
    assert_string_equal(c.pod_resources, "/run/pr/kubelet.sock");
    unsetenv("CUSHARE_DP_POD_RESOURCES");
    assert_int_equal(PARSE(&c, "--endpoints", "off"), 0);
    assert_false(c.endpoints);
    setenv("CUSHARE_DP_ENDPOINTS", "off", 1);
    assert_int_equal(PARSE(&c, "--slots", "2"), 0);
    assert_false(c.endpoints);
    unsetenv("CUSHARE_DP_ENDPOINTS");
}

static void test_config_resources(void **state)
{
    struct dp_config c;
    assert_int_equal(PARSE(&c, "--slots", "6", "--resource", "gpu",
                           "--resource", "gpu-high:slots=2,priority=high,weight=8",
                           "--resource", "example.com/shared-gpu:priority=low",
                           "--resource", "gpu-memory:kind=memory,unit=2G"),
                     0);
    assert_int_equal(c.nres, 4);
    assert_int_equal(c.res[0].slots, 6);
    assert_int_equal(c.res[1].slots, 2);
    assert_int_equal(c.res[1].priority, 0);
    assert_int_equal(c.res[1].weight, 8);
    assert_string_equal(c.res[2].name, "example.com/shared-gpu");
    assert_string_equal(c.res[2].endpoint, "cushare-example.com_shared-gpu.sock");
    assert_int_equal(c.res[2].mem_limit, 0);
    assert_int_equal(c.res[2].priority, 2);
    assert_int_equal(c.res[3].kind, DP_KIND_MEMORY);
    assert_int_equal(c.res[3].unit, 2ull << 30);
    assert_int_equal(PARSE(&c, "--resource", "gpu-small:mem-limit=1536M,weight=2"), 0);
    assert_int_equal(c.res[0].mem_limit, 1536ull << 20);
    assert_int_equal(c.res[0].weight, 2);
}

static void expect_bad(int rc, const char *text)
{
    assert_int_equal(rc, -1);
    if (!strstr(err, text))
        fail_msg("expected '%s' in '%s'", text, err);
}

static void test_config_errors(void **state)
{
    struct dp_config c;
    expect_bad(PARSE(&c, "--resource", "GPU"), "not DOMAIN/NAME");
    expect_bad(PARSE(&c, "--resource", "gpu:colour=red"), "unknown key 'colour'");
    expect_bad(PARSE(&c, "--resource", "gpu:slots=0"), "slots must be");
    expect_bad(PARSE(&c, "--resource", "gpu:priority=urgent"), "priority must be");
    expect_bad(PARSE(&c, "--resource", "m:kind=memory,priority=high"), "takes only unit");
    expect_bad(PARSE(&c, "--resource", "gpu:unit=1G"), "needs kind=memory");
    expect_bad(PARSE(&c, "--resource", "gpu", "--resource", "gpu"), "given twice");
    expect_bad(PARSE(&c, "--resource", "m:kind=memory"), "at least one resource must be");
    expect_bad(PARSE(&c, "--resource", "gpu:mem-limit=4G", "--resource", "m:kind=memory"),
               "cannot be combined");
    expect_bad(PARSE(&c, "--inject", "magic"), "env, preload or none");
    expect_bad(PARSE(&c, "--socket", "relative.sock"), "absolute");
    expect_bad(PARSE(&c, "--require-daemon", "maybe"), "on or off");
    expect_bad(PARSE(&c, "--endpoints", "sometimes"), "on or off");
    expect_bad(PARSE(&c, "--pod-resources", "kubelet.sock"), "absolute");
    expect_bad(PARSE(&c, "--pod-resources-timeout", "0"), "1..3600 s");
    expect_bad(PARSE(&c, "--plugin-dir",
                     "/a/very/long/directory/name/that/goes/on/and/on/and/on/and/on/and/on/and/"
                     "on/and/on/and/on/and/on/forever"),
               "longer than");
    expect_bad(PARSE(&c, "--frobnicate"), "unknown option");
}

static void test_config_env(void **state)
{
    struct dp_config c;
    setenv("CUSHARE_DP_SLOTS", "7", 1);
    setenv("CUSHARE_DP_RESOURCES", "gpu; gpu-low:priority=low", 1);
    setenv("CUSHARE_DP_INJECT", "preload", 1);
    setenv("CUSHARE_SOCKET", "/run/x/d.sock", 1);
    assert_int_equal(PARSE(&c, "--log-level", "debug"), 0);
    assert_int_equal(c.nres, 2);
    assert_int_equal(c.res[1].slots, 7);
    assert_int_equal(c.inject, DP_INJECT_PRELOAD);
    assert_string_equal(c.daemon_socket, "/run/x/d.sock");
    /* Flags win: slots, and --resource replaces the variable's list. */
    assert_int_equal(PARSE(&c, "--slots", "9", "--resource", "only", "--inject", "none"), 0);
    assert_int_equal(c.nres, 1);
    assert_string_equal(c.res[0].name, "cushare.io/only");
    assert_int_equal(c.res[0].slots, 9);
    assert_int_equal(c.inject, DP_INJECT_NONE);
    setenv("CUSHARE_DP_SLOTS", "lots", 1);
    expect_bad(PARSE(&c), "CUSHARE_DP_SLOTS");
    unsetenv("CUSHARE_DP_SLOTS");
    unsetenv("CUSHARE_DP_RESOURCES");
    unsetenv("CUSHARE_DP_INJECT");
    unsetenv("CUSHARE_SOCKET");
}

/* ---- IDs and replies ------------------------------------------------------------ */

static struct dp_node node2(void)
{
    struct dp_node n;
    memset(&n, 0, sizeof n);
    n.ngpus = 2;
    for (int i = 0; i < 2; i++) {
        snprintf(n.gpu[i].uuid, sizeof n.gpu[i].uuid, "GPU-aaaaaaaa-0000-0000-0000-00000000000%d", i);
        n.gpu[i].mem_total = 10ull << 30;
        n.gpu[i].healthy = true;
        n.gpu[i].numa = i ? -1 : 0;
        n.gpu[i].minor = i;
    }
    return n;
}

static void test_ids(void **state)
{
    struct dp_node n = node2();
    struct dp_resource slots = {.kind = DP_KIND_SLOTS, .slots = 3};
    struct dp_resource mem = {.kind = DP_KIND_MEMORY, .unit = 3ull << 30};
    char id[DP_ID_MAX + 1];
    unsigned k;
    assert_int_equal(dp_ids_per_gpu(&mem, &n.gpu[0]), 3);
    assert_int_equal(dp_id_make(id, &slots, &n.gpu[1], 2), 0);
    assert_string_equal(id, "GPU-aaaaaaaa-0000-0000-0000-000000000001::2");
    assert_int_equal(dp_id_parse(&slots, &n, id, &k), 1);
    assert_int_equal(k, 2);
    assert_int_equal(dp_id_parse(&mem, &n, id, &k), -1);
    assert_int_equal(dp_id_make(id, &mem, &n.gpu[0], 1), 0);
    assert_string_equal(id, "GPU-aaaaaaaa-0000-0000-0000-000000000000::m1");
    assert_int_equal(dp_id_parse(&mem, &n, id, &k), 0);
    assert_int_equal(dp_id_parse(&slots, &n, "GPU-aaaaaaaa-0000-0000-0000-000000000000::3", &k), -1);
    assert_int_equal(dp_id_parse(&slots, &n, "GPU-aaaaaaaa-0000-0000-0000-000000000000::01", &k), -1);
    assert_int_equal(dp_id_parse(&slots, &n, "GPU-aaaaaaaa-0000-0000-0000-000000000000", &k), -1);
    assert_int_equal(dp_id_parse(&slots, &n, "GPU-bbbbbbbb-0000-0000-0000-000000000000::0", &k), -1);
}

static void test_size_text(void **state)
{
    struct dp_arena a = DP_ARENA_INIT;
    assert_string_equal(dp_size_text(&a, 12ull << 30), "12G");
    assert_string_equal(dp_size_text(&a, 1536ull << 20), "1536M");
    assert_string_equal(dp_size_text(&a, 2ull << 40), "2T");
    assert_string_equal(dp_size_text(&a, 1000), "1000");
    dp_arena_free(&a);
}

static void test_build_list(void **state)
{
    struct dp_node n = node2();
    n.gpu[1].healthy = false;
    struct dp_resource r = {.kind = DP_KIND_SLOTS, .slots = 2};
    struct dp_arena a = DP_ARENA_INIT;
    V1beta1__ListAndWatchResponse *l = dp_build_list(&a, &r, &n);
    assert_int_equal(l->n_devices, 4);
    assert_string_equal(l->devices[1]->health, "Healthy");
    assert_string_equal(l->devices[2]->health, "Unhealthy");
    assert_int_equal(l->devices[0]->topology->nodes[0]->id, 0);
    assert_null(l->devices[3]->topology);
    dp_arena_free(&a);
}

static void test_build_alloc(void **state)
{
    struct dp_config c;
    assert_int_equal(PARSE(&c, "--inject", "none", "--require-daemon", "off", "--socket",
                           "/s.sock", "--resource", "g:mem-limit=3000M"),
                     0);
    struct dp_node n = node2();
    struct dp_arena a = DP_ARENA_INIT;
    V1beta1__ContainerAllocateResponse *r;
    char *ids[] = {"GPU-aaaaaaaa-0000-0000-0000-000000000001::0"};
    assert_int_equal(dp_build_alloc(&a, &c, &c.res[0], &n, ids, 1, NULL, &r, err, sizeof err), 0);
    assert_int_equal(r->n_envs, 3); /* no LD_PRELOAD, no REQUIRE_DAEMON */
    assert_string_equal(r->envs[2]->key, "CUSHARE_MEM_LIMIT");
    assert_string_equal(r->envs[2]->value, "3000M");
    assert_int_equal(r->n_mounts, 2);
    assert_string_equal(r->mounts[1]->host_path, "/"); /* a socket at the root */
    /* With an endpoint: its directory where the socket's would be. */
    assert_int_equal(PARSE(&c, "--socket", "/run/cushare/cushared.sock"), 0);
    assert_int_equal(dp_build_alloc(&a, &c, &c.res[0], &n, ids, 1, "/run/cushare/endpoints/dp-1",
                                    &r, err, sizeof err),
                     0);
    assert_string_equal(r->mounts[1]->host_path, "/run/cushare/endpoints/dp-1");
    assert_string_equal(r->mounts[1]->container_path, "/run/cushare");
    assert_string_equal(r->envs[1]->key, "CUSHARE_SOCKET");
    assert_string_equal(r->envs[1]->value, "/run/cushare/cushared.sock");
    n.gpu[1].healthy = false;
    assert_int_equal(dp_build_alloc(&a, &c, &c.res[0], &n, ids, 1, NULL, &r, err, sizeof err),
                     DP_ALLOC_UNHEALTHY);
    dp_arena_free(&a);
}

/* An endpoint's id: the same for the same resource and IDs in any order,
 * another for other IDs or another resource. */
static void test_endpoint_id(void **state)
{
    char *ab[] = {"GPU-a::0", "GPU-b::1"}, *ba[] = {"GPU-b::1", "GPU-a::0"};
    char *a_b[] = {"GPU-a::0GPU-b::1"}, *a[] = {"GPU-a::0"};
    char x[DP_EP_ID_LEN], y[DP_EP_ID_LEN];
    dp_ep_id("cushare.io/gpu", ab, 2, x);
    assert_int_equal(strlen(x), 19);
    assert_memory_equal(x, "dp-", 3);
    assert_int_equal(strspn(x + 3, "0123456789abcdef"), 16);
    dp_ep_id("cushare.io/gpu", ba, 2, y);
    assert_string_equal(x, y);
    dp_ep_id("cushare.io/gpu-high", ab, 2, y);
    assert_string_not_equal(x, y);
    dp_ep_id("cushare.io/gpu", a_b, 1, y);
    assert_string_not_equal(x, y);
    dp_ep_id("cushare.io/gpu", a, 1, y);
    assert_string_not_equal(x, y);
}

static void test_build_prefer_pack(void **state)
{
    struct dp_config c;
    assert_int_equal(PARSE(&c, "--placement", "pack", "--resource", "g:slots=3"), 0);
    struct dp_node n = node2();
    struct dp_arena a = DP_ARENA_INIT;
    char *avail[] = {"GPU-aaaaaaaa-0000-0000-0000-000000000000::0",
                     "GPU-aaaaaaaa-0000-0000-0000-000000000000::2",
                     "GPU-aaaaaaaa-0000-0000-0000-000000000001::1",
                     "bogus", "GPU-aaaaaaaa-0000-0000-0000-000000000001::1"};
    V1beta1__ContainerPreferredAllocationRequest rq =
        V1BETA1__CONTAINER_PREFERRED_ALLOCATION_REQUEST__INIT;
    rq.available_deviceids = avail;
    rq.n_available_deviceids = 5;
    rq.allocation_size = 1;
    /* pack: the GPU with the fewest free IDs (GPU 1: one) */
    V1beta1__ContainerPreferredAllocationResponse *o = dp_build_prefer(&a, &c, &c.res[0], &n, &rq);
    assert_int_equal(o->n_deviceids, 1);
    assert_string_equal(o->deviceids[0], avail[2]);
    /* asking for more than there is: all the valid ones, once each */
    rq.allocation_size = 9;
    o = dp_build_prefer(&a, &c, &c.res[0], &n, &rq);
    assert_int_equal(o->n_deviceids, 3);
    dp_arena_free(&a);
}

/* ---- NVML -------------------------------------------------------------------------- */

static void nvml_lib(char *out, size_t cap, const char *which)
{
    snprintf(out, cap, "%s/tests/k8s/%s/libnvidia-ml.so.1", tu_build(), which);
}

/* ---- pod-resources answers -------------------------------------------------------------- */

struct pr_row {
    const char *ns, *pod;
    size_t pod_len; /* 0: strlen */
    const char *ctr, *res;
    const char *ids[3];
};

static ProtobufCBinaryData pr_bin(const char *s, size_t n)
{
    return (ProtobufCBinaryData){n ? n : strlen(s), (uint8_t *)s};
}

/* A List answer: a pod per row, with one container holding ids of res. */
static const V1__ListPodResourcesResponse *pr_answer(const struct pr_row *rows, size_t n)
{
    static V1__ListPodResourcesResponse r;
    static V1__PodResources pod[8], *pods[8];
    static V1__ContainerResources ctr[8], *ctrs[8];
    static V1__ContainerDevices dev[8], *devs[8];
    static ProtobufCBinaryData ids[8][3];
    v1__list_pod_resources_response__init(&r);
    for (size_t i = 0; i < n; i++) {
        v1__pod_resources__init(&pod[i]);
        v1__container_resources__init(&ctr[i]);
        v1__container_devices__init(&dev[i]);
        pod[i].name = pr_bin(rows[i].pod, rows[i].pod_len);
        pod[i].namespace_ = pr_bin(rows[i].ns, 0);
        ctr[i].name = pr_bin(rows[i].ctr, 0);
        dev[i].resource_name = pr_bin(rows[i].res, 0);
        for (dev[i].n_device_ids = 0; dev[i].n_device_ids < 3 && rows[i].ids[dev[i].n_device_ids];
             dev[i].n_device_ids++)
            ids[i][dev[i].n_device_ids] = pr_bin(rows[i].ids[dev[i].n_device_ids], 0);
        dev[i].device_ids = ids[i];
        devs[i] = &dev[i];
        ctr[i].devices = &devs[i];
        ctr[i].n_devices = 1;
        ctrs[i] = &ctr[i];
        pod[i].containers = &ctrs[i];
        pod[i].n_containers = 1;
        pods[i] = &pod[i];
    }
    r.pod_resources = pods;
    r.n_pod_resources = n;
    return &r;
}

static enum dp_pr_match pr_match(const struct pr_row *rows, size_t n, const char *res,
                                 const char *const *ids, struct dp_pr_who *who, char *why)
{
    size_t nids = 0;
    while (ids[nids])
        nids++;
    return dp_podres_match(pr_answer(rows, n), res, (char *const *)ids, nids, who, why, 512);
}

#define G "cushare.io/gpu"

/* The container holding exactly the IDs, of that resource: not one with
 * more or fewer of them, nor the same IDs of another resource. */
static void test_podres_match(void **state)
{
    const struct pr_row rows[] = {
        {"team-b", "other", 0, "main", "cushare.io/gpu-high", {"A", "B", NULL}},
        {"team-c", "more", 0, "main", G, {"A", "B", "Z"}},
        {"team-a", "trainer-0", 0, "main", G, {"B", "A", NULL}},
    };
    struct dp_pr_who who;
    char why[512];
    assert_int_equal(pr_match(rows, 3, G, (const char *[]){"A", "B", NULL}, &who, why),
                     DP_PR_FOUND);
    assert_string_equal(who.pod, "trainer-0");
    assert_string_equal(who.ns, "team-a");
    assert_string_equal(who.container, "main");
    assert_int_equal(pr_match(rows, 3, G, (const char *[]){"A", NULL}, &who, why), DP_PR_NONE);
    assert_int_equal(pr_match(rows, 3, G, (const char *[]){"A", "Q", NULL}, &who, why),
                     DP_PR_NONE);
    assert_int_equal(pr_match(rows, 3, "cushare.io/gpu-low", (const char *[]){"A", "B", NULL},
                              &who, why),
                     DP_PR_NONE);
    assert_int_equal(pr_match(rows, 0, G, (const char *[]){"A", "B", NULL}, &who, why),
                     DP_PR_NONE);
    /* Two containers of one pod (an init container's IDs reused): the pod. */
    const struct pr_row two[] = {
        {"team-a", "p-0", 0, "init", G, {"C", NULL}},
        {"team-a", "p-0", 0, "main", G, {"C", NULL}},
    };
    assert_int_equal(pr_match(two, 2, G, (const char *[]){"C", NULL}, &who, why), DP_PR_FOUND);
    assert_string_equal(who.pod, "p-0");
    assert_string_equal(who.container, "");
}

/* Names the daemon would refuse, and IDs two pods claim, name nothing. */
static void test_podres_hostile(void **state)
{
    static const char long_name[] =
        "a123456789b123456789c123456789d123456789e123456789f123456789abcd"; /* 64 */
    const struct pr_row bad[] = {
        {"team-a", long_name, 0, "main", G, {"L", NULL}},
        {"team-a", "ok\0evil", 7, "main", G, {"N", NULL}},
        {"a/b", "p", 0, "main", G, {"S", NULL}},
        {"team-a", "p", 0, "-main", G, {"D", NULL}},
        {"team-a", "", 0, "main", G, {"E", NULL}},
        {"team-a", "p\n", 0, "main", G, {"F", NULL}},
    };
    const char *const which[] = {"L", "N", "S", "D", "E", "F"};
    struct dp_pr_who who;
    char why[512];
    for (size_t i = 0; i < 6; i++) {
        memset(&who, 0, sizeof who);
        assert_int_equal(pr_match(bad, 6, G, (const char *[]){which[i], NULL}, &who, why),
                         DP_PR_INVALID);
        assert_string_equal(who.pod, "");
        assert_non_null(strstr(why, "not all of them names"));
    }
    pr_match(bad, 6, G, (const char *[]){"N", NULL}, &who, why);
    assert_non_null(strstr(why, "pod 'ok?evil'")); /* shown, not cut at the NUL */
    pr_match(bad, 6, G, (const char *[]){"L", NULL}, &who, why);
    assert_non_null(strstr(why, "...'"));
    const struct pr_row two[] = {
        {"team-a", "p-0", 0, "main", G, {"T", NULL}},
        {"team-b", "p-0", 0, "main", G, {"T", NULL}},
    };
    assert_int_equal(pr_match(two, 2, G, (const char *[]){"T", NULL}, &who, why),
                     DP_PR_CONFLICT);
    assert_non_null(strstr(why, "two pods hold its devices"));
}

static void test_nvml_full(void **state)
{
    char lib[600], st[600], tmp[512];
    tu_tmpdir(tmp, sizeof tmp, "nvml");
    snprintf(st, sizeof st, "%s/state", tmp);
    tu_write(st, "");
    setenv("FAKE_NVML_GPUS", "3", 1);
    setenv("FAKE_NVML_STATE", st, 1);
    nvml_lib(lib, sizeof lib, "nvml");
    assert_int_equal(dp_nvml_open(lib, err, sizeof err), 0);
    assert_string_equal(dp_nvml_resolved("nvmlInit_v2"), "nvmlInit_v2");
    assert_string_equal(dp_nvml_resolved("nvmlDeviceGetHandleByUUID_v2"),
                        "nvmlDeviceGetHandleByUUID_v2");
    struct dp_node n;
    assert_int_equal(dp_nvml_discover(&n, "/nonexistent", err, sizeof err), 0);
    assert_int_equal(n.ngpus, 3);
    assert_string_equal(n.gpu[2].uuid, "GPU-00000000-0000-0000-0000-000000000002");
    assert_int_equal(n.gpu[2].minor, 2);
    assert_int_equal(n.gpu[2].numa, -1);
    assert_int_equal(n.gpu[0].mem_total, 16384ull << 20);
    dp_nvml_events_init(&n);
    char why[128];
    assert_int_equal(dp_nvml_probe(&n.gpu[1], why, sizeof why), 0);
    tu_write(st, "lost 1\nxid 2 13\n");
    assert_int_equal(dp_nvml_probe(&n.gpu[1], why, sizeof why), -1);
    assert_string_equal(why, "GPU is lost");
    assert_int_equal(dp_nvml_events_poll(&n), 0); /* Xid 13: the application's fault */
    tu_write(st, "xid 2 13\nxid 2 48\n");
    assert_int_equal(dp_nvml_events_poll(&n), 1); /* 48: double-bit ECC error */
    assert_true(n.gpu[2].xid_dead);
    assert_int_equal(dp_nvml_probe(&n.gpu[2], why, sizeof why), -1);
    dp_nvml_close();
    unsetenv("FAKE_NVML_GPUS");
    unsetenv("FAKE_NVML_STATE");
}

static void test_nvml_legacy(void **state)
{
    char lib[600];
    nvml_lib(lib, sizeof lib, "nvml-legacy");
    assert_int_equal(dp_nvml_open(lib, err, sizeof err), 0);
    assert_string_equal(dp_nvml_resolved("nvmlInit_v2"), "nvmlInit");
    assert_string_equal(dp_nvml_resolved("nvmlDeviceGetCount_v2"), "nvmlDeviceGetCount");
    assert_string_equal(dp_nvml_resolved("nvmlDeviceGetHandleByUUID_v2"),
                        "nvmlDeviceGetHandleByUUID");
    assert_null(dp_nvml_resolved("nvmlEventSetWait_v2"));
    struct dp_node n;
    assert_int_equal(dp_nvml_discover(&n, "/sys", err, sizeof err), 0);
    assert_int_equal(n.ngpus, 1);
    dp_nvml_events_init(&n); /* no event API: probes only */
    assert_int_equal(dp_nvml_events_poll(&n), 0);
    char why[128];
    assert_int_equal(dp_nvml_probe(&n.gpu[0], why, sizeof why), 0);
    dp_nvml_close();
}

static void test_nvml_missing(void **state)
{
    assert_int_equal(dp_nvml_open("/nonexistent/libnvidia-ml.so.1", err, sizeof err), -1);
    assert_non_null(strstr(err, "NVML not found"));
    char lib[600];
    snprintf(lib, sizeof lib, "%s/tests/k8s/test_dp_unit", tu_build());
    /* Not a library at all. */
    assert_int_equal(dp_nvml_open(lib, err, sizeof err), -1);
}

int main(void)
{
    cs_log_init("test_dp_unit", CS_LOG_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_defaults),  cmocka_unit_test(test_config_resources),
        cmocka_unit_test(test_config_errors),    cmocka_unit_test(test_config_env),
        cmocka_unit_test(test_ids),              cmocka_unit_test(test_size_text),
        cmocka_unit_test(test_build_list),       cmocka_unit_test(test_build_alloc),
        cmocka_unit_test(test_build_prefer_pack), cmocka_unit_test(test_endpoint_id),
        cmocka_unit_test(test_nvml_full),
        cmocka_unit_test(test_nvml_legacy),      cmocka_unit_test(test_nvml_missing),
        cmocka_unit_test(test_podres_match),     cmocka_unit_test(test_podres_hostile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
