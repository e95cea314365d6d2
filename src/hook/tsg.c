/* tsg.c: see tsg.h and docs/tsg.md.
 *
 * What libcuda does on driver 580 for one context (recorded on an H100:
 * tests/hook/hook_tsg_580.trace): on /dev/nvidiactl it allocates an RM
 * client (class 0x41), a device (0x80) and subdevice (0x2080), then four
 * channel groups (class 0xa06c, NVOS64 allocs) under the device: the
 * compute group (engineType 1, 8 channels of class 0xc86f) and three
 * copy-engine groups (engineType 0xb, 0xc, 0xd, 4 channels each), schedules
 * each (0xa06c0101) and finally sets the compute group's timeslice itself
 * (SET_TIMESLICE 2048 µs). On exit it frees nothing: closing the descriptor
 * frees the client.
 *
 * Hence:
 *  - groups are recorded at the return of their RM_ALLOC (fd, client,
 *    parent, handle, engine type read from the alloc params);
 *  - libcuda's own SET_TIMESLICE on a recorded compute group is observed:
 *    its value becomes that group's default, and while cushare has a
 *    timeslice in force the control is forwarded with cushare's value
 *    instead (a private copy of the parameters; libcuda's are untouched);
 *  - a group is forgotten when it, its parent or its client is freed, when
 *    a new client with the same handle is allocated on the same descriptor
 *    (the descriptor number was reused: the old file's clients died with
 *    it), and when the driver answers a control on it with "no such
 *    client/object";
 *  - before cushare sends a control on a descriptor it checks again that the
 *    descriptor is an NVIDIA device (a closed and reused number is not).
 *    close() is not hooked: the rules above cover reuse without a second
 *    hot interposed call.
 *
 * Concurrency: a small spinlock guards the table for a few loads and stores
 * at a time (never across a system call); a mutex serializes everything
 * that sends controls (probe, set, restore, applying to a new group,
 * substituting libcuda's SET), so decisions and the driver's state agree.
 * A thread-local flag makes a re-entrant ioctl (a signal handler calling
 * ioctl while this thread is inside the NV path) a pure pass-through, so no
 * lock is ever taken twice by one thread. A fork child reinitializes both
 * locks and forgets every group: the inherited descriptor and handles
 * belong to the parent's RM client.
 */
#include "hook/tsg.h"
#include "hook/config.h"
#include "hook/hook.h"
#include "common/log.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "hook/nvrm.h"

/* Driver branches whose layouts above are known to hold (the structures
 * have not changed across them; 580 is recorded). Others need
 * CUSHARE_TSG=force. */
#define DRIVER_MAJOR_MIN 535
#define DRIVER_MAJOR_MAX 580

/* ---- State ---------------------------------------------------------------- */

#define MAX_GROUPS 128 /* 4 per context: 32 contexts */

struct group {
    int fd; /* -1: free slot */
    uint32_t client, parent, handle, engine;
    uint32_t serial;  /* tells a slot's occupants apart across unlocks */
    uint64_t dflt_us; /* default timeslice (probe GET or libcuda's SET), 0 = unknown */
    uint64_t cur_us;  /* what cushare programmed, 0 = nothing (the default is in force) */
};

static struct group groups[MAX_GROUPS];
static _Atomic unsigned ngroups;   /* used slots: lets frees skip the table */
static unsigned next_serial;       /* under tbl_lock */
static _Atomic unsigned n_dropped; /* groups not recorded: table full */
static atomic_flag tbl_lock = ATOMIC_FLAG_INIT;

static pthread_mutex_t ctl_mu = PTHREAD_MUTEX_INITIALIZER;

_Atomic int cs_tsg_watch;
static _Atomic int state = CS_TSG_OFF;
static _Atomic int mode = CS_TSG_MODE_OFF;
static _Atomic uint64_t target_us; /* 0 = defaults */
static uint64_t static_us;         /* CUSHARE_TSG_TIMESLICE_US, read once */
static _Atomic uint64_t probe_default_us;
static _Atomic int disabling;      /* the one transition to UNAVAILABLE happened */
static _Atomic int table_full_logged;
static _Atomic int applied_logged;
static char reason[200];           /* written once, before state is published */
static char driver[32];            /* under ctl_mu; read after the probe */

static __thread int tls_busy __attribute__((tls_model("initial-exec")));

static void tbl_acquire(void)
{
    while (atomic_flag_test_and_set_explicit(&tbl_lock, memory_order_acquire))
        sched_yield(); /* only under contention; holders never block */
}

static void tbl_release(void)
{
    atomic_flag_clear_explicit(&tbl_lock, memory_order_release);
}

static bool is_gr(uint32_t engine)
{
    return engine >= NV_ENGINE_GR_FIRST && engine <= NV_ENGINE_GR_LAST;
}

