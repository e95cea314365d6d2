/* proto.h: the wire protocol between clients (libcushare.so, cusharectl) and
 * the daemon (cushared). docs/protocol.md is the prose version of this file.
 *
 * Transport: AF_UNIX SOCK_SEQPACKET, one record per message, one connection
 * per client process. The peer's pid and uid come from SO_PEERCRED, never
 * from a message.
 *
 * Record layout: a fixed 8-byte header, then the body of the type, every
 * field fixed-size and little-endian, no padding, no optional parts:
 *
 *     u32 magic (CS_PROTO_MAGIC)  u16 version (CS_PROTO_VERSION)  u16 type
 *
 * A record's length must equal exactly the size its type declares. Strings
 * travel in fixed-size fields, NUL-padded; the decoder requires a NUL inside
 * the field and only printable ASCII before it. Every numeric field has a
 * documented range that cs_msg_decode enforces, so code that handles a
 * decoded message may trust it. A record that fails to decode is a protocol
 * error: the receiver closes that connection (the daemon also counts it).
 *
 * Devices are named in lease messages by a client-chosen slot (0 ..
 * CS_MAX_DEVICES-1) bound to a GPU UUID by ATTACH, so a process may use
 * several GPUs over one connection.
 */
#ifndef CS_PROTO_H
#define CS_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/util.h"

#define CS_PROTO_MAGIC 0x50485343u /* "CSHP" on the wire */
#define CS_PROTO_VERSION 1
#define CS_HDR_SIZE 8
#define CS_MSG_MAX 512 /* no record is longer; receivers use this buffer size */
#define CS_MAX_DEVICES 16
#define CS_NAME_LEN 64   /* client name, pod, namespace fields */
#define CS_KEY_LEN 32    /* control: key of a `set` */
#define CS_VALUE_LEN 96  /* control: value of a `set` */
#define CS_TEXT_LEN 160  /* free-text reasons and replies */
#define CS_WEIGHT_MAX 1000000u
#define CS_ALL_BYTES UINT64_MAX /* "evict everything" */

enum cs_msg_type {
    /* client -> daemon: lease and memory */
    CS_MSG_HELLO = 1,    /* first message: who I am, my settings */
    CS_MSG_ATTACH = 2,   /* bind a slot to a GPU; state after a reconnect */
    CS_MSG_ACQUIRE = 3,  /* I want the lease on this slot */
    CS_MSG_RELEASE = 4,  /* I gave the lease back (drained) */
    CS_MSG_USAGE = 5,    /* memory footprint and idleness report */
    CS_MSG_EVICTED = 6,  /* reply to EVICT */
    CS_MSG_ROOM = 7,     /* the holder needs room for an allocation */
    CS_MSG_RESTORED = 8, /* the gate opened after a grant: restore cost */
    CS_MSG_PREFETCHED = 9, /* reply to PREFETCH */
    CS_MSG_TSG_STATE = 10, /* channel-group timeslice mechanism report (CS_HELLO_TSG) */
    CS_MSG_LC_BURST = 11,  /* a latency-critical burst ended: its timings (CS_HELLO_LC) */
    CS_MSG_PINNED = 12,    /* host memory pinned as swap backing (CS_HELLO_PIN) */
    CS_MSG_BORROW = 13,    /* lend me pieces of the node's pinned pool (CS_HELLO_POOL) */
    CS_MSG_RETURN = 14,    /* I no longer use these pieces (CS_HELLO_POOL) */
    CS_MSG_LABELS = 15,    /* more of who I am: the container (CS_HELLO_LABELS) */
    /* daemon -> client */
    CS_MSG_WELCOME = 32, /* reply to HELLO */
    CS_MSG_GRANT = 33,   /* you hold the lease: open the gate */
    CS_MSG_REVOKE = 34,  /* give the lease back (drain, maybe swap out) */
    CS_MSG_EVICT = 35,   /* swap out this much while not holding */
    CS_MSG_ROOM_REPLY = 36,
    CS_MSG_ERROR = 37,   /* fatal for the connection: reason text */
    CS_MSG_PREFETCH = 38, /* restore your memory now, the gate stays closed */
    CS_MSG_TIMESLICE = 39, /* set your compute channel groups' timeslice (CS_HELLO_TSG) */
    CS_MSG_LC_MODE = 40,   /* how to behave beside a latency-critical job (CS_HELLO_LC) */
    CS_MSG_TERMS = 41,     /* after WELCOME: what the node granted (CS_HELLO_TERMS) */
    CS_MSG_LEND = 42,      /* reply to BORROW: pieces, their descriptors attached (CS_HELLO_POOL) */
    /* cusharectl -> daemon */
    CS_MSG_CTL_STATUS = 64,
    CS_MSG_CTL_SET = 65,
    CS_MSG_CTL_DRAIN = 66,
    CS_MSG_CTL_ENDPOINT = 67, /* create or remove an endpoint (Kubernetes allocations) */
    CS_MSG_CTL_EP_IDENTITY = 68, /* name the pod of an existing endpoint (the device plugin,
                                    once the kubelet's pod-resources API told it) */
    /* daemon -> cusharectl */
    CS_MSG_CTL_GPU = 96,    /* one per GPU in a status reply */
    CS_MSG_CTL_CLIENT = 97, /* one per client per GPU in a status reply */
    CS_MSG_CTL_DONE = 98,   /* ends every control reply */
    CS_MSG_CTL_DAEMON = 99, /* first record of a status reply */
    CS_MSG_CTL_GPU_MEM = 100,    /* memory and swap of a GPU, after its CTL_GPU */
    CS_MSG_CTL_CLIENT_MEM = 101, /* swap of a client, after its CTL_CLIENT */
    CS_MSG_CTL_CLIENT_TSG = 102, /* timeslice of a client, after its CTL_CLIENT (CS_HELLO_TSG) */
    CS_MSG_CTL_CLIENT_LC = 103,  /* LC/BE mechanism of a client, after it (CS_HELLO_LC) */
    CS_MSG_CTL_LIMITS = 104,     /* connection limits and refusals, after CTL_DAEMON
                                    (CS_HELLO_LIMITS) */
    CS_MSG_CTL_VIEW = 105,       /* first record of a view's status reply (CS_HELLO_VIEW) */
    CS_MSG_CTL_CLIENT_LABELS = 106, /* a client's container, after its CTL_CLIENT (and the
                                       records after it) (CS_HELLO_LABELS) */
};

