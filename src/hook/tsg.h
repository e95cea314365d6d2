/* tsg.h: channel-group (TSG) timeslice control for this process's GPU work.
 *
 * The GPU time-slices the channel groups of different processes on the
 * compute engine with a slice of about 2 ms, which is what a short
 * latency-critical kernel waits for beside a busy best-effort process. A
 * process may change the timeslice of its *own* channel groups with an RM
 * control (NVA06C_CTRL_CMD_SET_TIMESLICE, non-privileged) issued on libcuda's
 * own /dev/nvidiactl descriptor with libcuda's RM client and object handles.
 * This module learns those handles by watching the RM ioctls libcuda makes
 * (the exported `ioctl` of hooks_ioctl.c hands every ioctl of type 'F' to
 * cs_tsg_ioctl), probes once that the driver answers as expected, and then
 * sets or restores the timeslice of the compute (GR) groups on request.
 * Anything unexpected turns it off for the life of the process, with one
 * log line and a reason (cs_tsg_reason), and the ioctl wrapper becomes a pure
 * pass-through again. See docs/tsg.md.
 *
 * Calls that change timeslices block for one RM round trip per compute
 * group (0.16-0.3 ms each on an H100, through the GSP): call them from a
 * worker thread, never from a submission path. They are thread-safe.
 */
#ifndef CS_HOOK_TSG_H
#define CS_HOOK_TSG_H

#include "hook/tsg_sys.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum cs_tsg_state {
    CS_TSG_OFF = 0,     /* CUSHARE_TSG=off (or CUSHARE_DISABLE): never looked at */
    CS_TSG_UNPROBED,    /* on, but no compute channel group seen yet (no context) */
    CS_TSG_READY,       /* probed; groups run with their default timeslice */
    CS_TSG_ACTIVE,      /* a cushare timeslice is in force (and is given to new groups) */
    CS_TSG_UNAVAILABLE, /* turned off after something unexpected: see cs_tsg_reason() */
};

/* GPU slots a request may name (the protocol's CS_MAX_DEVICES fits). */
#define CS_TSG_SLOTS 64u

/* Longest timeslice accepted by cs_tsg_set_timeslice_us, µs (1 s). */
#define CS_TSG_MAX_US 1000000u

/* Called once from the library constructor, after cs_config_load: takes
 * CUSHARE_TSG / CUSHARE_TSG_TIMESLICE_US from cs_cfg and registers the
 * fork handler (a child starts with an empty table). */
void cs_tsg_init(void);

/* Probes now if a compute group is known and it has not been done: the
 * driver version, then a GET_TIMESLICE round trip. Returns 0 when ready or
 * active, -EAGAIN when no compute group exists yet (the probe then runs
 * when libcuda creates one), -ENOTSUP when off or unavailable. */
int cs_tsg_probe(void);

/* Sets the timeslice of every compute channel group of this process to us
 * µs (1..CS_TSG_MAX_US; 0 means cs_tsg_restore()), and of every compute
 * group created later, until cs_tsg_restore(). Copy-engine groups keep
 * theirs (docs/tsg.md says why). When no group exists yet the value is
 * kept and applied when one appears (returns 0). Returns 0, -EINVAL (bad
 * value), -ERANGE (the driver refused this value: nothing changed),
 * -ENOTSUP (off or unavailable: no ioctl is made), -EPERM or -EIO (the
 * driver refused the control or answered unexpectedly: the mechanism is now
 * unavailable and the groups already changed were put back). */
int cs_tsg_set_timeslice_us(uint64_t us);

/* Puts every compute group cushare changed back to its default: the value
 * read at probe time, or the one libcuda itself last set on that group.
 * Returns 0, -ENOTSUP (off or unavailable), -EIO (unexpected answer: now
 * unavailable). */
int cs_tsg_restore(void);

enum cs_tsg_state cs_tsg_state(void);
/* The process has submitted work: if no compute channel group was seen by
 * then, none will be (libcuda creates them with the context), so an
 * UNPROBED mechanism turns UNAVAILABLE (the daemon then gates instead). */
void cs_tsg_work_without_groups(void);
const char *cs_tsg_state_name(enum cs_tsg_state s);
/* Why the mechanism is off or unavailable ("" otherwise). Stable once set. */
const char *cs_tsg_reason(void);
/* Channel groups recorded now (all engines). */
unsigned cs_tsg_group_count(void);

struct cs_tsg_info {
    enum cs_tsg_state state;
    unsigned groups;     /* recorded channel groups, all engines */
    unsigned gr_groups;  /* of which on a compute (GR) engine */
    unsigned dropped;    /* groups not recorded because the table was full */
    uint64_t target_us;  /* timeslice cushare applies, 0 = the defaults */
    uint64_t default_us; /* compute-group timeslice read by the probe */
    char driver[32];     /* driver version, "" before the probe */
};
void cs_tsg_get_info(struct cs_tsg_info *out);

/* The scheduler's TIMESLICE for GPU `slot` (µs; 0 = the defaults):
 * remembered; true if it changed. The caller then has cs_tsg_apply run
 * off its thread (a worker): applying blocks for RM round trips. */
bool cs_tsg_want(unsigned slot, uint64_t us);
/* Applies the shortest timeslice wanted for any GPU (or the library's own
 * setting) if it is not what the last apply gave the mechanism. */
void cs_tsg_apply(void);
/* What the last apply gave the mechanism and its answer (0 or -errno).
 * Before any: the library's own setting, 0. */
void cs_tsg_request_result(uint64_t *requested_us, int *status);

/* ---- Used by hooks_ioctl.c ------------------------------------------------ */

/* Nonzero while ioctls of type 'F' must go through cs_tsg_ioctl; zero when
 * the mechanism is off or unavailable (the wrapper is then pass-through). */
extern _Atomic int cs_tsg_watch;

/* The NV path of the ioctl wrapper: forwards to the real ioctl and records
 * what it needs. Never allocates; errno is the real call's. */
int cs_tsg_ioctl(int fd, unsigned long req, void *arg);

/* The system boundary (tsg_sys.h) is below this module. */

/* Resets everything as the constructor would with these settings (mode:
 * enum cs_tsg_mode of config.h). For the unit tests. */
void cs_tsg_configure(int mode, uint64_t static_us);

#endif
