/* nvtrace.c: an LD_PRELOAD recorder of the RM ioctls a CUDA program makes,
 * for re-checking the layouts src/hook/tsg.c relies on when the driver
 * changes (docs/tsg.md).
 *
 *   NVTRACE_OUT=/tmp/trace.txt LD_PRELOAD=$BUILD/lib/libnvtrace.so prog ...
 *
 * One line per ioctl of type 'F' (NV_IOCTL_MAGIC), written with one write(2)
 * each:
 *   A <fd> <req> <ret> <errno> root=<h> parent=<h> new=<h> class=<c> psize=<n>
 *     flags=<f> status=<s> params=<hex of the alloc params, up to 64 bytes>
 *   C <fd> <req> <ret> <errno> client=<h> object=<h> cmd=<c> flags=<f>
 *     psize=<n> status=<s> params=<hex, up to 64 bytes, after the call>
 *   F <fd> <req> <ret> <errno> root=<h> parent=<h> old=<h> status=<s>
 *   V <fd> <req> <ret> <errno> cmd=<c> reply=<r> version=<string>
 *   O <fd> <req> <ret> <errno> nr=<nr> size=<size>        (anything else)
 * and, the first time a descriptor is seen, `D <fd> <readlink target>`.
 * A debugging tool, not part of libcushare.so: it allocates nothing but
 * takes no care over signal handlers either.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dlvsym, RTLD_NEXT (also set by the build) */
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hook/nvrm.h" /* the RM parameter blocks, shared with the interposer */

#define EXPORT __attribute__((visibility("default")))

static int out_fd = -1;
static int (*real_ioctl)(int, unsigned long, void *);
static unsigned char seen[4096];

__attribute__((constructor)) static void nvtrace_init(void)
{
    const char *p = getenv("NVTRACE_OUT");
    out_fd = p ? open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : 2;
#if defined(__x86_64__)
    real_ioctl = (int (*)(int, unsigned long, void *))dlvsym(RTLD_NEXT, "ioctl", "GLIBC_2.2.5");
#else
    real_ioctl = (int (*)(int, unsigned long, void *))dlvsym(RTLD_NEXT, "ioctl", "GLIBC_2.17");
#endif
}

/* Bytes of alloc params to show: libcuda leaves NVOS64.paramsSize at 0 (RM
 * knows each class's size), so for a channel group show its 20-byte
 * NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS; other classes only when sized. */
static size_t alloc_bytes(uint64_t ptr, uint32_t size, uint32_t cls)
{
    if (!ptr)
        return 0;
    if (size)
        return size < 64 ? size : 64;
    return cls == 0xa06c ? 20 : 0;
}

static void hex(char *dst, size_t cap, const void *src, size_t n)
{
    const unsigned char *s = src;
    size_t o = 0;
    for (size_t i = 0; i < n && o + 3 < cap; i++)
        o += (size_t)snprintf(dst + o, cap - o, "%02x", s[i]);
    dst[o] = '\0';
}

static void emit(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void emit(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    ssize_t w = write(out_fd, line, (size_t)n);
    (void)w;
}

struct apiver {
    uint32_t cmd, reply;
    char version[64];
};

EXPORT int ioctl(int fd, unsigned long req, ...);
int ioctl(int fd, unsigned long req, ...)
{
    va_list ap;
    va_start(ap, req);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    if (!real_ioctl)
        return (int)syscall(SYS_ioctl, fd, req, arg);
    if (((req >> 8) & 0xff) != NV_IOCTL_MAGIC || out_fd < 0)
        return real_ioctl(fd, req, arg);
    if (fd >= 0 && fd < 4096 && !seen[fd]) {
        char link[64], target[256];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, target, sizeof target - 1);
        target[n > 0 ? n : 0] = '\0';
        seen[fd] = 1;
        emit("D %d %s", fd, target);
    }
    unsigned nr = req & 0xff, size = (req >> 16) & 0x3fff;
    int ret = real_ioctl(fd, req, arg);
    int e = ret ? errno : 0;
    char h[160];
    if (nr == NV_ESC_RM_ALLOC && size == sizeof(struct nvos21)) {
        struct nvos21 *p = arg;
        hex(h, sizeof h, (void *)(uintptr_t)p->pAllocParms, alloc_bytes(p->pAllocParms, p->paramsSize, p->hClass));
        emit("A %d %#lx %d %d root=%#x parent=%#x new=%#x class=%#x psize=%u flags=- status=%#x params=%s",
             fd, req, ret, e, p->hRoot, p->hObjectParent, p->hObjectNew, p->hClass, p->paramsSize,
             p->status, h);
    } else if (nr == NV_ESC_RM_ALLOC && size == sizeof(struct nvos64)) {
        struct nvos64 *p = arg;
        hex(h, sizeof h, (void *)(uintptr_t)p->pAllocParms, alloc_bytes(p->pAllocParms, p->paramsSize, p->hClass));
        emit("A %d %#lx %d %d root=%#x parent=%#x new=%#x class=%#x psize=%u flags=%#x status=%#x params=%s",
             fd, req, ret, e, p->hRoot, p->hObjectParent, p->hObjectNew, p->hClass, p->paramsSize,
             p->flags, p->status, h);
    } else if (nr == NV_ESC_RM_CONTROL && size == sizeof(struct nvos54)) {
        struct nvos54 *p = arg;
        hex(h, sizeof h, (void *)(uintptr_t)p->params, p->params ? (p->paramsSize < 64 ? p->paramsSize : 64) : 0);
        emit("C %d %#lx %d %d client=%#x object=%#x cmd=%#x flags=%#x psize=%u status=%#x params=%s",
             fd, req, ret, e, p->hClient, p->hObject, p->cmd, p->flags, p->paramsSize, p->status, h);
    } else if (nr == NV_ESC_RM_FREE && size == sizeof(struct nvos00)) {
        struct nvos00 *p = arg;
        emit("F %d %#lx %d %d root=%#x parent=%#x old=%#x status=%#x", fd, req, ret, e, p->hRoot,
             p->hObjectParent, p->hObjectOld, p->status);
    } else if (nr == 0xd2 && size == sizeof(struct apiver)) {
        struct apiver *p = arg;
        char v[65];
        memcpy(v, p->version, 64);
        v[64] = '\0';
        emit("V %d %#lx %d %d cmd=%#x reply=%u version=%s", fd, req, ret, e, p->cmd, p->reply, v);
    } else {
        emit("O %d %#lx %d %d nr=%#x size=%u", fd, req, ret, e, nr, size);
    }
    errno = e;
    return ret;
}
