/* policy_int.h: what policy.c shares with room.c and nobody else. */
#ifndef SD_POLICY_INT_H
#define SD_POLICY_INT_H

#include "sched/policy.h"

/* Asks for a decision on g at t (the earliest wins). */
void sd_gpu_want_at(struct sd_gpu *g, uint64_t t);
/* Re-evaluates g after memory changed. */
void sd_gpu_reschedule(struct sd_policy *p, struct sd_gpu *g, uint64_t now);

/* room.c, called by policy.c */
/* Answers the ROOMs whose time is up; sets g's deadline for the others. */
void sd_room_check(struct sd_policy *p, struct sd_gpu *g, uint64_t now);
/* m is going away: answer for it and forget it on both sides. */
void sd_room_forget(struct sd_policy *p, struct sd_member *m);

#endif
