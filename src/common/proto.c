/* proto.c: encoding, decoding and validation of protocol records.
 *
 * Every message type is described once, as a table of fields with their
 * kind, place in the C struct and permitted range. One encoder and one
 * decoder walk those tables, so a new message is a new table, not new
 * parsing code, and every field of every message is validated the same way.
 * The decoder never trusts a length or an offset from the wire: record
 * lengths are fixed per type and checked before a single field is read.
 */
#include "common/proto.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

enum field_kind { F_U32, F_I32, F_U64, F_BYTES, F_STR, F_PAD32, F_U32A };

struct field {
    uint8_t kind;
    uint16_t off;  /* offset in the C body struct */
    uint16_t len;  /* bytes on the wire (BYTES/STR); derived for numbers */
    uint64_t lo;   /* numeric range, inclusive */
    uint64_t hi;
};

struct msgdesc {
    uint16_t type;
    const char *name;
    const struct field *fields;
    size_t nfields;
    /* A rule across fields (the ranges are the table's), or NULL: the
     * reason the decoded body breaks it, NULL when it does not. */
    const char *(*check)(const struct cs_msg *m);
};

#define ANY32 0, UINT32_MAX
#define ANY64 0, UINT64_MAX
#define BYTES62 0, (1ull << 62)
/* The range is passed as one or two arguments (ANY32 expands to two), hence
 * the extra expansion step. */
#define U32(s, f, ...) U32_(s, f, __VA_ARGS__)
#define U64(s, f, ...) U64_(s, f, __VA_ARGS__)
#define U32_(s, f, lo, hi) {F_U32, offsetof(struct s, f), 4, lo, hi}
#define U64_(s, f, lo, hi) {F_U64, offsetof(struct s, f), 8, lo, hi}
#define I32(s, f) {F_I32, offsetof(struct s, f), 4, ANY32}
#define PAD(s, f) {F_PAD32, offsetof(struct s, f), 4, 0, 0}
#define BYTES(s, f) {F_BYTES, offsetof(struct s, f), sizeof(((struct s *)0)->f), 0, 0}
/* An array of u32, every element in [lo, hi] */
#define U32A(s, f, ...) U32A_(s, f, __VA_ARGS__)
#define U32A_(s, f, lo, hi) {F_U32A, offsetof(struct s, f), sizeof(((struct s *)0)->f), lo, hi}
#define STR(s, f) {F_STR, offsetof(struct s, f), sizeof(((struct s *)0)->f), 0, 0}
#define SLOT(s) U32(s, slot, 0, CS_MAX_DEVICES - 1)

