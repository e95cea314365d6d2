/* pinner.h: the daemon's pool pinning thread (issue 20).
 *
 * cushared owns a node-wide pool of pinned host memory and lends pieces of
 * it to clients as descriptors (SCM_RIGHTS). A piece is a VMM allocation
 * on the host NUMA node of GPU 0 (cuMemCreate, location HOST_NUMA, type
 * PINNED, POSIX file descriptor handle type) exported as a descriptor
 * (cuMemExportToShareableHandle). On the H100 (driver 580) this works in a
 * process without any CUDA context (cuInit only, as node.c's discovery),
 * takes no GPU memory, and the descriptor alone keeps the memory alive;
 * a HOST location is refused with a descriptor handle type, hence
 * HOST_NUMA. Pinning one piece takes 10-100+ ms (0.18-0.20 s/GiB), so it
 * runs on this thread, never on the loop: the loop asks for one piece at a
 * time, polls sd_pinner_fd and takes the result.
 *
 * Threads: the loop calls every function here; the pinner's own thread
 * only pins. The request/result slot is shared through one lock:
 *
 *   mu  (struct sd_pinner) the slot's state, the size asked for, the
 *       result and the stop flag; the eventfd's count changes only under
 *       it, so the descriptor is readable exactly while a result waits.
 *       Held for a few loads and stores and one eventfd write or read,
 *       never across a driver call.
 *
 * The driver's entry points, its granularity, the NUMA node and the
 * eventfd are written by sd_pinner_start before the thread exists and only
 * read afterwards.
 */
#ifndef SD_PINNER_H
#define SD_PINNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sd_pinner; /* one per daemon */

/* One piece, or why there is none. */
struct sd_pinned {
    bool ok;
    int fd;          /* the exported descriptor (O_CLOEXEC); -1 unless ok */
    uint64_t handle; /* the allocation, still held: released with fd */
    uint64_t size;   /* bytes asked for */
    uint64_t ns;     /* time taken by cuMemCreate and the export */
    int cu_err;      /* the driver's CUresult when !ok, else 0 */
};

/* Loads the driver (cuda_lib, NULL for "libcuda.so.1"; never unloaded),
 * cuInit(0), takes GPU 0's host NUMA node (CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID;
 * unknown or negative: node 0), checks with a granularity query that the
 * driver makes HOST_NUMA allocations with descriptor handles, and starts
 * the thread. Returns 0, or -1 with the reason in err (no driver, no GPU,
 * a driver without host NUMA allocations): the daemon then runs without a
 * pool. Signals are blocked in the thread (and in any thread the driver
 * starts meanwhile), so the loop's signalfd gets them all. */
int sd_pinner_start(struct sd_pinner **out, const char *cuda_lib, char *err, size_t cap);

/* The descriptor the loop polls (EPOLLIN): an eventfd, readable while a
 * result waits to be taken. */
int sd_pinner_fd(const struct sd_pinner *pn);

/* The driver's allocation granularity for a piece (2 MiB on the H100). */
uint64_t sd_pinner_granularity(const struct sd_pinner *pn);

/* Asks for one piece of size bytes (a positive multiple of the
 * granularity). One request at a time: -1 while one is being pinned or its
 * result has not been taken, or for a bad size; 0 when accepted. */
int sd_pinner_request(struct sd_pinner *pn, uint64_t size);

/* Takes the finished result, if any (the eventfd reads empty afterwards);
 * true if one was taken. The piece's fd and handle are the caller's from
 * then on (sd_pinner_release). */
bool sd_pinner_take(struct sd_pinner *pn, struct sd_pinned *out);

/* Releases a piece now: closes fd and releases the handle (~10 us, on the
 * loop). The memory goes once no importer maps it any more. */
void sd_pinner_release(struct sd_pinner *pn, int fd, uint64_t handle);

/* Stops the thread: a request already accepted is pinned first (stop
 * returns after it), and a result nobody took is released, since nobody
 * else holds it. Pieces taken before stay the caller's. Frees pn. */
void sd_pinner_stop(struct sd_pinner *pn);

/* Each lent piece holds a descriptor in the daemon: raises RLIMIT_NOFILE's
 * soft limit to the hard one. 0 with the resulting soft limit in
 * *limit_out (UINT32_MAX when larger), or -1 with errno when it cannot be
 * read or raised (*limit_out then the limit in force, if known, else 0). */
int sd_pinner_raise_nofile(uint32_t *limit_out);

#endif