static bool probed(int s)
{
    return s == CS_TSG_READY || s == CS_TSG_ACTIVE;
}

/* The one transition to UNAVAILABLE: reason, one log line, wrapper off. */
static void disable_at(enum cs_log_level level, const char *fmt, va_list ap)
{
    if (atomic_exchange(&disabling, 1))
        return;
    vsnprintf(reason, sizeof reason, fmt, ap);
    atomic_store_explicit(&state, CS_TSG_UNAVAILABLE, memory_order_release);
    atomic_store_explicit(&cs_tsg_watch, 0, memory_order_relaxed);
    cs_log(level, "channel-group timeslice control is unavailable: %s; LC/BE separation "
                  "falls back to gating", reason);
}

static void disable(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void disable(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    disable_at(CS_LOG_WARN, fmt, ap);
    va_end(ap);
}

static void disable_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void disable_info(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    disable_at(CS_LOG_INFO, fmt, ap);
    va_end(ap);
}

/* ---- The table ---------------------------------------------------------------- */

static void slot_clear(struct group *g)
{
    memset(g, 0, sizeof *g);
    g->fd = -1;
}

static void record_group(int fd, uint32_t client, uint32_t parent, uint32_t handle,
                         uint32_t engine, struct group *out)
{
    out->fd = -1;
    tbl_acquire();
    struct group *slot = NULL;
    for (int i = 0; i < MAX_GROUPS; i++) {
        struct group *g = &groups[i];
        if (g->fd == fd && g->client == client && g->handle == handle) {
            slot = g; /* the same handle again: the old one is gone */
            break;
        }
        if (!slot && g->fd < 0)
            slot = g;
    }
    if (slot) {
        if (slot->fd < 0)
            atomic_fetch_add_explicit(&ngroups, 1, memory_order_relaxed);
        slot->fd = fd;
        slot->client = client;
        slot->parent = parent;
        slot->handle = handle;
        slot->engine = engine;
        slot->serial = ++next_serial;
        slot->dflt_us = 0;
        slot->cur_us = 0;
        *out = *slot;
    }
    tbl_release();
    if (!slot) {
        atomic_fetch_add_explicit(&n_dropped, 1, memory_order_relaxed);
        if (!atomic_exchange(&table_full_logged, 1))
            cs_warn("channel groups: more than %d in this process; later ones keep the "
                    "driver's timeslice", MAX_GROUPS);
    }
}

/* Forgets the groups of `client` that are `obj` or children of `obj`, or
 * all of them when obj is the client itself. fd < 0 matches any. */
static void forget(int fd, uint32_t client, uint32_t obj)
{
    if (!atomic_load_explicit(&ngroups, memory_order_relaxed))
        return;
    tbl_acquire();
    for (int i = 0; i < MAX_GROUPS; i++) {
        struct group *g = &groups[i];
        if (g->fd < 0 || g->client != client || (fd >= 0 && g->fd != fd))
            continue;
        if (obj == client || g->handle == obj || g->parent == obj) {
            slot_clear(g);
            atomic_fetch_sub_explicit(&ngroups, 1, memory_order_relaxed);
        }
    }
    tbl_release();
}

static void forget_serial(uint32_t serial)
{
    tbl_acquire();
    for (int i = 0; i < MAX_GROUPS; i++)
        if (groups[i].fd >= 0 && groups[i].serial == serial) {
            slot_clear(&groups[i]);
            atomic_fetch_sub_explicit(&ngroups, 1, memory_order_relaxed);
        }
    tbl_release();
}

/* Stores the per-group values back, if the group still exists. */
static void update_serial(uint32_t serial, uint64_t dflt_us, uint64_t cur_us)
{
    tbl_acquire();
    for (int i = 0; i < MAX_GROUPS; i++)
        if (groups[i].fd >= 0 && groups[i].serial == serial) {
            groups[i].dflt_us = dflt_us;
            groups[i].cur_us = cur_us;
        }
    tbl_release();
}

static bool find_group(uint32_t client, uint32_t handle, struct group *out)
{
    bool found = false;
    tbl_acquire();
    for (int i = 0; i < MAX_GROUPS && !found; i++)
        if (groups[i].fd >= 0 && groups[i].client == client && groups[i].handle == handle) {
            *out = groups[i];
            found = true;
        }
    tbl_release();
    return found;
}

/* Copies the compute groups (at most cap) out of the table. */
static int snapshot_gr(struct group *out, int cap)
{
    int n = 0;
    tbl_acquire();
    for (int i = 0; i < MAX_GROUPS && n < cap; i++)
        if (groups[i].fd >= 0 && is_gr(groups[i].engine))
            out[n++] = groups[i];
    tbl_release();
    return n;
}

/* ---- Controls cushare sends ---------------------------------------------- */

/* How often a control is sent again when the driver did not run it. The
 * NVIDIA ioctl takes its power-management lock with
 * down_read_interruptible() before anything else, so a signal pending on
 * the calling thread answers EINTR (EAGAIN while a suspend is under way),
 * and the RM may answer NV_ERR_BUSY_RETRY; libcuda sends those again. Taken
 * as failures, one signal at the wrong moment turned the mechanism off for
 * the rest of the process, and beside a high job the daemon then gated it
 * instead (issue 21). A bound, so that a signal storm cannot hold the
 * thread for ever: after it, the failure stands. */
#define RM_TRIES 64

/* One RM control on libcuda's descriptor, sent again while the driver did
 * not run it (RM_TRIES). Returns the RM status, or UINT32_MAX with *err set
 * when the ioctl itself failed. errno is kept. */
static uint32_t rm_control(int fd, uint32_t client, uint32_t obj, uint32_t cmd, void *params,
                           uint32_t size, int *err)
{
    int saved = errno;
    uint32_t status = UINT32_MAX;
    *err = 0;
    for (int i = 0; i < RM_TRIES; i++) {
        struct nvos54 p = {
            .hClient = client,
            .hObject = obj,
            .cmd = cmd,
            .flags = 0,
            .params = (uint64_t)(uintptr_t)params,
            .paramsSize = size,
            .status = 0,
        };
        int rc = cs_ioctl_real(fd, NV_REQ_CONTROL, &p);
        *err = rc ? errno : 0;
        status = rc ? UINT32_MAX : p.status;
        bool again = rc ? *err == EINTR || *err == EAGAIN : status == NV_ERR_BUSY_RETRY;
        if (!again)
            break;
        if (rc == 0 || *err == EAGAIN)
            sched_yield(); /* the driver is busy: let it be (EINTR: at once) */
    }
    errno = saved;
    return status;
}

static bool status_gone(uint32_t s)
{
    return s == NV_ERR_INVALID_CLIENT || s == NV_ERR_INVALID_OBJECT ||
           s == NV_ERR_INVALID_OBJECT_HANDLE || s == NV_ERR_INVALID_OBJECT_PARENT ||
           s == NV_ERR_OBJECT_NOT_FOUND;
}

static bool status_value_refused(uint32_t s)
{
    return s == NV_ERR_INVALID_ARGUMENT || s == NV_ERR_NOT_SUPPORTED ||
           s == NV_ERR_OUT_OF_RANGE || s == NV_ERR_INVALID_PARAMETER;
}

enum op_result { OP_OK, OP_GONE, OP_REFUSED, OP_FAILED };

/* Names the failure for the reason string and picks the return code. */
static int fail_code(uint32_t status)
{
    return status == NV_ERR_INSUFFICIENT_PERMISSIONS ? -EPERM : -EIO;
}

static enum op_result do_get(const struct group *g, uint64_t *us, uint32_t *status)
{
    struct nva06c_timeslice p = {0};
    int err = 0;
    *status = rm_control(g->fd, g->client, g->handle, NV_CMD_GET_TIMESLICE, &p, sizeof p, &err);
    if (*status == NV_OK) {
        *us = p.timesliceUs;
        return OP_OK;
    }
    if (*status == UINT32_MAX)
        disable("GET_TIMESLICE ioctl failed: %s", strerror(err));
    else if (status_gone(*status))
        return OP_GONE;
    else
        disable("GET_TIMESLICE answered status %#x", *status);
    return OP_FAILED;
}

static enum op_result do_set(const struct group *g, uint64_t us, uint32_t *status)
{
    struct nva06c_timeslice p = {.timesliceUs = us};
    int err = 0;
    *status = rm_control(g->fd, g->client, g->handle, NV_CMD_SET_TIMESLICE, &p, sizeof p, &err);
    if (*status == NV_OK)
        return OP_OK;
    if (*status == UINT32_MAX) {
        disable("SET_TIMESLICE ioctl failed: %s", strerror(err));
        return OP_FAILED;
    }
    if (status_gone(*status))
        return OP_GONE;
    if (status_value_refused(*status))
        return OP_REFUSED;
    if (*status == NV_ERR_INSUFFICIENT_PERMISSIONS)
        disable("the driver refused SET_TIMESLICE (insufficient permissions)");
    else
        disable("SET_TIMESLICE answered status %#x", *status);
    return OP_FAILED;
}

/* The descriptor still an NVIDIA device? (A closed and reused number is
 * not, or is another open whose clients are not ours; the latter answers
 * "invalid client", handled as gone.) */
static bool fd_still_nv(int fd)
{
    return cs_tsg_sys_fd_is_nv(fd) == 1;
}

/* ---- Probe ------------------------------------------------------------------ */

/* Extracts "580.159.04" from the version file's text; returns the major or
 * -1. The first line reads "NVRM version: NVIDIA UNIX ... Kernel Module for
 * x86_64  580.159.04  Release Build ...": the first run of digits of 3+
 * followed by '.', preceded by a blank. */
static int parse_driver_version(const char *text, char *out, size_t cap)
{
    for (const char *s = text; *s && *s != '\n'; s++) {
        if ((s != text && s[-1] != ' ' && s[-1] != '\t') || *s < '0' || *s > '9')
            continue;
        const char *e = s;
        int major = 0;
        while (*e >= '0' && *e <= '9' && major < 100000)
            major = major * 10 + (*e++ - '0');
        if (e - s < 3 || *e != '.')
            continue;
        size_t n = 0;
        while (s[n] && s[n] != ' ' && s[n] != '\t' && s[n] != '\n' && n + 1 < cap) {
            out[n] = s[n];
            n++;
        }
        out[n] = '\0';
        return major;
    }
    return -1;
}

/* Under ctl_mu. 0: probed now or before; -EAGAIN: no compute group yet;
 * -ENOTSUP: off or unavailable. */
static int probe_locked(void)
{
    int s = atomic_load_explicit(&state, memory_order_acquire);
    if (probed(s))
        return 0;
    if (s != CS_TSG_UNPROBED)
        return -ENOTSUP;
    struct group g;
    if (snapshot_gr(&g, 1) < 1)
        return -EAGAIN;

    if (!driver[0]) {
        char text[512];
        int major = -1;
        if (cs_tsg_sys_driver_version(text, sizeof text) == 0)
            major = parse_driver_version(text, driver, sizeof driver);
        bool force = atomic_load(&mode) == CS_TSG_MODE_FORCE;
        if (major < 0 && !force) {
            driver[0] = '\0';
            disable("the driver version is unknown (/proc/driver/nvidia/version unreadable); "
                    "CUSHARE_TSG=force tries anyway");
            return -ENOTSUP;
        }
        if ((major < DRIVER_MAJOR_MIN || major > DRIVER_MAJOR_MAX) && !force) {
            disable("driver %s: the RM layouts used are known for %d..%d only; "
                    "CUSHARE_TSG=force tries anyway", driver, DRIVER_MAJOR_MIN, DRIVER_MAJOR_MAX);
            return -ENOTSUP;
        }
        if (major < 0)
            snprintf(driver, sizeof driver, "unknown");
    }
    if (!fd_still_nv(g.fd)) {
        disable("descriptor %d of the first compute channel group is not an NVIDIA device", g.fd);
        return -ENOTSUP;
    }
    uint64_t us = 0;
    uint32_t status;
    switch (do_get(&g, &us, &status)) {
    case OP_OK:
        break;
    case OP_GONE:
        /* Freed under us: try again with the next group. */
        forget_serial(g.serial);
        return probe_locked();
    default:
        return -ENOTSUP; /* disabled */
    }
    if (us == 0 || us > 10u * CS_TSG_MAX_US) {
        disable("GET_TIMESLICE returned an implausible %llu us", (unsigned long long)us);
        return -ENOTSUP;
    }
    update_serial(g.serial, us, 0);
    atomic_store(&probe_default_us, us);
    atomic_store_explicit(&state, CS_TSG_READY, memory_order_release);
    cs_info("channel-group timeslice control ready (driver %s, compute timeslice %llu us)",
            driver, (unsigned long long)us);
    return 0;
}

/* ---- Applying ----------------------------------------------------------------- */

/* Under ctl_mu: gives one compute group `us`, or (us == 0) puts back its
 * default if cushare changed it. A group that is gone is forgotten.
 * *status: the RM status of a failed control (for the return code). */
static enum op_result apply_one(struct group *g, uint64_t us, uint32_t *status)
{
    bool restoring = us == 0;
    *status = NV_OK;
    if (!fd_still_nv(g->fd)) {
        forget_serial(g->serial);
        return OP_GONE;
    }
    if (restoring) {
        if (!g->cur_us || !g->dflt_us)
            return OP_OK; /* nothing of ours in force */
        us = g->dflt_us;
    } else {
        if (g->cur_us == us)
            return OP_OK; /* already so: no round trip */
        if (!g->dflt_us) {
            uint64_t d = 0;
            enum op_result r = do_get(g, &d, status);
            if (r == OP_GONE)
                forget_serial(g->serial);
            if (r != OP_OK)
                return r;
            g->dflt_us = d;
        }
    }
    enum op_result r = do_set(g, us, status);
    if (r == OP_OK) {
        g->cur_us = restoring ? 0 : us;
        update_serial(g->serial, g->dflt_us, g->cur_us);
        cs_debug("channel group %#x: timeslice %llu us (default %llu us)", g->handle,
                 (unsigned long long)us, (unsigned long long)g->dflt_us);
        if (!restoring && !atomic_exchange(&applied_logged, 1))
            cs_info("channel groups: compute timeslice set to %llu us (default %llu us)",
                    (unsigned long long)us, (unsigned long long)g->dflt_us);
    } else if (r == OP_GONE) {
        forget_serial(g->serial);
    }
    return r;
}

/* Under ctl_mu: every compute group to `us` (0: defaults). On a refused
 * value the groups changed here go back to what they had; on a failure
 * (the mechanism is then unavailable) every group cushare changed goes back
 * to its default, best effort. */
static int apply_all(uint64_t us)
{
    static struct group snap[MAX_GROUPS]; /* under ctl_mu */
    static uint64_t before[MAX_GROUPS];
    int n = snapshot_gr(snap, MAX_GROUPS);
    for (int i = 0; i < n; i++) {
        before[i] = snap[i].cur_us;
        uint32_t status;
        enum op_result r = apply_one(&snap[i], us, &status);
        if (r == OP_OK || r == OP_GONE)
            continue;
        uint32_t ignored;
        if (r == OP_REFUSED) {
            /* Back to what each group had before this call. */
            for (int j = 0; j < i; j++) {
                if (snap[j].fd < 0 || snap[j].cur_us == before[j])
                    continue;
                uint64_t back = before[j] ? before[j] : snap[j].dflt_us;
                if (back && do_set(&snap[j], back, &ignored) == OP_OK)
                    update_serial(snap[j].serial, snap[j].dflt_us, before[j]);
            }
            return -ERANGE;
        }
        /* Unavailable now: every group cushare changed, in this call or
         * earlier ones (the failed one included), back to its default. */
        for (int j = 0; j < n; j++)
            if (snap[j].fd >= 0 && snap[j].cur_us && snap[j].dflt_us &&
                do_set(&snap[j], snap[j].dflt_us, &ignored) == OP_OK)
                update_serial(snap[j].serial, snap[j].dflt_us, 0);
        return fail_code(status);
    }
    return 0;
}

/* After libcuda created a compute group (its ioctl has returned): probe if
 * this is the first, then give it cushare's timeslice if one is in force. */
static void new_gr_group(struct group *g)
{
    pthread_mutex_lock(&ctl_mu);
    int s = atomic_load_explicit(&state, memory_order_acquire);
    if (s == CS_TSG_UNPROBED && probe_locked() == 0) {
        /* The probe read this group's default, or an older group's. */
        find_group(g->client, g->handle, g);
        s = atomic_load_explicit(&state, memory_order_acquire);
    }
    uint64_t us = atomic_load(&target_us);
    if (probed(s) && us) {
        uint32_t status;
        enum op_result r = apply_one(g, us, &status);
        if (r == OP_OK)
            atomic_store(&state, CS_TSG_ACTIVE);
        else if (r == OP_REFUSED)
            cs_warn("the driver refused a %llu us timeslice for a new channel group",
                    (unsigned long long)us);
    }
    pthread_mutex_unlock(&ctl_mu);
}

/* ---- The NV path of the ioctl wrapper ----------------------------------------- */

static bool is_root_class(uint32_t c)
{
    return c == NV_CLASS_ROOT || c == NV_CLASS_ROOT_NON_PRIV || c == NV_CLASS_ROOT_CLIENT;
}

static int on_alloc(int fd, unsigned long req, void *arg)
{
    bool is64 = req == NV_REQ_ALLOC64;
    /* hRoot..hClass are the first 16 bytes of both forms. */
    struct nvos21 *h = arg;
    uint32_t cls = h->hClass;
    if (cls != NV_CLASS_CHANNEL_GROUP && !is_root_class(cls))
        return cs_ioctl_real(fd, req, arg);
    int ret = cs_ioctl_real(fd, req, arg);
    int e = errno;
    uint32_t status = is64 ? ((struct nvos64 *)arg)->status : h->status;
    if (ret != 0 || status != NV_OK) {
        errno = e;
        return ret;
    }
    if (is_root_class(cls)) {
        /* A new client on this descriptor: any record of a client with this
         * handle on this descriptor number belongs to a file closed since. */
        forget(fd, h->hObjectNew ? h->hObjectNew : h->hRoot, h->hObjectNew ? h->hObjectNew : h->hRoot);
    } else if (cs_tsg_sys_fd_is_nv(fd) == 1) {
        uint64_t pp = h->pAllocParms;
        uint32_t flags = is64 ? ((struct nvos64 *)arg)->flags : 0;
        uint32_t size = is64 ? ((struct nvos64 *)arg)->paramsSize : h->paramsSize;
        uint32_t engine = NV_ENGINE_UNKNOWN;
        /* libcuda passes paramsSize 0 (the RM knows each class's size); a
         * serialized (FINN) block has another layout. The RM copied these
         * bytes successfully, so they are readable. */
        if (pp && !(flags & NVOS64_FLAGS_FINN_SERIALIZED) &&
            (size == 0 || size >= sizeof(struct nv_chgrp_alloc))) {
            struct nv_chgrp_alloc a;
            memcpy(&a, (const void *)(uintptr_t)pp, sizeof a);
            engine = a.engineType;
        }
        struct group g;
        record_group(fd, h->hRoot, h->hObjectParent, h->hObjectNew, engine, &g);
        if (g.fd >= 0 && is_gr(engine))
            new_gr_group(&g);
    }
    errno = e;
    return ret;
}

static int on_free(int fd, unsigned long req, void *arg)
{
    struct nvos00 *p = arg;
    uint32_t client = p->hRoot, obj = p->hObjectOld;
    int ret = cs_ioctl_real(fd, req, arg);
    int e = errno;
    /* Any descriptor: RM client handles are unique system-wide, and a
     * record too many dropped costs nothing. */
    if (ret == 0 && p->status == NV_OK)
        forget(-1, client, obj);
    errno = e;
    return ret;
}

/* libcuda's own SET_TIMESLICE on one of our compute groups: see the top. */
static int on_control(int fd, unsigned long req, void *arg)
{
    struct nvos54 *p = arg;
    struct group g;
    if (p->cmd != NV_CMD_SET_TIMESLICE || p->paramsSize != sizeof(struct nva06c_timeslice) ||
        p->flags != 0 || !p->params || !atomic_load_explicit(&ngroups, memory_order_relaxed) ||
        !find_group(p->hClient, p->hObject, &g) || !is_gr(g.engine))
        return cs_ioctl_real(fd, req, arg);
    struct nva06c_timeslice wanted;
    memcpy(&wanted, (const void *)(uintptr_t)p->params, sizeof wanted);

    pthread_mutex_lock(&ctl_mu);
    int s = atomic_load_explicit(&state, memory_order_acquire);
    uint64_t us = atomic_load(&target_us);
    int ret, e;
    if (probed(s) && us && us != wanted.timesliceUs) {
        struct nva06c_timeslice mine = {.timesliceUs = us};
        struct nvos54 copy = *p;
        copy.params = (uint64_t)(uintptr_t)&mine;
        ret = cs_ioctl_real(fd, req, &copy);
        e = errno;
        if (ret == 0 && copy.status == NV_OK) {
            p->status = copy.status;
            cs_debug("channel group %#x: libcuda's timeslice %llu us replaced by %llu us",
                     p->hObject, (unsigned long long)wanted.timesliceUs, (unsigned long long)us);
            if (find_group(p->hClient, p->hObject, &g))
                update_serial(g.serial, wanted.timesliceUs, us);
            pthread_mutex_unlock(&ctl_mu);
            errno = e;
            return ret;
        }
        /* Ours refused: libcuda gets exactly what it asked for. */
    }
    ret = cs_ioctl_real(fd, req, arg);
    e = errno;
    if (ret == 0 && p->status == NV_OK && find_group(p->hClient, p->hObject, &g))
        update_serial(g.serial, wanted.timesliceUs, 0);
    pthread_mutex_unlock(&ctl_mu);
    errno = e;
    return ret;
}

int cs_tsg_ioctl(int fd, unsigned long req, void *arg)
{
    /* A signal handler interrupting this thread inside the NV path, or no
     * parameter block at all: pass through, touch nothing. */
    if (tls_busy || !arg)
        return cs_ioctl_real(fd, req, arg);
    tls_busy = 1;
    int ret;
    if (req == NV_REQ_ALLOC64 || req == NV_REQ_ALLOC21) {
        ret = on_alloc(fd, req, arg);
    } else if (req == NV_REQ_FREE) {
        ret = on_free(fd, req, arg);
    } else if (req == NV_REQ_CONTROL) {
        ret = on_control(fd, req, arg);
    } else {
        unsigned nr = req & 0xff, size = (req >> 16) & 0x3fff;
        ret = cs_ioctl_real(fd, req, arg);
        /* An RM escape with a parameter block of a size we do not know, on
         * an NVIDIA descriptor: the driver's layouts changed. */
        if (nr >= NV_ESC_RM_FREE && nr <= NV_ESC_RM_ALLOC) {
            int e = errno;
            if (cs_tsg_sys_fd_is_nv(fd) == 1)
                disable("RM escape %#x arrived with a %u-byte parameter block; the layouts "
                        "known are those of driver 580", nr, size);
            errno = e;
        }
    }
    tls_busy = 0;
    return ret;
}

/* ---- API ----------------------------------------------------------------------- */

int cs_tsg_probe(void)
{
    int s = atomic_load_explicit(&state, memory_order_acquire);
    if (s == CS_TSG_OFF || s == CS_TSG_UNAVAILABLE)
        return -ENOTSUP;
    pthread_mutex_lock(&ctl_mu);
    int r = probe_locked();
    if (r == 0 && atomic_load(&target_us) && apply_all(atomic_load(&target_us)) == 0)
        atomic_store(&state, CS_TSG_ACTIVE);
    pthread_mutex_unlock(&ctl_mu);
    return r;
}

int cs_tsg_set_timeslice_us(uint64_t us)
{
    if (us == 0)
        return cs_tsg_restore();
    if (us > CS_TSG_MAX_US)
        return -EINVAL;
    int s = atomic_load_explicit(&state, memory_order_acquire);
    if (s == CS_TSG_OFF || s == CS_TSG_UNAVAILABLE)
        return -ENOTSUP;
    pthread_mutex_lock(&ctl_mu);
    uint64_t prev = atomic_exchange(&target_us, us);
    int r = probe_locked();
    if (r == -EAGAIN) {
        r = 0; /* applied when libcuda creates the first compute group */
    } else if (r == 0) {
        r = apply_all(us);
        if (r == 0)
            atomic_store(&state, CS_TSG_ACTIVE);
        else if (r == -ERANGE)
            atomic_store(&target_us, prev);
    }
    pthread_mutex_unlock(&ctl_mu);
    return r;
}

int cs_tsg_restore(void)
{
    int s = atomic_load_explicit(&state, memory_order_acquire);
    if (s == CS_TSG_OFF || s == CS_TSG_UNAVAILABLE)
        return -ENOTSUP;
    pthread_mutex_lock(&ctl_mu);
    atomic_store(&target_us, 0);
    int r = 0;
    if (probed(atomic_load(&state))) {
        r = apply_all(0);
        if (r == 0)
            atomic_store(&state, CS_TSG_READY);
    }
    pthread_mutex_unlock(&ctl_mu);
    return r == -ERANGE ? -EIO : r;
}

/* Said at info level: on the simulated driver (and any non-NVIDIA one)
 * this is the normal state of things, not a fault. */
void cs_tsg_work_without_groups(void)
{
    if (atomic_load_explicit(&state, memory_order_acquire) == CS_TSG_UNPROBED)
        disable_info("work was submitted but no compute channel group was seen "
                     "(not an NVIDIA driver, or channel-group allocations it does not recognise)");
}

enum cs_tsg_state cs_tsg_state(void)
{
    return (enum cs_tsg_state)atomic_load_explicit(&state, memory_order_acquire);
}

const char *cs_tsg_state_name(enum cs_tsg_state s)
{
    switch (s) {
    case CS_TSG_OFF:
        return "off";
    case CS_TSG_UNPROBED:
        return "unprobed";
    case CS_TSG_READY:
        return "ready";
    case CS_TSG_ACTIVE:
        return "active";
    case CS_TSG_UNAVAILABLE:
        return "unavailable";
    }
    return "?";
}

const char *cs_tsg_reason(void)
{
    int s = atomic_load_explicit(&state, memory_order_acquire);
    if (s == CS_TSG_UNAVAILABLE)
        return reason;
    if (s == CS_TSG_OFF)
        return "disabled by CUSHARE_TSG=off or CUSHARE_DISABLE";
    return "";
}

unsigned cs_tsg_group_count(void)
{
    return atomic_load_explicit(&ngroups, memory_order_relaxed);
}

void cs_tsg_get_info(struct cs_tsg_info *out)
{
    memset(out, 0, sizeof *out);
    out->state = cs_tsg_state();
    tbl_acquire();
    for (int i = 0; i < MAX_GROUPS; i++)
        if (groups[i].fd >= 0) {
            out->groups++;
            out->gr_groups += is_gr(groups[i].engine);
        }
    tbl_release();
    out->dropped = atomic_load(&n_dropped);
    out->target_us = atomic_load(&target_us);
    out->default_us = atomic_load(&probe_default_us);
    /* Written once, before the state that follows the probe is published. */
    if (out->state == CS_TSG_READY || out->state == CS_TSG_ACTIVE ||
        out->state == CS_TSG_UNAVAILABLE)
        memcpy(out->driver, driver, sizeof out->driver);
    out->driver[sizeof out->driver - 1] = '\0';
}

/* ---- What the scheduler asks, per GPU ------------------------------------------
 * The mechanism is process-wide (a channel group cannot be told apart by
 * GPU), the daemon's requests are per GPU: the process gets the shortest
 * one asked of any of its GPUs (a BE job that must not delay an LC job on
 * one GPU must be short there; on its other GPUs a short slice costs it
 * nothing measurable, docs/tsg.md), or its own CUSHARE_TSG_TIMESLICE_US.
 * req_mu guards `req` and serializes the appliers (the devices' workers),
 * so the last one to run applies the latest requests. Lock order: a
 * device's mu, then req_mu, then ctl_mu (locks.h). */
static pthread_mutex_t req_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    uint64_t want[CS_TSG_SLOTS]; /* per GPU slot, µs; 0 = the defaults */
    bool done;                   /* an apply gave the mechanism a value */
    uint64_t requested;          /* that value */
    int status;                  /* and its answer */
} req;

