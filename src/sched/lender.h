/* lender.h: the node's pool of pinned host memory, served (issue 20).
 *
 * Swap backing is pinned host memory, and pinning costs ~0.2-0.7 s/GiB
 * against ~0.02 s/GiB to copy: paid by each job, it was most of an
 * oversubscribed switch. The daemon pins pieces once per node (pinner.c's
 * thread: HOST_NUMA cuMemCreate exported as POSIX descriptors, no CUDA
 * context), keeps them in a pool (pool.c's bookkeeping) sized by what the
 * policy expects to be swapped out (sd_policy_pool_want), and lends them to
 * clients (BORROW -> LEND with SCM_RIGHTS), which import them for 12-14
 * ms/GiB and give them back (RETURN) once their memory is back on the GPU.
 *
 * A lent piece comes back when its borrower RETURNs it or its process has
 * exited: the daemon watches every borrower's process (pidfd), not its
 * connection, because a process that lost its connection still maps the
 * piece. A borrower whose process cannot be watched (no pidfd: another PID
 * namespace) loses its pieces to itself when its connection ends: the pool
 * forgets them (the memory lives while the process holds it). A piece a
 * live process gave back may still be imported there (the daemon cannot
 * revoke an import), so it goes only to the same tenant until every
 * borrower process of that tenant has exited, unless pool_share_tenants.
 */
#ifndef SD_LENDER_H
#define SD_LENDER_H

#include <stdbool.h>
#include <stdint.h>

#include "common/proto.h"
#include "sched/pool.h"

struct sd_server;
struct sd_conn;
struct sd_pinner;

/* epoll tag of the pinner's descriptor (server.c's tags are small numbers) */
#define SD_TAG_POOL 5
/* epoll tag of a borrower's pidfd: SD_WATCH_TAG | serial */
#define SD_WATCH_TAG (1ull << 62)

/* A borrower process the daemon watches until it exits. */
struct sd_watch {
    uint64_t client;        /* its client id (the pool's borrower) */
    uint64_t serial;        /* epoll tag, with SD_WATCH_TAG */
    uint32_t pid;
    int pidfd;
    bool connected;         /* its connection is open */
    uint64_t lent_bytes;    /* lent to it now, at most its GPU's memory */
    bool warned;            /* a bad RETURN of it was logged */
    struct sd_watch *next;
};

struct sd_lender {
    struct sd_pool pool;
    bool pool_ready;         /* pool initialized (the pinner may still be absent) */
    struct sd_pinner *pinner; /* NULL: this node lends nothing */
    struct sd_watch *watches;
    uint64_t next_serial;
    uint64_t reserve;        /* host memory pinning leaves available, bytes */
    uint64_t piece;          /* the big piece, bytes */
    uint32_t max_pieces;     /* the descriptors the pieces may take */
    bool inflight;           /* the pinner is pinning a piece */
    bool held;               /* pinning held back while a move is under way */
    uint64_t holds;          /* times it was (status, metrics) */
    bool pacing;             /* pinning paused for its pace (pool.h, Pacing) */
    uint64_t paces;          /* pauses so far (metrics) */
    bool reserve_warned;     /* the last pin was held back by the reserve (said once) */
    uint64_t retry_at;       /* a pin was refused (the host's reserve, the pinner's
                                request, the driver): none asked before this */
    uint64_t pins_ns;        /* time the pinner spent, all pieces */
    uint64_t avail_at;       /* when the host's available memory was last read for
                                free pieces (release_for_host, once a second) */
    bool pressure_warned;    /* pieces went for the host's memory (said once a stretch) */
};

/* Starts the pool when the `pool` setting is on and the driver can pin
 * exportable host memory; otherwise the node lends nothing (said once). */
void sd_lender_init(struct sd_server *s);
void sd_lender_fini(struct sd_server *s);
/* After each pass of the loop: sets the pool's target from the policy,
 * asks for the next piece, releases pieces past their linger. */
void sd_lender_drive(struct sd_server *s, uint64_t now);
/* The next time drive has something to do without an event (0: none). */
uint64_t sd_lender_deadline(const struct sd_server *s);
/* epoll: the pinner's descriptor (TAG_POOL) or a watch (SD_WATCH_TAG | serial). */
void sd_lender_pinned_event(struct sd_server *s, uint64_t now);
void sd_lender_watch_event(struct sd_server *s, uint64_t tag, uint64_t now);
/* BORROW and RETURN from a GPU client; false: a protocol error (why set). */
bool sd_lender_borrow(struct sd_server *s, struct sd_conn *c, const struct cs_msg_borrow *b,
                      const char **why);
bool sd_lender_return(struct sd_server *s, struct sd_conn *c, const struct cs_msg_return *r,
                      const char **why);
/* Who may be lent what another borrower gave back: an endpoint's
 * allocation (Kubernetes), else the uid; never 0. */
uint64_t sd_lender_tenant(const struct sd_conn *c);
/* A client's connection is closing. True when its process lives on and is
 * watched until it exits (then sd_lender_watch_event tells the policy,
 * sd_policy_process_gone). */
bool sd_lender_client_gone(struct sd_server *s, struct sd_conn *c, uint64_t client);

#endif
