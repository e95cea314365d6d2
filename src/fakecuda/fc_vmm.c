/* fc_vmm.c: virtual memory management (cuMemAddressReserve, cuMemCreate,
 * cuMemMap, cuMemSetAccess...).
 *
 * A reservation is a PROT_NONE mapping of address space. A physical
 * allocation (cuMemCreate) is a memfd: DEVICE-located ones are charged to
 * the device's capacity and filled with FC_POISON, HOST-located ones are
 * pinned host memory (zero, not charged). cuMemMap maps the memfd with
 * MAP_FIXED into the reservation; cuMemUnmap puts PROT_NONE address space
 * back, so the reservation keeps its address across unmap/remap and only
 * an explicit copy restores contents. Device access to a mapping needs
 * cuMemSetAccess first, like on a real GPU.
 *
 * Physical memory lives while its handle is held or it is mapped: a
 * handle released while still mapped keeps the memory alive until the
 * last unmap, like the real driver. A recreated allocation is a new memfd,
 * so no old data can ever reappear at the same address.
 *
 * Shareable handles: an allocation created with the POSIX file descriptor
 * handle type exports a duplicate of its memfd, and any process of the
 * simulator imports it (cuMemImportFromShareableHandle), mapping the same
 * pages. The memfd's name carries the location ("fakecuda-dev<N>",
 * "fakecuda-numa<N>" for a host NUMA node, "fakecuda-host"), as the real
 * driver's descriptor carries its properties. Like the H100's driver (580),
 * cuMemCreate refuses a HOST location with the POSIX descriptor handle type
 * (CUDA_ERROR_INVALID_VALUE) and takes HOST_NUMA with it: exportable host
 * memory is NUMA-placed. None of this needs a context, only cuInit.
 * Imported memory is charged to nobody: the exporter paid for it (its charge
 * goes when the exporter releases it, even if an importer still maps it,
 * which the real driver would keep counted until the last mapping).
 */
#include "fakecuda/fc_internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct fc_phys {
    uint64_t handle;
    int fd;
    size_t size;
    int dev;                         /* the device it is on, -1 for host memory */
    bool charged;                    /* counted in dev's capacity (created here) */
    CUmemAllocationProp prop;
    int hrefs;                       /* cuMemCreate + retains - releases */
    int maps;                        /* live mappings */
};

/* Physical allocations by handle (ascending: handles only grow). vmm_lock
 * guards the table and every fc_phys's counters; lock order is vmm_lock,
 * then the address map's lock. */
static pthread_mutex_t vmm_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fc_phys **phys;
static size_t nphys, capphys;
static uint64_t next_handle = 0x1000;

