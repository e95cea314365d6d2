/* fsafe.c: see fsafe.h. */
#include "common/fsafe.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What the final directory of a walk may also be. */
enum {
    FS_CREATE = 1,    /* create missing components */
    FS_ROOT_OK = 2,   /* owned by root as well as by us */
    FS_STICKY_OK = 4, /* a root-owned sticky directory (the caller checks the entry) */
};

static int fs_fail(int e, char *err, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fs_fail(int e, char *err, size_t cap, const char *fmt, ...)
{
    if (err && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    errno = e;
    return -1;
}

mode_t cs_fs_sock_dir_mode(void)
{
    return geteuid() == 0 ? 0755 : 0700;
}

const char *cs_fs_split(const char *path, char *dir, size_t cap)
{
    const char *slash = strrchr(path, '/');
    size_t n = !slash ? 0 : slash == path ? 1 : (size_t)(slash - path);
    if (n + 2 > cap)
        return NULL;
    if (n)
        memcpy(dir, path, n);
    else
        dir[n++] = '.';
    dir[n] = '\0';
    return slash ? slash + 1 : path;
}

static bool root_or_me(uid_t uid)
{
    return uid == 0 || uid == geteuid();
}

static bool others_write(const struct stat *st)
{
    return (st->st_mode & (S_IWGRP | S_IWOTH)) != 0;
}

static bool root_sticky(const struct stat *st)
{
    return st->st_uid == 0 && (st->st_mode & S_ISVTX);
}

/* path as an absolute path in buf (relative to the working directory),
 * trailing slashes removed. */
static int absolute(const char *path, char *buf, size_t cap, char *err, size_t ecap)
{
    size_t n = 0;
    if (!path || !path[0])
        return fs_fail(EINVAL, err, ecap, "empty path");
    if (path[0] != '/') {
        if (!getcwd(buf, cap))
            return fs_fail(errno, err, ecap, "%s: cannot resolve the working directory: %s",
                           path, strerror(errno));
        n = strlen(buf);
        if (n + 1 < cap && buf[n - 1] != '/')
            buf[n++] = '/';
    }
    size_t len = strlen(path);
    if (n + len >= cap)
        return fs_fail(ENAMETOOLONG, err, ecap, "%s: path too long", path);
    memcpy(buf + n, path, len + 1);
    for (n += len; n > 1 && buf[n - 1] == '/'; n--)
        buf[n - 1] = '\0';
    return 0;
}

/* A component above the directory: a directory owned by root or us,
 * writable by nobody else unless root-owned and sticky. A symbolic link
 * (/var/run -> /run) must be root's or ours, and its target passes too. */
static int check_above(const char *p, char *err, size_t cap)
{
    struct stat st;
    if (lstat(p, &st) < 0)
        return fs_fail(errno, err, cap, "%s: %s", p, strerror(errno));
    if (S_ISLNK(st.st_mode)) {
        if (!root_or_me(st.st_uid))
            return fs_fail(EPERM, err, cap,
                           "%s is a symbolic link owned by uid %u (neither root nor %u): its "
                           "owner chooses where it leads", p, (unsigned)st.st_uid,
                           (unsigned)geteuid());
        if (stat(p, &st) < 0)
            return fs_fail(errno, err, cap, "%s: %s", p, strerror(errno));
    }
    if (!S_ISDIR(st.st_mode))
        return fs_fail(ENOTDIR, err, cap, "%s is not a directory", p);
    if (!root_or_me(st.st_uid))
        return fs_fail(EPERM, err, cap,
                       "%s is owned by uid %u (neither root nor %u): its owner could replace "
                       "what lies below it", p, (unsigned)st.st_uid, (unsigned)geteuid());
    if (others_write(&st) && !root_sticky(&st))
        return fs_fail(EPERM, err, cap,
                       "%s is writable by others (mode %04o) and is not a root-owned sticky "
                       "directory: anyone could replace what lies below it",
                       p, (unsigned)(st.st_mode & 07777));
    return 0;
}

/* The directory itself, never through a link: ours (or root's, with
 * FS_ROOT_OK) and writable by nobody else (or root's sticky one, with
 * FS_STICKY_OK). */
static int check_final(const char *p, int flags, struct stat *st, char *err, size_t cap)
{
    if (lstat(p, st) < 0)
        return fs_fail(errno, err, cap, "%s: %s", p, strerror(errno));
    if (S_ISLNK(st->st_mode))
        return fs_fail(EPERM, err, cap,
                       "%s is a symbolic link, not a directory: someone may have planted it", p);
    if (!S_ISDIR(st->st_mode))
        return fs_fail(ENOTDIR, err, cap, "%s is not a directory", p);
    uid_t me = geteuid();
    if (root_sticky(st) && others_write(st) && !(flags & FS_STICKY_OK))
        return fs_fail(EPERM, err, cap,
                       "%s is a shared directory (mode %04o): the daemon's socket, lock and "
                       "state need a directory of their own", p, (unsigned)(st->st_mode & 07777));
    if (st->st_uid != me && !((flags & FS_ROOT_OK) && st->st_uid == 0))
        return fs_fail(EPERM, err, cap, "%s is owned by uid %u, not %u%s: someone else created it",
                       p, (unsigned)st->st_uid, (unsigned)me, flags & FS_ROOT_OK ? " or root" : "");
    if (others_write(st) && !((flags & FS_STICKY_OK) && root_sticky(st)))
        return fs_fail(EPERM, err, cap,
                       "%s is writable by group or others (mode %04o): anyone could plant files "
                       "in it", p, (unsigned)(st->st_mode & 07777));
    return 0;
}

/* mkdir with exactly `mode`: a missing component is ours from here on. */
static int make_dir(const char *p, mode_t mode, char *err, size_t cap)
{
    if (mkdir(p, mode) < 0) {
        if (errno == EEXIST) /* someone was quicker: the check decides */
            return 0;
        return fs_fail(errno, err, cap, "cannot create %s: %s", p, strerror(errno));
    }
    if (chmod(p, mode) < 0) /* the umask may have taken bits away */
        return fs_fail(errno, err, cap, "cannot set the mode of %s: %s", p, strerror(errno));
    return 0;
}

/* Checks (and with FS_CREATE makes) every component of path; *final gets
 * the last one's lstat. */
static int walk(const char *path, int flags, mode_t mode, struct stat *final, char *err,
                size_t cap)
{
    char buf[PATH_MAX];
    if (absolute(path, buf, sizeof buf, err, cap) < 0)
        return -1;
    for (char *p = buf + 1;; p++) {
        if (*p && *p != '/')
            continue;
        char c = *p;
        *p = '\0';
        int rc = c ? check_above(buf, err, cap) : check_final(buf, flags, final, err, cap);
        if (rc < 0 && errno == ENOENT && (flags & FS_CREATE)) {
            if (make_dir(buf, mode, err, cap) < 0)
                return -1;
            rc = c ? check_above(buf, err, cap) : check_final(buf, flags, final, err, cap);
        }
        if (rc < 0 || !c)
            return rc;
        *p = c;
    }
}

int cs_fs_ensure_dir(const char *path, mode_t mode, char *err, size_t cap)
{
    struct stat st;
    return walk(path, FS_CREATE, mode, &st, err, cap);
}

int cs_fs_check_dir(const char *path, char *err, size_t cap)
{
    struct stat st;
    return walk(path, 0, 0, &st, err, cap);
}

int cs_fs_check_socket(const char *sock, char *err, size_t cap)
{
    char path[PATH_MAX], dir[PATH_MAX];
    if (absolute(sock, path, sizeof path, err, cap) < 0)
        return -1;
    cs_fs_split(path, dir, sizeof dir);
    struct stat st;
    if (walk(dir, FS_ROOT_OK | FS_STICKY_OK, 0, &st, err, cap) < 0)
        return -1;
    if (!others_write(&st))
        return 0;
    /* A root-owned sticky directory: only the socket's owner (or root) can
     * remove or rename it, so it is trusted if that owner is. */
    if (lstat(path, &st) < 0)
        return fs_fail(errno, err, cap, "%s: %s", path, strerror(errno));
    if (!S_ISSOCK(st.st_mode))
        return fs_fail(EPERM, err, cap, "%s is not a socket", path);
    if (!root_or_me(st.st_uid))
        return fs_fail(EPERM, err, cap,
                       "%s is owned by uid %u (neither root nor %u) in a shared directory: "
                       "someone else's daemon, or a planted one", path, (unsigned)st.st_uid,
                       (unsigned)geteuid());
    return 0;
}

int cs_fs_open_append(const char *path, char *err, size_t cap)
{
    /* O_NONBLOCK: a planted FIFO must not block the open (cleared below). */
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY |
                            O_NONBLOCK, 0600);
    if (fd < 0)
        return fs_fail(errno, err, cap, "cannot open %s: %s%s", path, strerror(errno),
                       errno == ELOOP ? " (a symbolic link: not following it)" : "");
    struct stat st;
    int e = 0;
    if (fstat(fd, &st) < 0)
        fs_fail(e = errno, err, cap, "%s: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        fs_fail(e = EPERM, err, cap, "%s is not a regular file", path);
    else if (st.st_uid != geteuid())
        fs_fail(e = EPERM, err, cap, "%s is owned by uid %u, not %u", path, (unsigned)st.st_uid,
                (unsigned)geteuid());
    else if (st.st_nlink != 1)
        fs_fail(e = EPERM, err, cap, "%s has %lu hard links: it may be another file's name",
                path, (unsigned long)st.st_nlink);
    else if (fcntl(fd, F_SETFL, O_APPEND) < 0)
        fs_fail(e = errno, err, cap, "%s: %s", path, strerror(errno));
    if (e) {
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static int write_all(int fd, const char *p, size_t len)
{
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

int cs_fs_write_atomic(const char *dir, const char *name, const void *data, size_t len)
{
    char tmp[PATH_MAX], dst[PATH_MAX];
    int a = snprintf(tmp, sizeof tmp, "%s/.%s.XXXXXX", dir, name);
    int b = snprintf(dst, sizeof dst, "%s/%s", dir, name);
    if (a < 0 || b < 0 || (size_t)a >= sizeof tmp || (size_t)b >= sizeof dst) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = mkostemp(tmp, O_CLOEXEC); /* O_EXCL, 0600 */
    if (fd < 0)
        return -1;
    int rc = write_all(fd, data, len) == 0 && fsync(fd) == 0 ? 0 : -1;
    if (close(fd) < 0)
        rc = -1;
    if (rc == 0 && rename(tmp, dst) < 0)
        rc = -1;
    if (rc < 0) {
        int e = errno;
        unlink(tmp);
        errno = e;
    }
    return rc;
}
