/* ipc.c: CUDA IPC for swappable memory (ipc.h). */
#include "hook/ipc.h"
#include "hook/seg.h"
#include "common/log.h"
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

/* ---- the handle and the wire -----------------------------------------------
 * The 64 opaque bytes of a CUipcMemHandle, as cushare fills them. The
 * driver's own handles never start with the magic (they begin with the
 * exporter's context and allocation identifiers), so the two kinds are told
 * apart by it; a guessed key is refused by the exporter. */
#define IPC_MAGIC "cushIPC1"

struct ipc_wire {
    char magic[8];
    uint64_t nonce;   /* the exporter instance: names its socket */
    uint64_t key;     /* the export (random) */
    uint64_t offset;  /* the allocation's offset in the segment */
    uint64_t size;    /* the segment's bytes (all its parts') */
    int32_t pid;      /* the exporter */
    int32_t dev;      /* its device ordinal (for messages) */
    uint64_t part;    /* each part's bytes, the last one the rest (0: one part) */
    uint8_t pad[8];
};
_Static_assert(sizeof(struct ipc_wire) == sizeof(CUipcMemHandle), "an IPC handle is 64 bytes");

#define REQ_MAGIC 0x51495343u /* "CSIQ" */
/* Version 2 asks for one part's descriptor; version 1 (an export of one
 * part, and every export before parts) for the first. Both are served, and
 * an importer asks a one-part export in version 1, so hooks of either
 * version work together wherever no allocation is made of parts. */
#define REQ_VERSION 2u

struct ipc_req {
    uint32_t magic, version;
    uint64_t key;
    uint32_t index;   /* version 2: the part */
    uint32_t pad;
};
#define REQ_V1_SIZE 16
/* More parts than any GPU's memory makes at the smallest part (64 MiB):
 * a handle that says more is not ours. */
#define IPC_MAX_PARTS 65536u

struct ipc_reply {
    int32_t status;   /* 0, or an errno value */
    uint32_t pad;
    uint64_t size;
};

/* How long either side waits for the other: an importer for a wedged
 * exporter, the exporter's server for a client that connects and says
 * nothing (one such client must not stall every other import for long). */
#define IPC_TIMEOUT_S 5

/* ---- state -----------------------------------------------------------------
 * Exports (one per exported segment, by key) are guarded by exp_mu, imports
 * (one per export mapped here) by imp_mu. Two locks, because an import
 * holds imp_mu across its request, and the exporter that answers it may be
 * this very process (its server thread then needs exp_mu). Both are small
 * arrays: a program exports a handful of allocations, not thousands. */
struct export {
    uint64_t key;
    int *fds;         /* one per part, in address order */
    size_t n;
    uint64_t part, size;
};

struct import {
    int32_t pid;
    uint64_t nonce, key;
    CUdeviceptr va;
    uint64_t size, part;
    CUmemGenericAllocationHandle *h;  /* one per part, n of them */
    size_t n;
    uint32_t refs;
};

/* Bytes of part i of an allocation of `size` in parts of `part`. */
static uint64_t part_bytes(uint64_t size, uint64_t part, size_t i)
{
    uint64_t off = (uint64_t)i * part;
    return off >= size ? 0 : size - off < part ? size - off : part;
}

static pthread_mutex_t exp_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t imp_mu = PTHREAD_MUTEX_INITIALIZER;
static struct export *exports;
static size_t n_exports, cap_exports;
static struct import *imports;
static size_t n_imports, cap_imports;
static uint64_t my_nonce;    /* set with the server (exp_mu) */
static int listen_fd = -1;   /* the server's socket, -1 until the first export (exp_mu) */


static uint64_t random64(void)
{
    uint64_t x = 0;
    while (x == 0) {
        if (getrandom(&x, sizeof x, 0) != (ssize_t)sizeof x) {
            /* No entropy source: a weaker key, still never 0. */
            static _Atomic uint64_t ctr;
            x = ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&x ^ ++ctr;
        }
    }
    return x;
}

