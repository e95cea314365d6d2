/* fc_internal.h: the simulated CUDA driver's private declarations.
 *
 * The simulator is a test instrument: a libcuda.so.1 whose entry points
 * have the real driver's semantics for the subset cushare's tests use,
 * running "device" work on host threads. Every translation unit of the
 * simulator includes this header (and nothing of the rest of cushare), so
 * the library links only libc, libpthread and librt.
 *
 * cuda.h is included with __CUDA_API_VERSION_INTERNAL (set by the build):
 * every versioned name (cuMemAlloc_v2, cuLaunchKernel_ptsz, the v1 names)
 * is then declared under its own name, so each exported symbol is defined
 * explicitly. The visibility pragma gives the declarations default
 * visibility: the library is compiled with -fvisibility=hidden and the
 * version script exports cu* only.
 *
 * Module map (one file each, fc_ prefix):
 *   util     logging, clocks, environment, process liveness
 *   shm      the cross-process state: config, memory accounting, queues
 *   engine   FIFO-fair cross-process engines (kernels, copy directions),
 *            the kernel engine's time slices
 *   handle   registry of live opaque handles (validation without UB)
 *   addrmap  the process's device/host/reserved address ranges
 *   device   cuInit, devices, attributes, versions, fork handling
 *   error    cuGetErrorName/String
 *   fault    the fault switch (FAKECUDA_FAIL) and call counting
 *   ctx      contexts, the current-context stack, primary contexts
 *   stream   streams, worker threads, legacy/per-thread default streams
 *   event    events
 *   graph    stream capture, graph objects and their node lists
 *   gparams  graph node parameters: validation into op templates, the
 *            memory kinds a memcpy node records
 *   gnode    explicit graph construction (cuGraphAdd*Node, node params)
 *   gexec    instantiated graphs: instantiation (topological order), launch
 *   gupdate  changing instantiated graphs: exec node params, cuGraphExecUpdate
 *   mem      allocations, host memory, pools
 *   pointer  pointer attributes, legacy IPC handles, managed-memory hints
 *   vmm      virtual memory management (reserve/create/map)
 *   copy     memcpy/memset family
 *   module   modules, libraries, functions, the kernel catalogue
 *   launch   kernel launches and kernel execution, the trace
 *   texture  texture and surface objects
 *   procaddr cuGetProcAddress
 */
#ifndef FC_INTERNAL_H
#define FC_INTERNAL_H

#pragma GCC visibility push(default)
#include <cuda.h>
#pragma GCC visibility pop

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define FC_MAX_DEVICES   8
#define FC_POISON        0xFB            /* fresh device memory, every byte */
#define FC_CTX_COST      (8ull << 20)    /* device memory charged per context */
#define FC_GRANULARITY   (2ull << 20)    /* VMM minimum = recommended */
#define FC_DEVICE_NAME   "cushare simulated GPU"
#define FC_DRIVER_VERSION 13000
#define FC_PITCH_ALIGN   512
#define FC_MAX_KARGS     32              /* bytes of kernel parameters */

/* ------------------------------------------------------------------ util */

void fc_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
uint64_t fc_now_ns(void);
void fc_sleep_until(uint64_t deadline_ns);
void fc_sleep_ns(uint64_t ns);
/* What creating SIZE bytes of device memory costs (FAKECUDA_MEMCREATE_GBPS),
 * and pinning SIZE bytes of host memory (FAKECUDA_PIN_GBPS): sleeps. */
void fc_create_delay(uint64_t size);
void fc_pin_delay(uint64_t size);
/* What giving the device access to SIZE bytes of HOST-located VMM memory
 * costs (FAKECUDA_HOSTMAP_GBPS): sleeps. */
void fc_hostmap_delay(uint64_t size);
/* Reads an environment variable as a number within [lo, hi]; a malformed
 * or out-of-range value is reported on stderr and def is used. */
uint64_t fc_env_u64(const char *name, uint64_t def, uint64_t lo, uint64_t hi);
double fc_env_double(const char *name, double def, double lo, double hi);
/* Start time (clock ticks since boot, /proc/<pid>/stat field 22) of a live
 * process; 0 when it does not exist, is a zombie or cannot be read. */
uint64_t fc_proc_start(pid_t pid);
/* True when pid is alive and still the process that started at `start`. */
bool fc_proc_alive(pid_t pid, uint64_t start);
size_t fc_page_round(size_t n);
/* Fills bytes [0, size) of a file (a memfd) with FC_POISON through write
 * calls, not a mapping: on a VM whose hypervisor shadows the page tables,
 * the first touch of each page through each new mapping costs ~5 us (on
 * the CI's 2-core VMs, 2026-12-02: poisoning 150 MiB through a mapping
 * took 240 ms, through pwrite 30 ms), and the memory is mapped again
 * where it is used anyway. 0, or -1 with errno set. */
