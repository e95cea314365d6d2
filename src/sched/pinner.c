/* pinner.c: see pinner.h. cuda.h gives the driver's types and constants
 * only: the entry points come from dlopen, so the daemon runs (without a
 * pool) where there is no driver. */
#include "sched/pinner.h"

#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

typedef CUresult (*pn_init_fn)(unsigned);
typedef CUresult (*pn_dev_get_fn)(CUdevice *, int);
typedef CUresult (*pn_attr_fn)(int *, CUdevice_attribute, CUdevice);
typedef CUresult (*pn_gran_fn)(size_t *, const CUmemAllocationProp *,
                               CUmemAllocationGranularity_flags);
typedef CUresult (*pn_create_fn)(CUmemGenericAllocationHandle *, size_t,
                                 const CUmemAllocationProp *, unsigned long long);
typedef CUresult (*pn_export_fn)(void *, CUmemGenericAllocationHandle, CUmemAllocationHandleType,
                                 unsigned long long);
typedef CUresult (*pn_release_fn)(CUmemGenericAllocationHandle);

struct pn_api {
    pn_init_fn init;
    pn_dev_get_fn dev_get;
    pn_attr_fn attr;
    pn_gran_fn gran;
    pn_create_fn create;
    pn_export_fn export_fd;
    pn_release_fn release;
};

/* The slot: IDLE -> ASKED (request) -> PINNING (thread) -> DONE (result
 * posted) -> IDLE (taken). */
enum pn_state { PN_IDLE, PN_ASKED, PN_PINNING, PN_DONE };

