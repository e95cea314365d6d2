/* test_node.c: the node's GPUs (src/sched/node.c): the `gpus` setting's
 * parser with good and bad values, its lines adding up in a config file,
 * and discovery: NVML first (the device plugin's fake libnvidia-ml.so.1),
 * then the driver (the simulated one, found through LD_LIBRARY_PATH as
 * tests/run-suite.sh sets it), whose UUIDs are the ones the hook reports. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/log.h"
#include "sched/config.h"
#include "sched/node.h"

static char err[512];

static void uuid_of(const char *txt, uint8_t out[CS_UUID_LEN])
{
    assert_int_equal(cs_uuid_parse(txt, out), 0);
}

static void test_parse_auto_and_lists(void **state)
{
    (void)state;
    struct sd_node n;
    assert_int_equal(sd_node_parse("auto", &n, err, sizeof err), 1);
    assert_int_equal(sd_node_parse("  AUTO ", &n, err, sizeof err), 1);
    assert_int_equal(n.n, 0);
    assert_int_equal(sd_node_parse(" GPU-12345678-1234-1234-1234-123456789abc:80G ,"
                                   "12345678-1234-1234-1234-123456789abd,,"
                                   "gpu-12345678-1234-1234-1234-123456789abe : 1.5T",
                                   &n, err, sizeof err),
                     0);
    assert_int_equal(n.n, 3);
    assert_string_equal(n.source, "config");
    uint8_t u[CS_UUID_LEN];
    uuid_of("GPU-12345678-1234-1234-1234-123456789abd", u);
    assert_int_equal(sd_node_find(&n, u), 1);
    assert_int_equal(n.gpu[0].mem_total, 80ull << 30);
    assert_int_equal(n.gpu[1].mem_total, 0); /* unknown: no memory planning */
    assert_int_equal(n.gpu[2].mem_total, 3ull << 39);
    uuid_of("GPU-12345678-1234-1234-1234-123456789abf", u);
    assert_int_equal(sd_node_find(&n, u), -1);
}

static void bad(const char *spec, const char *why)
{
    struct sd_node n;
    err[0] = '\0';
    assert_int_equal(sd_node_parse(spec, &n, err, sizeof err), -1);
    if (!strstr(err, why))
        fail_msg("gpus = %s: '%s' does not say '%s'", spec, err, why);
}

static void test_parse_errors(void **state)
{
    (void)state;
    bad("", "no GPU listed");
    bad(" , ,", "no GPU listed");
    bad("GPU-zz", "'GPU-zz' is not a GPU UUID");
    bad("GPU-12345678-1234-1234-1234-123456789abc:", "'' is not a memory size");
    bad("GPU-12345678-1234-1234-1234-123456789abc:0", "'0' is not a memory size");
    bad("GPU-12345678-1234-1234-1234-123456789abc:lots", "'lots' is not a memory size");
    bad("GPU-12345678-1234-1234-1234-123456789abc,12345678123412341234123456789ABC",
        "GPU-12345678-1234-1234-1234-123456789abc is listed twice");
    bad("auto,GPU-12345678-1234-1234-1234-123456789abc", "'auto' is not a GPU UUID");
    char many[SD_GPUS_LEN];
    size_t len = 0;
    for (int i = 0; i <= SD_NODE_MAX_GPUS; i++)
        len += (size_t)snprintf(many + len, sizeof many - len,
                                "%s12345678-1234-1234-1234-%012x", i ? "," : "", i);
    bad(many, "more than 64 GPUs");
    /* The setting goes through the same parser. */
    struct sd_config c;
    sd_config_defaults(&c);
    assert_string_equal(c.gpus, "auto");
    assert_int_equal(sd_config_set(&c, "gpus", "GPU-zz", false, err, sizeof err), -1);
    assert_non_null(strstr(err, "gpus: 'GPU-zz' is not a GPU UUID"));
    assert_int_equal(sd_config_set(&c, "gpus", "auto", true, err, sizeof err), -1);
    assert_non_null(strstr(err, "start-up"));
}

/* libinih reads 200 characters a line: a list goes on several lines, which
 * add up (a repeated key or indented continuation lines). */