/* HELLO.flags */
#define CS_HELLO_RECONNECT 0x1u /* this process was registered before */
#define CS_HELLO_CONTROL 0x2u   /* a cusharectl connection, not a GPU client */
/* Capability: the peer understands the timeslice records (a GPU client:
 * TIMESLICE, and it sends TSG_STATE; a control connection: CTL_CLIENT_TSG).
 * Every decoder rejects a type it does not know, so the daemon sends those
 * only to peers that set this bit, and a peer whose HELLO with it is refused
 * (an older daemon) says HELLO again without it. See docs/protocol.md,
 * Versioning. */
#define CS_HELLO_TSG 0x4u
/* Capability: the peer understands LC_MODE (a GPU client, which also sends
 * LC_BURST) or CTL_CLIENT_LC (a control connection). Same rules as
 * CS_HELLO_TSG; a client that is refused with both bits retries with
 * CS_HELLO_TSG alone, then with neither. */
#define CS_HELLO_LC 0x8u
/* Capability: the client sends PINNED (a GPU client only; nothing is sent
 * to it). Same rules; the fallback order is TSG|LC|PIN, TSG|LC, TSG, none. */
#define CS_HELLO_PIN 0x10u
/* Capability: the client understands TERMS, which the daemon then sends
 * right after WELCOME. Same rules; the fallback order is TSG|LC|PIN|TERMS,
 * TSG|LC|PIN, TSG|LC, TSG, none. */
#define CS_HELLO_TERMS 0x20u

/* Capability of a GPU client: it borrows swap backing from the node's
 * pinned pool (BORROW, RETURN) and takes LEND with descriptors attached.
 * Same rules; the fallback order is TSG|LC|PIN|TERMS|POOL, then as for
 * CS_HELLO_TERMS. */
#define CS_HELLO_POOL 0x80u

/* Capability: a GPU client sends LABELS right after WELCOME (and TERMS); a
 * control connection's status replies may carry CTL_CLIENT_LABELS. Same
 * rules. A client sets it only when it has a label to send, ahead of its
 * other bits: on a refusal it says HELLO again without it and goes on down
 * its usual order. cusharectl's order is TSG|LC|LIMITS|LABELS, then as for
 * CS_HELLO_LIMITS. */
#define CS_HELLO_LABELS 0x100u

/* BORROW.kind: which of the pool's two piece sizes (LEND says the size) */
enum cs_piece_kind {
    CS_PIECE_BIG = 0,   /* the pool's piece (pool_piece_mb) */
    CS_PIECE_SMALL = 1, /* 2 MiB: the tail of a backing that is no whole number of pieces */
    CS_PIECE_KIND_MAX = 1,
};
/* Pieces per BORROW, LEND and RETURN (descriptors per record: SCM_RIGHTS
 * takes at most 253) */
#define CS_LEND_MAX 32
/* Largest piece size a LEND may name */
#define CS_PIECE_SIZE_MAX (1ull << 40)

/* TERMS.flags: what the node's grant reduced of what HELLO asked */
#define CS_TERMS_CUT_PRIORITY 0x1u
#define CS_TERMS_CUT_WEIGHT 0x2u
#define CS_TERMS_CUT_MEM 0x4u
/* Capability of a control connection: status replies may carry
 * CTL_LIMITS. Same rules; cusharectl's fallback order is TSG|LC|LIMITS,
 * TSG|LC, TSG, none. */
#define CS_HELLO_LIMITS 0x40u
/* A view connection (with CS_HELLO_CONTROL): the job's own view of the
 * node, for the hook's NVML answers (nvidia-smi, pynvml). Allowed on an
 * endpoint, where control is not; it may only ask CTL_STATUS, and the reply
 * is CTL_VIEW, then the GPUs of its grant (CTL_GPU, only index, uuid and
 * memory filled) and the clients it may see (CTL_CLIENT): those of its
 * allocation's pod (or endpoint), or on the main socket those of its uid
 * (every one for the owner and root), then CTL_DONE. An older daemon
 * refuses the bit: the hook then answers from its own process alone. */
#define CS_HELLO_VIEW 0x200u
/* Capability of a GPU client: it sends RESTORED for every grant whose gate
 * it opens (src/hook/jobs.c granted()). The daemon then takes a holder's
 * memory as restored only from the RESTORED of its current lease (or its
 * restore's answer deadline), not from a USAGE, which may have been sent
 * before an older revoke's swap-out finished: after a daemon restart such a
 * USAGE let a prefetch take the room the restore needed (the lease model's
 * finding 6, docs/model.md). Without the bit a daemon learns it from the
 * client's first RESTORED, as before. Same rules: the hook says it first,
 * with LABELS when it has a label (a daemon that knows it knows LABELS),
 * then as before. */