int fc_fill_fd(int fd, size_t size);
/* A private anonymous mapping of len bytes (MAP_FAILED on failure), with
 * MAP_POPULATE when populate, advised to use transparent huge pages: the
 * simulated device's and pinned host memory is touched whole, and on such
 * a VM a 2 MiB page's first touch costs what one 4 KiB page's does
 * (150 MiB first written in 14 ms instead of 560). Where THP is off, the
 * advice is ignored. */
void *fc_map_anon(size_t len, bool populate);

/* Intrusive doubly linked list (libuv's QUEUE, simplified). */
struct fc_list {
    struct fc_list *prev, *next;
};
#define FC_LIST_INIT(l) ((l)->prev = (l)->next = (l))
#define FC_CONTAINER(p, type, field) ((type *)((char *)(p)-offsetof(type, field)))
static inline void fc_list_add(struct fc_list *head, struct fc_list *n)
{
    n->prev = head->prev;
    n->next = head;
    head->prev->next = n;
    head->prev = n;
}
static inline void fc_list_del(struct fc_list *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->prev = n->next = n;
}
static inline bool fc_list_empty(const struct fc_list *l) { return l->next == l; }

/* ----------------------------------------------------------- the process */

struct fc_config {
    int ndev;
    uint64_t mem_bytes;              /* per device */
    double bytes_per_ns;             /* PCIe, per direction (GB/s = B/ns) */
    bool concurrent;                 /* FAKECUDA_CONCURRENT: kernels skip the engine */
    uint64_t timeslice_ns;           /* FAKECUDA_TIMESLICE_US; per device (shm) */
    double create_bytes_per_ns;      /* FAKECUDA_MEMCREATE_GBPS; 0 = instant */
    double pin_bytes_per_ns;         /* FAKECUDA_PIN_GBPS; 0 = instant */
    double hostmap_bytes_per_ns;     /* FAKECUDA_HOSTMAP_GBPS; 0 = instant */
    char shm_name[160];              /* "/fakecuda-<FAKECUDA_SHM>" */
};

struct fc_ctx;
struct fc_shm;

/* Process-wide state. `lock` guards initialization, the primary contexts'
 * retain counts and the fork generation; everything else here is written
 * once under it during cuInit and read-only afterwards (readers first check
 * `ready` with an acquire load). */
struct fc_proc {
    pthread_mutex_t lock;
    atomic_int ready;                /* 1 once cuInit succeeded */
    CUresult init_err;               /* sticky cuInit failure, 0 if none */
    struct fc_config cfg;
    struct fc_shm *shm;
    size_t shm_size;
    int trace_fd;                    /* -1 when FAKECUDA_TRACE is unset */
    bool fd_handles;                 /* FAKECUDA_FD_HANDLES: POSIX-fd export (default 1) */
    bool peer;                       /* FAKECUDA_PEER: devices may access each other (default 0) */
    pid_t pid;
    uint64_t start;                  /* our start time, see fc_proc_start */
    struct fc_ctx *primary[FC_MAX_DEVICES];
    int primary_refs[FC_MAX_DEVICES];
    unsigned primary_flags[FC_MAX_DEVICES];
};
extern struct fc_proc fc_proc;

/* CUDA_SUCCESS once cuInit succeeded in this process, else the error. */
static inline CUresult fc_ready(void)
{
    return atomic_load_explicit(&fc_proc.ready, memory_order_acquire)
               ? CUDA_SUCCESS
               : CUDA_ERROR_NOT_INITIALIZED;
}
CUresult fc_check_device(CUdevice dev);
void fc_unsupported_log(const char *name);

/* ---------------------------------------------------------------- error */

/* The name of a CUresult ("CUDA_ERROR_UNKNOWN"), NULL if it has none. */
const char *fc_error_name(CUresult code);
/* The CUresult named by [name, name+len); false if none is. */
bool fc_error_by_name(const char *name, size_t len, CUresult *out);

/* ---------------------------------------------------------------- fault */

/* The entry points FAKECUDA_FAIL can fail (fc_fault.c), as exported:
 * X(symbol, allocating). An allocating one fails with OUT_OF_MEMORY by
 * default. Each starts with FC_FAULT(symbol), before anything else, so a
 * failed call has no effect; an exported name that serves another one
 * (cuCtxPushCurrent and _v2) goes through a shared static body, so each
 * name counts its own calls. Covers every driver call of the hook's
 * segment, swap, backing, VMM, IPC and lease code, and the calls that
 * programs make around them. */
