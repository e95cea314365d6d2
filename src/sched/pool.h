/* pool.h: the bookkeeping of cushared's node-wide pinned pool (issue 20),
 * free of syscalls, the driver and clocks.
 *
 * The daemon owns pinned host memory in pieces (HOST_NUMA cuMemCreate
 * allocations exported as POSIX descriptors: pinner.c makes and releases
 * them) and lends them to clients, which import them as swap backing and
 * give them back (RETURN) or die. This module only decides: which piece to
 * pin next, which to release, which to lend; it carries each piece's
 * descriptor and handle without touching them. Every entry point takes the
 * time as an argument, so the whole pool runs in unit tests on simulated
 * time (tests/sched/test_pool.c).
 *
 * Target: the policy says how many bytes the node should have pinned now
 * (sd_pool_set_want); the target is clamp(want, min_bytes, max_bytes)
 * rounded up to whole big pieces, or down where up would pass max_bytes
 * (the target is always reachable). max_bytes and max_pieces bound
 * everything pinned, both classes together, whatever the target.
 *
 * Two classes of pieces: big ones (cfg.piece, 64 MiB by default) make the
 * bulk of a backing, small ones (SD_POOL_SMALL, the host granularity) its
 * tail. The target is split between them by demand:
 *   small target = min(target, max(D, min(target / 16, cfg.small_floor))), big target = target - small target,
 * where D, a multiple of SD_POOL_SMALL, is a decaying high-water of the
 * small demand seen at each set_want: the small pieces lent then plus the
 * small pieces borrowers asked for and missed since the previous set_want.
 * D rises at once to a higher demand; after linger_ns without reaching it
 * again it falls to max(demand now, D / 2 rounded down to SD_POOL_SMALL),
 * one halving per linger_ns. So small pieces are pinned once clients asked
 * for them and missed, and stay as long as an unused piece would linger.
 * A class is pinned while it is below its target (the big class up to
 * whole pieces: its target rounded up to cfg.piece), small first. A piece
 * is released (sd_pool_shrink) when its class is beyond its target by at
 * least that piece, it has been free for linger_ns, and what stays pinned
 * is at least min_bytes. With cfg.piece == SD_POOL_SMALL there is one class
 * (big) and D is not used.
 *
 * Host pressure: the lender says how far the host's available memory is
 * below reserve_bytes (sd_pool_set_short). While it is, any free piece may
 * go, within its target or not, lingered or not, min_bytes or not (the
 * longest free first, taint as below), until the pieces chosen make up the
 * shortfall: the pool grows only above the reserve (sd_pool_next_pin, for
 * min_bytes too), and a pool that had grown gives back what it does not
 * lend when the host's own memory needs it; it grows again once the host
 * has the room. Lent pieces back memory that is swapped out, which would
 * be in the host's RAM pinned or not.
 *
 * Taint (tenancy): a process that was lent a piece may keep its import
 * after RETURN (the daemon cannot revoke it), so a returned piece may go
 * only to the same tenant until every process of that tenant that ever
 * borrowed from the pool has exited. A piece is tainted by its borrower's
 * tenant when lent; the taint is cleared when the tenant's live borrower
 * count (clients registered at their first lend, until their exit) drops
 * to 0. Borrowing takes the tenant's own tainted pieces first, then clean
 * ones, never another tenant's (share_node: taint is not kept at all).
 * A client lost without an exit seen (sd_pool_client_lost: no pidfd) stops
 * counting as live, but its process may still hold imports of pieces it
 * returned, so its tenant is marked unwatched: the tenant's tainted pieces
 * stay tainted (only that tenant may borrow them) until they have all left
 * the pool; meanwhile, once the tenant has no live borrower, they may be
 * released by sd_pool_shrink like clean ones.
 *
 * Pacing: a piece being pinned holds a driver lock that every process's
 * device allocations wait for (bench/results/oversubscription.md: a 64 MiB
 * cuMemAlloc took 14-17 ms instead of 0.06 while the pool grew, 16 GiB of
 * them 3-4 s instead of 18 ms). Growth that nobody waits for is paced:
 * after a piece that took t to pin, the next one starts no sooner than
 * t * (100 - pace_pct) / pace_pct later, so allocations in between run at
 * full speed. Unpaced (sd_pool_pin_at returns now) when pace_pct is 0 or
 * 100, when no GPU client is there to be slowed (`alone`: the pool
 * pinned at start), and while growth is needed now: a borrow missed
 * pieces within SD_POOL_URGENT_NS (the borrower is pinning its own).
 *
 * Storage: pieces in a dense array (swap-removed) indexed by id through an
 * open-addressing table, so finding a piece is O(1) and lending n pieces
 * scans the array at most twice. Borrower clients and tenants are short
 * arrays. An allocation failure makes the call do nothing (a new piece is
 * not added: sd_pool_pinned returns 0 and the caller releases it; a lend
 * lends nothing), never loses a piece.
 *
 * Ownership: one struct sd_pool, owned by the daemon's thread (server.c),
 * which alone calls these functions. The structs are public for embedding
 * and read access; only pool.c changes them.
 */
