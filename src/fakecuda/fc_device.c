/* fc_device.c: cuInit, the driver version, devices and their attributes,
 * and fork handling.
 *
 * Configuration is read once, at the first successful cuInit:
 *   FAKECUDA_DEVICES   number of devices (default 1, 0..8)
 *   FAKECUDA_MEM_MB    device memory per device (default 1024)
 *   FAKECUDA_PCIE_GBPS host<->device bandwidth per direction (default 10)
 *   FAKECUDA_SHM       cross-process state name (default uid<uid>)
 *   FAKECUDA_TRACE     file receiving one line per executed kernel
 *   FAKECUDA_MEMCREATE_GBPS  the rate at which device memory is created
 *                      (cuMemAlloc, cuMemCreate); the driver clears and maps
 *                      the pages, so a large allocation takes time (default
 *                      0: instant), per process
 *   FAKECUDA_PIN_GBPS  the rate at which host memory is pinned
 *                      (cuMemHostAlloc, cuMemHostRegister, cuMemCreate of
 *                      host memory: HOST, HOST_NUMA and HOST_NUMA_CURRENT
 *                      locations alike; the H100's host pins at ~2-3 GB/s,
 *                      a twentieth of its copy rate); default 0: instant,
 *                      per process
 *   FAKECUDA_HOSTMAP_GBPS the rate at which cuMemSetAccess gives the device
 *                      access to HOST-located VMM memory (the H100 sets up
 *                      its small pages at ~0.1 GB/s: 9.5 ms/GiB,
 *                      bench/results/addresses.md); default 0: instant
 *   FAKECUDA_FD_HANDLES 0 models a driver without POSIX file descriptor
 *                      handles for VMM memory (default 1), per process
 *   FAKECUDA_PEER      1: distinct devices can access each other's memory
 *                      (cuDeviceCanAccessPeer, cuCtxEnablePeerAccess);
 *                      default 0, per process
 *
 * Fork: a child inherits none of the parent's CUDA state. Its first call
 * after fork sees an uninitialized driver (CUDA_ERROR_NOT_INITIALIZED, the
 * parent's handles are invalid), and cuInit in the child initializes it
 * afresh as a new process with its own share of the simulated devices. The
 * real driver refuses CUDA in such a child altogether; the simulator is
 * more permissive so that tests can fork helpers freely.
 */
#include "fakecuda/fc_internal.h"

#include <ctype.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct fc_proc fc_proc = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .trace_fd = -1,
};

/* Set once (under fc_proc.lock); inherited by children, like the handlers. */
static bool atfork_registered;

static void atfork_child(void)
{
    /* Only the forking thread exists in the child: no locking needed, and
     * no inherited lock may be trusted, so everything starts over. */
    pthread_mutex_init(&fc_proc.lock, NULL);
    atomic_store(&fc_proc.ready, 0);
    fc_proc.init_err = CUDA_SUCCESS;
    if (fc_proc.trace_fd >= 0)
        close(fc_proc.trace_fd);
    fc_proc.trace_fd = -1;
    if (fc_proc.shm)
        munmap(fc_proc.shm, fc_proc.shm_size);
    fc_proc.shm = NULL;
    fc_handle_atfork_child();
    fc_addrmap_reset();
    fc_shm_atfork_child();
    fc_ctx_atfork_child();
    fc_stream_atfork_child();
    fc_capture_atfork_child();
    fc_mem_atfork_child();
    fc_vmm_atfork_child();
    fc_module_atfork_child();
    fc_texture_atfork_child();
}

static bool shm_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 100)
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr("._-", *s))
            return false;
    return true;
}

static void read_config(struct fc_config *c)
{
    c->ndev = (int)fc_env_u64("FAKECUDA_DEVICES", 1, 0, FC_MAX_DEVICES);
    c->mem_bytes = fc_env_u64("FAKECUDA_MEM_MB", 1024, 16, 1u << 24) << 20;
    c->bytes_per_ns = fc_env_double("FAKECUDA_PCIE_GBPS", 10.0, 0.001, 100000.0);
    c->concurrent = fc_env_u64("FAKECUDA_CONCURRENT", 0, 0, 1) == 1;
    c->timeslice_ns = fc_env_u64("FAKECUDA_TIMESLICE_US", 0, 0, 1000000) * 1000;
    c->create_bytes_per_ns = fc_env_double("FAKECUDA_MEMCREATE_GBPS", 0.0, 0.0, 100000.0);
    c->pin_bytes_per_ns = fc_env_double("FAKECUDA_PIN_GBPS", 0.0, 0.0, 100000.0);
    c->hostmap_bytes_per_ns = fc_env_double("FAKECUDA_HOSTMAP_GBPS", 0.0, 0.0, 100000.0);
    const char *name = getenv("FAKECUDA_SHM");
    if (name && !shm_name_ok(name)) {
        fc_log("FAKECUDA_SHM=\"%s\" is not a name of 1-100 letters, digits, "
               "'.', '_' or '-'; using the default", name);
        name = NULL;
    }
    if (name)
        snprintf(c->shm_name, sizeof c->shm_name, "/fakecuda-%s", name);
    else
        snprintf(c->shm_name, sizeof c->shm_name, "/fakecuda-uid%u",
                 (unsigned)getuid());
}

