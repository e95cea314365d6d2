/* exitwatch.h: the processes of departed clients, watched for their exit.
 *
 * A client's connection closes 0.1-0.4 s before its process and its GPU
 * memory are gone (measured on an H200, bench/results/oversubscription.md).
 * The policy counts a departed client's memory as the driver's until the
 * exit is reported (room.c "departed"), which needs someone to watch the
 * process: the lender watches every borrower (lender.c); this module
 * watches the others that left GPU memory behind (a job that never swapped,
 * or a node without the pool), from their disconnect until they exit or
 * SD_EXITWATCH_NS has passed, whichever comes first.
 *
 * A fixed table of pidfds: a tenant that connects and leaves in a loop holds
 * at most SD_EXITWATCH_MAX descriptors, for SD_EXITWATCH_NS each. A
 * departure that finds the table full is not watched, and its memory is
 * planned as free at once, as it was before any watch. The module knows
 * nothing of the server or the policy: the caller adds the descriptor to
 * its epoll set with the tag returned, and passes the tag back when it is
 * readable (sd_exitwatch_event names the client whose process exited).
 */
#ifndef SD_EXITWATCH_H
#define SD_EXITWATCH_H

#include <stdint.h>

/* epoll tag of a watched exit: SD_EXITWATCH_TAG | serial (lender.h's
 * SD_WATCH_TAG is bit 62, endpoint.h's SD_EP_TAG bit 63) */
#define SD_EXITWATCH_TAG (1ull << 61)
#define SD_EXITWATCH_MAX 32
/* Longer than the policy's wait for a departed client's exit
 * (SD_DEPART_WAIT_NS, 1 s): an exit within that wait is always reported. */
#define SD_EXITWATCH_NS (2000 * 1000000ull)

struct sd_exitwatch_ent {
    uint64_t client; /* 0: the entry is free */
    uint64_t serial; /* its tag, with SD_EXITWATCH_TAG */
    uint64_t until;  /* dropped unwatched at this time */
    int pidfd;
};

struct sd_exitwatch {
    struct sd_exitwatch_ent e[SD_EXITWATCH_MAX];
    uint64_t next_serial;
};

void sd_exitwatch_init(struct sd_exitwatch *xw);
/* Closes every descriptor. */
void sd_exitwatch_fini(struct sd_exitwatch *xw);
/* Watches pid's exit for client until `until`: the pidfd to add to the
 * epoll set with *tag, or -1 (pid 0, the table full, or no pidfd: the
 * process is gone already or in no namespace of ours; errno says). */
int sd_exitwatch_add(struct sd_exitwatch *xw, uint64_t client, uint32_t pid, uint64_t until,
                     uint64_t *tag);
/* The watch of tag ends (its pidfd is readable: the process exited; or the
 * caller could not add it to its epoll set): its descriptor is closed.
 * Returns its client, or 0 when the tag names no watch (dropped earlier,
 * or a stale event). */
uint64_t sd_exitwatch_event(struct sd_exitwatch *xw, uint64_t tag);
/* Drops the watches whose time has come (now >= until). */
void sd_exitwatch_expire(struct sd_exitwatch *xw, uint64_t now);
/* The earliest time a watch will be dropped, 0 if none. */
uint64_t sd_exitwatch_deadline(const struct sd_exitwatch *xw);
/* Watches now held. */
uint32_t sd_exitwatch_count(const struct sd_exitwatch *xw);

#endif
