/* hook_tsg.c: unit tests of the channel-group control (src/hook/tsg.c).
 *
 * tsg.c is linked in directly, with its system boundary (cs_ioctl_real,
 * cs_tsg_sys_fd_is_nv, cs_tsg_sys_driver_version) provided here by a small
 * model of the RM: clients owned by a descriptor, objects with parents,
 * channel groups with a timeslice, GET/SET_TIMESLICE with the driver's
 * checks (exact paramsSize, client owned by the descriptor, object class),
 * and switches to make it refuse. The RM ioctls libcuda made for one
 * context on an H100 with driver 580.159.04 (tests/hook/hook_tsg_580.trace,
 * recorded with bench/lc/nvtrace.c) are replayed through the same two-line
 * dispatch the exported ioctl makes (hooks_ioctl.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "hook/config.h"
#include "hook/tsg.h"
#include "hook/nvrm.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- The RM's ABI: hook/nvrm.h, whose static assertions pin every size,
 * offset and request code to the values recorded from driver 580. ------ */

#define CTL_FD 9
#define V580 "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)  \nGCC version:  gcc version 15.3.0 (GCC) \n"

/* ---- The model ------------------------------------------------------------- */

#define MAX_OBJ 4096
struct obj {
    uint32_t client, handle, parent, cls, engine;
    int owner_fd; /* clients: the descriptor they belong to */
    uint64_t ts;
    int live;
};

static struct {
    pthread_mutex_t mu;
    struct obj o[MAX_OBJ];
    int nv_fd[256];
    uint32_t next_client;
    uint32_t ts_size;    /* paramsSize the driver wants for GET/SET */
    uint32_t set_status; /* forced answer to SET (0: normal) */
    uint64_t fail_value; /* ... only for this value (0: any) */
    int intr_left;       /* the next controls fail with errno EINTR, not run */
    int again_left;      /* ... with errno EAGAIN */
    int busy_left;       /* ... answer NV_ERR_BUSY_RETRY, not run */
    uint64_t min_us;     /* SET below: NOT_SUPPORTED */
    const char *version; /* NULL: unreadable */
    int calls, gets, sets, others, fd_checks;
    int last_fd;
    unsigned long last_req;
    void *last_arg;
} rm = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void rm_reset(void)
{
    pthread_mutex_lock(&rm.mu);
    memset(rm.o, 0, sizeof rm.o);
    memset(rm.nv_fd, 0, sizeof rm.nv_fd);
    rm.next_client = 0xc1d00001;
    rm.ts_size = 8;
    rm.set_status = 0;
    rm.fail_value = 0;
    rm.intr_left = rm.again_left = rm.busy_left = 0;
    rm.min_us = 1;
    rm.version = V580;
    rm.calls = rm.gets = rm.sets = rm.others = rm.fd_checks = 0;
    rm.last_fd = -1;
    rm.last_req = 0;
    rm.last_arg = NULL;
    pthread_mutex_unlock(&rm.mu);
}

static struct obj *find(uint32_t client, uint32_t h)
{
    for (int i = 0; i < MAX_OBJ; i++)
        if (rm.o[i].live && rm.o[i].client == client && rm.o[i].handle == h)
            return &rm.o[i];
    return NULL;
}

static void free_tree(uint32_t client, uint32_t h)
{
    for (int i = 0; i < MAX_OBJ; i++)
        if (rm.o[i].live && rm.o[i].client == client && rm.o[i].parent == h && rm.o[i].handle != h)
            free_tree(client, rm.o[i].handle);
    struct obj *o = find(client, h);
    if (o)
        o->live = 0;
}

static uint32_t rm_alloc(int fd, uint32_t *root, uint32_t parent, uint32_t *new, uint32_t cls,
                         const void *params)
{
    if (cls == 0x41 || cls == 0x0 || cls == 0x1) {
        uint32_t c = rm.next_client++;
        for (int i = 0; i < MAX_OBJ; i++)
            if (!rm.o[i].live) {
                rm.o[i] = (struct obj){.client = c, .handle = c, .cls = cls, .owner_fd = fd, .live = 1};
                break;
            }
        *new = c;
        *root = c;
        return NV_OK;
    }
    if (!find(*root, *root))
        return NV_ERR_INVALID_CLIENT;
    if (!find(*root, parent))
        return NV_ERR_INVALID_OBJECT_PARENT;
    for (int i = 0; i < MAX_OBJ; i++)
        if (!rm.o[i].live) {
            struct obj *o = &rm.o[i];
            *o = (struct obj){.client = *root, .handle = *new, .parent = parent, .cls = cls, .live = 1};
            if (cls == 0xa06c) {
                uint32_t e = 0;
                if (params)
                    memcpy(&e, (const char *)params + 12, 4);
                o->engine = e;
                o->ts = 1024; /* what a fresh group reads (libcuda then sets 2048 on GR) */
            }
            return NV_OK;
        }
    return 0x1A; /* insufficient resources */
}