static void rate_delay(uint64_t size, double bytes_per_ns)
{
    if (bytes_per_ns > 0)
        fc_sleep_ns((uint64_t)((double)size / bytes_per_ns));
}

void fc_create_delay(uint64_t size)
{
    rate_delay(size, fc_proc.cfg.create_bytes_per_ns);
}

void fc_pin_delay(uint64_t size)
{
    rate_delay(size, fc_proc.cfg.pin_bytes_per_ns);
}

void fc_hostmap_delay(uint64_t size)
{
    rate_delay(size, fc_proc.cfg.hostmap_bytes_per_ns);
}

static void open_trace(void)
{
    const char *path = getenv("FAKECUDA_TRACE");
    if (!path || !*path)
        return;
    fc_proc.trace_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fc_proc.trace_fd < 0)
        fc_log("FAKECUDA_TRACE=%s cannot be opened; no trace", path);
}

static CUresult init_locked(void)
{
    struct fc_config want;
    read_config(&want);
    if (want.ndev == 0)
        return CUDA_ERROR_NO_DEVICE;
    fc_proc.pid = getpid();
    fc_proc.start = fc_proc_start(fc_proc.pid);
    fc_proc.fd_handles = fc_env_u64("FAKECUDA_FD_HANDLES", 1, 0, 1) == 1;
    fc_proc.peer = fc_env_u64("FAKECUDA_PEER", 0, 0, 1) == 1;
    CUresult r = fc_shm_attach(&want, &fc_proc.cfg, &fc_proc.shm, &fc_proc.shm_size);
    if (r != CUDA_SUCCESS)
        return r;
    open_trace();
    fc_stream_tls_init();
    if (!atfork_registered) {
        pthread_atfork(NULL, NULL, atfork_child);
        atfork_registered = true;
    }
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuInit(unsigned int Flags)
{
    FC_FAULT(cuInit);
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (fc_ready() == CUDA_SUCCESS)
        return CUDA_SUCCESS;
    pthread_mutex_lock(&fc_proc.lock);
    CUresult r = fc_proc.init_err;
    if (r == CUDA_SUCCESS && !atomic_load(&fc_proc.ready)) {
        r = init_locked();
        if (r == CUDA_SUCCESS)
            atomic_store_explicit(&fc_proc.ready, 1, memory_order_release);
        else
            fc_proc.init_err = r;
    }
    pthread_mutex_unlock(&fc_proc.lock);
    return r;
}

CUresult CUDAAPI cuDriverGetVersion(int *driverVersion)
{
    if (!driverVersion)
        return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = FC_DRIVER_VERSION;
    return CUDA_SUCCESS;
}

CUresult fc_check_device(CUdevice dev)
{
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    return dev >= 0 && dev < fc_proc.cfg.ndev ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult CUDAAPI cuDeviceGetCount(int *count)
{
    FC_FAULT(cuDeviceGetCount);
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    *count = fc_proc.cfg.ndev;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal)
{
    FC_FAULT(cuDeviceGet);
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_check_device(ordinal);
    if (r == CUDA_SUCCESS)
        *device = ordinal;
    return r;
}

CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev)
{
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    snprintf(name, (size_t)len, "%s", FC_DEVICE_NAME);
    return CUDA_SUCCESS;
}

/* Deterministic per device index (an FNV-1a stream over a fixed label), so
 * that every process, whatever its FAKECUDA_SHM, sees the same UUIDs. */
static void make_uuid(int dev, unsigned char out[16])
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < 16; i++) {
        const char *label = "cushare-fakecuda";
        h ^= (unsigned char)label[i] + (uint64_t)dev * 131u;
        h *= 0x100000001b3ull;
        out[i] = (unsigned char)(h >> 32);
    }
    out[6] = (unsigned char)((out[6] & 0x0f) | 0x40);   /* version 4 */
    out[8] = (unsigned char)((out[8] & 0x3f) | 0x80);   /* RFC 4122 variant */
}

static CUresult device_uuid(CUuuid *uuid, CUdevice dev)
{
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_check_device(dev);
    if (r == CUDA_SUCCESS)
        make_uuid(dev, (unsigned char *)uuid->bytes);
    return r;
}

CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    FC_FAULT(cuDeviceGetUuid_v2);
    return device_uuid(uuid, dev);
}