#ifndef SD_POOL_H
#define SD_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SD_POOL_SMALL (2ull << 20)         /* the small piece: the host granularity */
#define SD_POOL_PIECE_DEFAULT (64ull << 20) /* cfg.piece when 0 */

enum sd_piece_state { SD_PIECE_FREE = 0, SD_PIECE_LENT = 1 };

struct sd_piece {
    uint32_t id;            /* nonzero, unique for the daemon's life, never reused */
    enum sd_piece_state state;
    uint64_t size;          /* cfg.piece (big) or SD_POOL_SMALL */
    int fd;                 /* exported descriptor, carried, never touched here */
    uint64_t handle;        /* driver handle, carried */
    uint64_t borrower;      /* client id while LENT */
    uint64_t taint;         /* tenant whose process may still hold it, 0 = clean */
    uint64_t free_since;    /* ns it last became FREE (for the linger) */
};

struct sd_pool_cfg {
    uint64_t max_bytes;     /* never more pinned than this (0 = pool off: lends nothing, pins nothing) */
    uint64_t min_bytes;     /* kept pinned always (pinned at start) */
    uint64_t reserve_bytes; /* never pin when host available - piece < this */
    uint64_t piece;         /* big piece size (0: SD_POOL_PIECE_DEFAULT; rounded up to a
                               multiple of SD_POOL_SMALL) */
    uint64_t linger_ns;     /* a free piece beyond the target is released after this long */
    uint32_t max_pieces;    /* descriptor budget: never more pieces than this (0: none) */
    bool share_node;        /* true: ignore taint (pool_share = node) */
    uint64_t small_floor;   /* small pieces wanted before any demand (at most a sixteenth
                               of the target; 0 = by demand only) */
    uint32_t pace_pct;      /* growth nobody waits for pins at most this share of the
                               time (0 or 100: unpaced; see Pacing above) */
};

#define SD_POOL_URGENT_NS 1000000000ull /* a missed borrow makes growth urgent this long */

struct sd_pool_stats {
    uint64_t pinned_bytes, free_bytes, lent_bytes, target_bytes;
    uint64_t free_big_bytes;        /* of free_bytes, in big pieces */
    uint64_t pieces_pinned_total, pieces_released_total, lends_total, returns_total,
        missed_pieces_total, reserve_refusals_total, bad_returns_total;
    uint64_t pressure_releases_total; /* of the released, chosen for host pressure */
};

/* A client registered at its first lend: kept while it is live (no exit
 * or loss seen) or still has pieces lent. */
struct sd_pool_client {
    uint64_t id, tenant;
    uint32_t lent;          /* pieces LENT to it now */
    bool live;
};

/* A tenant with live borrowers or pieces tainted by it. */
struct sd_pool_tenant {
    uint64_t id;
    uint32_t live;          /* live borrower clients */
    uint32_t tainted;       /* pieces (FREE or LENT) whose taint is this tenant */
    bool unwatched;         /* a borrower was lost while it had tainted pieces:
                               their taint is never cleared (see above) */
};

#define SD_POOL_CLASSES 2 /* big, small (pool.c: CL_BIG, CL_SMALL) */

struct sd_pool {
    struct sd_pool_cfg cfg;         /* normalized copy (piece) */
    struct sd_piece *pc;            /* pieces, dense, in no order */
    size_t n, cap;
    uint32_t *ix;                   /* id -> index + 1 (0: empty slot) */
    size_t ix_size;                 /* slots, a power of two > 2 * n (0 until the first piece) */
    struct sd_pool_client *cl;
    size_t ncl, clcap;
    struct sd_pool_tenant *tn;
    size_t ntn, tncap;
    uint32_t last_id;               /* ids are handed out in order from 1 */
    uint64_t inflight;              /* size of the pin in flight, 0 = none */
    uint64_t target, small_target;  /* bytes, see above */
    uint64_t small_missed;          /* small pieces missed since the last set_want */
    uint64_t small_hw;              /* D, bytes */
    uint64_t small_hw_at;           /* when D was last raised or decayed */
    size_t orphan_at;               /* where sd_pool_orphan_next looks first */
    uint64_t pace_until;            /* a paced pin starts no sooner (ns) */
    uint64_t urgent_until;          /* growth is urgent before this (ns): a borrow missed */
    uint64_t short_bytes;           /* host pressure not yet met by releases (see above) */
    uint32_t count[SD_POOL_CLASSES]; /* pieces per class */
    uint32_t lent[SD_POOL_CLASSES];  /* of them LENT */
    struct sd_pool_stats st;        /* the counters (byte figures: sd_pool_get_stats) */
};