bool cs_tsg_want(unsigned slot, uint64_t us)
{
    if (slot >= CS_TSG_SLOTS)
        return false;
    pthread_mutex_lock(&req_mu);
    bool changed = req.want[slot] != us;
    req.want[slot] = us;
    pthread_mutex_unlock(&req_mu);
    return changed;
}

static uint64_t req_effective_locked(void)
{
    uint64_t eff = static_us;
    for (unsigned i = 0; i < CS_TSG_SLOTS; i++)
        if (req.want[i] && (!eff || req.want[i] < eff))
            eff = req.want[i];
    return eff;
}

void cs_tsg_apply(void)
{
    pthread_mutex_lock(&req_mu);
    uint64_t us = req_effective_locked();
    if (!req.done || us != req.requested) {
        int r = cs_tsg_set_timeslice_us(us);
        if (r < 0 && r != -ENOTSUP)
            cs_warn("channel groups: timeslice %llu us not applied: %s",
                    (unsigned long long)us, strerror(-r));
        else
            cs_debug("channel groups: timeslice %llu us (%s)", (unsigned long long)us,
                     r == 0 ? "applied" : "mechanism off or unavailable");
        req.done = true;
        req.requested = us;
        req.status = r;
    }
    pthread_mutex_unlock(&req_mu);
}

