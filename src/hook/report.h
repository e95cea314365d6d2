/* report.h: what the daemon hears of a device between lease messages.
 *
 * USAGE goes out when the device's memory picture changes or its holder
 * turns idle or busy; PINNED when the host backing held for it changes (to
 * a daemon that took CS_HELLO_PIN). A holder is idle when it has submitted
 * nothing for the daemon's idle period (no gated call begun or still
 * running, no allocation, free or room wait: cs_dev.host) *and* has no work
 * left on the GPU. Submissions are counted by the gate; whether work is
 * still in flight is asked by the worker (an idle probe: it waits for the
 * contexts, then restarts the idle clock from when the GPU finished, so a
 * job blocked on a long kernel is not mistaken for an idle one).
 *
 * Runs on the client I/O thread (its ticks) and the worker (the probe);
 * struct cs_dev_report is under the device's mu.
 */
#ifndef CS_HOOK_REPORT_H
#define CS_HOOK_REPORT_H

#include "hook/device.h"

/* I/O thread, while connected: idle detection, USAGE and PINNED. */
void cs_report_tick(struct cs_dev *d, uint64_t now_ns);
/* Before an ACQUIRE (d->mu held): USAGE at once if the memory picture
 * changed since the last one, so that the daemon weighs the waiter by its
 * footprint now, not a tick old. A job's first kernel follows its first
 * allocations, and a waiter that has not run is expected to grow like the
 * largest job that has (the daemon's quantum, policy.c) only once its
 * footprint is known there. */
void cs_report_usage_locked(struct cs_dev *d);
/* Milliseconds until cs_report_tick has something to do for any device. */
uint32_t cs_report_interval_ms(void);
/* A lease was granted (d->mu held): the idle clock starts afresh. */
void cs_report_held_locked(struct cs_dev *d, uint64_t now_ns);
/* A lease ended (d->mu held): idleness belonged to it. */
void cs_report_released_locked(struct cs_dev *d);
/* A (re)connection's ATTACH went out (d->mu held): report afresh. */
void cs_report_attached_locked(struct cs_dev *d);
/* The worker's idle probe (CS_JOB_IDLE_PROBE; no lock held). */
void cs_report_idle_probe(struct cs_dev *d, const struct cs_job *job);

#endif
