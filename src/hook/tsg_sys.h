/* tsg_sys.h: tsg.c's system boundary (tsg_sys.c). */
#ifndef CS_HOOK_TSG_SYS_H
#define CS_HOOK_TSG_SYS_H

#include <stddef.h>

/* The system boundary, defined in tsg_sys.c (and by the unit test's
 * model of the driver): the real ioctl; whether fd is an NVIDIA character device
 * (major 195: /dev/nvidiactl or /dev/nvidiaN); the text of
 * /proc/driver/nvidia/version (NUL-terminated, -1 if unreadable). */
int cs_ioctl_real(int fd, unsigned long req, void *arg);
int cs_tsg_sys_fd_is_nv(int fd);
int cs_tsg_sys_driver_version(char *buf, size_t cap);

#endif