#define CS_HELLO_RESTORED 0x400u
/* Capability of a GPU client that borrows from the pool (CS_HELLO_POOL):
 * it understands EVICT with CS_EVICT_GIVEBACK, and gives back the pool's
 * pieces that back its resident memory when asked, and, holding the GPU,
 * before each ROOM it sends (RETURN, then ROOM). The daemon asks only
 * clients that set it, and leaves to their ROOMs the part of a move for
 * them that would pin backing the pool cannot lend (takeback.c
 * sd_takeback_paced); a client of the release before that promise gives
 * nothing back with its ROOMs, and its victims pin as before, in parts.
 * Same rules: the hook says it first (with RESTORED, and LABELS when it
 * has a label: a daemon that knows it knows those), then as before. */
#define CS_HELLO_GIVEBACK 0x800u

/* ATTACH.flags: the client's state on that GPU, meaningful on reconnect.
 * HELD is the hook's CS_LEASE_HELD (CUSHARE_LEASE_HELD); docs/protocol.md
 * keeps calling the flag HOLDING. */
#define CS_ATTACH_HELD 0x1u    /* my gate is open under lease_id */
#define CS_ATTACH_WAITING 0x2u /* I have work waiting for the lease */

/* EVICT.flags */
#define CS_EVICT_PREPARE 0x1u /* only pin host backing for `bytes`; move nothing */
/* give back up to about `bytes` of the pool's pieces that back resident
 * memory (pinned ahead, or kept); move nothing (CS_HELLO_GIVEBACK only) */
#define CS_EVICT_GIVEBACK 0x2u

/* ROOM.flags */
#define CS_ROOM_CONTEXT 0x1u /* for a new context: asked by any client, holder or not */

/* USAGE.flags */
#define CS_USAGE_IDLE 0x1u /* nothing submitted for the idle period */

/* TIMESLICE.timeslice_us, TSG_STATE.*_us: longest timeslice, 1 s */
#define CS_TIMESLICE_MAX_US 1000000u

/* TSG_STATE.state: the client's channel-group timeslice mechanism (the
 * values of the hook's enum cs_tsg_state, docs/tsg.md) */
enum cs_tsg_mech {
    CS_TSG_MECH_OFF = 0,         /* CUSHARE_TSG=off or CUSHARE_DISABLE */
    CS_TSG_MECH_UNPROBED = 1,    /* on; no compute channel group seen yet */
    CS_TSG_MECH_READY = 2,       /* probed; groups at their default timeslice */
    CS_TSG_MECH_ACTIVE = 3,      /* a cushare timeslice is in force */
    CS_TSG_MECH_UNAVAILABLE = 4, /* turned off after something unexpected: reason */
    CS_TSG_MECH_MAX = 4,
};

/* LC_MODE.mode: what a client does on one GPU beside a latency-critical
 * (high-class) job when channel-group timeslices cannot protect it
 * (docs/priority.md). */
enum cs_lc_mode {
    CS_LC_NONE = 0,         /* plain lease behaviour */
    CS_LC_RELEASE_IDLE = 1, /* the LC job: give the lease back as soon as its
                               work is done and nothing new came for param_us */
    CS_LC_BOUNDED = 2,      /* a gated BE job: keep at most param_us of work in
                               flight, so that a revoke drains that fast */
    CS_LC_MODE_MAX = 2,
};
/* LC_MODE.param_us: linger or window, at most 1 s */
#define CS_LC_PARAM_MAX_US 1000000u

/* CTL_SET.flags */
#define CS_CTL_SET_MORE 0x1u /* stage this pair; more follow, applied together */

/* CTL_ENDPOINT.op */
enum cs_ep_op {
    CS_EP_CREATE = 1, /* make it, or change its terms for new connections */
    CS_EP_REMOVE = 2, /* close its socket; open connections keep running */
    CS_EP_OP_MAX = 2,
};

/* CTL_GPU.mode and CTL_DAEMON.mode */
enum cs_mode {
    CS_MODE_EXCLUSIVE = 0, /* one lease holder per GPU */
    CS_MODE_SHARED = 1,    /* holders whose memory fits run together */
    CS_MODE_MIXED = 2,     /* a high holder and a lower-class one whose memory
                              fits run together; one holder per class side */
    CS_MODE_MAX = 2,
};

/* CTL_CLIENT.state: the daemon's view of one client on one GPU. The status
 * output and docs/protocol.md keep the word they always showed for HELD:
 * "holding". */
enum cs_lease_state {
    CS_STATE_IDLE = 0,     /* attached, not asking for the GPU */
    CS_STATE_WAITING = 1,  /* ACQUIRE received, no GRANT yet */
    CS_STATE_HELD = 2,     /* GRANT sent (or claimed after a restart) */
    CS_STATE_REVOKING = 3, /* REVOKE sent, RELEASE not received yet */
    CS_STATE_MAX = 3,
};

enum cs_release_reason {
    CS_RELEASE_REVOKED = 1, /* answering a REVOKE */
    CS_RELEASE_IDLE = 2,    /* gave it back on its own: nothing to do */
    CS_RELEASE_DETACH = 3,  /* the context/device is going away */
    CS_RELEASE_REASON_MAX = 3,
};