static struct fc_phys *phys_find(uint64_t h)
{
    size_t lo = 0, hi = nphys;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (phys[mid]->handle < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < nphys && phys[lo]->handle == h ? phys[lo] : NULL;
}

static CUresult phys_insert(struct fc_phys *p)
{
    if (nphys == capphys) {
        size_t ncap = capphys ? capphys * 2 : 64;
        struct fc_phys **nv = realloc(phys, ncap * sizeof *nv);
        if (!nv)
            return CUDA_ERROR_OUT_OF_MEMORY;
        phys = nv;
        capphys = ncap;
    }
    p->handle = next_handle++;
    phys[nphys++] = p;
    return CUDA_SUCCESS;
}

/* Under vmm_lock: frees p once neither a handle nor a mapping holds it. */
static void phys_maybe_free(struct fc_phys *p)
{
    if (p->hrefs > 0 || p->maps > 0)
        return;
    for (size_t i = 0; i < nphys; i++) {
        if (phys[i] == p) {
            memmove(&phys[i], &phys[i + 1], (nphys - i - 1) * sizeof *phys);
            nphys--;
            break;
        }
    }
    close(p->fd);
    if (p->charged)
        fc_shm_uncharge(p->dev, p->size);
    free(p);
}

/* Gives p (hrefs 1) its handle; frees it on failure. */
static CUresult phys_publish(struct fc_phys *p, CUmemGenericAllocationHandle *handle)
{
    pthread_mutex_lock(&vmm_lock);
    CUresult r = phys_insert(p);
    if (r == CUDA_SUCCESS) {
        *handle = p->handle;
    } else {
        p->hrefs = 0;
        phys_maybe_free(p);
    }
    pthread_mutex_unlock(&vmm_lock);
    return r;
}

static bool granular(uint64_t x)
{
    return x % FC_GRANULARITY == 0;
}

/* ------------------------------------------------------------ properties */

/* Validates a CUmemAllocationProp; *dev = the charged device or -1. */
static CUresult check_prop(const CUmemAllocationProp *prop, int *dev)
{
    if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    switch (prop->location.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
        *dev = prop->location.id;
        return fc_check_device(prop->location.id);
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
        *dev = -1;
        return fc_ready();
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult CUDAAPI cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                               CUmemAllocationGranularity_flags option)
{
    FC_FAULT(cuMemGetAllocationGranularity);
    if (!granularity)
        return CUDA_ERROR_INVALID_VALUE;
    if (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)
        return CUDA_ERROR_INVALID_VALUE;
    int dev;
    CUresult r = check_prop(prop, &dev);
    if (r == CUDA_SUCCESS)
        *granularity = FC_GRANULARITY;
    return r;
}

/* --------------------------------------------------------- create/release */

#define FC_MEMFD_PREFIX "fakecuda-"

/* The memfd's name for an allocation at prop's location (dev: its device,
 * -1 for host memory). */
static void memfd_name(const CUmemAllocationProp *prop, int dev, char *name, size_t cap)
{
    if (dev >= 0)
        snprintf(name, cap, FC_MEMFD_PREFIX "dev%d", dev);
    else if (prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA)
        snprintf(name, cap, FC_MEMFD_PREFIX "numa%d", prop->location.id);
    else
        snprintf(name, cap, FC_MEMFD_PREFIX "host");
}

static int make_memfd(size_t size, const CUmemAllocationProp *prop, int dev)
{
    char name[32];
    memfd_name(prop, dev, name, sizeof name);
    bool poison = dev >= 0;
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    if (ftruncate(fd, (off_t)size) != 0) {
        close(fd);
        return -1;
    }
    if (poison && fc_fill_fd(fd, size) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                             const CUmemAllocationProp *prop, unsigned long long flags)
{
    FC_FAULT(cuMemCreate);
    if (!handle || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    int dev;
    CUresult r = check_prop(prop, &dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (size == 0 || !granular(size))
        return CUDA_ERROR_INVALID_VALUE;
    /* Measured on the H100: HOST memory is not exportable, HOST_NUMA is. */
    if (prop->location.type == CU_MEM_LOCATION_TYPE_HOST &&
        (prop->requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
        return CUDA_ERROR_INVALID_VALUE;
    if (prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE &&
        (prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
         !fc_proc.fd_handles))
        return CUDA_ERROR_NOT_SUPPORTED;      /* only POSIX descriptors */
    if (dev >= 0 && fc_shm_charge(dev, size) != CUDA_SUCCESS)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct fc_phys *p = calloc(1, sizeof *p);
    int fd = p ? make_memfd(size, prop, dev) : -1;
    if (fd < 0) {
        free(p);
        if (dev >= 0)
            fc_shm_uncharge(dev, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    p->fd = fd;
    p->size = size;
    p->dev = dev;
    p->charged = dev >= 0;
    p->prop = *prop;
    p->hrefs = 1;
    r = phys_publish(p, handle);
    if (r == CUDA_SUCCESS && dev >= 0)
        fc_create_delay(size);
    else if (r == CUDA_SUCCESS)
        fc_pin_delay(size);
    return r;
}

CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle)
{
    FC_FAULT(cuMemRelease);
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&vmm_lock);
    struct fc_phys *p = phys_find(handle);
    if (!p || p->hrefs == 0) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        p->hrefs--;
        phys_maybe_free(p);
    }
    pthread_mutex_unlock(&vmm_lock);
    return r;
}

CUresult CUDAAPI cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                        CUmemGenericAllocationHandle handle)
{
    if (!prop)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&vmm_lock);
    struct fc_phys *p = phys_find(handle);
    if (p && p->hrefs > 0)
        *prop = p->prop;
    else
        r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_unlock(&vmm_lock);
    return r;
}

CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&vmm_lock);
    struct fc_range rg;
    if (fc_map_find((uintptr_t)addr, &rg) && rg.kind == FC_R_VMM) {
        struct fc_phys *p = rg.obj;
        p->hrefs++;
        *handle = p->handle;
    } else {
        r = CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_unlock(&vmm_lock);
    return r;
}

/* ------------------------------------------------------- shareable handles */

CUresult CUDAAPI cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                              CUmemAllocationHandleType handleType,
                                              unsigned long long flags)
{
    FC_FAULT(cuMemExportToShareableHandle);
    if (!shareableHandle || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&vmm_lock);
    struct fc_phys *p = phys_find(handle);
    if (!p || p->hrefs == 0 ||
        !(p->prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
        r = CUDA_ERROR_INVALID_VALUE;  /* not created shareable */
    } else {
        int fd = fcntl(p->fd, F_DUPFD_CLOEXEC, 0);
        if (fd < 0)
            r = CUDA_ERROR_OUT_OF_MEMORY;
        else
            *(int *)shareableHandle = fd;
    }
    pthread_mutex_unlock(&vmm_lock);
    return r;
}

/* The location a simulator memfd was created for, from its name: device
 * ordinal, -1 for host (*numa: its node, -1 for a plain HOST location);
 * false if fd is not one of ours. */
static bool memfd_location(int fd, int *dev, int *numa)
{
    *numa = -1;
    char link[64], target[128];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0)
        return false;
    target[n] = 0;
    const char *want = "/memfd:" FC_MEMFD_PREFIX;
    if (strncmp(target, want, strlen(want)) != 0)
        return false;
    const char *rest = target + strlen(want);
    if (strncmp(rest, "host", 4) == 0) {
        *dev = -1;
        return true;
    }
    if (sscanf(rest, "numa%d", numa) == 1 && *numa >= 0) {
        *dev = -1;
        return true;
    }
    return sscanf(rest, "dev%d", dev) == 1 && *dev >= 0;
}

CUresult CUDAAPI cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                                CUmemAllocationHandleType shHandleType)
{
    FC_FAULT(cuMemImportFromShareableHandle);
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_NOT_SUPPORTED;
    int in = (int)(intptr_t)osHandle, dev, numa;
    struct stat st;
    if (in < 0 || !memfd_location(in, &dev, &numa) || fstat(in, &st) != 0 || st.st_size <= 0 ||
        !granular((uint64_t)st.st_size))
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_phys *p = calloc(1, sizeof *p);
    /* The caller keeps its descriptor (as with the real driver). */
    int fd = p ? fcntl(in, F_DUPFD_CLOEXEC, 0) : -1;
    if (fd < 0) {
        free(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    p->fd = fd;
    p->size = (size_t)st.st_size;
    p->dev = dev;
    p->charged = false;
    p->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p->prop.location.type = dev >= 0    ? CU_MEM_LOCATION_TYPE_DEVICE
                            : numa >= 0 ? CU_MEM_LOCATION_TYPE_HOST_NUMA
                                        : CU_MEM_LOCATION_TYPE_HOST;
    p->prop.location.id = dev >= 0 ? dev : numa >= 0 ? numa : 0;
    p->prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    p->hrefs = 1;
    r = phys_publish(p, handle);
    return r;
}

/* ------------------------------------------------------------ address space */

static bool pow2(size_t x)
{
    return x && !(x & (x - 1));
}

/* Reserves size bytes aligned to `align`: at `hint` when that range is
 * free, else anywhere (over-reserve, then trim both ends). */
static void *reserve(size_t size, size_t align, uintptr_t hint)
{
    int fl = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    if (hint && hint % align == 0) {
        void *p = mmap((void *)hint, size, PROT_NONE, fl | MAP_FIXED_NOREPLACE, -1, 0);
        if (p == (void *)hint)
            return p;
        if (p != MAP_FAILED)
            munmap(p, size);       /* kernel without MAP_FIXED_NOREPLACE */
    }
    size_t span = size + align;
    if (span < size)
        return NULL;
    char *p = mmap(NULL, span, PROT_NONE, fl, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    uintptr_t start = ((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1);
    size_t head = start - (uintptr_t)p, tail = span - head - size;
    if (head)
        munmap(p, head);
    if (tail)
        munmap((char *)start + size, tail);
    return (void *)start;
}

CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                     CUdeviceptr addr, unsigned long long flags)
{
    FC_FAULT(cuMemAddressReserve);
    if (!ptr || flags != 0 || size == 0 || !granular(size))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (alignment == 0)
        alignment = FC_GRANULARITY;
    if (!pow2(alignment))
        return CUDA_ERROR_INVALID_VALUE;
    if (alignment < FC_GRANULARITY)
        alignment = FC_GRANULARITY;
    void *p = reserve(size, alignment, addr);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    r = fc_resv_insert((uintptr_t)p, size);
    if (r != CUDA_SUCCESS) {
        munmap(p, size);
        return r;
    }
    *ptr = (CUdeviceptr)p;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    FC_FAULT(cuMemAddressFree);
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!fc_resv_remove(ptr, size))
        return CUDA_ERROR_INVALID_VALUE;
    munmap((void *)ptr, size);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------- map/unmap */

CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                          CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    FC_FAULT(cuMemMap);
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (flags != 0 || size == 0 || !granular(ptr) || !granular(size) || !granular(offset))
        return CUDA_ERROR_INVALID_VALUE;
    if (!fc_resv_contains(ptr, size))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&vmm_lock);
    struct fc_phys *p = phys_find(handle);
    if (!p || p->hrefs == 0 || offset > p->size || size > p->size - offset) {
        pthread_mutex_unlock(&vmm_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* The real driver maps an allocation whole: part of one (a smaller
     * size, or an offset) is CUDA_ERROR_NOT_SUPPORTED, device- or
     * host-located alike (measured on an H100, driver 580). */
    if (offset != 0 || size != p->size) {
        pthread_mutex_unlock(&vmm_lock);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    struct fc_range rg = {
        .start = ptr, .end = ptr + size, .kind = FC_R_VMM,
        .dev = p->dev >= 0 ? p->dev : 0, .prot = 0, .dev_loc = p->dev >= 0,
        .obj = p, .size = size,
    };
    /* Register first (no device access yet), then map over the
     * reservation: a concurrent overlapping map fails the insertion. */
    r = fc_map_insert(&rg);
    if (r == CUDA_SUCCESS) {
        /* Populated: the real driver maps the pages at cuMemMap, and a
         * VM's first touch of each page of a new mapping costs half as much
         * when the kernel has already allocated its page table entry. */
        void *m = mmap((void *)ptr, size, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_FIXED | MAP_POPULATE, p->fd, (off_t)offset);
        if (m == MAP_FAILED) {
            fc_map_remove(ptr, FC_R_VMM, NULL);
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            p->maps++;
        }
    }
    pthread_mutex_unlock(&vmm_lock);
    return r;
}

CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    FC_FAULT(cuMemUnmap);
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!granular(ptr) || !granular(size))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&vmm_lock);
    struct fc_range *v;
    size_t n = fc_map_remove_span(ptr, size, FC_R_VMM, &v);
    for (size_t i = 0; i < n; i++) {
        /* Back to reserved address space: PROT_NONE, no pages. */
        mmap((void *)v[i].start, v[i].end - v[i].start, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
        struct fc_phys *p = v[i].obj;
        p->maps--;
        phys_maybe_free(p);
    }
    pthread_mutex_unlock(&vmm_lock);
    free(v);
    return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static unsigned prot_of(CUmemAccess_flags f)
{
    switch (f) {
    case CU_MEM_ACCESS_FLAGS_PROT_READ: return FC_PROT_R;
    case CU_MEM_ACCESS_FLAGS_PROT_READWRITE: return FC_PROT_R | FC_PROT_W;
    default: return 0;
    }
}

CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    FC_FAULT(cuMemSetAccess);
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!desc || count == 0 || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned prot = 0;
    for (size_t i = 0; i < count; i++) {
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE)
            return CUDA_ERROR_INVALID_VALUE;
        r = fc_check_device(desc[i].location.id);
        if (r != CUDA_SUCCESS)
            return r;
        if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ
            && desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return CUDA_ERROR_INVALID_VALUE;
        prot |= prot_of(desc[i].flags);
    }
    /* The real driver's cost for host memory (small pages), paid before
     * the access takes effect: until the call returns the device cannot
     * touch the range. */
    uint64_t host = 0;
    fc_map_host_bytes(ptr, size, &host);
    fc_hostmap_delay(host);
    return fc_map_set_prot(ptr, size, prot);
}

CUresult CUDAAPI cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr)
{
    if (!flags || !location)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (location->type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    r = fc_check_device(location->id);
    if (r != CUDA_SUCCESS)
        return r;
    /* Measured: cuMemAlloc memory answers too (read-write), an address
     * with nothing mapped does not. */
    struct fc_range rg;
    if (!fc_map_find(ptr, &rg) || (rg.kind != FC_R_VMM && rg.kind != FC_R_DEVICE))
        return CUDA_ERROR_INVALID_VALUE;
    *flags = (rg.prot & FC_PROT_W) ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE
             : (rg.prot & FC_PROT_R) ? CU_MEM_ACCESS_FLAGS_PROT_READ
                                     : CU_MEM_ACCESS_FLAGS_PROT_NONE;
    return CUDA_SUCCESS;
}

/* Forked child: the parent's physical allocations are the parent's. */
static struct fc_phys **forsaken;
void fc_vmm_atfork_child(void)
{
    pthread_mutex_init(&vmm_lock, NULL);
    forsaken = phys;
    phys = NULL;
    nphys = capphys = 0;
}