static uint32_t rm_control(int fd, struct nvos54 *p)
{
    struct obj *c = find(p->hClient, p->hClient);
    if (!c)
        return NV_ERR_INVALID_CLIENT;
    if (p->cmd != NV_CMD_SET_TIMESLICE && p->cmd != NV_CMD_GET_TIMESLICE)
        return NV_OK;
    if (c->owner_fd != fd)
        return NV_ERR_INVALID_CLIENT; /* a fresh nvidiactl descriptor is not libcuda's */
    struct obj *o = find(p->hClient, p->hObject);
    if (!o)
        return NV_ERR_OBJECT_NOT_FOUND;
    if (o->cls != 0xa06c)
        return NV_ERR_NOT_SUPPORTED;
    if (p->paramsSize != rm.ts_size)
        return NV_ERR_INVALID_PARAM_STRUCT;
    uint64_t *v = (uint64_t *)(uintptr_t)p->params;
    if (p->cmd == NV_CMD_GET_TIMESLICE) {
        rm.gets++;
        *v = o->ts;
        return NV_OK;
    }
    rm.sets++;
    if (rm.set_status && (!rm.fail_value || *v == rm.fail_value))
        return rm.set_status;
    if (*v < rm.min_us)
        return NV_ERR_NOT_SUPPORTED;
    o->ts = *v;
    return NV_OK;
}

static int is_ts_cmd(const void *arg)
{
    uint32_t cmd = ((const struct nvos54 *)arg)->cmd;
    return cmd == NV_CMD_GET_TIMESLICE || cmd == NV_CMD_SET_TIMESLICE;
}

/* tsg.c's system boundary. */
int cs_ioctl_real(int fd, unsigned long req, void *arg)
{
    pthread_mutex_lock(&rm.mu);
    rm.calls++;
    rm.last_fd = fd;
    rm.last_req = req;
    rm.last_arg = arg;
    int nv = fd >= 0 && fd < 256 && rm.nv_fd[fd];
    int ret = 0;
    if (!nv) {
        rm.others++;
        pthread_mutex_unlock(&rm.mu);
        errno = ENOTTY;
        return req == FIONREAD ? 1234 : -1;
    }
    if (req == NV_REQ_ALLOC64) {
        struct nvos64 *p = arg;
        p->status = rm_alloc(fd, &p->hRoot, p->hObjectParent, &p->hObjectNew, p->hClass,
                             (const void *)(uintptr_t)p->pAllocParms);
    } else if (req == NV_REQ_ALLOC21) {
        struct nvos21 *p = arg;
        p->status = rm_alloc(fd, &p->hRoot, p->hObjectParent, &p->hObjectNew, p->hClass,
                             (const void *)(uintptr_t)p->pAllocParms);
    } else if (req == NV_REQ_FREE) {
        struct nvos00 *p = arg;
        free_tree(p->hRoot, p->hObjectOld);
        p->status = NV_OK;
    } else if (req == NV_REQ_CONTROL && is_ts_cmd(arg) && (rm.intr_left > 0 || rm.again_left > 0)) {
        /* nvidia_ioctl's down_read_interruptible() with a signal pending (or
         * a suspend under way): nothing done. Only cushare's controls:
         * the replayed libcuda ones are strict. */
        errno = rm.intr_left > 0 ? EINTR : EAGAIN;
        rm.intr_left > 0 ? rm.intr_left-- : rm.again_left--;
        ret = -1;
    } else if (req == NV_REQ_CONTROL && is_ts_cmd(arg) && rm.busy_left > 0) {
        rm.busy_left--;
        ((struct nvos54 *)arg)->status = NV_ERR_BUSY_RETRY;
    } else if (req == NV_REQ_CONTROL) {
        struct nvos54 *p = arg;
        p->status = rm_control(fd, p);
    } else {
        rm.others++;
    }
    pthread_mutex_unlock(&rm.mu);
    return ret;
}

int cs_tsg_sys_fd_is_nv(int fd)
{
    pthread_mutex_lock(&rm.mu);
    rm.fd_checks++;
    int nv = fd >= 0 && fd < 256 && rm.nv_fd[fd];
    pthread_mutex_unlock(&rm.mu);
    return nv;
}

int cs_tsg_sys_driver_version(char *buf, size_t cap)
{
    if (!rm.version)
        return -1;
    snprintf(buf, cap, "%s", rm.version);
    return 0;
}

/* The dispatch of hooks_ioctl.c's ioctl. */
static int wrap(int fd, unsigned long req, void *arg)
{
    if (((req >> 8) & 0xffu) != 'F' || !atomic_load(&cs_tsg_watch))
        return cs_ioctl_real(fd, req, arg);
    return cs_tsg_ioctl(fd, req, arg);
}