#define FC_FAULT_SYMBOLS(X)                                                    \
    X(cuInit, 0) X(cuDeviceGet, 0) X(cuDeviceGetCount, 0)                      \
    X(cuDeviceGetAttribute, 0) X(cuDeviceGetUuid, 0) X(cuDeviceGetUuid_v2, 0)  \
    X(cuDeviceTotalMem_v2, 0) X(cuDeviceCanAccessPeer, 0) X(cuGetErrorName, 0) \
    X(cuDevicePrimaryCtxRetain, 0) X(cuCtxSetCurrent, 0) X(cuCtxGetDevice, 0)  \
    X(cuCtxSynchronize, 0) X(cuCtxPushCurrent, 0) X(cuCtxPushCurrent_v2, 0)    \
    X(cuCtxPopCurrent, 0) X(cuCtxPopCurrent_v2, 0)                             \
    X(cuThreadExchangeStreamCaptureMode, 0) X(cuStreamCreate, 0)               \
    X(cuStreamSynchronize, 0) X(cuStreamDestroy, 0) X(cuStreamDestroy_v2, 0)   \
    X(cuMemAlloc_v2, 1) X(cuMemAllocPitch_v2, 1) X(cuMemAllocManaged, 1)       \
    X(cuMemFree_v2, 0) X(cuMemHostAlloc, 1) X(cuMemAllocHost_v2, 1)            \
    X(cuMemFreeHost, 0) X(cuMemHostRegister, 1) X(cuMemHostRegister_v2, 1)     \
    X(cuMemHostUnregister, 0) X(cuMemGetAllocationGranularity, 0)              \
    X(cuMemCreate, 1) X(cuMemRelease, 0) X(cuMemAddressReserve, 1)             \
    X(cuMemAddressFree, 0) X(cuMemMap, 0) X(cuMemUnmap, 0) X(cuMemSetAccess, 0) \
    X(cuMemExportToShareableHandle, 0) X(cuMemImportFromShareableHandle, 0)    \
    X(cuMemcpyAsync, 0) X(cuMemcpyHtoD_v2, 0) X(cuMemcpyDtoH_v2, 0)          \
    X(cuGraphAddMemcpyNode, 1) X(cuGraphAddMemsetNode, 1)                      \
    X(cuGraphAddKernelNode, 1) X(cuGraphAddKernelNode_v2, 1)                   \
    X(cuGraphAddEmptyNode, 1) X(cuGraphAddNode, 1) X(cuGraphAddNode_v2, 1)     \
    X(cuGraphAddDependencies, 1) X(cuGraphAddDependencies_v2, 1)               \
    X(cuGraphMemcpyNodeGetParams, 0) X(cuGraphMemcpyNodeSetParams, 0)          \
    X(cuGraphMemsetNodeGetParams, 0) X(cuGraphMemsetNodeSetParams, 0)          \
    X(cuGraphKernelNodeGetParams, 0) X(cuGraphKernelNodeGetParams_v2, 0)       \
    X(cuGraphKernelNodeSetParams, 0) X(cuGraphKernelNodeSetParams_v2, 0)       \
    X(cuGraphNodeSetParams, 0) X(cuGraphNodeGetType, 0)                        \
    X(cuGraphExecMemcpyNodeSetParams, 0) X(cuGraphExecMemsetNodeSetParams, 0)  \
    X(cuGraphExecKernelNodeSetParams, 0)                                       \
    X(cuGraphExecKernelNodeSetParams_v2, 0) X(cuGraphExecNodeSetParams, 0)     \
    X(cuGraphExecUpdate, 0) X(cuGraphExecUpdate_v2, 0)                         \
    X(cuTexObjectCreate, 1) X(cuTexObjectDestroy, 0)                           \
    X(cuTexObjectGetResourceDesc, 0) X(cuTexObjectGetTextureDesc, 0)           \
    X(cuSurfObjectCreate, 1) X(cuSurfObjectDestroy, 0)                         \
    X(cuIpcGetMemHandle, 0) X(cuMemAdvise, 0) X(cuMemAdvise_v2, 0)             \
    X(cuMemRangeGetAttribute, 0) X(cuMemRangeGetAttributes, 0)                 \
    X(cuMemPrefetchAsync, 0) X(cuMemPrefetchAsync_ptsz, 0)                     \
    X(cuMemPrefetchAsync_v2, 0) X(cuMemPrefetchAsync_v2_ptsz, 0)              \
    X(cuCtxEnablePeerAccess, 0) X(cuCtxDisablePeerAccess, 0)

enum fc_fault_sym {
#define FC_FAULT_ENUM_(sym, alloc) FC_FAULT_##sym,
    FC_FAULT_SYMBOLS(FC_FAULT_ENUM_)
#undef FC_FAULT_ENUM_
    FC_FAULT_NSYMS
};