static const struct field f_hello[] = {
    U32(cs_msg_hello, flags, 0,
        CS_HELLO_RECONNECT | CS_HELLO_CONTROL | CS_HELLO_TSG | CS_HELLO_LC | CS_HELLO_PIN |
            CS_HELLO_TERMS | CS_HELLO_LIMITS | CS_HELLO_POOL | CS_HELLO_LABELS |
            CS_HELLO_VIEW | CS_HELLO_RESTORED | CS_HELLO_GIVEBACK),
    U32(cs_msg_hello, priority, 0, CS_PRIO_COUNT - 1),
    U32(cs_msg_hello, weight, 1, CS_WEIGHT_MAX),
    U32(cs_msg_hello, proto_min, 1, CS_PROTO_VERSION),
    U64(cs_msg_hello, mem_limit, BYTES62),
    U64(cs_msg_hello, prev_client_id, ANY64),
    STR(cs_msg_hello, name),
    STR(cs_msg_hello, pod),
    STR(cs_msg_hello, ns),
};
static const struct field f_welcome[] = {
    U64(cs_msg_welcome, client_id, 1, UINT64_MAX),
    U64(cs_msg_welcome, epoch, ANY64),
    U32(cs_msg_welcome, idle_ms, 1, 3600000),
    U32(cs_msg_welcome, flags, 0, 0),
};
static const struct field f_attach[] = {
    SLOT(cs_msg_attach),
    U32(cs_msg_attach, flags, 0, CS_ATTACH_HELD | CS_ATTACH_WAITING),
    BYTES(cs_msg_attach, uuid),
    U64(cs_msg_attach, total_mem, BYTES62),
    U64(cs_msg_attach, lease_id, ANY64),
};
static const struct field f_acquire[] = {
    SLOT(cs_msg_acquire),
    U32(cs_msg_acquire, flags, 0, 0),
};
static const struct field f_release[] = {
    SLOT(cs_msg_release),
    U32(cs_msg_release, reason, 1, CS_RELEASE_REASON_MAX),
    U64(cs_msg_release, lease_id, ANY64),
    U64(cs_msg_release, drain_ns, ANY64),
    U64(cs_msg_release, swap_ns, ANY64),
    U64(cs_msg_release, swapped_bytes, BYTES62),
};
static const struct field f_usage[] = {
    SLOT(cs_msg_usage),
    U32(cs_msg_usage, flags, 0, CS_USAGE_IDLE),
    U64(cs_msg_usage, resident, BYTES62),
    U64(cs_msg_usage, swapped, BYTES62),
    U64(cs_msg_usage, unswappable, BYTES62),
    U64(cs_msg_usage, footprint, BYTES62),
    U64(cs_msg_usage, submissions, ANY64),
};
static const struct field f_evicted[] = {
    SLOT(cs_msg_evicted),
    I32(cs_msg_evicted, status),
    U64(cs_msg_evicted, request_id, ANY64),
    U64(cs_msg_evicted, bytes, BYTES62),
    U64(cs_msg_evicted, ns, ANY64),
};
static const struct field f_room[] = {
    SLOT(cs_msg_room),
    U32(cs_msg_room, flags, 0, CS_ROOM_CONTEXT),
    U64(cs_msg_room, request_id, ANY64),
    U64(cs_msg_room, bytes, 1, 1ull << 62),
};
static const struct field f_restored[] = {
    SLOT(cs_msg_restored),
    I32(cs_msg_restored, status),
    U64(cs_msg_restored, lease_id, ANY64),
    U64(cs_msg_restored, bytes, BYTES62),
    U64(cs_msg_restored, ns, ANY64),
};
static const struct field f_prefetch[] = {
    SLOT(cs_msg_prefetch),
    U32(cs_msg_prefetch, flags, 0, 0),
    U64(cs_msg_prefetch, request_id, ANY64),
    U64(cs_msg_prefetch, bytes, 1, 1ull << 62),
};
static const struct field f_prefetched[] = {
    SLOT(cs_msg_prefetched),
    I32(cs_msg_prefetched, status),
    U64(cs_msg_prefetched, request_id, ANY64),
    U64(cs_msg_prefetched, bytes, BYTES62),
    U64(cs_msg_prefetched, ns, ANY64),
};
static const struct field f_timeslice[] = {
    SLOT(cs_msg_timeslice),
    U32(cs_msg_timeslice, flags, 0, 0),
    U64(cs_msg_timeslice, timeslice_us, 0, CS_TIMESLICE_MAX_US),
};
static const struct field f_tsg_state[] = {
    U32(cs_msg_tsg_state, state, 0, CS_TSG_MECH_MAX),
    I32(cs_msg_tsg_state, status),
    U64(cs_msg_tsg_state, requested_us, 0, CS_TIMESLICE_MAX_US),
    U64(cs_msg_tsg_state, applied_us, 0, CS_TIMESLICE_MAX_US),
    U32(cs_msg_tsg_state, groups, ANY32),
    PAD(cs_msg_tsg_state, pad),
    STR(cs_msg_tsg_state, reason),
};
static const struct field f_grant[] = {
    SLOT(cs_msg_grant),
    U32(cs_msg_grant, quantum_ms, ANY32),
    U64(cs_msg_grant, lease_id, ANY64),
};
static const struct field f_revoke[] = {
    SLOT(cs_msg_revoke),
    U32(cs_msg_revoke, reason, 1, CS_REVOKE_REASON_MAX),
    U64(cs_msg_revoke, lease_id, ANY64),
    U64(cs_msg_revoke, evict_bytes, ANY64),
};
static const struct field f_evict[] = {
    SLOT(cs_msg_evict),
    U32(cs_msg_evict, flags, 0, CS_EVICT_PREPARE | CS_EVICT_GIVEBACK),
    U64(cs_msg_evict, request_id, ANY64),
    U64(cs_msg_evict, bytes, 1, UINT64_MAX),
};
static const struct field f_room_reply[] = {
    SLOT(cs_msg_room_reply),
    I32(cs_msg_room_reply, status),
    U64(cs_msg_room_reply, request_id, ANY64),
};
static const struct field f_error[] = {
    U32(cs_msg_error, code, ANY32),
    PAD(cs_msg_error, pad),
    STR(cs_msg_error, text),
};
static const struct field f_ctl_status[] = {
    U32(cs_msg_ctl_status, flags, 0, 0),
    PAD(cs_msg_ctl_status, pad),
};
static const struct field f_ctl_set[] = {
    U32(cs_msg_ctl_set, flags, 0, CS_CTL_SET_MORE),
    PAD(cs_msg_ctl_set, pad),
    STR(cs_msg_ctl_set, key),
    STR(cs_msg_ctl_set, value),
};
static const struct field f_ctl_drain[] = {
    U32(cs_msg_ctl_drain, on, 0, 1),
    PAD(cs_msg_ctl_drain, pad),
    STR(cs_msg_ctl_drain, gpu),
};
static const struct field f_ctl_endpoint[] = {
    U32(cs_msg_ctl_endpoint, op, 1, CS_EP_OP_MAX),
    U32(cs_msg_ctl_endpoint, max_priority, 0, CS_PRIO_COUNT - 1),
    U32(cs_msg_ctl_endpoint, max_weight, 1, CS_WEIGHT_MAX),
    U32(cs_msg_ctl_endpoint, max_conns, 0, 65536),
    U64(cs_msg_ctl_endpoint, mem_limit, BYTES62),
    U32(cs_msg_ctl_endpoint, ngpus, 0, CS_MAX_DEVICES),
    PAD(cs_msg_ctl_endpoint, pad),
    BYTES(cs_msg_ctl_endpoint, gpus),
    STR(cs_msg_ctl_endpoint, id),
    STR(cs_msg_ctl_endpoint, pod),
    STR(cs_msg_ctl_endpoint, ns),
};
static const struct field f_ctl_ep_identity[] = {
    U32(cs_msg_ctl_ep_identity, flags, 0, 0),
    PAD(cs_msg_ctl_ep_identity, pad),
    STR(cs_msg_ctl_ep_identity, id),
    STR(cs_msg_ctl_ep_identity, pod),
    STR(cs_msg_ctl_ep_identity, ns),
    STR(cs_msg_ctl_ep_identity, container),
};
static const struct field f_ctl_daemon[] = {
    U32(cs_msg_ctl_daemon, pid, ANY32),
    U32(cs_msg_ctl_daemon, uid, ANY32),
    U64(cs_msg_ctl_daemon, epoch, ANY64),
    U64(cs_msg_ctl_daemon, uptime_ns, ANY64),
    U32(cs_msg_ctl_daemon, mode, 0, CS_MODE_MAX),
    U32(cs_msg_ctl_daemon, metrics_port, 0, 65535),
    U32(cs_msg_ctl_daemon, clients, ANY32),
    U32(cs_msg_ctl_daemon, connections, ANY32),
    U64(cs_msg_ctl_daemon, connections_total, ANY64),
    U64(cs_msg_ctl_daemon, protocol_errors, ANY64),
    U64(cs_msg_ctl_daemon, dropped_slow, ANY64),
    U32(cs_msg_ctl_daemon, quantum_floor_ms, ANY32),
    U32(cs_msg_ctl_daemon, quantum_cap_ms, ANY32),
    U32(cs_msg_ctl_daemon, idle_release_ms, ANY32),
    U32(cs_msg_ctl_daemon, revoke_timeout_ms, ANY32),
    U32(cs_msg_ctl_daemon, reconnect_grace_ms, ANY32),
    U32(cs_msg_ctl_daemon, force_release, 0, 1),
    U64(cs_msg_ctl_daemon, mem_reserve, BYTES62),
    U32(cs_msg_ctl_daemon, switch_cost_ppm, 0, 1000000),
    PAD(cs_msg_ctl_daemon, pad),
};
static const struct field f_ctl_gpu[] = {
    U32(cs_msg_ctl_gpu, index, ANY32),
    U32(cs_msg_ctl_gpu, mode, 0, CS_MODE_MAX),
    BYTES(cs_msg_ctl_gpu, uuid),
    U32(cs_msg_ctl_gpu, clients, ANY32),
    U32(cs_msg_ctl_gpu, draining, 0, 1),
    U32(cs_msg_ctl_gpu, holders, ANY32),
    U32(cs_msg_ctl_gpu, waiters, ANY32),
    U32(cs_msg_ctl_gpu, restoring, 0, 1),
    U32(cs_msg_ctl_gpu, quantum_ms, ANY32),
    U64(cs_msg_ctl_gpu, mem_total, BYTES62),
    U64(cs_msg_ctl_gpu, mem_reserve, BYTES62),
    U64(cs_msg_ctl_gpu, mem_resident, ANY64),
    U64(cs_msg_ctl_gpu, switches, ANY64),
    U64(cs_msg_ctl_gpu, idle_ns, ANY64),
    U64(cs_msg_ctl_gpu, busy_ns, ANY64),
    U64(cs_msg_ctl_gpu, switch_ns, ANY64),
    U64(cs_msg_ctl_gpu, revoke_timeouts, ANY64),
    U64(cs_msg_ctl_gpu, forced_releases, ANY64),
};
static const struct field f_ctl_client[] = {
    U64(cs_msg_ctl_client, client_id, ANY64),
    U32(cs_msg_ctl_client, pid, ANY32),
    U32(cs_msg_ctl_client, uid, ANY32),
    U32(cs_msg_ctl_client, gpu_index, ANY32),
    U32(cs_msg_ctl_client, priority, 0, CS_PRIO_COUNT - 1),
    U32(cs_msg_ctl_client, weight, 1, CS_WEIGHT_MAX),
    U32(cs_msg_ctl_client, state, 0, CS_STATE_MAX),
    U32(cs_msg_ctl_client, idle, 0, 1),
    U32(cs_msg_ctl_client, flags, 0, CS_CTL_CLIENT_FLAGS),
    U64(cs_msg_ctl_client, gpu_ns, ANY64),
    U64(cs_msg_ctl_client, wait_ns, ANY64),
    U64(cs_msg_ctl_client, slices, ANY64),
    U64(cs_msg_ctl_client, preemptions, ANY64),
    U64(cs_msg_ctl_client, revokes, ANY64),
    U64(cs_msg_ctl_client, forced, ANY64),
    U64(cs_msg_ctl_client, resident, BYTES62),
    U64(cs_msg_ctl_client, swapped, BYTES62),
    U64(cs_msg_ctl_client, unswappable, BYTES62),
    U64(cs_msg_ctl_client, footprint, BYTES62),
    U64(cs_msg_ctl_client, swap_ns, ANY64),
    U64(cs_msg_ctl_client, mem_limit, BYTES62),
    U64(cs_msg_ctl_client, vtime, ANY64),
    STR(cs_msg_ctl_client, name),
    STR(cs_msg_ctl_client, pod),
    STR(cs_msg_ctl_client, ns),
};
static const struct field f_ctl_gpu_mem[] = {
    U32(cs_msg_ctl_gpu_mem, index, ANY32),
    U32(cs_msg_ctl_gpu_mem, share_turns, ANY32),
    U64(cs_msg_ctl_gpu_mem, capacity, ANY64),
    U64(cs_msg_ctl_gpu_mem, client_reserve, ANY64),
    U64(cs_msg_ctl_gpu_mem, footprint, ANY64),
    U64(cs_msg_ctl_gpu_mem, swapped, ANY64),
    U64(cs_msg_ctl_gpu_mem, swap_out_bytes, ANY64),
    U64(cs_msg_ctl_gpu_mem, swap_out_ns, ANY64),
    U64(cs_msg_ctl_gpu_mem, swap_in_bytes, ANY64),
    U64(cs_msg_ctl_gpu_mem, swap_in_ns, ANY64),
    U64(cs_msg_ctl_gpu_mem, evictions, ANY64),
    U64(cs_msg_ctl_gpu_mem, prefetches, ANY64),
    U64(cs_msg_ctl_gpu_mem, prefetch_bytes, ANY64),
    U64(cs_msg_ctl_gpu_mem, prepares, ANY64),
    U64(cs_msg_ctl_gpu_mem, room_made, ANY64),
    U64(cs_msg_ctl_gpu_mem, room_refused, ANY64),
    U64(cs_msg_ctl_gpu_mem, room_waits, ANY64),
};
static const struct field f_ctl_client_mem[] = {
    U64(cs_msg_ctl_client_mem, client_id, ANY64),
    U32(cs_msg_ctl_client_mem, gpu_index, ANY32),
    U32(cs_msg_ctl_client_mem, overhead_mib, ANY32),
    U64(cs_msg_ctl_client_mem, swap_out_bytes, ANY64),
    U64(cs_msg_ctl_client_mem, swap_out_ns, ANY64),
    U64(cs_msg_ctl_client_mem, swap_in_bytes, ANY64),
    U64(cs_msg_ctl_client_mem, swap_in_ns, ANY64),
    U64(cs_msg_ctl_client_mem, evictions, ANY64),
    U64(cs_msg_ctl_client_mem, prefetches, ANY64),
    U64(cs_msg_ctl_client_mem, prepares, ANY64),
    U64(cs_msg_ctl_client_mem, rooms, ANY64),
    U64(cs_msg_ctl_client_mem, rooms_refused, ANY64),
    U64(cs_msg_ctl_client_mem, drain_ns, ANY64),
};
static const struct field f_ctl_client_tsg[] = {
    U64(cs_msg_ctl_client_tsg, client_id, ANY64),
    U32(cs_msg_ctl_client_tsg, gpu_index, ANY32),
    U32(cs_msg_ctl_client_tsg, reported, 0, 1),
    U32(cs_msg_ctl_client_tsg, state, 0, CS_TSG_MECH_MAX),
    I32(cs_msg_ctl_client_tsg, status),
    U64(cs_msg_ctl_client_tsg, asked_us, 0, CS_TIMESLICE_MAX_US),
    U64(cs_msg_ctl_client_tsg, requested_us, 0, CS_TIMESLICE_MAX_US),
    U64(cs_msg_ctl_client_tsg, applied_us, 0, CS_TIMESLICE_MAX_US),
    U32(cs_msg_ctl_client_tsg, groups, ANY32),
    PAD(cs_msg_ctl_client_tsg, pad),
    STR(cs_msg_ctl_client_tsg, reason),
};
static const struct field f_lc_mode[] = {
    SLOT(cs_msg_lc_mode),
    U32(cs_msg_lc_mode, mode, 0, CS_LC_MODE_MAX),
    U32(cs_msg_lc_mode, param_us, 0, CS_LC_PARAM_MAX_US),
    U32(cs_msg_lc_mode, flags, 0, 0),
};
static const struct field f_pinned[] = {
    SLOT(cs_msg_pinned),
    U32(cs_msg_pinned, flags, 0, 0),
    U64(cs_msg_pinned, bytes, BYTES62),
};
static const struct field f_labels[] = {
    U32(cs_msg_labels, flags, 0, 0),
    PAD(cs_msg_labels, pad),
    STR(cs_msg_labels, container),
};
static const struct field f_borrow[] = {
    SLOT(cs_msg_borrow),
    U32(cs_msg_borrow, kind, 0, CS_PIECE_KIND_MAX),
    U64(cs_msg_borrow, request_id, ANY64),
    U32(cs_msg_borrow, count, 1, CS_LEND_MAX),
    U32(cs_msg_borrow, flags, 0, 0),
};
static const struct field f_lend[] = {
    U64(cs_msg_lend, request_id, ANY64),
    U64(cs_msg_lend, piece_size, 0, CS_PIECE_SIZE_MAX),
    U32(cs_msg_lend, count, 0, CS_LEND_MAX),
    U32(cs_msg_lend, flags, 0, 0),
    U32A(cs_msg_lend, ids, ANY32),
};
static const struct field f_return[] = {
    U32(cs_msg_return, count, 1, CS_LEND_MAX),
    U32(cs_msg_return, flags, 0, 0),
    U32A(cs_msg_return, ids, ANY32),
};