static int counter(int *c)
{
    pthread_mutex_lock(&rm.mu);
    int v = *c;
    pthread_mutex_unlock(&rm.mu);
    return v;
}

static uint64_t ts_of(uint32_t client, uint32_t h)
{
    pthread_mutex_lock(&rm.mu);
    struct obj *o = find(client, h);
    uint64_t v = o ? o->ts : 0;
    pthread_mutex_unlock(&rm.mu);
    return v;
}

/* ---- Replaying the recording --------------------------------------------------- */

/* What the recording's one context is made of (see the trace). */
#define CLIENT 0xc1d00024u
#define DEVICE 0x5c000002u
#define GR_GROUP 0x5c000015u
#define CE_GROUP1 0x5c00003eu

static const char *trace_path(void)
{
    static char path[4096];
    if (access("tests/hook/hook_tsg_580.trace", R_OK) == 0)
        return "tests/hook/hook_tsg_580.trace";
    const char *src = __FILE__;
    const char *slash = strrchr(src, '/');
    snprintf(path, sizeof path, "%.*s/hook_tsg_580.trace", slash ? (int)(slash - src) : 1,
             slash ? src : ".");
    return path;
}

static uint32_t field(const char *line, const char *name)
{
    const char *p = strstr(line, name);
    assert_non_null(p);
    return (uint32_t)strtoul(p + strlen(name), NULL, 0);
}

static size_t hexbytes(const char *line, unsigned char *out, size_t cap)
{
    const char *p = strstr(line, "params=");
    if (!p)
        return 0;
    p += 7;
    size_t n = 0;
    while (n < cap && p[0] && p[1] && p[0] != '\n' && p[0] != ' ') {
        unsigned v;
        if (sscanf(p, "%2x", &v) != 1)
            break;
        out[n++] = (unsigned char)v;
        p += 2;
    }
    return n;
}

/* Replays the recording through wrap(). strict: every call must come back
 * as it did from the real driver. Returns the number of RM calls made. */
static int replay(int strict)
{
    FILE *f = fopen(trace_path(), "r");
    assert_non_null(f);
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        int fd;
        unsigned long req;
        char kind;
        if (line[0] == '#' || sscanf(line, "%c %d %lx", &kind, &fd, &req) < 2)
            continue;
        if (kind == 'D') {
            if (strstr(line, "/dev/nvidia"))
                rm.nv_fd[fd] = 1;
            continue;
        }
        int ret = 0;
        uint32_t status = 0;
        if (kind == 'A') {
            unsigned char params[64];
            size_t np = hexbytes(line, params, sizeof params);
            uint32_t cls = field(line, "class="), newh = field(line, "new=");
            int root = cls == 0x41;
            if (root)
                rm.next_client = newh; /* the handle the real RM chose */
            struct nvos64 p = {
                .hRoot = root ? 0 : field(line, "root="),
                .hObjectParent = root ? 0 : field(line, "parent="),
                .hObjectNew = root ? 0 : newh,
                .hClass = cls,
                .pAllocParms = np ? (uint64_t)(uintptr_t)params : 0,
            };
            ret = wrap(fd, req, &p);
            status = p.status;
            if (strict)
                assert_int_equal(p.hObjectNew, newh);
        } else if (kind == 'C') {
            unsigned char params[64] = {0};
            uint32_t psize = field(line, "psize=");
            hexbytes(line, params, sizeof params);
            struct nvos54 p = {
                .hClient = field(line, "client="),
                .hObject = field(line, "object="),
                .cmd = field(line, "cmd="),
                .flags = field(line, "flags="),
                .params = (uint64_t)(uintptr_t)params,
                .paramsSize = psize,
            };
            ret = wrap(fd, req, &p);
            status = p.status;
        } else if (kind == 'F') {
            struct nvos00 p = {
                .hRoot = field(line, "root="),
                .hObjectParent = field(line, "parent="),
                .hObjectOld = field(line, "old="),
            };
            ret = wrap(fd, req, &p);
            status = p.status;
        } else if (kind == 'O') {
            static unsigned char buf[0x4000];
            ret = wrap(fd, req, buf);
        } else {
            continue;
        }
        n++;
        if (strict) {
            assert_int_equal(ret, 0);
            assert_int_equal(status, 0);
        }
    }
    fclose(f);
    return n;
}

static void gr_alloc(int fd, uint32_t client, uint32_t parent, uint32_t h, uint32_t engine,
                     unsigned long req)
{
    uint32_t params[5] = {0, 0, 0, engine, 0};
    if (req == NV_REQ_ALLOC21) {
        struct nvos21 p = {client, parent, h, 0xa06c, (uint64_t)(uintptr_t)params, 0, 0};
        assert_int_equal(wrap(fd, req, &p), 0);
        assert_int_equal(p.status, 0);
    } else {
        struct nvos64 p = {client, parent, h, 0xa06c, (uint64_t)(uintptr_t)params, 0, 0, 0, 0, 0};
        assert_int_equal(wrap(fd, req, &p), 0);
        assert_int_equal(p.status, 0);
    }
}