void cs_tsg_request_result(uint64_t *requested_us, int *status)
{
    pthread_mutex_lock(&req_mu);
    *requested_us = req.done ? req.requested : static_us;
    *status = req.done ? req.status : 0;
    pthread_mutex_unlock(&req_mu);
}

/* ---- Set-up and fork --------------------------------------------------------- */

static void reset_table(void)
{
    for (int i = 0; i < MAX_GROUPS; i++)
        slot_clear(&groups[i]);
    atomic_store(&ngroups, 0);
    atomic_store(&n_dropped, 0);
    next_serial = 0;
}

void cs_tsg_configure(int m, uint64_t static_timeslice_us)
{
    pthread_mutex_lock(&ctl_mu);
    tbl_acquire();
    reset_table();
    tbl_release();
    atomic_store(&mode, m);
    static_us = static_timeslice_us;
    atomic_store(&target_us, m == CS_TSG_MODE_OFF ? 0 : static_us);
    atomic_store(&probe_default_us, 0);
    atomic_store(&disabling, 0);
    atomic_store(&table_full_logged, 0);
    atomic_store(&applied_logged, 0);
    reason[0] = '\0';
    driver[0] = '\0';
    atomic_store(&state, m == CS_TSG_MODE_OFF ? CS_TSG_OFF : CS_TSG_UNPROBED);
    atomic_store(&cs_tsg_watch, m != CS_TSG_MODE_OFF);
    pthread_mutex_unlock(&ctl_mu);
}

