/* burst.h: a latency-critical job's lease, given back burst by burst.
 *
 * In LC_MODE RELEASE_IDLE (docs/priority.md) the lease is taken for a
 * burst of work: the worker waits for the GPU to finish it, lingers
 * lc_linger_us (or until a cushare_hint's deadline) for more, then closes
 * the gate and RELEASEs (reason IDLE), reporting LC_BURST. The next
 * submission asks for the lease again.
 */
#ifndef CS_HOOK_BURST_H
#define CS_HOOK_BURST_H

#include "hook/device.h"

/* The worker's CS_JOB_BURST for the lease job->id (no lock held). */
void cs_burst_run(struct cs_dev *d, const struct cs_job *job);

#endif