static void rm_free(int fd, uint32_t client, uint32_t h)
{
    struct nvos00 p = {client, client, h, 0};
    assert_int_equal(wrap(fd, NV_REQ_FREE, &p), 0);
}

static int setup(void **state)
{
    (void)state;
    rm_reset();
    cs_tsg_configure(CS_TSG_MODE_ON, 0);
    return 0;
}

/* ---- Cases ----------------------------------------------------------------------- */

static void happy_path(void **state)
{
    (void)state;
    replay(1);
    struct cs_tsg_info info;
    cs_tsg_get_info(&info);
    assert_int_equal(info.groups, 4);
    assert_int_equal(info.gr_groups, 1);
    assert_int_equal(cs_tsg_state(), CS_TSG_READY);
    assert_string_equal(info.driver, "580.159.04");
    assert_int_equal(info.default_us, 1024); /* the probe's GET, before libcuda's SET */
    assert_int_equal(counter(&rm.gets), 1);
    assert_int_equal(counter(&rm.sets), 1); /* libcuda's own, forwarded as it was */
    assert_int_equal(ts_of(CLIENT, GR_GROUP), 2048);

    int calls = counter(&rm.calls);
    assert_int_equal(cs_tsg_set_timeslice_us(1), 0);
    assert_int_equal(cs_tsg_state(), CS_TSG_ACTIVE);
    assert_int_equal(ts_of(CLIENT, GR_GROUP), 1);
    assert_int_equal(ts_of(CLIENT, CE_GROUP1), 1024); /* copy engines untouched */
    assert_int_equal(counter(&rm.calls) - calls, 1);  /* one SET: the default is known */

    calls = counter(&rm.calls);
    assert_int_equal(cs_tsg_set_timeslice_us(1), 0);
    assert_int_equal(counter(&rm.calls), calls); /* already so: no round trip */
    assert_int_equal(cs_tsg_set_timeslice_us(200), 0);
    assert_int_equal(ts_of(CLIENT, GR_GROUP), 200);

    assert_int_equal(cs_tsg_restore(), 0);
    assert_int_equal(cs_tsg_state(), CS_TSG_READY);
    assert_int_equal(ts_of(CLIENT, GR_GROUP), 2048); /* what libcuda had set */
    calls = counter(&rm.calls);
    assert_int_equal(cs_tsg_restore(), 0);
    assert_int_equal(counter(&rm.calls), calls);
    assert_string_equal(cs_tsg_reason(), "");
    assert_int_equal(cs_tsg_set_timeslice_us(0), 0); /* 0 = restore */
    assert_int_equal(cs_tsg_set_timeslice_us(CS_TSG_MAX_US + 1), -EINVAL);
}

/* CUSHARE_TSG_TIMESLICE_US: the group gets it at creation, and libcuda's
 * own SET 2048 goes to the driver as cushare's value (recorded as the
 * group's default). */
static void static_setting_and_libcuda_set(void **state)
{
    (void)state;
    cs_tsg_configure(CS_TSG_MODE_ON, 200);
    assert_int_equal(cs_tsg_state(), CS_TSG_UNPROBED);
    replay(1);
    assert_int_equal(cs_tsg_state(), CS_TSG_ACTIVE);
    assert_int_equal(ts_of(CLIENT, GR_GROUP), 200);
    assert_int_equal(ts_of(CLIENT, CE_GROUP1), 1024);
    assert_int_equal(cs_tsg_restore(), 0);
    assert_int_equal(ts_of(CLIENT, GR_GROUP), 2048);
}

static void set_before_any_group(void **state)
{
    (void)state;
    assert_int_equal(cs_tsg_set_timeslice_us(50), 0);
    assert_int_equal(counter(&rm.calls), 0);
    assert_int_equal(cs_tsg_state(), CS_TSG_UNPROBED);
    assert_int_equal(cs_tsg_probe(), -EAGAIN);
    replay(1);
    assert_int_equal(cs_tsg_state(), CS_TSG_ACTIVE);
    assert_int_equal(ts_of(CLIENT, GR_GROUP), 50);
}

/* The old NVOS21 form records groups too. */
static void nvos21_form(void **state)
{
    (void)state;
    replay(1);
    gr_alloc(CTL_FD, CLIENT, DEVICE, 0x5c100000, 1, NV_REQ_ALLOC21);
    assert_int_equal(cs_tsg_group_count(), 5);
    assert_int_equal(cs_tsg_set_timeslice_us(7), 0);
    assert_int_equal(ts_of(CLIENT, 0x5c100000), 7);
}