static socklen_t socket_name(struct sockaddr_un *a, int32_t pid, uint64_t nonce)
{
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    /* Abstract (leading NUL): nothing to clean up when the process dies. */
    int n = snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "cushare-ipc-%d-%016llx", (int)pid,
                     (unsigned long long)nonce);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static void set_timeout(int fd)
{
    struct timeval tv = {IPC_TIMEOUT_S, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* ---- exporter: the table ----------------------------------------------------- */

uint64_t cs_ipc_register(const int *fds, size_t n, uint64_t part, uint64_t size)
{
    int *own = n ? malloc(n * sizeof *own) : NULL;
    uint64_t key = 0;
    pthread_mutex_lock(&exp_mu);
    if (own && cs_grow_array((void **)&exports, &cap_exports, n_exports, sizeof *exports)) {
        memcpy(own, fds, n * sizeof *own);
        key = random64();
        exports[n_exports++] = (struct export){key, own, n, part, size};
    }
    pthread_mutex_unlock(&exp_mu);
    if (!key) {
        for (size_t i = 0; i < n; i++)
            close(fds[i]);
        free(own);
    }
    return key;
}

static void export_close(struct export *e)
{
    for (size_t i = 0; i < e->n; i++)
        close(e->fds[i]);
    free(e->fds);
}

void cs_ipc_unregister(uint64_t key)
{
    pthread_mutex_lock(&exp_mu);
    for (size_t i = 0; i < n_exports; i++) {
        if (exports[i].key == key) {
            export_close(&exports[i]);
            exports[i] = exports[--n_exports];
            break;
        }
    }
    pthread_mutex_unlock(&exp_mu);
}

/* A duplicate of the descriptor of the export's part `index` (the caller
 * closes it), with that part's bytes, or -1. */
static int export_dup(uint64_t key, uint32_t index, uint64_t *size)
{
    int fd = -1;
    pthread_mutex_lock(&exp_mu);
    for (size_t i = 0; i < n_exports; i++) {
        if (exports[i].key == key && index < exports[i].n) {
            fd = fcntl(exports[i].fds[index], F_DUPFD_CLOEXEC, 0);
            *size = part_bytes(exports[i].size, exports[i].part, index);
            break;
        }
    }
    pthread_mutex_unlock(&exp_mu);
    return fd;
}

/* ---- exporter: the server ----------------------------------------------------- */

static bool peer_allowed(int c)
{
    struct ucred cr;
    socklen_t len = sizeof cr;
    if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0)
        return false;
    return cr.uid == getuid() || cr.uid == 0;
}

/* A reply with room for one descriptor. */
union fd_ctl {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
};

static struct msghdr reply_msg(struct ipc_reply *rep, struct iovec *iov, union fd_ctl *ctl)
{
    *iov = (struct iovec){rep, sizeof *rep};
    memset(ctl, 0, sizeof *ctl);
    struct msghdr m = {0};
    m.msg_iov = iov;
    m.msg_iovlen = 1;
    m.msg_control = ctl->buf;
    m.msg_controllen = sizeof ctl->buf;
    return m;
}

static void send_reply(int c, int32_t status, uint64_t size, int fd)
{
    struct ipc_reply rep = {status, 0, size};
    struct iovec iov;
    union fd_ctl ctl;
    struct msghdr m = reply_msg(&rep, &iov, &ctl);
    if (fd < 0) {
        m.msg_control = NULL;
        m.msg_controllen = 0;
    } else {
        struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &fd, sizeof fd);
    }
    if (sendmsg(c, &m, MSG_NOSIGNAL) < 0)
        cs_debug("CUDA IPC: a reply to an importer was lost: %s", strerror(errno));
}

/* One request on connection c: anything malformed, foreign or unknown is
 * answered with an error (or dropped) and costs the exporter nothing. */
