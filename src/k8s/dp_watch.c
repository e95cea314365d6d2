/* dp_watch.c: inotify on the kubelet's device-plugins directory. The events
 * are only a hint to look again (dp_plugin_check compares inodes): a
 * restarted kubelet removes every socket there and creates a new
 * kubelet.sock, and an overflowing queue loses nothing that a look misses.
 * The one thing a look cannot tell, a kubelet.sock replaced between two
 * looks by one with the same inode number, the CREATE event tells. */
#include <errno.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "k8s/dp_plugin.h"

int dp_watch_open(const char *dir)
{
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        cs_error("mkdir %s: %s", dir, strerror(errno));
        return -1;
    }
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0) {
        cs_error("inotify_init1: %s", strerror(errno));
        return -1;
    }
    uint32_t mask = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF |
                    IN_MOVE_SELF;
    if (inotify_add_watch(fd, dir, mask) < 0) {
        cs_error("inotify_add_watch %s: %s", dir, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

unsigned dp_watch_drain(int fd, const char *kubelet_sock)
{
    _Alignas(struct inotify_event) char buf[4096];
    unsigned what = 0;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0)
            return what;
        what |= DP_WATCH_ANY;
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)(void *)p;
            /* A new kubelet.sock is a new kubelet, even if it got the
             * inode number of the old one back. */
            if ((ev->mask & (IN_CREATE | IN_MOVED_TO)) && ev->len &&
                !strcmp(ev->name, kubelet_sock))
                what |= DP_WATCH_KUBELET;
            p += sizeof *ev + ev->len;
        }
    }
}