enum cs_revoke_reason {
    CS_REVOKE_QUANTUM = 1, /* slice used up and someone waits */
    CS_REVOKE_PREEMPT = 2, /* a higher priority class waits */
    CS_REVOKE_IDLE = 3,    /* holder idle and someone waits */
    CS_REVOKE_DRAIN = 4,   /* operator drained the GPU */
    CS_REVOKE_MEMORY = 5,  /* shared mode: memory no longer fits */
    CS_REVOKE_REASON_MAX = 5,
};

struct cs_msg_hello {
    uint32_t flags;
    uint32_t priority;      /* enum cs_priority */
    uint32_t weight;        /* 1 .. CS_WEIGHT_MAX */
    uint32_t proto_min;     /* lowest version the client speaks */
    uint64_t mem_limit;     /* per-GPU quota in bytes, 0 = none */
    uint64_t prev_client_id;/* set with CS_HELLO_RECONNECT */
    char name[CS_NAME_LEN];
    char pod[CS_NAME_LEN];
    char ns[CS_NAME_LEN];
};

struct cs_msg_welcome {
    uint64_t client_id;
    uint64_t epoch;         /* changes each time the daemon starts */
    uint32_t idle_ms;       /* report USAGE idle after this long without work */
    uint32_t flags;
};

struct cs_msg_attach {
    uint32_t slot;
    uint32_t flags;         /* CS_ATTACH_* */
    uint8_t uuid[CS_UUID_LEN];
    uint64_t total_mem;     /* what the driver reports for the device */
    uint64_t lease_id;      /* with CS_ATTACH_HELD */
};

struct cs_msg_acquire {
    uint32_t slot;
    uint32_t flags;         /* reserved, 0 */
};

struct cs_msg_release {
    uint32_t slot;
    uint32_t reason;        /* enum cs_release_reason */
    uint64_t lease_id;
    uint64_t drain_ns;      /* time from revoke to drained */
    uint64_t swap_ns;       /* time spent swapping out, if asked */
    uint64_t swapped_bytes; /* bytes swapped out while releasing */
};

struct cs_msg_usage {
    uint32_t slot;
    uint32_t flags;         /* CS_USAGE_* */
    uint64_t resident;      /* device bytes materialized now */
    uint64_t swapped;       /* bytes held in host backing */
    uint64_t unswappable;   /* part of resident that can never move */
    uint64_t footprint;     /* everything allocated: resident + swapped + reserved */
    uint64_t submissions;   /* gated calls so far (monotonic) */
};

struct cs_msg_evicted {
    uint32_t slot;
    int32_t status;         /* 0 or a CUresult */
    uint64_t request_id;
    uint64_t bytes;         /* moved to host by this request */
    uint64_t ns;
};

struct cs_msg_room {
    uint32_t slot;
    uint32_t flags;
    uint64_t request_id;
    uint64_t bytes;
};

/* After a GRANT: the memory was made resident and the gate opened. */
struct cs_msg_restored {
    uint32_t slot;
    int32_t status;         /* 0, or the CUresult that kept failing (then retried) */
    uint64_t lease_id;
    uint64_t bytes;         /* copied back from host backing */
    uint64_t ns;            /* GRANT received -> gate open */
};

/* Daemon -> client: make the memory resident ahead of the grant (both fit
 * on the GPU); the gate stays closed. Answered by PREFETCHED. */
struct cs_msg_prefetch {
    uint32_t slot;
    uint32_t flags;         /* reserved, 0 */
    uint64_t request_id;
    uint64_t bytes;         /* restore at most this much (what fits now) */
};

struct cs_msg_prefetched {
    uint32_t slot;
    int32_t status;         /* 0 or a CUresult */
    uint64_t request_id;
    uint64_t bytes;         /* copied back */
    uint64_t ns;
};

/* Daemon -> client (CS_HELLO_TSG only): give your compute channel groups
 * this timeslice while you run beside a latency-critical holder of this
 * GPU; 0 = back to the driver's defaults. Sent on change only. */
struct cs_msg_timeslice {
    uint32_t slot;
    uint32_t flags;         /* reserved, 0 */
    uint64_t timeslice_us;  /* 0 .. CS_TIMESLICE_MAX_US */
};

/* Client -> daemon (CS_HELLO_TSG only): the state of the process's
 * channel-group timeslice mechanism, sent after the handshake and whenever
 * it changes. One per process: the mechanism is process-wide. */
struct cs_msg_tsg_state {
    uint32_t state;         /* enum cs_tsg_mech */
    int32_t status;         /* last change's result: 0 or -errno */
    uint64_t requested_us;  /* what the process was asked for (TIMESLICE over
                               its GPUs, or CUSHARE_TSG_TIMESLICE_US); 0 = defaults */
    uint64_t applied_us;    /* what the mechanism keeps in force; 0 = defaults */
    uint32_t groups;        /* compute channel groups known */
    uint32_t pad;
    char reason[CS_TEXT_LEN]; /* why it is off or unavailable, "" otherwise */
};

/* Daemon -> client (CS_HELLO_LC only): behave this way on this GPU until
 * told otherwise. Sent on change only; a new connection starts at NONE. */
struct cs_msg_lc_mode {
    uint32_t slot;
    uint32_t mode;          /* enum cs_lc_mode */
    uint32_t param_us;      /* RELEASE_IDLE: linger; BOUNDED: window (1 .. CS_LC_PARAM_MAX_US) */
    uint32_t flags;         /* reserved, 0 */
};