/* True when FAKECUDA_FAIL or FAKECUDA_FAIL_COUNT is set: set at load,
 * read-only afterwards (no cost to a process that sets neither). */
extern bool fc_fault_on;
/* Counts one call of s; its error when the switch fails it, else success. */
CUresult fc_fault_call(enum fc_fault_sym s);
#define FC_FAULT(sym)                                                          \
    do {                                                                       \
        if (fc_fault_on) {                                                     \
            CUresult fc_fault_r_ = fc_fault_call(FC_FAULT_##sym);              \
            if (fc_fault_r_ != CUDA_SUCCESS)                                   \
                return fc_fault_r_;                                            \
        }                                                                      \
    } while (0)

/* ----------------------------------------------------------------- shm */

CUresult fc_shm_attach(const struct fc_config *want, struct fc_config *got,
                       struct fc_shm **shm, size_t *size);
/* Memory accounting of this process on device `dev` in the shared table.
 * fc_shm_charge fails with CUDA_ERROR_OUT_OF_MEMORY when it does not fit. */
CUresult fc_shm_charge(int dev, uint64_t bytes);
void fc_shm_uncharge(int dev, uint64_t bytes);
void fc_shm_meminfo(int dev, uint64_t *free_b, uint64_t *total_b);
void fc_shm_atfork_child(void);

/* -------------------------------------------------------------- engine */

enum fc_engine_id { FC_ENG_KERNEL = 0, FC_ENG_H2D = 1, FC_ENG_D2H = 2, FC_NENGINES = 3 };

struct fc_hold {
    int dev, eng, idx;
    uint64_t ticket;
};
/* Waits (FIFO) for engine `eng` of `dev`. Entries with the same non-zero
 * `owner` that are adjacent in the queue share the engine (kernels of one
 * context on several streams); owner 0 means exclusive. With a time slice
 * (FAKECUDA_TIMESLICE_US > 0) the kernel engine's current owner also passes
 * the waiters of others until its slice ends (fc_engine.c). */
void fc_engine_acquire(int dev, int eng, uint64_t owner, struct fc_hold *h);
/* `backlog` (kernel engine; NULL for copies): the owner's kernels queued
 * and not yet finished, this one excluded. It is read under the engine's
 * lock: when it is 0 and the owner holds nothing else, its slice ends. */
void fc_engine_release(const struct fc_hold *h, const atomic_uint *backlog);

/* ------------------------------------------------------------- handles */

enum fc_htype {
    FC_H_NONE = 0, FC_H_CTX, FC_H_STREAM, FC_H_EVENT, FC_H_MODULE, FC_H_FUNC,
    FC_H_LIBRARY, FC_H_KERNEL, FC_H_GRAPH, FC_H_GEXEC, FC_H_POOL, FC_H_GNODE,
};
int fc_handle_add(const void *p, enum fc_htype type);
void fc_handle_del(const void *p);
enum fc_htype fc_handle_type(const void *p);
static inline bool fc_handle_is(const void *p, enum fc_htype t)
{
    return p && fc_handle_type(p) == t;
}

/* ------------------------------------------------------------- address map */

enum fc_rkind {
    FC_R_DEVICE = 1,   /* cuMemAlloc*, pitch, async */
    FC_R_MANAGED,      /* cuMemAllocManaged */
    FC_R_HOST,         /* cuMemHostAlloc / cuMemAllocHost */
    FC_R_HOSTREG,      /* cuMemHostRegister */
    FC_R_VMM,          /* one cuMemMap of a cuMemCreate handle */
};
#define FC_PROT_R 1u
#define FC_PROT_W 2u

struct fc_range {
    uintptr_t start, end;            /* [start, end) */
    int kind;                        /* enum fc_rkind */
    int dev;
    unsigned prot;                   /* device access (VMM: cuMemSetAccess) */
    bool dev_loc;                    /* memory located on the device */
    struct fc_ctx *ctx;              /* owning context, NULL for VMM */
    void *obj;                       /* DEVICE: its pool; VMM: its fc_phys */
    unsigned flags;                  /* HOST, HOSTREG: the caller's flags */
    size_t size;                     /* size the caller asked for */
};

CUresult fc_map_insert(const struct fc_range *r);
bool fc_map_remove(uintptr_t start, int kind, struct fc_range *out);
bool fc_map_find(uintptr_t addr, struct fc_range *out);
/* Removes the ranges of `kind` that exactly tile [p, p+n) and returns them
 * (caller frees *out); 0 and nothing removed when they do not. */
size_t fc_map_remove_span(uintptr_t p, size_t n, int kind, struct fc_range **out);
/* Collects (copies) every range owned by ctx; caller frees *out. */
size_t fc_map_collect_ctx(struct fc_ctx *ctx, struct fc_range **out);
/* Device accesses hold the read lock while touching memory, so that an
 * unmap or free (write lock) can never pull pages from under a copy or a
 * kernel: the simulated "fault" is then an error, never a SIGSEGV. */
void fc_map_rdlock(void);
void fc_map_unlock(void);
/* Under the read lock: is [p, p+n) covered by ranges the device can access
 * with `prot`? Ranges may be adjacent (several VMM mappings). */
bool fc_map_covered_locked(uintptr_t p, size_t n, unsigned prot);
bool fc_map_covered(uintptr_t p, size_t n, unsigned prot);
/* Is p device memory (a device allocation, a DEVICE-located mapping, or a
 * reservation), i.e. a "device" pointer for unified addressing: which
 * engine and link a copy uses? Host-located VMM memory is not. */
bool fc_map_is_device(uintptr_t p);
/* Under the read lock: is p in device address space (as fc_map_is_device,
 * or any VMM mapping)? Such a side of a copy is checked when it runs. */
bool fc_map_in_vas_locked(uintptr_t p);
/* Sets the access of every VMM mapping inside [p, p+n), which must be
 * covered by VMM mappings exactly. */
CUresult fc_map_set_prot(uintptr_t p, size_t n, unsigned prot);
/* The bytes of HOST-located VMM mappings inside [p, p+n). */
void fc_map_host_bytes(uintptr_t p, size_t n, uint64_t *host);

/* Reservations (cuMemAddressReserve). */
CUresult fc_resv_insert(uintptr_t start, size_t size);
bool fc_resv_remove(uintptr_t start, size_t size);
bool fc_resv_contains(uintptr_t p, size_t n);
void fc_addrmap_reset(void);
void fc_handle_atfork_child(void);

/* ------------------------------------------------------------- contexts */

struct fc_stream;
struct fc_capture;

struct fc_ctx {
    uint32_t id;                     /* unique in this process (cuCtxGetId) */
    int dev;
    unsigned flags;
    bool primary;
    atomic_int sticky;               /* CUresult after a device fault */
    /* Kernels queued on the context's streams and not yet finished (or
     * skipped): the "more work queued" signal of its time slice. */
    atomic_uint kernels_pending;
    /* lock guards streams, legacy, every stream's `cap`, capture graphs,
     * flags, limits, cache_config and the ordering of submissions (see
     * fc_submit). */
    pthread_mutex_t lock;
    pthread_cond_t idle;             /* a stream left `streams` */
    struct fc_list streams;          /* every live stream of the context */
    struct fc_stream *legacy;        /* the NULL stream, made on first use */
    size_t limits[CU_LIMIT_MAX];
    int cache_config;
    uint32_t peers;                  /* devices it enabled peer access to (bit = ordinal) */
};

uint64_t fc_ctx_owner(const struct fc_ctx *c);
/* The current context of the calling thread, validated and active:
 * CUDA_ERROR_INVALID_CONTEXT when there is none. */
CUresult fc_ctx_current(struct fc_ctx **out);
/* Like fc_ctx_current, and also reports the context's sticky error. */
CUresult fc_ctx_enter(struct fc_ctx **out);
bool fc_ctx_valid(const struct fc_ctx *c);
CUresult fc_ctx_sync(struct fc_ctx *c);
void fc_ctx_atfork_child(void);

/* -------------------------------------------------------------- streams */

enum fc_opkind {
    FC_OP_KERNEL = 1, FC_OP_COPY, FC_OP_MEMSET, FC_OP_HOSTFN, FC_OP_CALLBACK,
    FC_OP_EVENT_RECORD, FC_OP_EVENT_WAIT, FC_OP_STREAM_WAIT, FC_OP_WRITE_VALUE,
    FC_OP_WAIT_VALUE, FC_OP_FREE,
};

enum fc_dir { FC_H2H = 0, FC_H2D, FC_D2H, FC_D2D };

/* A strided 3-D copy; 1-D copies have height = depth = 1. */
struct fc_copy {
    uintptr_t dst, src;
    size_t dpitch, spitch, dslice, sslice;
    size_t width, height, depth;
    int dir;                         /* enum fc_dir */
};

struct fc_memset {
    uintptr_t dst;
    size_t pitch, width, height;     /* width in elements */
    unsigned esize;                  /* 1, 2 or 4 */
    uint32_t value;
};

struct fc_kdesc;
struct fc_event;

struct fc_op {
    struct fc_op *next;
    int kind;                        /* enum fc_opkind */
    uint64_t seq;                    /* position in its stream */
    union {
        struct {
            const struct fc_kdesc *k;
            unsigned char args[FC_MAX_KARGS];
            CUfunction f;            /* as launched (a CUfunction or CUkernel) */
            unsigned grid[3], block[3], shmem;   /* for graph node params */
        } kernel;
        struct fc_copy copy;
        struct fc_memset set;
        struct {
            CUhostFn fn;
            void *arg;
        } host;
        struct {
            CUstreamCallback fn;
            void *arg;
            CUstream handle;
        } cb;
        struct {
            struct fc_event *ev;
            uint64_t gen;
        } ev;
        struct {
            struct fc_stream *s;
            uint64_t seq;
        } sw;
        struct {
            uintptr_t addr;
            uint64_t value;
            unsigned size;
            unsigned flags;
        } val;
        struct {
            uintptr_t addr;
        } free;
    } u;
};

enum fc_skind { FC_S_USER = 0, FC_S_LEGACY, FC_S_PERTHREAD };

struct fc_stream {
    struct fc_list node;             /* in ctx->streams (ctx->lock) */
    struct fc_ctx *ctx;
    int kind;                        /* enum fc_skind */
    unsigned flags;
    int priority;
    uint64_t id;
    struct fc_capture *cap;          /* capturing into; guarded by ctx->lock */
    /* lock guards the queue, the counters, refs and stop. */
    pthread_mutex_t lock;
    pthread_cond_t cv;               /* work queued, op done, or stop */
    struct fc_op *head, *tail;
    uint64_t enqueued, completed;    /* op sequence numbers */
    int refs;
    bool stop;
};

struct fc_op *fc_op_new(int kind);
/* Resolves a stream argument: NULL (the legacy stream, or the per-thread
 * stream when per_thread), CU_STREAM_LEGACY, CU_STREAM_PER_THREAD or a
 * handle. Needs a current context for the default streams. */
CUresult fc_stream_resolve(CUstream h, bool per_thread, struct fc_stream **out);
/* The same with the default streams taken in context c (a peer copy's
 * source context) instead of the current one. */
CUresult fc_stream_resolve_in(struct fc_ctx *c, CUstream h, bool per_thread,
                              struct fc_stream **out);
/* Queues op on s in the context's submission order, adding the implicit
 * legacy-stream dependencies; records it instead while s is capturing.
 * Takes ownership of op in every case. *seq_out (may be NULL) receives
 * its sequence number (0 when it was captured). */
CUresult fc_submit(struct fc_stream *s, struct fc_op *op, uint64_t *seq_out);
/* Submits and waits for completion: the synchronous API forms. */
CUresult fc_submit_sync(struct fc_stream *s, struct fc_op *op);
CUresult fc_stream_wait(struct fc_stream *s, uint64_t seq);
bool fc_stream_blocking(const struct fc_stream *s);
/* Whether s is capturing now (a moment later it may not be: only for
 * choices a racing capture cannot make wrong, see memset_submit). */
bool fc_stream_capturing(struct fc_stream *s);
void fc_stream_ref(struct fc_stream *s);
void fc_stream_unref(struct fc_stream *s);
struct fc_stream *fc_stream_create(struct fc_ctx *c, int kind, unsigned flags, int prio);
void fc_stream_destroy(struct fc_stream *s);
struct fc_stream *fc_ctx_legacy_locked(struct fc_ctx *c);
void fc_stream_atfork_child(void);
void fc_stream_tls_init(void);

/* --------------------------------------------------------------- events */

struct fc_event {
    unsigned flags;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    uint64_t rec_gen, done_gen;      /* records asked for / completed */
    uint64_t ts_ns;                  /* time the last record completed */
    uint64_t cap_id;                 /* capture it was last recorded into */
    int refs;
};
void fc_event_unref(struct fc_event *e);
void fc_event_complete(struct fc_event *e, uint64_t gen);
void fc_event_wait_gen(struct fc_event *e, uint64_t gen);

/* ------------------------------------------------------- capture, graphs */

/* One operand of a memcpy node as it was when the node's parameters were
 * set: the update rules compare these (the real driver fixes them then,
 * not at instantiation), never what is mapped at the address now. */
struct fc_opnd {
    int decl;                        /* the CUmemorytype the caller named */
    int loc;                         /* CU_MEMORYTYPE_HOST or _DEVICE: where it lives */
    bool vmm;                        /* a VMM mapping: belongs to no context */
    int dev;                         /* -1: a host pointer */
    const struct fc_ctx *ctx;        /* the owning context (cuMemAlloc, pinned) */
};

/* A graph node: the op template it submits when its graph runs, its
 * dependencies, and the parameters as given (what *GetParams return).
 * Like the real driver's, graphs are not thread-safe objects: calls on one
 * graph are serialized by the application (a capture appends under its
 * context's lock, and the graph is handed out only when it ends). */
struct fc_gnode {
    struct fc_list link;             /* in its graph's `nodes`, creation order */
    struct fc_graph *graph;
    CUgraphNodeType type;
    struct fc_op op;                 /* kind 0 for an empty node */
    struct fc_gnode **deps;          /* each dependency once */
    size_t ndeps;
    size_t idx;                      /* scratch of fc_gexec.c: creation rank */
    union {
        struct {
            CUDA_MEMCPY3D p;
            CUcontext ctx;
            struct fc_opnd opnd[2];  /* dst, src */
        } copy;
        struct {
            CUDA_MEMSET_NODE_PARAMS p;
            CUcontext ctx;
        } set;
        struct {
            CUcontext ctx;
            CUkernel kern;           /* given as a CUkernel (func NULL) */
            void *argp[4];           /* kernelParams handed out: into op's args */
        } kern;
    } u;
};

struct fc_graph {
    struct fc_list nodes;            /* struct fc_gnode, creation order */
    size_t n;
    struct fc_gnode *last;           /* capture: the node the next one follows */
};

/* The graph behind a handle (INVALID_VALUE for a stale or foreign one). */
CUresult fc_graph_get(CUgraph h, struct fc_graph **out);
/* A new node of `type`, in no graph yet (NULL when out of memory). */
struct fc_gnode *fc_gnode_alloc(CUgraphNodeType type);
/* Validates deps (live nodes of g, each once; edge data default or NULL)
 * and appends n to g after them. On failure n is untouched. */
CUresult fc_gnode_attach(struct fc_graph *g, struct fc_gnode *n, const CUgraphNode *deps,
                         const CUgraphEdgeData *edges, size_t ndeps);
/* Frees a node that is in no graph. */
void fc_gnode_discard(struct fc_gnode *n);
/* Adds dependency `from` to n (INVALID_VALUE if it is there already). */
CUresult fc_gnode_add_dep(struct fc_gnode *n, struct fc_gnode *from);
bool fc_gnode_has_dep(const struct fc_gnode *n, const struct fc_gnode *d);
/* Only full-completion edges exist here: NULL or all-zero edge data. */
bool fc_edge_default(const CUgraphEdgeData *e);

/* An instantiated graph (fc_gexec.c): its nodes in the order a launch
 * submits them, independent of the graph they came from. */
struct fc_xnode {
    const void *orig;                /* its graph node: compared, never followed */
    CUgraphNodeType type;
    struct fc_op op;
    struct fc_opnd opnd[2];          /* memcpy: as its graph node had them */
    size_t ndeps;
    size_t *deps;                    /* positions of its dependencies, ascending */
};

struct fc_gexec {
    struct fc_xnode *v;
    size_t n;
};

CUresult fc_gexec_get(CUgraphExec h, struct fc_gexec **out);
/* g's nodes as exec nodes in launch order (*out has g->n): INVALID_VALUE
 * when g has a cycle. */
CUresult fc_xnodes_build(struct fc_graph *g, struct fc_xnode **out);
void fc_xnodes_free(struct fc_xnode *v, size_t n);

/* Node parameters (fc_gparams.c): each validates like the real driver,
 * address checks included, and fills an op template. */
CUresult fc_gp_ctx(CUcontext c);
CUresult fc_gp_copy(const CUDA_MEMCPY3D *p, struct fc_op *op, struct fc_opnd opnd[2]);
CUresult fc_gp_memset(const CUDA_MEMSET_NODE_PARAMS *p, struct fc_op *op);
/* The kernel is f, else kern; arguments are copied, never looked into. */
CUresult fc_gp_kernel(CUfunction f, CUkernel kern, const unsigned g[3], const unsigned b[3],
                      unsigned shmem, void **params, void **extra, struct fc_op *op);
bool fc_opnd_same(const struct fc_opnd a[2], const struct fc_opnd b[2]);
/* The older and newer parameter structures as the ones nodes keep. */
CUDA_KERNEL_NODE_PARAMS fc_kernel_from_v1(const CUDA_KERNEL_NODE_PARAMS_v1 *p);
CUDA_KERNEL_NODE_PARAMS_v1 fc_kernel_to_v1(const CUDA_KERNEL_NODE_PARAMS *p);
CUDA_KERNEL_NODE_PARAMS fc_kernel_from_v3(const CUDA_KERNEL_NODE_PARAMS_v3 *p);
CUDA_MEMSET_NODE_PARAMS fc_memset_from_v2(const CUDA_MEMSET_NODE_PARAMS_v2 *p);
/* A CUgraphNodeParams: reserved fields zero (INVALID_VALUE), a type the
 * simulator builds (memcpy, memset, kernel, empty; else NOT_SUPPORTED). */
CUresult fc_node_params_check(const CUgraphNodeParams *np);
/* A captured op as a node: its type and the parameters GetParams return. */
void fc_gp_captured(struct fc_gnode *n, CUcontext ctx);
/* Points n's kernelParams at its copied arguments. */
void fc_gp_kernel_argp(struct fc_gnode *n);

struct fc_capture {
    struct fc_list node;             /* in the process's capture list */
    uint64_t id;
    CUstreamCaptureMode mode;
    pthread_t thread;
    struct fc_ctx *ctx;
    struct fc_stream *origin;
    struct fc_graph *graph;
    atomic_bool invalidated;
};

/* Under ctx->lock: records op into s's capture. Takes ownership. */
CUresult fc_capture_record_locked(struct fc_stream *s, struct fc_op *op);
/* Marks a capture invalidated (its cuStreamEndCapture will fail). */
void fc_capture_invalidate(struct fc_capture *cap);
/* A "potentially unsafe" call (an allocation, a context synchronization)
 * during capture: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED when the calling
 * thread's capture mode prohibits it (the offending captures are then
 * invalidated, like the real driver). */
CUresult fc_capture_check_unsafe(void);
/* The live capture `id`: FC_CAP_NONE if there is none, FC_CAP_HERE with
 * *out set when it belongs to c (caller holds c->lock, which keeps it
 * alive), FC_CAP_ELSEWHERE when it belongs to another context. */
enum { FC_CAP_NONE, FC_CAP_HERE, FC_CAP_ELSEWHERE };
int fc_capture_lookup(uint64_t id, struct fc_ctx *c, struct fc_capture **out);
/* Invalidates the live capture `id`; false when there is none. */
bool fc_capture_invalidate_id(uint64_t id);
void fc_capture_forget_ctx(struct fc_ctx *c);
void fc_graph_free(struct fc_graph *g);
void fc_capture_atfork_child(void);

/* ---------------------------------------------------------------- memory */

CUresult fc_mem_free_addr(uintptr_t p, bool sync);
void fc_mem_free_ctx(struct fc_ctx *c);
void fc_mem_atfork_child(void);
void fc_vmm_atfork_child(void);

/* --------------------------------------------------------------- copies */

/* Executes one copy or memset on the worker (validation + timing). */
CUresult fc_copy_run(struct fc_ctx *c, const struct fc_copy *cp);
CUresult fc_memset_run(const struct fc_memset *ms);
/* A CUDA_MEMCPY3D as one fc_copy (INVALID_VALUE for a malformed one,
 * NOT_SUPPORTED for arrays); addresses are not looked at. */
CUresult fc_copy_from3d(const CUDA_MEMCPY3D *p, struct fc_copy *out);
/* May the device touch both sides of cp now? INVALID_VALUE if not. */
CUresult fc_copy_check(const struct fc_copy *cp);
bool fc_copy_dst_dev(int dir);
bool fc_copy_src_dev(int dir);
/* A memset's shape, checked for alignment and pitch (INVALID_VALUE);
 * fc_memset_covered: may the device write all of it now? */
CUresult fc_memset_make(uintptr_t dst, size_t pitch, uint32_t value, unsigned esize,
                        size_t width, size_t height, struct fc_memset *out);
bool fc_memset_covered(const struct fc_memset *ms);

/* ------------------------------------------------------- modules, kernels */

struct fc_kdesc {
    const char *name;
    size_t argbytes;                 /* packed size with natural alignment */
    int nparams;
    unsigned char psize[4], poff[4];
    /* Runs the kernel body on the host; errors are device faults. */
    CUresult (*run)(const unsigned char *args);
};
/* The catalogue entry behind a CUfunction or CUkernel handle, or NULL. */
const struct fc_kdesc *fc_func_kdesc(CUfunction f);
void fc_module_free_ctx(struct fc_ctx *c);
void fc_module_atfork_child(void);
/* Texture and surface objects of a context go with it. */
void fc_texture_free_ctx(struct fc_ctx *c);
void fc_texture_atfork_child(void);

CUresult fc_kernel_run(struct fc_ctx *c, const struct fc_op *op);
/* Validates a launch of f (dimensions, parameters) and fills op, a
 * FC_OP_KERNEL, with the kernel, a copy of its parameters and the launch
 * shape: cuLaunchKernel's checks, shared with graph kernel nodes. */
CUresult fc_kernel_prepare(CUfunction f, const unsigned g[3], const unsigned b[3], unsigned shmem,
                           void **params, void **extra, struct fc_op *op);
void fc_trace_kernel(int dev, const struct fc_ctx *c, const char *name,
                     uint64_t start, uint64_t end);

#endif