static void serve_one(int c)
{
    set_timeout(c);
    if (!peer_allowed(c)) {
        cs_warn("CUDA IPC: refused a request from another user's process");
        send_reply(c, EACCES, 0, -1);
        return;
    }
    struct ipc_req req;
    memset(&req, 0, sizeof req);
    ssize_t n = recv(c, &req, sizeof req, 0);
    bool v1 = n == REQ_V1_SIZE && req.version == 1u;
    bool v2 = n == (ssize_t)sizeof req && req.version == REQ_VERSION;
    if (req.magic != REQ_MAGIC || (!v1 && !v2)) {
        send_reply(c, EPROTO, 0, -1);
        return;
    }
    uint64_t size = 0;
    int fd = export_dup(req.key, v1 ? 0 : req.index, &size);
    send_reply(c, fd >= 0 ? 0 : ENOENT, size, fd);
    if (fd >= 0)
        close(fd);
}

static void *server_main(void *arg)
{
    int ls = (int)(intptr_t)arg;
    for (;;) {
        int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) {
            if (errno == EBADF || errno == EINVAL || errno == ENOTSOCK)
                return NULL; /* the socket is gone */
            if (errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == ENOBUFS) {
                struct timespec ts = {0, 50 * 1000 * 1000};
                nanosleep(&ts, NULL); /* out of descriptors: do not spin */
            }
            continue;
        }
        serve_one(c);
        close(c);
    }
}

/* Starts the server on the first export. Caller holds exp_mu. */
static bool server_ensure_locked(void)
{
    if (listen_fd >= 0)
        return true;
    uint64_t nonce = random64();
    int ls = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (ls < 0)
        return false;
    struct sockaddr_un a;
    socklen_t len = socket_name(&a, getpid(), nonce);
    if (bind(ls, (struct sockaddr *)&a, len) != 0 || listen(ls, 64) != 0) {
        cs_warn("CUDA IPC: cannot listen for importers: %s", strerror(errno));
        close(ls);
        return false;
    }
    /* The application's signals are never delivered to our thread. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    int e = pthread_create(&t, &at, server_main, (void *)(intptr_t)ls);
    pthread_attr_destroy(&at);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e != 0) {
        cs_warn("CUDA IPC: cannot start the export thread: %s", strerror(e));
        close(ls);
        return false;
    }
    listen_fd = ls;
    my_nonce = nonce;
    return true;
}

/* ---- exporter: cuIpcGetMemHandle --------------------------------------------- */

CUresult cs_ipc_export(CUipcMemHandle *out, CUdeviceptr dptr, CUdeviceptr base, int dev)
{
    pthread_mutex_lock(&exp_mu);
    bool serving = server_ensure_locked();
    uint64_t nonce = my_nonce;
    pthread_mutex_unlock(&exp_mu);
    if (!serving)
        return CUDA_ERROR_OPERATING_SYSTEM;
    struct cs_seg_export ex;
    CUresult r = cs_seg_export(dptr, cs_ipc_register, cs_ipc_unregister, &ex);
    if (r != CUDA_SUCCESS)
        return r;
    struct ipc_wire w;
    memset(&w, 0, sizeof w);
    memcpy(w.magic, IPC_MAGIC, sizeof w.magic);
    w.nonce = nonce;
    w.key = ex.key;
    w.offset = base - ex.va;
    w.size = ex.size;
    w.part = ex.part;
    w.pid = (int32_t)getpid();
    w.dev = dev;
    memcpy(out, &w, sizeof w);
    return CUDA_SUCCESS;
}

/* ---- importer ------------------------------------------------------------------ */

static bool parse(const CUipcMemHandle *h, struct ipc_wire *w)
{
    memcpy(w, h, sizeof *w);
    return memcmp(w->magic, IPC_MAGIC, sizeof w->magic) == 0;
}

bool cs_ipc_is_ours(const CUipcMemHandle *h)
{
    struct ipc_wire w;
    return parse(h, &w);
}

/* Receives the reply and its descriptor; -1 with *why set on failure. */
static int recv_fd(int s, uint64_t *size, const char **why)
{
    struct ipc_reply rep;
    struct iovec iov;
    union fd_ctl ctl;
    struct msghdr m = reply_msg(&rep, &iov, &ctl);
    ssize_t n = recvmsg(s, &m, MSG_CMSG_CLOEXEC);
    int fd = -1;
    struct cmsghdr *cm = n > 0 ? CMSG_FIRSTHDR(&m) : NULL;
    if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
        cm->cmsg_len == CMSG_LEN(sizeof(int)))
        memcpy(&fd, CMSG_DATA(cm), sizeof fd);
    if (n != (ssize_t)sizeof rep || rep.status != 0 || fd < 0) {
        *why = n < 0                   ? strerror(errno)
               : n != (ssize_t)sizeof rep ? "no answer"
               : rep.status == ENOENT  ? "the allocation was freed"
               : rep.status == EACCES  ? "it belongs to another user"
               : rep.status != 0       ? "the request was refused"
                                       : "no descriptor came with the answer";
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *size = rep.size;
    return fd;
}

/* Asks the exporter for the descriptor of part `index` of w's export. */
static int fetch_fd(const struct ipc_wire *w, uint32_t index, uint64_t *size, const char **why)
{
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s < 0) {
        *why = strerror(errno);
        return -1;
    }
    set_timeout(s);
    struct sockaddr_un a;
    socklen_t len = socket_name(&a, w->pid, w->nonce);
    bool one = w->part == 0 || w->part >= w->size; /* one part: asked as version 1 */
    struct ipc_req req = {REQ_MAGIC, one ? 1u : REQ_VERSION, w->key, index, 0};
    size_t rlen = one ? REQ_V1_SIZE : sizeof req;
    int fd = -1;
    if (connect(s, (struct sockaddr *)&a, len) != 0)
        *why = errno == ECONNREFUSED || errno == ENOENT
                   ? "the exporting process is gone (or in another network namespace)"
                   : strerror(errno);
    else if (send(s, &req, rlen, MSG_NOSIGNAL) != (ssize_t)rlen)
        *why = strerror(errno);
    else
        fd = recv_fd(s, size, why);
    close(s);
    return fd;
}