/* ids[0..count) nonzero, the rest zero: a piece list has no holes and no
 * hidden entries. */
static const char *ids_check(const uint32_t *ids, uint32_t count)
{
    for (uint32_t i = 0; i < CS_LEND_MAX; i++)
        if ((i < count) != (ids[i] != 0))
            return i < count ? "piece id 0 in the list" : "piece id after the list's end";
    return NULL;
}
static const char *lend_check(const struct cs_msg *m)
{
    if ((m->u.lend.count == 0) != (m->u.lend.piece_size == 0))
        return "piece size without pieces, or pieces without a size";
    if (m->u.lend.piece_size % (2ull << 20))
        return "piece size not a multiple of 2 MiB";
    return ids_check(m->u.lend.ids, m->u.lend.count);
}
static const char *return_check(const struct cs_msg *m)
{
    return ids_check(m->u.ret.ids, m->u.ret.count);
}
static const struct field f_terms[] = {
    U32(cs_msg_terms, priority, 0, CS_PRIO_COUNT - 1),
    U32(cs_msg_terms, weight, 1, CS_WEIGHT_MAX),
    U64(cs_msg_terms, mem_limit, BYTES62),
    U32(cs_msg_terms, flags, 0, CS_TERMS_CUT_PRIORITY | CS_TERMS_CUT_WEIGHT | CS_TERMS_CUT_MEM),
    PAD(cs_msg_terms, pad),
    STR(cs_msg_terms, text),
};
static const struct field f_lc_burst[] = {
    SLOT(cs_msg_lc_burst),
    U32(cs_msg_lc_burst, flags, 0, 0),
    U64(cs_msg_lc_burst, lease_id, ANY64),
    U64(cs_msg_lc_burst, wait_ns, ANY64),
    U64(cs_msg_lc_burst, busy_ns, ANY64),
};
static const struct field f_ctl_limits[] = {
    U32(cs_msg_ctl_limits, max_conns_per_uid, ANY32),
    U32(cs_msg_ctl_limits, hello_timeout_ms, ANY32),
    U32(cs_msg_ctl_limits, owner_reserve, ANY32),
    U32(cs_msg_ctl_limits, node_gpus, ANY32),
    U64(cs_msg_ctl_limits, refused_max_clients, ANY64),
    U64(cs_msg_ctl_limits, refused_max_conns_per_uid, ANY64),
    U64(cs_msg_ctl_limits, refused_connections, ANY64),
    U64(cs_msg_ctl_limits, refused_unknown_gpu, ANY64),
    U64(cs_msg_ctl_limits, refused_hello_timeout, ANY64),
};