/* Client -> daemon (CS_HELLO_LC only): a lease held in RELEASE_IDLE mode
 * ended on its own. One per burst of latency-critical work. */
struct cs_msg_lc_burst {
    uint32_t slot;
    uint32_t flags;         /* reserved, 0 */
    uint64_t lease_id;      /* the lease it released */
    uint64_t wait_ns;       /* first blocked submission -> gate open (0 if none blocked) */
    uint64_t busy_ns;       /* gate open -> the GPU had finished the burst's work */
};

/* Client -> daemon (CS_HELLO_PIN only): the host memory this process holds
 * pinned as swap backing for one GPU, for swapped-out memory and kept for
 * resident memory (CUSHARE_PIN_KEEP) alike; sent when it changes. The
 * daemon's pin-ahead budget counts it instead of estimating. */
struct cs_msg_pinned {
    uint32_t slot;
    uint32_t flags;         /* reserved, 0 */
    uint64_t bytes;
};

/* Client -> daemon (CS_HELLO_POOL only): lend me up to `count` pieces of
 * this kind for swap backing of GPU `slot`. Answered by one LEND with the
 * same request_id, carrying between 0 and count pieces. */
struct cs_msg_borrow {
    uint32_t slot;
    uint32_t kind;          /* enum cs_piece_kind */
    uint64_t request_id;
    uint32_t count;         /* 1 .. CS_LEND_MAX */
    uint32_t flags;         /* reserved, 0 */
};

/* Client -> daemon (CS_HELLO_LABELS only), once, right after WELCOME (and
 * TERMS), before any ATTACH: what HELLO has no room for. A claim, shown in
 * status and metrics when the daemon believes the peer (docs/metrics.md). */
struct cs_msg_labels {
    uint32_t flags;         /* reserved, 0 */
    uint32_t pad;
    char container[CS_NAME_LEN]; /* CUSHARE_CONTAINER (CONTAINER_NAME); "" when unknown */
};

/* Daemon -> client (CS_HELLO_POOL only): the answer to a BORROW. `count`
 * pieces of piece_size bytes, ids[0..count) nonzero and ids[count..] zero;
 * the record carries exactly `count` descriptors (SCM_RIGHTS), in the same
 * order: each a cuMemExportToShareableHandle POSIX descriptor of pinned
 * host memory. Pieces stay the client's until it RETURNs them or its
 * process exits. */
struct cs_msg_lend {
    uint64_t request_id;
    uint64_t piece_size;    /* 0 with count 0 */
    uint32_t count;         /* 0 .. CS_LEND_MAX */
    uint32_t flags;         /* reserved, 0 */
    uint32_t ids[CS_LEND_MAX];
};

/* Client -> daemon (CS_HELLO_POOL only): these lent pieces are unmapped and
 * released here; ids[0..count) nonzero, the rest zero. */
struct cs_msg_return {
    uint32_t count;         /* 1 .. CS_LEND_MAX */
    uint32_t flags;         /* reserved, 0 */
    uint32_t ids[CS_LEND_MAX];
};

/* Daemon -> client (CS_HELLO_TERMS only), right after WELCOME: what this
 * process runs at, decided by the node (the connection's grant: the
 * configuration's [uid.*]/[gid.*] sections, or the Kubernetes allocation its
 * endpoint belongs to), never above what HELLO asked. mem_limit is the
 * quota the client must enforce itself. */
struct cs_msg_terms {
    uint32_t priority;      /* enum cs_priority granted */
    uint32_t weight;        /* 1 .. CS_WEIGHT_MAX granted */
    uint64_t mem_limit;     /* per-GPU bytes, 0 = none */
    uint32_t flags;         /* CS_TERMS_CUT_*: what was reduced */
    uint32_t pad;
    char text[CS_TEXT_LEN]; /* why, e.g. "uid 1000 may claim at most normal, weight 1
                               (default grant)"; "" when nothing was cut */
};

struct cs_msg_grant {
    uint32_t slot;
    uint32_t quantum_ms;    /* informational: expected slice length */
    uint64_t lease_id;
};

struct cs_msg_revoke {
    uint32_t slot;
    uint32_t reason;        /* enum cs_revoke_reason */
    uint64_t lease_id;
    uint64_t evict_bytes;   /* swap out this much after draining; 0 = none */
};

struct cs_msg_evict {
    uint32_t slot;
    uint32_t flags;
    uint64_t request_id;
    uint64_t bytes;         /* CS_ALL_BYTES = everything swappable */
};

struct cs_msg_room_reply {
    uint32_t slot;
    int32_t status;         /* 0: room made; else CUDA_ERROR_OUT_OF_MEMORY */
    uint64_t request_id;
};

struct cs_msg_error {
    uint32_t code;
    uint32_t pad;
    char text[CS_TEXT_LEN];
};

struct cs_msg_ctl_status {
    uint32_t flags;         /* reserved, 0 */
    uint32_t pad;
};

/* One knob change (`cusharectl set KEY=VALUE`). A batch is sent as pairs
 * flagged CS_CTL_SET_MORE followed by one unflagged pair: the daemon checks
 * each pair as it arrives and applies the whole batch at the last one, or
 * none of it. Every CTL_SET gets one CTL_DONE. */
struct cs_msg_ctl_set {
    uint32_t flags;         /* CS_CTL_SET_* */
    uint32_t pad;
    char key[CS_KEY_LEN];
    char value[CS_VALUE_LEN];
};

struct cs_msg_ctl_drain {
    uint32_t on;            /* 1 drain, 0 undrain */
    uint32_t pad;
    char gpu[CS_NAME_LEN];  /* UUID text or index */
};