/* Unmaps and releases the first k parts of im, and frees its range. */
static void unmap_import(struct import *im, size_t k)
{
    for (size_t i = 0; i < k; i++) {
        cs_real.cuMemUnmap(im->va + (CUdeviceptr)i * im->part, part_bytes(im->size, im->part, i));
        cs_real.cuMemRelease(im->h[i]);
    }
    cs_real.cuMemAddressFree(im->va, im->size);
}

/* Fetches, imports and maps part i of w's export at its place in im. */
static CUresult map_part(const struct ipc_wire *w, struct import *im, size_t i)
{
    uint64_t want = part_bytes(im->size, im->part, i), size = 0;
    const char *why = "?";
    int fd = fetch_fd(w, (uint32_t)i, &size, &why);
    if (fd < 0) {
        cs_warn("CUDA IPC: cannot open memory of process %d (GPU %d): %s", (int)w->pid,
                (int)w->dev, why);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    CUresult r = size != want ? CUDA_ERROR_INVALID_HANDLE
                              : cs_real.cuMemImportFromShareableHandle(
                                    &im->h[i], (void *)(intptr_t)fd,
                                    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    close(fd);
    if (r != CUDA_SUCCESS)
        return r;
    r = cs_real.cuMemMap(im->va + (CUdeviceptr)i * im->part, want, 0, im->h[i], 0);
    if (r != CUDA_SUCCESS)
        cs_real.cuMemRelease(im->h[i]);
    return r;
}

/* Maps every part of w's export side by side at a fresh range, with access
 * for device cdev. */
static CUresult map_import(const struct ipc_wire *w, CUdevice cdev, struct import *im)
{
    CUresult r = cs_real.cuMemAddressReserve(&im->va, im->size, CS_CHUNK_SIZE, 0, 0);
    if (r != CUDA_SUCCESS)
        return r;
    size_t k = 0;
    while (k < im->n && (r = map_part(w, im, k)) == CUDA_SUCCESS)
        k++;
    if (r == CUDA_SUCCESS) {
        CUmemAccessDesc acc;
        memset(&acc, 0, sizeof acc);
        acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        acc.location.id = cdev;
        acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        r = cs_real.cuMemSetAccess(im->va, im->size, &acc, 1);
    }
    if (r != CUDA_SUCCESS)
        unmap_import(im, k);
    return r;
}

static struct import *import_find_locked(const struct ipc_wire *w)
{
    for (size_t i = 0; i < n_imports; i++)
        if (imports[i].pid == w->pid && imports[i].nonce == w->nonce && imports[i].key == w->key)
            return &imports[i];
    return NULL;
}

static CUresult open_new_locked(const struct ipc_wire *w, CUdevice cdev, struct import **out)
{
    if (!cs_grow_array((void **)&imports, &cap_imports, n_imports, sizeof *imports))
        return CUDA_ERROR_OUT_OF_MEMORY;
    uint64_t part = w->part == 0 || w->part > w->size ? w->size : w->part;
    struct import im = {w->pid, w->nonce, w->key, 0, w->size, part, NULL, 0, 1};
    im.n = (size_t)((w->size + part - 1) / part);
    im.h = malloc(im.n * sizeof *im.h);
    if (!im.h)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = map_import(w, cdev, &im);
    if (r != CUDA_SUCCESS) {
        free(im.h);
        cs_warn("CUDA IPC: cannot map memory of process %d (GPU %d): error %d", (int)w->pid,
                (int)w->dev, (int)r);
        return r;
    }
    imports[n_imports] = im;
    *out = &imports[n_imports++];
    return CUDA_SUCCESS;
}

CUresult cs_ipc_open(CUdeviceptr *out, const CUipcMemHandle *h, unsigned int flags)
{
    (void)flags; /* peer access: the mapping is given to the current device */
    struct ipc_wire w;
    if (!out || !parse(h, &w) || w.offset >= w.size || w.size % CS_CHUNK_SIZE ||
        (w.part && w.part < w.size &&
         (w.part % CS_CHUNK_SIZE || (w.size + w.part - 1) / w.part > IPC_MAX_PARTS)))
        return CUDA_ERROR_INVALID_VALUE; /* not a handle cs_ipc_export made */
    CUdevice cdev;
    if (cs_real.cuCtxGetDevice(&cdev) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&imp_mu);
    struct import *im = import_find_locked(&w);
    CUresult r = CUDA_SUCCESS;
    if (im)
        im->refs++;
    else
        r = open_new_locked(&w, cdev, &im);
    if (r == CUDA_SUCCESS)
        *out = im->va + w.offset;
    pthread_mutex_unlock(&imp_mu);
    return r;
}

bool cs_ipc_close(CUdeviceptr ptr, CUresult *r)
{
    pthread_mutex_lock(&imp_mu);
    struct import *im = NULL;
    for (size_t i = 0; i < n_imports && !im; i++)
        if (ptr >= imports[i].va && ptr < imports[i].va + imports[i].size)
            im = &imports[i];
    if (!im) {
        pthread_mutex_unlock(&imp_mu);
        return false;
    }
    *r = CUDA_SUCCESS;
    if (--im->refs == 0) {
        struct import gone = *im;
        *im = imports[--n_imports];
        *r = CUDA_SUCCESS;
        for (size_t i = 0; i < gone.n; i++) {
            CUresult u = cs_real.cuMemUnmap(gone.va + (CUdeviceptr)i * gone.part,
                                            part_bytes(gone.size, gone.part, i));
            if (*r == CUDA_SUCCESS)
                *r = u;
            cs_real.cuMemRelease(gone.h[i]);
        }
        cs_real.cuMemAddressFree(gone.va, gone.size);
        free(gone.h);
    }
    pthread_mutex_unlock(&imp_mu);
    return true;
}

void cs_ipc_reset_after_fork(void)
{
    /* The parent's exports and mappings are the parent's: the child closes
     * its copies of the descriptors (device memory does not survive fork)
     * and starts without a server. */
    pthread_mutex_init(&exp_mu, NULL);
    pthread_mutex_init(&imp_mu, NULL);
    for (size_t i = 0; i < n_exports; i++)
        export_close(&exports[i]);
    if (listen_fd >= 0)
        close(listen_fd);
    listen_fd = -1;
    n_exports = 0;
    for (size_t i = 0; i < n_imports; i++)
        free(imports[i].h); /* the parent's mappings, not this process's */
    n_imports = 0;
}
