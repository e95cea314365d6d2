/* hooks_ioctl.c: the exported ioctl.
 *
 * libcuda makes its RM calls with ioctl() through the PLT, so the preloaded
 * definition below sees them (tsg.c explains what it records). Every other
 * ioctl of the process passes through it too, so the common path is one
 * shift-and-compare on the request's type byte and one relaxed load: no
 * lock, allocation or system call of ours. With CUSHARE_TSG=off (or once
 * the mechanism turned itself off) every ioctl takes that path.
 *
 * Version: libcuda (like any program linked against glibc) references
 * ioctl@GLIBC_2.2.5 (GLIBC_2.17 on AArch64). The dynamic linker binds a
 * versioned reference only to a definition of that version or an
 * unversioned one, so the map exports ours as ioctl@@GLIBC_2.2.5; in the
 * CUSHARE_1.0 node libcuda would bypass it.
 *
 * The real ioctl and the rest of tsg.c's system boundary live in
 * tsg_sys.c, below tsg.c.
 */
#include "hook/hook.h"
#include "hook/tsg.h"

#include <stdarg.h>
#include <sys/ioctl.h>

/* The third argument is read as a pointer whatever the caller passed (an
 * int, a pointer or nothing): on every ABI glibc supports it travels in a
 * register or slot of pointer size, and the real ioctl reads it the same
 * way. This is what glibc's own wrapper does. */
CS_EXPORT int ioctl(int fd, unsigned long req, ...)
{
    va_list ap;
    va_start(ap, req);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    if (cs_likely(((req >> 8) & 0xffu) != 'F') ||
        !atomic_load_explicit(&cs_tsg_watch, memory_order_relaxed))
        return cs_ioctl_real(fd, req, arg);
    return cs_tsg_ioctl(fd, req, arg);
}