static void test_config_lines_add_up(void **state)
{
    (void)state;
    const char *t = getenv("TEST_TMP");
    char path[512];
    snprintf(path, sizeof path, "%s/gpus.conf", t && *t ? t : "/tmp");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("[cushared]\n"
          "gpus = GPU-12345678-1234-1234-1234-000000000000:80G,\n"
          "       GPU-12345678-1234-1234-1234-000000000001:80G\n"
          "max_conns_per_uid = 4\n"
          "gpus = GPU-12345678-1234-1234-1234-000000000002:40G\n",
          f);
    fclose(f);
    struct sd_config c;
    struct sd_overrides ov = {0};
    sd_config_defaults(&c);
    assert_int_equal(sd_config_load(&c, &ov, path, err, sizeof err), 0);
    struct sd_node n;
    assert_int_equal(sd_node_parse(c.gpus, &n, err, sizeof err), 0);
    assert_int_equal(n.n, 3);
    assert_int_equal(n.gpu[2].mem_total, 40ull << 30);
    assert_int_equal(c.max_conns_per_uid, 4);
}

/* The simulated driver's UUIDs: deterministic per device (fc_device.c). */
static const char *const fake_uuid0 = "GPU-4c071990-d534-4322-ace9-31dd97317aff";

static void test_discover_driver(void **state)
{
    (void)state;
    struct sd_node n;
    struct sd_node_libs libs = {.nvml = "libnvidia-ml-absent.so.1"};
    sd_node_discover(&n, &libs);
    assert_string_equal(n.source, "driver");
    assert_int_equal(n.n, 2); /* FAKECUDA_DEVICES, set by main */
    uint8_t u[CS_UUID_LEN];
    uuid_of(fake_uuid0, u);
    assert_int_equal(sd_node_find(&n, u), 0);
    assert_int_equal(n.gpu[0].mem_total, 512ull << 20); /* FAKECUDA_MEM_MB */
    assert_memory_not_equal(n.gpu[0].uuid, n.gpu[1].uuid, CS_UUID_LEN);
}

static void nvml_path(char *out, size_t cap)
{
    const char *b = getenv("CUSHARE_BUILD");
    snprintf(out, cap, "%s/tests/k8s/nvml/libnvidia-ml.so.1", b && *b ? b : "build");
}

static void test_discover_nvml_first(void **state)
{
    (void)state;
    char lib[512];
    nvml_path(lib, sizeof lib);
    setenv("FAKE_NVML_GPUS", "3", 1);
    struct sd_node n;
    struct sd_node_libs libs = {.nvml = lib};
    sd_node_discover(&n, &libs);
    assert_string_equal(n.source, "NVML");
    assert_int_equal(n.n, 3);
    uint8_t u[CS_UUID_LEN];
    uuid_of("GPU-00000000-0000-0000-0000-000000000002", u);
    assert_int_equal(sd_node_find(&n, u), 2);
    assert_int_equal(n.gpu[2].mem_total, 16384ull << 20);
    /* NVML there but failing: the driver answers. */
    setenv("FAKE_NVML_INIT_FAIL", "1", 1);
    sd_node_discover(&n, &libs);
    assert_string_equal(n.source, "driver");
    assert_int_equal(n.n, 2);
    unsetenv("FAKE_NVML_INIT_FAIL");
    unsetenv("FAKE_NVML_GPUS");
}

static void test_discover_nothing(void **state)
{
    (void)state;
    struct sd_node n;
    struct sd_node_libs libs = {.nvml = "libnvidia-ml-absent.so.1",
                                .cuda = "libcuda-absent.so.1"};
    sd_node_discover(&n, &libs);
    assert_int_equal(n.n, 0);
    assert_string_equal(n.source, "none");
    /* Not an error: the daemon starts and refuses every ATTACH. */
    assert_int_equal(sd_node_init(&n, "GPU-12345678-1234-1234-1234-123456789abc", err,
                                  sizeof err),
                     0);
    assert_int_equal(n.n, 1);
}

int main(void)
{
    cs_log_init("test_node", CS_LOG_ERROR);
    /* Read by the simulated driver at its cuInit, in this process. */
    setenv("FAKECUDA_DEVICES", "2", 1);
    setenv("FAKECUDA_MEM_MB", "512", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_auto_and_lists),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_config_lines_add_up),
        cmocka_unit_test(test_discover_driver),
        cmocka_unit_test(test_discover_nvml_first),
        cmocka_unit_test(test_discover_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