/* An endpoint: a socket of its own, made for one allocation (a Kubernetes
 * container), whose connections may claim at most these terms (the grant,
 * sched/access.h). Needs the daemon's uid or root; answered by one CTL_DONE
 * whose text is the socket path (CREATE) or -errno and a reason. */
struct cs_msg_ctl_endpoint {
    uint32_t op;            /* enum cs_ep_op */
    uint32_t max_priority;  /* best class its clients may claim (enum cs_priority) */
    uint32_t max_weight;    /* 1 .. CS_WEIGHT_MAX */
    uint32_t max_conns;     /* connections open at once; 0 = the daemon's default */
    uint64_t mem_limit;     /* per-GPU bytes, 0 = none */
    uint32_t ngpus;         /* entries of gpus used; 0 = any GPU of the node */
    uint32_t pad;
    uint8_t gpus[CS_MAX_DEVICES][CS_UUID_LEN];
    char id[CS_NAME_LEN];   /* 1-63 of [A-Za-z0-9._-], not starting with '.' */
    char pod[CS_NAME_LEN];  /* "" when unknown */
    char ns[CS_NAME_LEN];
};

/* The pod, namespace and container an existing endpoint's clients belong to:
 * what the device plugin learns from the kubelet's pod-resources API after
 * Allocate, when the endpoint already exists. Needs the daemon's uid or
 * root; answered by one CTL_DONE. The daemon only fills in what the
 * endpoint does not name yet, never changes what it names (-EEXIST), and
 * applies it to the connections already open on the endpoint as well. */
struct cs_msg_ctl_ep_identity {
    uint32_t flags;         /* reserved, 0 */
    uint32_t pad;
    char id[CS_NAME_LEN];   /* the endpoint */
    char pod[CS_NAME_LEN];  /* 1-63 of [A-Za-z0-9._-] starting with a letter or digit */
    char ns[CS_NAME_LEN];   /* the same */
    char container[CS_NAME_LEN]; /* the same, or "" when unknown */
};

/* Daemon-wide part of a status reply. */
struct cs_msg_ctl_daemon {
    uint32_t pid;
    uint32_t uid;               /* owner: control changes need it or root */
    uint64_t epoch;
    uint64_t uptime_ns;
    uint32_t mode;              /* enum cs_mode */
    uint32_t metrics_port;      /* 0 = no metrics endpoint */
    uint32_t clients;           /* registered GPU clients */
    uint32_t connections;       /* open connections, control ones included */
    uint64_t connections_total; /* accepted since start */
    uint64_t protocol_errors;   /* connections closed for a bad record */
    uint64_t dropped_slow;      /* connections dropped for not reading */
    uint32_t quantum_floor_ms;
    uint32_t quantum_cap_ms;
    uint32_t idle_release_ms;
    uint32_t revoke_timeout_ms;
    uint32_t reconnect_grace_ms;
    uint32_t force_release;     /* 0 or 1 */
    uint64_t mem_reserve;       /* bytes per GPU */
    uint32_t switch_cost_ppm;   /* switch_cost_target in millionths */
    uint32_t pad;
};

struct cs_msg_ctl_gpu {
    uint32_t index;
    uint32_t mode;          /* enum cs_mode */
    uint8_t uuid[CS_UUID_LEN];
    uint32_t clients;
    uint32_t draining;      /* 0 or 1 */
    uint32_t holders;       /* HELD or REVOKING */
    uint32_t waiters;
    uint32_t restoring;     /* 1 while waiting for pre-restart holders */
    uint32_t quantum_ms;    /* current quantum */
    uint64_t mem_total;
    uint64_t mem_reserve;
    uint64_t mem_resident;  /* sum over clients */
    uint64_t switches;
    uint64_t idle_ns;
    uint64_t busy_ns;
    uint64_t switch_ns;     /* smoothed REVOKE -> next GRANT time */
    uint64_t revoke_timeouts;
    uint64_t forced_releases;
};

/* CTL_CLIENT.flags (issue 17; 0 from an older daemon, whose field was pad) */
#define CS_CTL_CLIENT_UNRESPONSIVE 0x1u /* missed a deadline or stopped: asked nothing more */
#define CS_CTL_CLIENT_DEMOTED 0x2u      /* ...and its class and weight lowered to low, 1 */
#define CS_CTL_CLIENT_FLAGS 0x3u

struct cs_msg_ctl_client {
    uint64_t client_id;
    uint32_t pid;
    uint32_t uid;
    uint32_t gpu_index;
    uint32_t priority;
    uint32_t weight;
    uint32_t state;         /* enum cs_lease_state */
    uint32_t idle;          /* last USAGE said idle */
    uint32_t flags;         /* CS_CTL_CLIENT_* */
    uint64_t gpu_ns;
    uint64_t wait_ns;
    uint64_t slices;
    uint64_t preemptions;
    uint64_t revokes;
    uint64_t forced;        /* leases taken back after revoke_timeout */
    uint64_t resident;
    uint64_t swapped;
    uint64_t unswappable;
    uint64_t footprint;
    uint64_t swap_ns;
    uint64_t mem_limit;
    uint64_t vtime;         /* weighted virtual time, ns / weight */
    char name[CS_NAME_LEN];
    char pod[CS_NAME_LEN];
    char ns[CS_NAME_LEN];
};