CUresult CUDAAPI cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    FC_FAULT(cuDeviceGetUuid);
    return device_uuid(uuid, dev);
}

CUresult CUDAAPI cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
    if (!pciBusId || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_check_device(dev);
    if (r == CUDA_SUCCESS)
        snprintf(pciBusId, (size_t)len, "0000:%02x:00.0", (unsigned)dev);
    return r;
}

CUresult CUDAAPI cuDeviceGetByPCIBusId(CUdevice *dev, const char *pciBusId)
{
    if (!dev || !pciBusId)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    unsigned dom = 0, bus = 0, slot = 0, fn = 0;
    if (sscanf(pciBusId, "%x:%x:%x.%x", &dom, &bus, &slot, &fn) != 4
        && sscanf(pciBusId, "%x:%x.%x", &bus, &slot, &fn) != 3)
        return CUDA_ERROR_INVALID_VALUE;
    if (dom != 0 || slot != 0 || fn != 0 || bus >= (unsigned)fc_proc.cfg.ndev)
        return CUDA_ERROR_INVALID_DEVICE;
    *dev = (CUdevice)bus;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    FC_FAULT(cuDeviceTotalMem_v2);
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_check_device(dev);
    if (r == CUDA_SUCCESS)
        *bytes = fc_proc.cfg.mem_bytes;
    return r;
}

/* H100 SXM values (checked against a real one, driver 580), except where
 * the simulation differs: two async engines (one per copy direction, as
 * simulated), no shareable handles but POSIX descriptors (those as
 * FAKECUDA_FD_HANDLES says; no mempool handle types, RDMA, dma-buf).
 * Anything not listed is 0. */
static int attribute(CUdevice_attribute a, CUdevice dev)
{
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return 49152;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: return 65536;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: return 65536;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: return 1980000;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: return 512;
    case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP: return 1;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return 132;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: return CU_COMPUTEMODE_DEFAULT;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH: return 131072;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH: return 131072;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT: return 65536;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH: return 16384;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT: return 16384;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH: return 16384;
    case CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT: return 512;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: return 1;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: return 1;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: return dev;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: return 2619000;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return 5120;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return 50 << 20;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return 2048;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: return 2;   /* H2D + D2H */
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT: return 32;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: return 233472;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: return 65536;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID: return dev;
    case CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO: return 2;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: return 1;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return 232448;
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: return fc_proc.fd_handles;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE: return 32768000;
    case CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE: return 134213632;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS: return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR: return 1;
    case CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT: return 4;
    case CU_DEVICE_ATTRIBUTE_TENSOR_MAP_ACCESS_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS: return 1;
    case CU_DEVICE_ATTRIBUTE_NUMA_ID: return -1;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID: return 0;   /* the H100 box's node */
    case CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: return 1;
    /* cuMemCreate takes HOST_NUMA locations (as the H100's driver does). */
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: return 1;
    default: return 0;
    }
}

CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    FC_FAULT(cuDeviceGetAttribute);
    if (!pi)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if ((int)attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    *pi = attribute(attrib, dev);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceComputeCapability(int *major, int *minor, CUdevice dev)
{
    if (!major || !minor)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_check_device(dev);
    if (r == CUDA_SUCCESS) {
        *major = 9;
        *minor = 0;
    }
    return r;
}

CUresult CUDAAPI cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
    FC_FAULT(cuDeviceCanAccessPeer);
    if (!canAccessPeer)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_check_device(dev);
    if (r == CUDA_SUCCESS)
        r = fc_check_device(peerDev);
    if (r == CUDA_SUCCESS)
        *canAccessPeer = fc_proc.peer && dev != peerDev;
    return r;
}

CUresult CUDAAPI cuDeviceGetP2PAttribute(int *value, CUdevice_P2PAttribute attrib,
                                         CUdevice srcDevice, CUdevice dstDevice)
{
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_check_device(srcDevice);
    if (r == CUDA_SUCCESS)
        r = fc_check_device(dstDevice);
    if (r == CUDA_SUCCESS && srcDevice == dstDevice)
        r = CUDA_ERROR_INVALID_DEVICE;
    if (r == CUDA_SUCCESS)
        *value = 0;
    return r;
}

CUresult CUDAAPI cuDeviceGetExecAffinitySupport(int *pi, CUexecAffinityType type, CUdevice dev)
{
    if (!pi)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_check_device(dev);
    if (r == CUDA_SUCCESS)
        *pi = 0;
    return r;
}

/* The real driver refuses; callers fall back to their own helpers. */
CUresult CUDAAPI cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
    if (ppExportTable)
        *ppExportTable = NULL;
    static atomic_flag logged = ATOMIC_FLAG_INIT;
    if (!atomic_flag_test_and_set(&logged))
        fc_unsupported_log("cuGetExportTable");
    return CUDA_ERROR_NOT_SUPPORTED;
}
