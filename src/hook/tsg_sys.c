/* tsg_sys.c: tsg.c's system boundary: the real ioctl, NVIDIA's character
 * devices, the driver's version text.
 *
 * The real ioctl is the next definition after this library: glibc's, or
 * another interposer's loaded after us. It is looked up with dlvsym, not
 * dlsym: inside this library `dlsym` binds to our own override
 * (hooks_dlsym.c), and dlvsym takes no lock we could hold and allocates
 * nothing on success. Looked up once in the constructor; an ioctl made
 * before the constructor (another library's constructor) looks it up
 * itself, racing harmlessly (every thread stores the same pointer). If the
 * lookup fails, the raw system call does the job.
 *
 * The unit test of tsg.c (tests/hook/hook_tsg.c) links its own model of
 * these three functions instead of this file.
 */
#include "hook/hook.h"
#include "hook/tsg_sys.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#if defined(__x86_64__)
#define CS_IOCTL_VERSION "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define CS_IOCTL_VERSION "GLIBC_2.17"
#else
#error "libcushare.so supports x86-64 and AArch64"
#endif

/* NVIDIA's character devices: /dev/nvidiactl is 195:255, /dev/nvidiaN 195:N
 * (NV_MAJOR_DEVICE_NUMBER; nvidia-uvm has a dynamic major and no RM). */
#define NV_MAJOR_DEVICE_NUMBER 195u

typedef int (*ioctl_fn)(int, unsigned long, ...);
static _Atomic(ioctl_fn) real_ioctl;

static int raw_ioctl(int fd, unsigned long req, ...)
{
    va_list ap;
    va_start(ap, req);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return (int)syscall(SYS_ioctl, fd, req, arg);
}

static ioctl_fn resolve(void)
{
    ioctl_fn f = (ioctl_fn)dlvsym(RTLD_NEXT, "ioctl", CS_IOCTL_VERSION);
    if (!f)
        f = raw_ioctl;
    atomic_store_explicit(&real_ioctl, f, memory_order_release);
    return f;
}

__attribute__((constructor)) static void cs_ioctl_resolve(void)
{
    if (!atomic_load_explicit(&real_ioctl, memory_order_acquire))
        resolve();
}

int cs_ioctl_real(int fd, unsigned long req, void *arg)
{
    ioctl_fn f = atomic_load_explicit(&real_ioctl, memory_order_acquire);
    if (cs_unlikely(!f))
        f = resolve();
    return f(fd, req, arg);
}

int cs_tsg_sys_fd_is_nv(int fd)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return 0;
    return S_ISCHR(st.st_mode) && major(st.st_rdev) == NV_MAJOR_DEVICE_NUMBER;
}

/* open/read/close rather than stdio: no allocation. */
int cs_tsg_sys_driver_version(char *buf, size_t cap)
{
    if (cap == 0)
        return -1;
    int fd = open("/proc/driver/nvidia/version", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t n = 0;
    while (n + 1 < cap) {
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    return n ? 0 : -1;
}
