/* dp_install.c: what the plugin puts on the node for containers to mount:
 * libcushare.so (--install-lib) and the ld.so.preload file (--inject
 * preload). Both are replaced by rename(2): a running container keeps the
 * inode it mapped, a new one gets the new file, nobody sees half a file. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "k8s/dp_install.h"

static int mkdirs(const char *path)
{
    char buf[DP_PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(buf, 0755) < 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return 0;
}

static int copy_fd(int in, int out)
{
    char buf[65536];
    for (;;) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n == 0)
            return 0;
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(out, buf + off, (size_t)(n - off));
            if (w < 0 && errno != EINTR)
                return -1;
            off += w > 0 ? w : 0;
        }
    }
}

/* Writes dst atomically from src_fd (or from text when src_fd < 0). */
static int replace(const char *dst, int src_fd, const char *text, mode_t mode, char *err,
                   size_t cap)
{
    char tmp[DP_PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", dst, (int)getpid());
    if (mkdirs(dst) < 0) {
        snprintf(err, cap, "cannot create the directory of %s: %s", dst, strerror(errno));
        return -1;
    }
    int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (out < 0) {
        snprintf(err, cap, "%s: %s", tmp, strerror(errno));
        return -1;
    }
    int rc = src_fd >= 0 ? copy_fd(src_fd, out)
                         : (write(out, text, strlen(text)) == (ssize_t)strlen(text) ? 0 : -1);
    if (rc == 0)
        rc = fchmod(out, mode) | fsync(out);
    if (close(out) < 0)
        rc = -1;
    if (rc == 0 && rename(tmp, dst) < 0)
        rc = -1;
    if (rc < 0) {
        snprintf(err, cap, "writing %s: %s", dst, strerror(errno));
        unlink(tmp);
    }
    return rc;
}

int dp_install_lib(const char *src, const char *dst, char *err, size_t cap)
{
    struct stat a, b;
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0 || fstat(in, &a) < 0) {
        snprintf(err, cap, "--install-lib %s: %s", src, strerror(errno));
        if (in >= 0)
            close(in);
        return -1;
    }
    if (stat(dst, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
        close(in);
        return 0; /* already the same file */
    }
    int rc = replace(dst, in, NULL, 0755, err, cap);
    close(in);
    if (rc == 0)
        cs_info("installed %s as %s", src, dst);
    return rc;
}

int dp_install_preload(const char *file, const char *lib_in_container, char *err, size_t cap)
{
    char text[DP_PATH_MAX + 2];
    snprintf(text, sizeof text, "%s\n", lib_in_container);
    return replace(file, -1, text, 0644, err, cap);
}
