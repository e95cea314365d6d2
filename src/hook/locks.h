/* locks.h: every lock of libcushare.so, who it guards, and the one order in
 * which they nest. Nothing to compile: the modules that own the locks refer
 * here instead of restating the order.
 *
 * A thread holding a lock takes only locks further down this list, never
 * one above it. Two devices' locks of one kind are never held together.
 *
 *   segs.mu   (struct cs_segs, seg.c; one per device)
 *             a device's segments (what each one's addresses show), the
 *             placeholder, the swap engine's state, the pinner's
 *             hold-off. Held across placing memory on the GPU, which may
 *             wait for the scheduler's answer to ROOM (and first gives the
 *             pool back its pieces, RETURN: swap.c
 *             cs_swap_lend_back_locked): so the client I/O thread, which
 *             delivers that answer, never takes it.
 *     vmm_mu      (vmm.c) the application's VMM objects and mappings;
 *                 an object's mappings change only with both held
 *     exp_mu      (ipc.c) the export table (registering an export)
 *     idx_mu      (seg.c) the address index
 *     lend.one    (client.c) one BORROW of the node's pool at a time, held
 *                 across the wait for its LEND (the swap engine borrows
 *                 under segs.mu, the pinner under nothing); the I/O thread
 *                 hands the LEND over under lend.mu alone
 *       lend.mu   (client.c) the LEND waited for
 *   cs_dev.mu (struct cs_dev, device.h; one per device)
 *             the lease, the job queues, idle reports, LC mode, statistics
 *             (struct cs_dev's parts say which). Taken inside segs.mu by
 *             seg.c's may_place question and by a grant opening the gate
 *             after its restore (swap.c's cs_swap_restore).
 *     cl.mu       (client.c) the published connection: every send
 *     bound.mu    (struct cs_bound, bound.h) a bounded gate's events
 *     req_mu      (tsg.c) the timeslice each GPU asks for
 *       ctl_mu    (tsg.c) controls sent to the driver
 *         tbl_lock (tsg.c, a spinlock) the channel-group table, for a few
 *                 loads and stores, never across a system call
 *
 * Leaves, taken with nothing of the above held and taking nothing else:
 *   ctx_mu      (device.c) contexts seen and their devices
 *   tab_mu      (mem.c) the allocation records (dropped before freeing a
 *               context's segments)
 *   room_mu     (client.c) outstanding ROOM requests (dropped before sending)
 *   imp_mu      (ipc.c) the import table, held across an import's request
 *               to the exporting process, so never with exp_mu
 *   primary_mu  (hooks_ctx.c) primary contexts retained by the application
 *   view_mu     (nvml.c) the cached view of the job (view.h), held across
 *               fetching a new one from the daemon (a short connection of
 *               its own, 1 s at most); taken by NVML calls only, which
 *               take a device's mu after dropping it
 *   xtab_mu     (nvml.c) making the copy of NVML's private export table
 *               (nvidia-smi's process lists), once; nothing taken under it
 *
 * Atomics and once-written pointers need no lock: the gate word and counter
 * (struct cs_dev_gate), the host and memory counters (struct cs_dev_host,
 * cs_dev_mem), the segment byte counters, the remap word (cs_seg_remaps:
 * written under the moving device's segs.mu, read by any thread after a
 * failed call), cs_segs.unshown and .wanted (the shower's hints), and the
 * ops tables each layer
 * registers from the constructor before any thread of ours exists
 * (cs_dev_set_ops, cs_seg_set_ops, cs_client_set_ops, cs_worker_set_ops,
 * cs_pmap_set_table).
 */
#ifndef CS_HOOK_LOCKS_H
#define CS_HOOK_LOCKS_H
#endif