static void driver_refuses_set(void **state)
{
    (void)state;
    replay(1);
    rm.set_status = NV_ERR_INSUFFICIENT_PERMISSIONS;
    assert_int_equal(cs_tsg_set_timeslice_us(1), -EPERM);
    assert_int_equal(cs_tsg_state(), CS_TSG_UNAVAILABLE);
    assert_non_null(strstr(cs_tsg_reason(), "permission"));
    assert_int_equal(atomic_load(&cs_tsg_watch), 0);
    assert_int_equal(ts_of(CLIENT, GR_GROUP), 2048);

    int calls = counter(&rm.calls);
    assert_int_equal(cs_tsg_set_timeslice_us(1), -ENOTSUP);
    assert_int_equal(cs_tsg_restore(), -ENOTSUP);
    assert_int_equal(cs_tsg_probe(), -ENOTSUP);
    assert_int_equal(counter(&rm.calls), calls);
    /* The wrapper is a pass-through now: one call, nothing recorded. */
    int checks = counter(&rm.fd_checks);
    gr_alloc(CTL_FD, CLIENT, DEVICE, 0x5c100000, 1, NV_REQ_ALLOC64);
    assert_int_equal(counter(&rm.calls), calls + 1);
    assert_int_equal(counter(&rm.fd_checks), checks);
    const char *r = cs_tsg_reason();
    assert_int_equal(cs_tsg_set_timeslice_us(5), -ENOTSUP);
    assert_ptr_equal(cs_tsg_reason(), r);
}

/* A later refusal after the mechanism was in use puts groups back. */
static void refusal_after_use_restores(void **state)
{
    (void)state;
    replay(1);
    gr_alloc(CTL_FD, CLIENT, DEVICE, 0x5c100000, 1, NV_REQ_ALLOC64);
    assert_int_equal(cs_tsg_set_timeslice_us(100), 0);
    assert_int_equal(ts_of(CLIENT, GR_GROUP), 100);
    rm.set_status = 0x65; /* timeout: unexpected */
    rm.fail_value = 5;
    assert_int_equal(cs_tsg_set_timeslice_us(5), -EIO);
    assert_int_equal(cs_tsg_state(), CS_TSG_UNAVAILABLE);
    assert_non_null(strstr(cs_tsg_reason(), "0x65"));
    assert_int_equal(ts_of(CLIENT, GR_GROUP), 2048);      /* libcuda's value */
    assert_int_equal(ts_of(CLIENT, 0x5c100000), 1024);    /* its default */
}

/* The driver did not run the control (a signal pending on the thread:
 * EINTR; a suspend: EAGAIN; NV_ERR_BUSY_RETRY): sent again, as libcuda
 * does. Before, one such answer turned the mechanism off for good, and the
 * daemon gated the job beside a high one for the rest of its run. A storm
 * longer than the bound still fails. */
static void interrupted_control_retried(void **state)
{
    (void)state;
    rm.intr_left = 2; /* the probe's GET at the first compute group */
    replay(1);
    assert_int_equal(rm.intr_left, 0);
    assert_int_equal(cs_tsg_state(), CS_TSG_READY);
    rm.intr_left = 3;
    assert_int_equal(cs_tsg_set_timeslice_us(1), 0);
    assert_int_equal(cs_tsg_state(), CS_TSG_ACTIVE);
    assert_int_equal(ts_of(CLIENT, GR_GROUP), 1);
    rm.again_left = 2;
    rm.busy_left = 0;
    assert_int_equal(cs_tsg_set_timeslice_us(50), 0);
    assert_int_equal(ts_of(CLIENT, GR_GROUP), 50);
    rm.busy_left = 5;
    assert_int_equal(cs_tsg_restore(), 0);
    assert_int_equal(rm.busy_left, 0);
    assert_int_equal(ts_of(CLIENT, GR_GROUP), 2048);
    /* Endless: the bound holds and the failure stands. */
    rm.intr_left = 1000000;
    assert_int_equal(cs_tsg_set_timeslice_us(1), -EIO);
    assert_int_equal(cs_tsg_state(), CS_TSG_UNAVAILABLE);
    assert_non_null(strstr(cs_tsg_reason(), "Interrupted"));
    assert_true(rm.intr_left > 1000000 - 1000);
    rm.intr_left = 0;
}

static void value_refused_changes_nothing(void **state)
{
    (void)state;
    replay(1);
    gr_alloc(CTL_FD, CLIENT, DEVICE, 0x5c100000, 1, NV_REQ_ALLOC64);
    assert_int_equal(cs_tsg_set_timeslice_us(100), 0);
    rm.min_us = 10;
    assert_int_equal(cs_tsg_set_timeslice_us(5), -ERANGE);
    assert_int_equal(cs_tsg_state(), CS_TSG_ACTIVE);
    assert_int_equal(ts_of(CLIENT, GR_GROUP), 100);
    assert_int_equal(ts_of(CLIENT, 0x5c100000), 100);
    struct cs_tsg_info info;
    cs_tsg_get_info(&info);
    assert_int_equal(info.target_us, 100);
}