/* Memory and swap of one GPU: follows its CTL_GPU in a status reply. */
struct cs_msg_ctl_gpu_mem {
    uint32_t index;         /* the CTL_GPU's */
    uint32_t share_turns;   /* turns given to a starved lower class (saturates; 0 from an
                               older daemon, whose field was pad) */
    uint64_t capacity;      /* what the clients may keep resident (memory model) */
    uint64_t client_reserve;/* bytes set aside per attached client */
    uint64_t footprint;     /* sum of the clients' footprints */
    uint64_t swapped;       /* sum of the clients' swapped bytes */
    uint64_t swap_out_bytes;
    uint64_t swap_out_ns;
    uint64_t swap_in_bytes;
    uint64_t swap_in_ns;
    uint64_t evictions;     /* EVICTs sent (PREPARE not counted) */
    uint64_t prefetches;    /* PREFETCHes sent */
    uint64_t prefetch_bytes;/* bytes prefetches copied back */
    uint64_t prepares;      /* EVICT PREPAREs sent */
    uint64_t room_made;     /* ROOMs answered 0 */
    uint64_t room_refused;  /* ROOMs answered CUDA_ERROR_OUT_OF_MEMORY */
    uint64_t room_waits;    /* grants held back until evictions made room */
};

/* Swap of one client on one GPU: follows its CTL_CLIENT in a status reply. */
struct cs_msg_ctl_client_mem {
    uint64_t client_id;
    uint32_t gpu_index;
    uint32_t overhead_mib;  /* what the driver charges its process beyond its
                               allocations, measured (MiB; 0: not measured, or
                               an older daemon, whose field was pad) */
    uint64_t swap_out_bytes;
    uint64_t swap_out_ns;   /* RELEASE.swap_ns + EVICTED.ns */
    uint64_t swap_in_bytes;
    uint64_t swap_in_ns;    /* RESTORED.ns + PREFETCHED.ns */
    uint64_t evictions;     /* EVICTs received */
    uint64_t prefetches;    /* PREFETCHes received */
    uint64_t prepares;      /* EVICT PREPAREs received */
    uint64_t rooms;         /* its ROOMs answered 0 */
    uint64_t rooms_refused; /* its ROOMs answered CUDA_ERROR_OUT_OF_MEMORY */
    uint64_t drain_ns;      /* RELEASE.drain_ns */
};

/* Timeslice of one client on one GPU: follows its CTL_CLIENT (and
 * CTL_CLIENT_MEM) in a status reply to a CS_HELLO_TSG control connection. */
struct cs_msg_ctl_client_tsg {
    uint64_t client_id;
    uint32_t gpu_index;
    uint32_t reported;      /* 1: the client sent TSG_STATE (0: an older client) */
    uint32_t state;         /* enum cs_tsg_mech, from its TSG_STATE */
    int32_t status;
    uint64_t asked_us;      /* last TIMESLICE sent for this GPU (0 = defaults) */
    uint64_t requested_us;  /* from its TSG_STATE */
    uint64_t applied_us;
    uint32_t groups;
    uint32_t pad;
    char reason[CS_TEXT_LEN];
};

/* LC/BE behaviour of one client on one GPU: follows its CTL_CLIENT (and
 * the records after it) in a status reply to a CS_HELLO_LC control
 * connection. */
struct cs_msg_ctl_client_lc {
    uint64_t client_id;
    uint32_t gpu_index;
    uint32_t mechanism;     /* enum cs_lc_mech: what protects LC jobs from it / it from others */
    uint32_t mode;          /* enum cs_lc_mode last sent */
    uint32_t param_us;
    uint64_t lc_preempted;  /* revoked because a latency-critical job had work */
    uint64_t bursts;        /* LC_BURSTs reported */
    uint64_t burst_wait_p50_ns; /* from its LC_BURSTs; 0 when none */
    uint64_t burst_wait_p99_ns;
    uint64_t burst_busy_p50_ns;
    uint64_t burst_busy_p99_ns;
};

/* A client's labels beyond CTL_CLIENT's: follows its CTL_CLIENT (and the
 * records after it) in a status reply to a CS_HELLO_LABELS control
 * connection. */
struct cs_msg_ctl_client_labels {
    uint64_t client_id;
    uint32_t gpu_index;
    uint32_t pad;
    char container[CS_NAME_LEN]; /* "" when unknown or not believed */
};

/* The daemon's connection limits and what they refused, by reason: follows
 * CTL_DAEMON in a status reply to a CS_HELLO_LIMITS control connection. */
struct cs_msg_ctl_limits {
    uint32_t max_conns_per_uid;
    uint32_t hello_timeout_ms;
    uint32_t owner_reserve;     /* connections beyond max_clients for the owner and root */
    uint32_t node_gpus;         /* the node's GPUs (the only ones clients may attach) */
    uint64_t refused_max_clients;       /* HELLOs beyond max_clients */
    uint64_t refused_max_conns_per_uid; /* connections beyond a uid's cap */
    uint64_t refused_connections;       /* connections beyond the total cap */
    uint64_t refused_unknown_gpu;       /* ATTACHes of a GPU not of the node */
    uint64_t refused_hello_timeout;     /* connections without HELLO in time */
};

/* CTL_CLIENT_LC.mechanism */
enum cs_lc_mech {
    CS_LC_MECH_NONE = 0,    /* no latency-critical job beside it, or not a BE job */
    CS_LC_MECH_TSG = 1,     /* a BE job kept short by channel-group timeslices */
    CS_LC_MECH_GATE = 2,    /* a BE job gated while the LC job has work */
    CS_LC_MECH_LC = 3,      /* the latency-critical job itself */
    CS_LC_MECH_MAX = 3,
};