static const struct field f_ctl_client_lc[] = {
    U64(cs_msg_ctl_client_lc, client_id, ANY64),
    U32(cs_msg_ctl_client_lc, gpu_index, ANY32),
    U32(cs_msg_ctl_client_lc, mechanism, 0, CS_LC_MECH_MAX),
    U32(cs_msg_ctl_client_lc, mode, 0, CS_LC_MODE_MAX),
    U32(cs_msg_ctl_client_lc, param_us, 0, CS_LC_PARAM_MAX_US),
    U64(cs_msg_ctl_client_lc, lc_preempted, ANY64),
    U64(cs_msg_ctl_client_lc, bursts, ANY64),
    U64(cs_msg_ctl_client_lc, burst_wait_p50_ns, ANY64),
    U64(cs_msg_ctl_client_lc, burst_wait_p99_ns, ANY64),
    U64(cs_msg_ctl_client_lc, burst_busy_p50_ns, ANY64),
    U64(cs_msg_ctl_client_lc, burst_busy_p99_ns, ANY64),
};
static const struct field f_ctl_view[] = {
    U32(cs_msg_ctl_view, pid, ANY32),
    U32(cs_msg_ctl_view, flags, 0, CS_CTL_VIEW_ENDPOINT),
    U64(cs_msg_ctl_view, mem_limit, BYTES62),
};
static const struct field f_ctl_client_labels[] = {
    U64(cs_msg_ctl_client_labels, client_id, ANY64),
    U32(cs_msg_ctl_client_labels, gpu_index, ANY32),
    PAD(cs_msg_ctl_client_labels, pad),
    STR(cs_msg_ctl_client_labels, container),
};
static const struct field f_ctl_done[] = {
    I32(cs_msg_ctl_done, status),
    PAD(cs_msg_ctl_done, pad),
    STR(cs_msg_ctl_done, text),
};