static void params_size_mismatch(void **state)
{
    (void)state;
    rm.ts_size = 16; /* a driver whose timeslice params grew */
    replay(0);
    assert_int_equal(cs_tsg_state(), CS_TSG_UNAVAILABLE);
    assert_non_null(strstr(cs_tsg_reason(), "0x3a"));
    assert_int_equal(counter(&rm.sets) + counter(&rm.gets), 0); /* both refused */
    assert_int_equal(cs_tsg_set_timeslice_us(1), -ENOTSUP);
}

static void unknown_driver_version(void **state)
{
    (void)state;
    rm.version = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  590.10.01  Release\n";
    replay(1);
    assert_int_equal(cs_tsg_state(), CS_TSG_UNAVAILABLE);
    assert_non_null(strstr(cs_tsg_reason(), "590.10.01"));
    assert_int_equal(counter(&rm.gets), 0);
    assert_int_equal(cs_tsg_set_timeslice_us(1), -ENOTSUP);
    assert_int_equal(ts_of(CLIENT, GR_GROUP), 2048);

    /* force: the version is not held against it; the round trip decides. */
    rm_reset();
    cs_tsg_configure(CS_TSG_MODE_FORCE, 0);
    rm.version = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  590.10.01  Release\n";
    replay(1);
    assert_int_equal(cs_tsg_state(), CS_TSG_READY);

    rm_reset();
    cs_tsg_configure(CS_TSG_MODE_ON, 0);
    rm.version = NULL;
    replay(1);
    assert_int_equal(cs_tsg_state(), CS_TSG_UNAVAILABLE);
    assert_non_null(strstr(cs_tsg_reason(), "version"));
}

/* An RM escape whose parameter block has a size we do not know, on an
 * NVIDIA descriptor, means the layouts changed: off. On another device,
 * nothing happens. */
static void unknown_escape_size(void **state)
{
    (void)state;
    replay(1);
    unsigned char buf[64] = {0};
    unsigned long req40 = 0xc028462bul; /* RM_ALLOC with 40 bytes */
    wrap(100, req40, buf);
    assert_int_equal(cs_tsg_state(), CS_TSG_READY);
    wrap(CTL_FD, req40, buf);
    assert_int_equal(cs_tsg_state(), CS_TSG_UNAVAILABLE);
    assert_non_null(strstr(cs_tsg_reason(), "40-byte"));
}

static void rm_free_removes_groups(void **state)
{
    (void)state;
    replay(1);
    assert_int_equal(cs_tsg_group_count(), 4);
    rm_free(CTL_FD, CLIENT, CE_GROUP1);
    assert_int_equal(cs_tsg_group_count(), 3);
    rm_free(CTL_FD, CLIENT, 0x5c000040); /* a channel: no group */
    assert_int_equal(cs_tsg_group_count(), 3);
    rm_free(CTL_FD, CLIENT, DEVICE); /* the parent of every group */
    assert_int_equal(cs_tsg_group_count(), 0);
    int calls = counter(&rm.calls);
    assert_int_equal(cs_tsg_set_timeslice_us(3), 0);
    assert_int_equal(counter(&rm.calls), calls);

    rm_reset();
    cs_tsg_configure(CS_TSG_MODE_ON, 0);
    replay(1);
    rm_free(CTL_FD, CLIENT, CLIENT); /* the client: everything */
    assert_int_equal(cs_tsg_group_count(), 0);
}

/* The RM forgets every object of a client, behind the interposer's back
 * (its descriptor was closed). */
static void rm_drop_client(uint32_t client)
{
    pthread_mutex_lock(&rm.mu);
    for (int i = 0; i < MAX_OBJ; i++)
        if (rm.o[i].client == client)
            rm.o[i].live = 0;
    pthread_mutex_unlock(&rm.mu);
}

/* Descriptor reuse: closed, the number reused by a non-NVIDIA file; or by
 * another nvidiactl open whose new client reuses the handle; or whose
 * client is another (the driver answers "invalid client"). */
static void fd_reuse(void **state)
{
    (void)state;
    replay(1);
    rm.nv_fd[CTL_FD] = 0; /* now a pipe, say */
    int sets = counter(&rm.sets);
    assert_int_equal(cs_tsg_set_timeslice_us(1), 0);
    assert_int_equal(cs_tsg_group_count(), 3); /* the compute group is forgotten */
    assert_int_equal(counter(&rm.sets), sets);

    rm_reset();
    cs_tsg_configure(CS_TSG_MODE_ON, 0);
    replay(1);
    rm_drop_client(CLIENT); /* close(9): the RM frees its clients; open() returns 9 again */
    rm.next_client = CLIENT;
    struct nvos64 root = {.hClass = NV_CLASS_ROOT_CLIENT};
    assert_int_equal(wrap(CTL_FD, NV_REQ_ALLOC64, &root), 0);
    assert_int_equal(root.hObjectNew, CLIENT);
    assert_int_equal(cs_tsg_group_count(), 0);

    rm_reset();
    cs_tsg_configure(CS_TSG_MODE_ON, 0);
    replay(1);
    rm_drop_client(CLIENT);
    assert_int_equal(cs_tsg_set_timeslice_us(1), 0); /* nothing left to change */
    assert_int_equal(cs_tsg_group_count(), 3);       /* the copy-engine groups wait */
    assert_int_equal(cs_tsg_state(), CS_TSG_ACTIVE);
    assert_string_equal(cs_tsg_reason(), "");
}

