/* overhead.h: the meter's samples into the memory model (issue 21).
 *
 * meter.c reads, on its own thread, what the driver charges each process on
 * each GPU; this file, on the loop, matches those processes to the clients
 * (each connection's pid from SO_PEERCRED) and hands the figures to the
 * policy (sd_policy_measured), which measures every client's overhead
 * beyond its allocations and plans memory with it (mem.c). Nothing here
 * trusts a client: the pid is the kernel's, the figure the driver's.
 */
#ifndef SD_OVERHEAD_H
#define SD_OVERHEAD_H

#include <stdint.h>

struct sd_server;

/* epoll tag of the meter's descriptor (server.c's tags are small numbers) */
#define SD_TAG_METER 6

/* Starts the meter unless mem_sample_ms is 0; without NVML (or its
 * process list) the daemon plans with client_reserve_mb alone, said once. */
void sd_overhead_init(struct sd_server *s);
/* The meter's descriptor fired: its newest sample into the policy. */
void sd_overhead_event(struct sd_server *s, uint64_t now);
void sd_overhead_fini(struct sd_server *s);

#endif