void sd_pool_init(struct sd_pool *p, const struct sd_pool_cfg *cfg);
/* Frees the tables only (descriptors and handles are the caller's). */
void sd_pool_fini(struct sd_pool *p);
/* The demand (bytes the node should have pinned now) from the policy; sets
 * the target and the classes' split (see above). */
void sd_pool_set_want(struct sd_pool *p, uint64_t want, uint64_t now);
/* The size of the next piece to pin (cfg.piece or SD_POOL_SMALL), 0 = none:
 * no pin in flight, its class below its target, pieces < max_pieces,
 * pinned + size <= max_bytes, and host_avail >= size + reserve_bytes (a
 * class refused only by that counts one reserve refusal per call). Marks
 * the pin in flight. */
uint64_t sd_pool_next_pin(struct sd_pool *p, uint64_t host_avail);
/* The pin in flight finished: ok adds the piece and returns its new id;
 * !ok adds nothing. Returns 0, the piece not added (the caller releases
 * it), also when size is neither class's or the table cannot grow. */
uint32_t sd_pool_pinned(struct sd_pool *p, bool ok, uint64_t size, int fd, uint64_t handle,
                        uint64_t now);
/* The last pin (ok or not) took pin_ns, finishing at now: paces the next
 * one (see Pacing above). */
void sd_pool_pace(struct sd_pool *p, uint64_t pin_ns, uint64_t now);
/* When the next pin may start, never before now: now when unpaced (see
 * Pacing above), else the end of the last pin's pause. */
uint64_t sd_pool_pin_at(const struct sd_pool *p, bool alone, uint64_t now);
/* The host's available memory is `bytes` below reserve_bytes (0: not; see
 * Host pressure above). */
void sd_pool_set_short(struct sd_pool *p, uint64_t bytes);
/* A FREE piece to release now, or NULL: clean (or tainted by an unwatched
 * tenant without live borrowers); its class beyond its target by at least
 * the piece, free for linger_ns, and min_bytes still pinned without it; or
 * any such piece while the host is short (counted against the shortfall);
 * the one free the longest. The caller releases its fd/handle and calls
 * sd_pool_remove. */
const struct sd_piece *sd_pool_shrink(struct sd_pool *p, uint64_t now);
/* Takes piece id out of the pool (unknown ids: nothing). */
void sd_pool_remove(struct sd_pool *p, uint32_t id);
/* Lends up to n pieces of `size` to client `client` of tenant `tenant`
 * (nonzero): FREE pieces tainted by this tenant first, then clean ones;
 * never one tainted by another tenant (unless share_node). Fills out[] with
 * pointers (valid until the next call that changes the pool), returns how
 * many; counts the shortfall as missed pieces (of the small class: the
 * small demand). Lends nothing (and counts nothing) when the pool is off,
 * to tenant 0, for a size of neither class, to a client registered with
 * another tenant (or lost with pieces still lent). */
uint32_t sd_pool_borrow(struct sd_pool *p, uint64_t client, uint64_t tenant, uint64_t size,
                        uint32_t n, const struct sd_piece **out, uint64_t now);
/* Client gives piece id back: 0, or -1 when it is not LENT to this client
 * (nothing changes; bad_returns_total++). The piece becomes FREE, tainted
 * by the client's tenant unless share_node. */
int sd_pool_return(struct sd_pool *p, uint64_t client, uint32_t id, uint64_t now);
/* The client's process has exited (the daemon saw its pidfd): every piece
 * LENT to it becomes FREE (tainted by its tenant); when it was its tenant's
 * last live borrower, every FREE piece tainted by that tenant becomes clean
 * (unless the tenant is unwatched). */
void sd_pool_client_exited(struct sd_pool *p, uint64_t client, uint64_t now);
/* The client is gone but its process cannot be watched (no pidfd): its LENT
 * pieces leave the pool (whoever holds an import keeps the memory):
 *   while ((pc = sd_pool_orphan_next(p, client))) { release pc->fd/handle; sd_pool_remove(p, pc->id); }
 * then sd_pool_client_lost(p, client, now): it no longer counts as live,
 * and its tenant becomes unwatched (see above). */
const struct sd_piece *sd_pool_orphan_next(struct sd_pool *p, uint64_t client);
void sd_pool_client_lost(struct sd_pool *p, uint64_t client, uint64_t now);
/* Whether client has pieces lent now. */
bool sd_pool_has_lent(const struct sd_pool *p, uint64_t client);
/* Whether the pool counts client as a live borrower: it was lent a piece
 * and neither its exit nor its loss was reported. The server watches its
 * process while this holds (it may keep imports after returning them all),
 * and reports its exit or loss. */
bool sd_pool_is_borrower(const struct sd_pool *p, uint64_t client);
void sd_pool_get_stats(const struct sd_pool *p, struct sd_pool_stats *out);
const struct sd_piece *sd_pool_find(const struct sd_pool *p, uint32_t id);

#endif