static void non_nv_ioctl_untouched(void **state)
{
    (void)state;
    int n = 0;
    assert_int_equal(wrap(3, FIONREAD, &n), 1234);
    assert_int_equal(rm.last_fd, 3);
    assert_int_equal(rm.last_req, FIONREAD);
    assert_ptr_equal(rm.last_arg, &n);
    /* Type 'F' but not an RM escape (a framebuffer's FBIOGET_VSCREENINFO). */
    assert_int_equal(wrap(4, 0x4600, &n), -1);
    assert_int_equal(errno, ENOTTY);
    assert_int_equal(rm.last_req, 0x4600);
    assert_int_equal(counter(&rm.calls), 2);
    assert_int_equal(counter(&rm.fd_checks), 0);
    /* An RM_ALLOC of a channel group on something that is not an NVIDIA
     * device: forwarded, not recorded. */
    uint32_t params[5] = {0, 0, 0, 1, 0};
    struct nvos64 p = {1, 2, 3, 0xa06c, (uint64_t)(uintptr_t)params, 0, 0, 0, 0, 0};
    assert_int_equal(wrap(5, NV_REQ_ALLOC64, &p), -1);
    assert_int_equal(cs_tsg_group_count(), 0);
    /* A NULL parameter block goes straight through. */
    wrap(CTL_FD, NV_REQ_CONTROL, NULL);
    assert_null(rm.last_arg);
}

static void off_is_pure_passthrough(void **state)
{
    (void)state;
    cs_tsg_configure(CS_TSG_MODE_OFF, 100);
    assert_int_equal(cs_tsg_state(), CS_TSG_OFF);
    assert_int_equal(atomic_load(&cs_tsg_watch), 0);
    int n = replay(1);
    assert_int_equal(counter(&rm.calls), n); /* one real call per call, nothing else */
    assert_int_equal(counter(&rm.fd_checks), 0);
    assert_int_equal(cs_tsg_group_count(), 0);
    assert_int_equal(ts_of(CLIENT, GR_GROUP), 2048);
    assert_int_equal(cs_tsg_set_timeslice_us(1), -ENOTSUP);
    assert_int_equal(cs_tsg_restore(), -ENOTSUP);
    assert_int_equal(counter(&rm.calls), n);
    assert_non_null(strstr(cs_tsg_reason(), "CUSHARE_TSG=off"));
}

static void table_full(void **state)
{
    (void)state;
    replay(1);
    for (uint32_t i = 0; i < 200; i++)
        gr_alloc(CTL_FD, CLIENT, DEVICE, 0x5d000000 + i, i % 2 ? 1 : 0xb, NV_REQ_ALLOC64);
    struct cs_tsg_info info;
    cs_tsg_get_info(&info);
    assert_int_equal(info.groups, 128);
    assert_int_equal(info.dropped, 200 - 124);
    assert_int_equal(cs_tsg_set_timeslice_us(9), 0);
    assert_int_equal(ts_of(CLIENT, GR_GROUP), 9);
    assert_int_equal(ts_of(CLIENT, 0x5d000001), 9);    /* recorded GR group */
    assert_int_equal(ts_of(CLIENT, 0x5d000000 + 199), 1024); /* dropped */
    /* Room again after frees; a new GR group gets the timeslice in force. */
    rm_free(CTL_FD, CLIENT, 0x5d000001);
    gr_alloc(CTL_FD, CLIENT, DEVICE, 0x5e000000, 1, NV_REQ_ALLOC64);
    assert_int_equal(ts_of(CLIENT, 0x5e000000), 9);
}

static void config_knobs(void **state)
{
    (void)state;
    setenv("CUSHARE_TSG", "off", 1);
    setenv("CUSHARE_TSG_TIMESLICE_US", "250", 1);
    cs_config_load();
    assert_int_equal(cs_cfg.tsg_mode, CS_TSG_MODE_OFF);
    assert_int_equal(cs_cfg.tsg_timeslice_us, 250);
    setenv("CUSHARE_TSG", "force", 1);
    setenv("CUSHARE_TSG_TIMESLICE_US", "0", 1);
    cs_config_load();
    assert_int_equal(cs_cfg.tsg_mode, CS_TSG_MODE_FORCE);
    assert_int_equal(cs_cfg.tsg_timeslice_us, 0);
    unsetenv("CUSHARE_TSG");
    setenv("CUSHARE_TSG_TIMESLICE_US", "2000000", 1);
    cs_config_load();
    assert_int_equal(cs_cfg.tsg_mode, CS_TSG_MODE_ON);
    assert_int_equal(cs_cfg.tsg_timeslice_us, 0);
    setenv("CUSHARE_DISABLE", "1", 1);
    cs_config_load();
    assert_int_equal(cs_cfg.tsg_mode, CS_TSG_MODE_OFF);
    unsetenv("CUSHARE_DISABLE");
    unsetenv("CUSHARE_TSG_TIMESLICE_US");
}