#define DESC(t, n, f) {t, n, f, sizeof(f) / sizeof(f[0]), NULL}
#define DESCC(t, n, f, c) {t, n, f, sizeof(f) / sizeof(f[0]), c}
static const struct msgdesc descs[] = {
    DESC(CS_MSG_HELLO, "HELLO", f_hello),
    DESC(CS_MSG_ATTACH, "ATTACH", f_attach),
    DESC(CS_MSG_ACQUIRE, "ACQUIRE", f_acquire),
    DESC(CS_MSG_RELEASE, "RELEASE", f_release),
    DESC(CS_MSG_USAGE, "USAGE", f_usage),
    DESC(CS_MSG_EVICTED, "EVICTED", f_evicted),
    DESC(CS_MSG_ROOM, "ROOM", f_room),
    DESC(CS_MSG_WELCOME, "WELCOME", f_welcome),
    DESC(CS_MSG_GRANT, "GRANT", f_grant),
    DESC(CS_MSG_REVOKE, "REVOKE", f_revoke),
    DESC(CS_MSG_EVICT, "EVICT", f_evict),
    DESC(CS_MSG_ROOM_REPLY, "ROOM_REPLY", f_room_reply),
    DESC(CS_MSG_RESTORED, "RESTORED", f_restored),
    DESC(CS_MSG_PREFETCH, "PREFETCH", f_prefetch),
    DESC(CS_MSG_PREFETCHED, "PREFETCHED", f_prefetched),
    DESC(CS_MSG_TSG_STATE, "TSG_STATE", f_tsg_state),
    DESC(CS_MSG_TIMESLICE, "TIMESLICE", f_timeslice),
    DESC(CS_MSG_LC_MODE, "LC_MODE", f_lc_mode),
    DESC(CS_MSG_LC_BURST, "LC_BURST", f_lc_burst),
    DESC(CS_MSG_PINNED, "PINNED", f_pinned),
    DESC(CS_MSG_BORROW, "BORROW", f_borrow),
    DESCC(CS_MSG_LEND, "LEND", f_lend, lend_check),
    DESCC(CS_MSG_RETURN, "RETURN", f_return, return_check),
    DESC(CS_MSG_LABELS, "LABELS", f_labels),
    DESC(CS_MSG_TERMS, "TERMS", f_terms),
    DESC(CS_MSG_ERROR, "ERROR", f_error),
    DESC(CS_MSG_CTL_STATUS, "CTL_STATUS", f_ctl_status),
    DESC(CS_MSG_CTL_SET, "CTL_SET", f_ctl_set),
    DESC(CS_MSG_CTL_DRAIN, "CTL_DRAIN", f_ctl_drain),
    DESC(CS_MSG_CTL_ENDPOINT, "CTL_ENDPOINT", f_ctl_endpoint),
    DESC(CS_MSG_CTL_EP_IDENTITY, "CTL_EP_IDENTITY", f_ctl_ep_identity),
    DESC(CS_MSG_CTL_GPU, "CTL_GPU", f_ctl_gpu),
    DESC(CS_MSG_CTL_CLIENT, "CTL_CLIENT", f_ctl_client),
    DESC(CS_MSG_CTL_DONE, "CTL_DONE", f_ctl_done),
    DESC(CS_MSG_CTL_DAEMON, "CTL_DAEMON", f_ctl_daemon),
    DESC(CS_MSG_CTL_GPU_MEM, "CTL_GPU_MEM", f_ctl_gpu_mem),
    DESC(CS_MSG_CTL_CLIENT_MEM, "CTL_CLIENT_MEM", f_ctl_client_mem),
    DESC(CS_MSG_CTL_CLIENT_TSG, "CTL_CLIENT_TSG", f_ctl_client_tsg),
    DESC(CS_MSG_CTL_CLIENT_LC, "CTL_CLIENT_LC", f_ctl_client_lc),
    DESC(CS_MSG_CTL_LIMITS, "CTL_LIMITS", f_ctl_limits),
    DESC(CS_MSG_CTL_VIEW, "CTL_VIEW", f_ctl_view),
    DESC(CS_MSG_CTL_CLIENT_LABELS, "CTL_CLIENT_LABELS", f_ctl_client_labels),
};