/* The child owns none of the parent's RM objects (the inherited descriptor
 * is the parent's client's), and another thread may have held either lock
 * at the fork. The probe's verdict on the driver stands; a child that uses
 * CUDA gets its own groups and probes them. */
static void after_fork_child(void)
{
    pthread_mutex_init(&ctl_mu, NULL);
    pthread_mutex_init(&req_mu, NULL); /* a worker may have held it */
    memset(&req, 0, sizeof req);       /* the child's groups start at our own setting */
    atomic_flag_clear(&tbl_lock);
    reset_table();
    tls_busy = 0;
    atomic_store(&target_us, atomic_load(&mode) == CS_TSG_MODE_OFF ? 0 : static_us);
    if (probed(atomic_load(&state)))
        atomic_store(&state, CS_TSG_UNPROBED);
}

void cs_tsg_init(void)
{
    cs_tsg_configure(cs_cfg.tsg_mode, cs_cfg.tsg_timeslice_us);
    pthread_atfork(NULL, NULL, after_fork_child);
    if (cs_cfg.tsg_mode != CS_TSG_MODE_OFF && cs_cfg.tsg_timeslice_us)
        cs_info("channel groups: a %llu us timeslice will be applied to this process's compute "
                "groups (CUSHARE_TSG_TIMESLICE_US)", (unsigned long long)cs_cfg.tsg_timeslice_us);
}