/* The child of a fork owns none of the parent's groups. */
static void fork_child_forgets(void **state)
{
    (void)state;
    cs_config_load(); /* the defaults: the environment is clean */
    cs_tsg_init();    /* registers the fork handler */
    replay(1);
    assert_int_equal(cs_tsg_set_timeslice_us(1), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int calls = counter(&rm.calls);
        int bad = cs_tsg_group_count() != 0 || cs_tsg_state() != CS_TSG_UNPROBED ||
                  cs_tsg_set_timeslice_us(1) != 0 || counter(&rm.calls) != calls;
        _exit(bad);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(cs_tsg_group_count(), 4);
}

/* Threads: libcuda creating and destroying contexts while the scheduler's
 * worker flips the timeslice. Every group alive at the end has the
 * timeslice in force, and restore puts each back. */
static _Atomic int stop;
static _Atomic int thread_failures;

static void *churn(void *arg)
{
    uint32_t base = (uint32_t)(uintptr_t)arg;
    int live[16] = {0};
    for (uint32_t i = 0; !atomic_load(&stop) && i < 400; i++) {
        uint32_t k = (i * 7) % 16, h = base + k;
        if (live[k]) {
            struct nvos00 p = {CLIENT, CLIENT, h, 0};
            if (wrap(CTL_FD, NV_REQ_FREE, &p) != 0 || p.status != 0)
                atomic_fetch_add(&thread_failures, 1);
        } else {
            uint32_t params[5] = {0, 0, 0, 1, 0};
            struct nvos64 p = {CLIENT, DEVICE, h, 0xa06c, (uint64_t)(uintptr_t)params, 0, 0, 0, 0, 0};
            if (wrap(CTL_FD, NV_REQ_ALLOC64, &p) != 0 || p.status != 0)
                atomic_fetch_add(&thread_failures, 1);
        }
        live[k] = !live[k];
    }
    return NULL;
}

static void threads(void **state)
{
    (void)state;
    replay(1);
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(0x5f000000u + 0x1000u * (unsigned)i));
    for (int i = 0; i < 200; i++) {
        assert_int_equal(cs_tsg_set_timeslice_us(1 + (uint64_t)(i % 5)), 0);
        if (i % 7 == 0)
            assert_int_equal(cs_tsg_restore(), 0);
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    atomic_store(&stop, 0);
    assert_int_equal(atomic_load(&thread_failures), 0);
    assert_int_equal(cs_tsg_set_timeslice_us(33), 0);
    pthread_mutex_lock(&rm.mu);
    for (int i = 0; i < MAX_OBJ; i++)
        if (rm.o[i].live && rm.o[i].cls == 0xa06c && rm.o[i].engine == 1)
            assert_int_equal(rm.o[i].ts, 33);
    pthread_mutex_unlock(&rm.mu);
    assert_int_equal(cs_tsg_restore(), 0);
    assert_int_equal(ts_of(CLIENT, GR_GROUP), 2048);
    assert_int_equal(cs_tsg_state(), CS_TSG_READY);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(happy_path, setup),
        cmocka_unit_test_setup(static_setting_and_libcuda_set, setup),
        cmocka_unit_test_setup(set_before_any_group, setup),
        cmocka_unit_test_setup(nvos21_form, setup),
        cmocka_unit_test_setup(driver_refuses_set, setup),
        cmocka_unit_test_setup(refusal_after_use_restores, setup),
        cmocka_unit_test_setup(interrupted_control_retried, setup),
        cmocka_unit_test_setup(value_refused_changes_nothing, setup),
        cmocka_unit_test_setup(params_size_mismatch, setup),
        cmocka_unit_test_setup(unknown_driver_version, setup),
        cmocka_unit_test_setup(unknown_escape_size, setup),
        cmocka_unit_test_setup(rm_free_removes_groups, setup),
        cmocka_unit_test_setup(fd_reuse, setup),
        cmocka_unit_test_setup(non_nv_ioctl_untouched, setup),
        cmocka_unit_test_setup(off_is_pure_passthrough, setup),
        cmocka_unit_test_setup(table_full, setup),
        cmocka_unit_test_setup(config_knobs, setup),
        cmocka_unit_test_setup(fork_child_forgets, setup),
        cmocka_unit_test_setup(threads, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