static const struct msgdesc *desc_of(uint16_t type)
{
    for (size_t i = 0; i < sizeof descs / sizeof descs[0]; i++)
        if (descs[i].type == type)
            return &descs[i];
    return NULL;
}

static size_t body_size(const struct msgdesc *d)
{
    size_t n = 0;
    for (size_t i = 0; i < d->nfields; i++)
        n += d->fields[i].len;
    return n;
}

size_t cs_msg_size(uint16_t type)
{
    const struct msgdesc *d = desc_of(type);
    return d ? CS_HDR_SIZE + body_size(d) : 0;
}

const char *cs_msg_name(uint16_t type)
{
    const struct msgdesc *d = desc_of(type);
    return d ? d->name : "UNKNOWN";
}

/* ---- little-endian primitives (byte by byte: no alignment, any host) ---- */

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

int cs_msg_encode(const struct cs_msg *m, uint8_t *buf, size_t cap)
{
    const struct msgdesc *d = desc_of(m->type);
    if (!d || cap < CS_HDR_SIZE + body_size(d))
        return -1;
    put_le(buf, CS_PROTO_MAGIC, 4);
    put_le(buf + 4, CS_PROTO_VERSION, 2);
    put_le(buf + 6, m->type, 2);
    const uint8_t *body = (const uint8_t *)&m->u;
    uint8_t *p = buf + CS_HDR_SIZE;
    for (size_t i = 0; i < d->nfields; i++) {
        const struct field *f = &d->fields[i];
        const uint8_t *src = body + f->off;
        uint32_t v32;
        uint64_t v64;
        switch (f->kind) {
        case F_U32:
        case F_I32:
            memcpy(&v32, src, 4);
            put_le(p, v32, 4);
            break;
        case F_PAD32:
            put_le(p, 0, 4);
            break;
        case F_U64:
            memcpy(&v64, src, 8);
            put_le(p, v64, 8);
            break;
        case F_BYTES:
            memcpy(p, src, f->len);
            break;
        case F_U32A:
            for (uint16_t k = 0; k < f->len; k += 4) {
                memcpy(&v32, src + k, 4);
                put_le(p + k, v32, 4);
            }
            break;
        case F_STR:
            /* NUL-pad; always leave a terminator inside the field. */
            memset(p, 0, f->len);
            memcpy(p, src, strnlen((const char *)src, f->len - 1u));
            break;
        }
        p += f->len;
    }
    return (int)(p - buf);
}

