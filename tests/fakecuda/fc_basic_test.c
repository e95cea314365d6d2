/* fc_basic_test: initialization, devices and attributes, error names,
 * cuGetProcAddress, and the NOT_SUPPORTED fallback of the simulated driver.
 * Runs with FAKECUDA_DEVICES=2 FAKECUDA_MEM_MB=256 (set before cuInit). */
#include "fc_testutil.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static void *self_sym(const char *name)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(h);
    void *p = dlsym(h, name);
    dlclose(h);
    assert_non_null(p);
    return p;
}

/* Before cuInit: device calls say NOT_INITIALIZED; version queries and
 * cuGetProcAddress work (the runtime calls them first). */
static void test_before_init(void **state)
{
    int n = -1, v = 0;
    CUcontext c;
    CUdeviceptr p;
    CKR(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    CKR(cuCtxGetCurrent(&c), CUDA_ERROR_NOT_INITIALIZED);
    CKR(cuMemAlloc(&p, 16), CUDA_ERROR_NOT_INITIALIZED);
    CK(cuDriverGetVersion(&v));
    assert_int_equal(v, 13000);
    void *fn = NULL;
    CK(cuGetProcAddress("cuInit", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, NULL));
    assert_ptr_equal(fn, self_sym("cuInit"));
    CKR(cuInit(1), CUDA_ERROR_INVALID_VALUE);
    CK(cuInit(0));
    CK(cuInit(0));                      /* idempotent */
}

static void test_devices(void **state)
{
    int n;
    CUdevice d;
    char name[64];
    size_t total;
    CK(cuDeviceGetCount(&n));
    assert_int_equal(n, 2);
    CK(cuDeviceGet(&d, 1));
    assert_int_equal(d, 1);
    CKR(cuDeviceGet(&d, 2), CUDA_ERROR_INVALID_DEVICE);
    CKR(cuDeviceGet(&d, -1), CUDA_ERROR_INVALID_DEVICE);
    CKR(cuDeviceGet(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    CK(cuDeviceGetName(name, sizeof name, 0));
    assert_string_equal(name, "cushare simulated GPU");
    CK(cuDeviceGetName(name, 5, 0));
    assert_string_equal(name, "cush");
    CKR(cuDeviceGetName(name, 0, 0), CUDA_ERROR_INVALID_VALUE);
    CK(cuDeviceTotalMem(&total, 1));
    assert_int_equal(total, 256 * MiB);
    CKR(cuDeviceTotalMem(&total, 7), CUDA_ERROR_INVALID_DEVICE);
}

static void test_attributes(void **state)
{
    static const struct {
        CUdevice_attribute a;
        int want;
    } expect[] = {
        { CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9 },
        { CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0 },
        { CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 132 },
        { CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32 },
        { CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024 },
        { CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1 },
        { CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1 },
        { CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1 },
        { CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 1 },
        { CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, 0 },
        { CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1 },
        { CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS, 1 },
        { CU_DEVICE_ATTRIBUTE_INTEGRATED, 0 },
    };
    int v;
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++) {
        CK(cuDeviceGetAttribute(&v, expect[i].a, 0));
        assert_int_equal(v, expect[i].want);
    }
    CK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 1));
    assert_int_equal(v, 1);
    CKR(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
    CKR(cuDeviceGetAttribute(&v, (CUdevice_attribute)0, 0), CUDA_ERROR_INVALID_VALUE);
    CKR(cuDeviceGetAttribute(NULL, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0), CUDA_ERROR_INVALID_VALUE);
    int can = -1;
    CK(cuDeviceCanAccessPeer(&can, 0, 1));
    assert_int_equal(can, 0);
}

static void uuid_of(int dev, CUuuid *u)
{
    CK(cuDeviceGetUuid(u, dev));
}

/* The UUID depends on the device index only: stable across calls, distinct
 * per device, identical in another process with another FAKECUDA_SHM. */
static void test_uuid(void **state)
{
    CUuuid a, b, c;
    uuid_of(0, &a);
    uuid_of(0, &b);
    uuid_of(1, &c);
    assert_memory_equal(a.bytes, b.bytes, 16);
    assert_memory_not_equal(a.bytes, c.bytes, 16);
    CK(cuDeviceGetUuid_v2(&b, 1));
    assert_memory_equal(b.bytes, c.bytes, 16);

    int fds[2];
    assert_int_equal(pipe(fds), 0);
    char shm[128];
    const char *base = getenv("FAKECUDA_SHM");
    snprintf(shm, sizeof shm, "%s-uuid%d", base ? base : "fc-basic", (int)getpid());
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 1);
        setenv("FAKECUDA_SHM", shm, 1);
        execl("/proc/self/exe", "fc_basic_test", "--print-uuid", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    unsigned char other[16];
    ssize_t got = 0, r;
    while (got < 16 && (r = read(fds[0], other + got, 16 - (size_t)got)) > 0)
        got += r;
    close(fds[0]);
    int st;
    waitpid(pid, &st, 0);
    char path[160];
    snprintf(path, sizeof path, "/fakecuda-%s", shm);
    assert_int_equal(shm_unlink(path), 0);     /* the probe made its own */
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(got, 16);
    assert_memory_equal(other, c.bytes, 16);
}

static void test_pci_bus_id(void **state)
{
    char id[32];
    CUdevice d;
    CK(cuDeviceGetPCIBusId(id, sizeof id, 1));
    assert_string_equal(id, "0000:01:00.0");
    CK(cuDeviceGetByPCIBusId(&d, id));
    assert_int_equal(d, 1);
    CKR(cuDeviceGetByPCIBusId(&d, "0000:09:00.0"), CUDA_ERROR_INVALID_DEVICE);
    CKR(cuDeviceGetByPCIBusId(&d, "nonsense"), CUDA_ERROR_INVALID_VALUE);
}

/* Every CUresult of the cuda.h in use has its own name. */
static const struct {
    CUresult code;
    const char *name;
} all_codes[] = {
#define FC_ERR(n, text) { n, #n },
#include "fc_errors.inc"
#undef FC_ERR
};

static void test_error_names(void **state)
{
    const char *s;
    assert_true(sizeof all_codes / sizeof all_codes[0] > 90);
    for (size_t i = 0; i < sizeof all_codes / sizeof all_codes[0]; i++) {
        CK(cuGetErrorName(all_codes[i].code, &s));
        assert_string_equal(s, all_codes[i].name);
        CK(cuGetErrorString(all_codes[i].code, &s));
        assert_non_null(s);
        assert_true(strlen(s) > 0);
    }
    CK(cuGetErrorString(CUDA_ERROR_INVALID_VALUE, &s));
    assert_string_equal(s, "invalid argument");
    CK(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s));
    assert_string_equal(s, "out of memory");
    CK(cuGetErrorString(CUDA_ERROR_ILLEGAL_ADDRESS, &s));
    assert_string_equal(s, "an illegal memory access was encountered");
    CKR(cuGetErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
    assert_null(s);
    CKR(cuGetErrorString((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
    CKR(cuGetErrorName(CUDA_SUCCESS, NULL), CUDA_ERROR_INVALID_VALUE);
}

static void expect_proc(const char *api, int version, cuuint64_t flags, const char *symbol)
{
    void *fn = (void *)1;
    CUdriverProcAddressQueryResult st = -1;
    CK(cuGetProcAddress(api, &fn, version, flags, &st));
    assert_int_equal(st, CU_GET_PROC_ADDRESS_SUCCESS);
    if (fn != self_sym(symbol))
        fail_msg("cuGetProcAddress(%s, %d, %llu) is not %s", api, version,
                 (unsigned long long)flags, symbol);
}

/* Not found: CUDA_SUCCESS with a NULL pointer and the reason in the
 * status, like the real driver (the 4-argument form says NOT_FOUND). */
static void expect_no_proc(const char *api, int version, cuuint64_t flags,
                           CUdriverProcAddressQueryResult want)
{
    void *fn = (void *)1;
    CUdriverProcAddressQueryResult st = -1;
    CK(cuGetProcAddress(api, &fn, version, flags, &st));
    assert_int_equal(st, want);
    assert_null(fn);
    CUresult (*v1)(const char *, void **, int, cuuint64_t) = self_sym("cuGetProcAddress");
    CKR(v1(api, &fn, version, flags), CUDA_ERROR_NOT_FOUND);
}

static void test_procaddr(void **state)
{
    const cuuint64_t PT = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    const cuuint64_t LEG = CU_GET_PROC_ADDRESS_LEGACY_STREAM;
    expect_proc("cuMemAlloc", 13000, 0, "cuMemAlloc_v2");
    expect_proc("cuMemAlloc", 3020, 0, "cuMemAlloc_v2");
    expect_proc("cuMemAlloc", 3000, 0, "cuMemAlloc");          /* v1 at old versions */
    expect_proc("cuCtxCreate", 13000, 0, "cuCtxCreate_v4");
    expect_proc("cuCtxCreate", 12000, 0, "cuCtxCreate_v3");
    expect_proc("cuCtxCreate", 4000, 0, "cuCtxCreate_v2");
    expect_proc("cuMemcpyHtoD", 13000, PT, "cuMemcpyHtoD_v2_ptds");
    expect_proc("cuMemcpyHtoD", 13000, LEG, "cuMemcpyHtoD_v2");
    expect_proc("cuMemcpyHtoD", 13000, 0, "cuMemcpyHtoD_v2");   /* DEFAULT = legacy */
    expect_proc("cuMemcpyHtoDAsync", 12000, PT, "cuMemcpyHtoDAsync_v2_ptsz");
    expect_proc("cuLaunchKernel", 12000, PT, "cuLaunchKernel_ptsz");
    expect_proc("cuLaunchKernel", 6050, LEG, "cuLaunchKernel");
    expect_proc("cuStreamBeginCapture", 10000, PT, "cuStreamBeginCapture_ptsz");
    expect_proc("cuStreamBeginCapture", 12000, PT, "cuStreamBeginCapture_v2_ptsz");
    expect_proc("cuStreamBeginCapture", 12000, 0, "cuStreamBeginCapture_v2");
    expect_proc("cuCtxSynchronize", 13000, 0, "cuCtxSynchronize_v2");
    expect_proc("cuCtxSynchronize", 12080, 0, "cuCtxSynchronize");
    expect_proc("cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2");
    expect_proc("cuGetProcAddress", 11030, 0, "cuGetProcAddress");
    expect_no_proc("cuNotAnEntryPoint", 13000, 0, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    expect_no_proc("cuMemAlloc_v2", 13000, 0, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    expect_no_proc("cuLaunchKernelEx", 11000, 0, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    expect_no_proc("cuMemAlloc", 1000, 0, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    /* With the per-thread flag an api that has per-thread forms is answered
     * from those only: no _ptsz before 7.0, so nothing (not the legacy one). */
    expect_no_proc("cuLaunchKernel", 6050, PT, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    void *fn;
    CKR(cuGetProcAddress("cuMemAlloc", &fn, 13000, 4, NULL), CUDA_ERROR_INVALID_VALUE);
    CKR(cuGetProcAddress("cuMemAlloc", &fn, 13010, 0, NULL), CUDA_ERROR_INVALID_VALUE);  /* newer than the driver */
    CKR(cuGetProcAddress(NULL, &fn, 13000, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    CKR(cuGetProcAddress("cuMemAlloc", NULL, 13000, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    /* The 11.3 form (4 arguments). */
    CUresult (*v1)(const char *, void **, int, cuuint64_t) = self_sym("cuGetProcAddress");
    CK(v1("cuMemFree", &fn, 13000, 0));
    assert_ptr_equal(fn, self_sym("cuMemFree_v2"));
    /* What it returns is callable. */
    CUresult (*ver)(int *) = fct_proc("cuDriverGetVersion", 13000, 0);
    int v = 0;
    CK(ver(&v));
    assert_int_equal(v, 13000);
}

/* Table-driven: every row of the generated entry-point table resolves to
 * its own symbol when asked at exactly its version with its variant. */
struct row {
    const char *api, *symbol;
    int version;
    bool pt;
};
static const struct row table[] = {
#define CS_API(api, symbol, version, variant) { #api, #symbol, version, #variant[1] == 'T' },
#define CS_API_SYMBOL(symbol)
#include "common/cuda_api_table.h"
#undef CS_API
#undef CS_API_SYMBOL
};

static void test_procaddr_table(void **state)
{
    size_t n = sizeof table / sizeof table[0];
    assert_true(n > 600);
    for (size_t i = 0; i < n; i++) {
        bool newer_same_version = false;
        for (size_t j = 0; j < n; j++)
            if (j != i && strcmp(table[j].api, table[i].api) == 0
                && table[j].version == table[i].version && table[j].pt == table[i].pt)
                newer_same_version = true;
        if (newer_same_version)
            continue;
        expect_proc(table[i].api, table[i].version,
                    table[i].pt ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                : CU_GET_PROC_ADDRESS_LEGACY_STREAM,
                    table[i].symbol);
    }
}

/* Unsupported entry points answer NOT_SUPPORTED and say so once. */
static void test_unsupported(void **state)
{
    int err = dup(2);
    char path[] = "/tmp/fc_basic_stderr.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    dup2(fd, 2);
    CUarray arr;
    CUDA_ARRAY_DESCRIPTOR desc = { 16, 16, CU_AD_FORMAT_FLOAT, 1 };
    CUresult r1 = cuArrayCreate(&arr, &desc);
    CUresult r2 = cuArrayCreate(&arr, &desc);
    const void *tab;
    CUuuid id = { { 0 } };
    CUresult r3 = cuGetExportTable(&tab, &id);
    dup2(err, 2);
    close(err);
    char buf[512] = { 0 };
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    close(fd);
    unlink(path);
    assert_int_equal(r1, CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(r2, CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(r3, CUDA_ERROR_NOT_SUPPORTED);
    assert_true(n > 0);
    const char *msg = "fakecuda: cuArrayCreate_v2 is not supported by the simulated driver\n";
    char *first = strstr(buf, msg);
    assert_non_null(first);
    assert_null(strstr(first + 1, msg));      /* once */
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--print-uuid") == 0) {
        CUuuid u;
        if (cuInit(0) != CUDA_SUCCESS || cuDeviceGetUuid(&u, 1) != CUDA_SUCCESS)
            return 1;
        return write(1, u.bytes, 16) == 16 ? 0 : 1;
    }
    setenv("FAKECUDA_DEVICES", "2", 1);
    setenv("FAKECUDA_MEM_MB", "256", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_before_init),
        cmocka_unit_test(test_devices),
        cmocka_unit_test(test_attributes),
        cmocka_unit_test(test_uuid),
        cmocka_unit_test(test_pci_bus_id),
        cmocka_unit_test(test_error_names),
        cmocka_unit_test(test_procaddr),
        cmocka_unit_test(test_procaddr_table),
        cmocka_unit_test(test_unsupported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