/* CTL_VIEW.flags */
#define CS_CTL_VIEW_ENDPOINT 0x1u /* the asker came through an endpoint */

/* First record of a view's status reply: who asked, as the daemon sees it. */
struct cs_msg_ctl_view {
    uint32_t pid;           /* the asker's pid in the daemon's pid namespace */
    uint32_t flags;         /* CS_CTL_VIEW_* */
    uint64_t mem_limit;     /* the connection's granted per-GPU limit, 0 = none */
};

struct cs_msg_ctl_done {
    int32_t status;         /* 0 ok, else -errno */
    uint32_t pad;
    char text[CS_TEXT_LEN];
};

struct cs_msg {
    uint16_t type;
    union {
        struct cs_msg_hello hello;
        struct cs_msg_welcome welcome;
        struct cs_msg_attach attach;
        struct cs_msg_acquire acquire;
        struct cs_msg_release release;
        struct cs_msg_usage usage;
        struct cs_msg_evicted evicted;
        struct cs_msg_room room;
        struct cs_msg_restored restored;
        struct cs_msg_prefetch prefetch;
        struct cs_msg_prefetched prefetched;
        struct cs_msg_timeslice timeslice;
        struct cs_msg_tsg_state tsg_state;
        struct cs_msg_lc_mode lc_mode;
        struct cs_msg_lc_burst lc_burst;
        struct cs_msg_pinned pinned;
        struct cs_msg_borrow borrow;
        struct cs_msg_lend lend;
        struct cs_msg_return ret;
        struct cs_msg_labels labels;
        struct cs_msg_terms terms;
        struct cs_msg_grant grant;
        struct cs_msg_revoke revoke;
        struct cs_msg_evict evict;
        struct cs_msg_room_reply room_reply;
        struct cs_msg_error error;
        struct cs_msg_ctl_status ctl_status;
        struct cs_msg_ctl_set ctl_set;
        struct cs_msg_ctl_drain ctl_drain;
        struct cs_msg_ctl_endpoint ctl_endpoint;
        struct cs_msg_ctl_ep_identity ctl_ep_identity;
        struct cs_msg_ctl_daemon ctl_daemon;
        struct cs_msg_ctl_gpu ctl_gpu;
        struct cs_msg_ctl_client ctl_client;
        struct cs_msg_ctl_gpu_mem ctl_gpu_mem;
        struct cs_msg_ctl_client_mem ctl_client_mem;
        struct cs_msg_ctl_client_tsg ctl_client_tsg;
        struct cs_msg_ctl_client_lc ctl_client_lc;
        struct cs_msg_ctl_limits ctl_limits;
        struct cs_msg_ctl_client_labels ctl_client_labels;
        struct cs_msg_ctl_done ctl_done;
        struct cs_msg_ctl_view ctl_view;
    } u;
};

/* Encodes m into buf (at least CS_MSG_MAX bytes). Returns the record length,
 * or -1 if m's type is unknown. Strings longer than their field are cut. */
int cs_msg_encode(const struct cs_msg *m, uint8_t *buf, size_t cap);

/* Decodes and validates one record. Returns 0 and fills *m, or -1 with *why
 * (a static string) set to the first rule the record broke. */
int cs_msg_decode(const uint8_t *buf, size_t len, struct cs_msg *m, const char **why);

/* Wire size of a type's record, header included; 0 for unknown types. */
size_t cs_msg_size(uint16_t type);
const char *cs_msg_name(uint16_t type);

/* Socket helpers: one record per call, EINTR retried. cs_send returns 0 or
 * -errno; cs_recv returns 1 (message), 0 (peer closed), -errno (I/O error,
 * -EAGAIN on a non-blocking socket with nothing to read) or -EPROTO (record
 * rejected, *why set). */
int cs_send(int fd, const struct cs_msg *m);
int cs_recv(int fd, struct cs_msg *m, const char **why);
/* The same carrying descriptors (SCM_RIGHTS). cs_send_fds sends n (0 ..
 * CS_LEND_MAX) with the record. cs_recv_fds takes up to cap into fds
 * (close-on-exec) and says how many in *nfds; a record that came with more
 * than cap, or whose descriptors were cut off, is -EPROTO with every
 * descriptor that came closed. The caller owns what it got, and must close
 * what the message does not account for. */
int cs_send_fds(int fd, const struct cs_msg *m, const int *fds, int n);
/* One encoded record with 1 .. CS_LEND_MAX descriptors, without blocking:
 * sendmsg(2)'s answer. */
ssize_t cs_send_record_fds(int fd, const uint8_t *buf, size_t len, const int *fds, int n);
int cs_recv_fds(int fd, struct cs_msg *m, const char **why, int *fds, int cap, int *nfds);

/* The default socket path: /run/cushare/cushared.sock for root, else
 * $XDG_RUNTIME_DIR/cushare/cushared.sock, else /tmp/cushare-<uid>/cushared.sock.
 * Returns 0, or -1 if buf is too small. */
int cs_default_socket_path(char *buf, size_t cap);

/* Connects a SOCK_SEQPACKET client socket (close-on-exec). Returns fd or -errno. */
int cs_connect(const char *path);
/* The same, non-blocking: it never waits, for a loop that must not (a
 * unix socket connects at once or fails; -EAGAIN: the listener's backlog is
 * full). */
int cs_connect_nonblock(const char *path);

#endif