static bool str_ok(const uint8_t *p, size_t len)
{
    size_t n = 0;
    while (n < len && p[n] != 0) {
        if (p[n] < 0x20 || p[n] > 0x7e)
            return false;
        n++;
    }
    if (n == len)
        return false; /* no terminator inside the field */
    for (; n < len; n++) /* NUL padding only: no hidden bytes after it */
        if (p[n] != 0)
            return false;
    return true;
}

static int decode_field(const struct field *f, const uint8_t *p, uint8_t *dst, const char **why)
{
    uint64_t v;
    switch (f->kind) {
    case F_U32:
    case F_I32:
        v = get_le(p, 4);
        if (f->kind == F_U32 && (v < f->lo || v > f->hi)) {
            *why = "field out of range";
            return -1;
        }
        uint32_t v32 = (uint32_t)v;
        memcpy(dst, &v32, 4);
        return 0;
    case F_PAD32:
        if (get_le(p, 4) != 0) {
            *why = "non-zero padding";
            return -1;
        }
        memset(dst, 0, 4);
        return 0;
    case F_U64:
        v = get_le(p, 8);
        if (v < f->lo || v > f->hi) {
            *why = "field out of range";
            return -1;
        }
        memcpy(dst, &v, 8);
        return 0;
    case F_BYTES:
        memcpy(dst, p, f->len);
        return 0;
    case F_U32A:
        for (uint16_t k = 0; k < f->len; k += 4) {
            v = get_le(p + k, 4);
            if (v < f->lo || v > f->hi) {
                *why = "field out of range";
                return -1;
            }
            uint32_t e = (uint32_t)v;
            memcpy(dst + k, &e, 4);
        }
        return 0;
    case F_STR:
        if (!str_ok(p, f->len)) {
            *why = "malformed string field";
            return -1;
        }
        memcpy(dst, p, f->len);
        return 0;
    }
    *why = "internal: bad field kind";
    return -1;
}

int cs_msg_decode(const uint8_t *buf, size_t len, struct cs_msg *m, const char **why)
{
    static const char *ignored;
    if (!why)
        why = &ignored;
    if (len < CS_HDR_SIZE) {
        *why = "record shorter than the header";
        return -1;
    }
    if (get_le(buf, 4) != CS_PROTO_MAGIC) {
        *why = "bad magic";
        return -1;
    }
    if (get_le(buf + 4, 2) != CS_PROTO_VERSION) {
        *why = "unsupported protocol version";
        return -1;
    }
    uint16_t type = (uint16_t)get_le(buf + 6, 2);
    const struct msgdesc *d = desc_of(type);
    if (!d) {
        *why = "unknown message type";
        return -1;
    }
    if (len != CS_HDR_SIZE + body_size(d)) {
        *why = "wrong record length for its type";
        return -1;
    }
    memset(m, 0, sizeof *m);
    m->type = type;
    uint8_t *body = (uint8_t *)&m->u;
    const uint8_t *p = buf + CS_HDR_SIZE;
    for (size_t i = 0; i < d->nfields; i++) {
        if (decode_field(&d->fields[i], p, body + d->fields[i].off, why) < 0)
            return -1;
        p += d->fields[i].len;
    }
    const char *broke = d->check ? d->check(m) : NULL;
    if (broke) {
        *why = broke;
        return -1;
    }
    return 0;
}

