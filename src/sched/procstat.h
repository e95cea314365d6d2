/* procstat.h: what the daemon can see of a client's process in /proc. */
#ifndef SD_PROCSTAT_H
#define SD_PROCSTAT_H

#include <stdbool.h>
#include <stdint.h>

#include "sched/policy.h"

/* Whether process pid is stopped: state 'T' (SIGSTOP, SIGTSTP) or 't' (a
 * tracer's stop) in /proc/<pid>/stat. False when it cannot be read (gone,
 * another pid namespace, pid 0). */
bool sd_proc_stopped(uint32_t pid);

/* sd_policy_ops.stopped for the server: the member's connection's pid
 * (SO_PEERCRED, never the client's word). */
bool sd_proc_member_stopped(void *ctx, const struct sd_member *m);

#endif