struct sd_pinner {
    /* Written by sd_pinner_start before the thread exists, read-only after. */
    struct pn_api cu;
    int numa;
    uint64_t gran;
    int efd;
    pthread_t thread;
    /* mu guards the rest (pinner.h); cv: a request or the stop flag. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    enum pn_state state;
    uint64_t want;
    struct sd_pinned result;
    bool stopping;
};

/* ---- the driver ---------------------------------------------------------- */

static bool pn_resolve(void *dl, struct pn_api *cu)
{
    *(void **)&cu->init = dlsym(dl, "cuInit");
    *(void **)&cu->dev_get = dlsym(dl, "cuDeviceGet");
    *(void **)&cu->attr = dlsym(dl, "cuDeviceGetAttribute");
    *(void **)&cu->gran = dlsym(dl, "cuMemGetAllocationGranularity");
    *(void **)&cu->create = dlsym(dl, "cuMemCreate");
    *(void **)&cu->export_fd = dlsym(dl, "cuMemExportToShareableHandle");
    *(void **)&cu->release = dlsym(dl, "cuMemRelease");
    return cu->init && cu->dev_get && cu->attr && cu->gran && cu->create && cu->export_fd &&
           cu->release;
}

/* A piece's properties: pinned, on host NUMA node numa, exportable as a
 * descriptor (a HOST location is refused with that handle type). */
static CUmemAllocationProp pn_prop(int numa)
{
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    p.location.id = numa;
    p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    return p;
}

/* Loads and checks the driver, fills pn->cu, numa and gran. */
static int pn_open(struct sd_pinner *pn, const char *lib, char *err, size_t cap)
{
    /* Never dlclose()d: an initialized driver may run threads of its own. */
    void *dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!dl || !pn_resolve(dl, &pn->cu)) {
        snprintf(err, cap, "no CUDA driver (%s): %s", lib, dl ? "entry points missing" : dlerror());
        return -1;
    }
    CUdevice dev = 0;
    CUresult r = pn->cu.init(0);
    if (r == CUDA_SUCCESS)
        r = pn->cu.dev_get(&dev, 0);
    if (r != CUDA_SUCCESS) {
        snprintf(err, cap, "the CUDA driver finds no GPU (CUresult %d)", (int)r);
        return -1;
    }
    /* -1 (or an error, on drivers before the attribute) when the system
     * does not say: node 0, as on a machine without NUMA. */
    int numa = -1;
    if (pn->cu.attr(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev) != CUDA_SUCCESS || numa < 0)
        numa = 0;
    pn->numa = numa;
    CUmemAllocationProp p = pn_prop(numa);
    size_t g = 0;
    r = pn->cu.gran(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (r != CUDA_SUCCESS || g == 0) {
        snprintf(err, cap,
                 "the CUDA driver makes no exportable host memory on NUMA node %d "
                 "(cuMemGetAllocationGranularity: CUresult %d)",
                 numa, (int)r);
        return -1;
    }
    pn->gran = g;
    return 0;
}

/* Creates and exports one piece; on any failure nothing is kept. */
static void pn_pin(const struct sd_pinner *pn, uint64_t size, struct sd_pinned *out)
{
    memset(out, 0, sizeof *out);
    out->fd = -1;
    out->size = size;
    CUmemAllocationProp p = pn_prop(pn->numa);
    CUmemGenericAllocationHandle h = 0;
    uint64_t t0 = cs_now_ns();
    CUresult r = pn->cu.create(&h, (size_t)size, &p, 0);
    if (r == CUDA_SUCCESS) {
        int fd = -1;
        r = pn->cu.export_fd(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
        if (r == CUDA_SUCCESS) {
            out->ok = true;
            out->fd = fd;
            out->handle = h;
        } else {
            pn->cu.release(h);
        }
    }
    out->ns = cs_now_ns() - t0;
    out->cu_err = (int)r;
}

/* ---- the thread ------------------------------------------------------------ */

/* Under mu: the eventfd counts the posted result. */
static void pn_post(struct sd_pinner *pn)
{
    uint64_t one = 1;
    ssize_t n = write(pn->efd, &one, sizeof one); /* fails only at 2^64-1 */
    (void)n;
}

static void *pn_main(void *arg)
{
    struct sd_pinner *pn = arg;
    pthread_mutex_lock(&pn->mu);
    for (;;) {
        while (pn->state != PN_ASKED && !pn->stopping)
            pthread_cond_wait(&pn->cv, &pn->mu);
        /* A request accepted before the stop is still pinned. */
        if (pn->state != PN_ASKED)
            break;
        pn->state = PN_PINNING;
        uint64_t size = pn->want;
        pthread_mutex_unlock(&pn->mu);
        struct sd_pinned r;
        pn_pin(pn, size, &r);
        pthread_mutex_lock(&pn->mu);
        pn->result = r;
        pn->state = PN_DONE;
        pn_post(pn);
    }
    pthread_mutex_unlock(&pn->mu);
    return NULL;
}

/* The eventfd, the lock and the thread; undoes its own steps on failure. */
static int pn_spawn(struct sd_pinner *pn, char *err, size_t cap)
{
    pn->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (pn->efd < 0) {
        snprintf(err, cap, "eventfd: %s", strerror(errno));
        return -1;
    }
    pthread_mutex_init(&pn->mu, NULL);
    pthread_cond_init(&pn->cv, NULL);
    pn->state = PN_IDLE;
    int e = pthread_create(&pn->thread, NULL, pn_main, pn);
    if (e != 0) {
        snprintf(err, cap, "pthread_create: %s", strerror(e));
        pthread_cond_destroy(&pn->cv);
        pthread_mutex_destroy(&pn->mu);
        close(pn->efd);
        return -1;
    }
    pthread_setname_np(pn->thread, "cushared-pin");
    return 0;
}

/* ---- the loop's side ------------------------------------------------------- */

int sd_pinner_start(struct sd_pinner **out, const char *cuda_lib, char *err, size_t cap)
{
    *out = NULL;
    /* Threads inherit the creator's mask: the driver's (started by cuInit)
     * and ours must leave every signal to the loop's signalfd. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    struct sd_pinner *pn = calloc(1, sizeof *pn);
    int rc = -1;
    if (!pn)
        snprintf(err, cap, "out of memory");
    else if (pn_open(pn, cuda_lib ? cuda_lib : "libcuda.so.1", err, cap) == 0)
        rc = pn_spawn(pn, err, cap);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc < 0) {
        free(pn);
        return -1;
    }
    *out = pn;
    return 0;
}

int sd_pinner_fd(const struct sd_pinner *pn)
{
    return pn->efd;
}

uint64_t sd_pinner_granularity(const struct sd_pinner *pn)
{
    return pn->gran;
}

int sd_pinner_request(struct sd_pinner *pn, uint64_t size)
{
    if (size == 0 || size % pn->gran != 0)
        return -1;
    int rc = -1;
    pthread_mutex_lock(&pn->mu);
    if (pn->state == PN_IDLE && !pn->stopping) {
        pn->want = size;
        pn->state = PN_ASKED;
        pthread_cond_signal(&pn->cv);
        rc = 0;
    }
    pthread_mutex_unlock(&pn->mu);
    return rc;
}

bool sd_pinner_take(struct sd_pinner *pn, struct sd_pinned *out)
{
    pthread_mutex_lock(&pn->mu);
    bool done = pn->state == PN_DONE;
    if (done) {
        *out = pn->result;
        pn->state = PN_IDLE;
        uint64_t n;
        ssize_t got = read(pn->efd, &n, sizeof n); /* back to unreadable */
        (void)got;
    }
    pthread_mutex_unlock(&pn->mu);
    return done;
}

void sd_pinner_release(struct sd_pinner *pn, int fd, uint64_t handle)
{
    if (fd >= 0)
        close(fd);
    CUresult r = pn->cu.release((CUmemGenericAllocationHandle)handle);
    if (r != CUDA_SUCCESS)
        cs_warn("pool: cuMemRelease of a piece failed (CUresult %d)", (int)r);
}

void sd_pinner_stop(struct sd_pinner *pn)
{
    if (!pn)
        return;
    pthread_mutex_lock(&pn->mu);
    pn->stopping = true;
    pthread_cond_signal(&pn->cv);
    pthread_mutex_unlock(&pn->mu);
    pthread_join(pn->thread, NULL);
    struct sd_pinned left;
    if (sd_pinner_take(pn, &left) && left.ok)
        sd_pinner_release(pn, left.fd, left.handle);
    close(pn->efd);
    pthread_cond_destroy(&pn->cv);
    pthread_mutex_destroy(&pn->mu);
    free(pn);
}

int sd_pinner_raise_nofile(uint32_t *limit_out)
{
    *limit_out = 0;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return -1;
    int rc = 0;
    if (rl.rlim_cur < rl.rlim_max) {
        rlim_t was = rl.rlim_cur;
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
            rl.rlim_cur = was;
            rc = -1;
        }
    }
    *limit_out = rl.rlim_cur > UINT32_MAX ? UINT32_MAX : (uint32_t)rl.rlim_cur;
    return rc;
}