/* ---- sockets ------------------------------------------------------------ */

int cs_send(int fd, const struct cs_msg *m)
{
    uint8_t buf[CS_MSG_MAX];
    int n = cs_msg_encode(m, buf, sizeof buf);
    if (n < 0)
        return -EINVAL;
    for (;;) {
        ssize_t w = send(fd, buf, (size_t)n, MSG_NOSIGNAL);
        if (w == n)
            return 0;
        if (w >= 0)
            return -EMSGSIZE; /* SEQPACKET sends whole records or fails */
        if (errno != EINTR)
            return -errno;
    }
}

ssize_t cs_send_record_fds(int fd, const uint8_t *buf, size_t len, const int *fds, int n)
{
    union {
        char b[CMSG_SPACE(sizeof(int) * CS_LEND_MAX)];
        struct cmsghdr align;
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct iovec iov = {(void *)buf, len};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b,
                        .msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n)};
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
    memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)n);
    return sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
}

int cs_send_fds(int fd, const struct cs_msg *m, const int *fds, int n)
{
    if (n <= 0)
        return cs_send(fd, m);
    if (n > CS_LEND_MAX)
        return -EINVAL;
    uint8_t buf[CS_MSG_MAX];
    int len = cs_msg_encode(m, buf, sizeof buf);
    if (len < 0)
        return -EINVAL;
    for (;;) {
        ssize_t w = cs_send_record_fds(fd, buf, (size_t)len, fds, n);
        if (w == len)
            return 0;
        if (w >= 0)
            return -EMSGSIZE;
        if (errno != EINTR)
            return -errno;
    }
}

/* Descriptors of a received control block into fds (up to cap); every one
 * beyond cap is closed. Returns how many there were in all. */
static int take_fds(struct msghdr *mh, int *fds, int cap, int *kept)
{
    int all = 0;
    *kept = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        int n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        for (int i = 0; i < n; i++, all++) {
            int d;
            memcpy(&d, CMSG_DATA(c) + sizeof(int) * (size_t)i, sizeof d);
            if (*kept < cap)
                fds[(*kept)++] = d;
            else
                close(d);
        }
    }
    return all;
}

int cs_recv_fds(int fd, struct cs_msg *m, const char **why, int *fds, int cap, int *nfds)
{
    uint8_t buf[CS_MSG_MAX + 1];
    union {
        char b[CMSG_SPACE(sizeof(int) * CS_LEND_MAX)];
        struct cmsghdr align;
    } ctl;
    *nfds = 0;
    for (;;) {
        struct iovec iov = {buf, sizeof buf};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b,
                            .msg_controllen = sizeof ctl.b};
        ssize_t r = recvmsg(fd, &mh, MSG_TRUNC | MSG_CMSG_CLOEXEC);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        int kept, all = take_fds(&mh, fds, cap, &kept);
        const char *bad = NULL;
        if ((mh.msg_flags & MSG_CTRUNC) || all > kept)
            bad = "more descriptors than the record may carry";
        else if (r == 0 && kept == 0)
            return 0;
        else if ((size_t)r > CS_MSG_MAX)
            bad = "record longer than any message";
        else if (cs_msg_decode(buf, (size_t)r, m, &bad) == 0)
            bad = NULL;
        if (bad) {
            for (int i = 0; i < kept; i++)
                close(fds[i]);
            if (why)
                *why = bad;
            return -EPROTO;
        }
        *nfds = kept;
        return 1;
    }
}

int cs_recv(int fd, struct cs_msg *m, const char **why)
{
    uint8_t buf[CS_MSG_MAX + 1];
    for (;;) {
        ssize_t r = recv(fd, buf, sizeof buf, MSG_TRUNC);
        if (r == 0)
            return 0;
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if ((size_t)r > CS_MSG_MAX) {
            if (why)
                *why = "record longer than any message";
            return -EPROTO;
        }
        if (cs_msg_decode(buf, (size_t)r, m, why) < 0)
            return -EPROTO;
        return 1;
    }
}

int cs_default_socket_path(char *buf, size_t cap)
{
    int n;
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    if (geteuid() == 0)
        n = snprintf(buf, cap, "/run/cushare/cushared.sock");
    else if (xdg && xdg[0] == '/')
        n = snprintf(buf, cap, "%s/cushare/cushared.sock", xdg);
    else
        n = snprintf(buf, cap, "/tmp/cushare-%u/cushared.sock", (unsigned)geteuid());
    return (n < 0 || (size_t)n >= cap) ? -1 : 0;
}

static int connect_with(const char *path, int flags)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path)
        return -ENAMETOOLONG;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | flags, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

int cs_connect(const char *path)
{
    return connect_with(path, 0);
}

int cs_connect_nonblock(const char *path)
{
    return connect_with(path, SOCK_NONBLOCK);
}
