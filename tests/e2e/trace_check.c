/* trace_check: analyses a FAKECUDA_TRACE kernel trace for the end-to-end
 * scheduling tests (tests/e2e). One line per executed kernel:
 *   <device> <pid> <context id> <kernel name> <start ns> <end ns>
 * (CLOCK_MONOTONIC). Output is `key=value` lines for the shell to read.
 *
 *   trace_check TRACE overlap
 *       Kernels of different (pid, context) on one device that overlap in
 *       time: prints `overlaps=N` and the first few; exit 1 when N > 0.
 *   trace_check TRACE summary
 *       Per pid: `pid=P kernels=N first_start=T last_end=T busy_ns=B
 *       max_kernel_ns=K runs=R`, where a run is a maximal sequence of the
 *       pid's kernels with no other pid's kernel starting in between
 *       (in exclusive mode, one run per lease at most).
 *   trace_check TRACE devices
 *       Per pid and device, in that order: `pid=P dev=D kernels=N
 *       first_start=T last_end=T busy_ns=B`: which GPUs each process
 *       ran on (multi-GPU jobs, tests/e2e/e2e_multigpu.sh).
 *   trace_check TRACE shares [PID...]
 *       The window where every pid (those given, or all in the trace) is
 *       running: from the latest first kernel start to the earliest last
 *       kernel end. Prints `window_ns=W` and per pid `pid=P busy_ns=B
 *       share=S`: its kernel time inside the window over everyone's.
 *   trace_check TRACE first PID [AFTER_NS]
 *       `start=T end=E` of PID's first kernel starting at or after AFTER_NS
 *       (default 0); exit 1 if there is none.
 *   trace_check TRACE latency PID SUBMIT_NS
 *       For work PID submitted at SUBMIT_NS: `latency_ns=L start=T` of its
 *       first kernel starting at or after SUBMIT_NS (L = T - SUBMIT_NS),
 *       and `prev_pid=Q prev_start=S prev_end=E` of the last kernel of
 *       another pid started before SUBMIT_NS (prev_pid=0 if none) and
 *       `own_prev_end=E` of PID's last kernel that ended before SUBMIT_NS
 *       (0 if none). Exit 1 if PID has no kernel after SUBMIT_NS.
 *   trace_check TRACE handoffs FROM_PID TO_PID
 *       Every point where the trace, in start order, passes from a kernel
 *       of FROM_PID straight to one of TO_PID: `from_end=E to_start=S
 *       gap_ns=G` (G = S - E, negative if they overlap).
 *   trace_check TRACE gaps FROM_NS TO_NS OVER_NS PID...
 *       The union of the given pids' kernels (every device) inside the
 *       window [FROM_NS, TO_NS], and the gaps in it: the times when none of
 *       them had a kernel running, the window's start and end included (a
 *       stall at either edge is a stall). Prints `window_ns=W busy_ns=B
 *       longest_gap_ns=G gap_start=S gap_end=E gaps_over=N` (B: the union's
 *       length; N: gaps longer than OVER_NS), then `gap start=S end=E
 *       gap_ns=G` for the first 20 of those. For "no honest job was stalled
 *       longer than X while the attacker ran".
 *
 * Exit status: 0, 1 for a check that failed, 2 for bad usage or an
 * unreadable or malformed trace.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kern {
    int dev;
    long pid;
    unsigned long ctx;
    char name[32];
    uint64_t start, end;
};

static struct kern *k;
static size_t nk;

static void die(const char *msg, const char *arg)
{
    fprintf(stderr, "trace_check: %s%s\n", msg, arg ? arg : "");
    exit(2);
}

static uint64_t parse_u64(const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || !*s || *end || s[0] == '-')
        die("not a non-negative integer: ", s);
    return v;
}

static int by_dev_start(const void *pa, const void *pb)
{
    const struct kern *a = pa, *b = pb;
    if (a->dev != b->dev)
        return a->dev < b->dev ? -1 : 1;
    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    return a->end < b->end ? -1 : a->end > b->end;
}

static void load(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        die("cannot open ", path);
    size_t cap = 0;
    char line[256];
    unsigned long lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (nk == cap) {
            cap = cap ? cap * 2 : 4096;
            k = realloc(k, cap * sizeof *k);
            if (!k)
                die("out of memory", NULL);
        }
        struct kern *e = &k[nk];
        unsigned long long s, t;
        if (sscanf(line, "%d %ld %lu %31s %llu %llu", &e->dev, &e->pid, &e->ctx, e->name, &s,
                   &t) != 6 || t < s) {
            char where[32];
            snprintf(where, sizeof where, "%lu", lineno);
            die("malformed trace line ", where);
        }
        e->start = s;
        e->end = t;
        nk++;
    }
    fclose(f);
    qsort(k, nk, sizeof *k, by_dev_start);
}

/* ---- overlap --------------------------------------------------------------- */

static int cmd_overlap(void)
{
    /* A kernel overlaps an earlier-starting kernel of another (pid, ctx)
     * iff that kernel ends after it starts. Keep the two latest ends of
     * distinct keys: the latest end among *other* keys is one of them. */
    size_t n = 0, shown = 0;
    for (size_t i = 0; i < nk;) {
        int dev = k[i].dev;
        struct { long pid; unsigned long ctx; uint64_t end; bool set; } top[2] = {{0}};
        for (; i < nk && k[i].dev == dev; i++) {
            const struct kern *e = &k[i];
            int other = top[0].set && (top[0].pid != e->pid || top[0].ctx != e->ctx) ? 0 : 1;
            if (top[other].set && top[other].end > e->start) {
                if (shown++ < 5)
                    printf("overlap: dev %d pid %ld ctx %lu %s [%" PRIu64 ", %" PRIu64
                           "] starts %.3f ms before pid %ld ctx %lu ends\n",
                           dev, e->pid, e->ctx, e->name, e->start, e->end,
                           (double)(top[other].end - e->start) / 1e6, top[other].pid,
                           top[other].ctx);
                n++;
            }
            /* insert (key, end) into the top two of distinct keys */
            bool same0 = top[0].set && top[0].pid == e->pid && top[0].ctx == e->ctx;
            if (same0) {
                if (e->end > top[0].end)
                    top[0].end = e->end;
            } else if (!top[0].set || e->end > top[0].end) {
                top[1] = top[0];
                top[0].pid = e->pid;
                top[0].ctx = e->ctx;
                top[0].end = e->end;
                top[0].set = true;
            } else if (!top[1].set || e->end > top[1].end) {
                top[1].pid = e->pid;
                top[1].ctx = e->ctx;
                top[1].end = e->end;
                top[1].set = true;
            }
        }
    }
    printf("kernels=%zu overlaps=%zu\n", nk, n);
    return n ? 1 : 0;
}

/* ---- per pid --------------------------------------------------------------- */

struct pstat {
    long pid;
    size_t kernels, runs;
    uint64_t first_start, last_end, busy, max_kernel;
};

static struct pstat ps[256];
static size_t nps;

static struct pstat *pstat_of(long pid)
{
    for (size_t i = 0; i < nps; i++)
        if (ps[i].pid == pid)
            return &ps[i];
    if (nps == sizeof ps / sizeof ps[0])
        die("more than 256 pids in the trace", NULL);
    struct pstat *p = &ps[nps++];
    memset(p, 0, sizeof *p);
    p->pid = pid;
    p->first_start = UINT64_MAX;
    return p;
}

/* Kernel e into its pid's figures (all but runs). */
static void account(const struct kern *e)
{
    struct pstat *p = pstat_of(e->pid);
    p->kernels++;
    if (e->start < p->first_start)
        p->first_start = e->start;
    if (e->end > p->last_end)
        p->last_end = e->end;
    uint64_t d = e->end - e->start;
    p->busy += d;
    if (d > p->max_kernel)
        p->max_kernel = d;
}

static void collect(void)
{
    long last_pid = 0;
    for (size_t i = 0; i < nk; i++) {
        account(&k[i]);
        if (k[i].pid != last_pid)
            pstat_of(k[i].pid)->runs++;
        last_pid = k[i].pid;
    }
}

static int cmd_summary(void)
{
    collect();
    for (size_t i = 0; i < nps; i++)
        printf("pid=%ld kernels=%zu first_start=%" PRIu64 " last_end=%" PRIu64
               " busy_ns=%" PRIu64 " max_kernel_ns=%" PRIu64 " runs=%zu\n",
               ps[i].pid, ps[i].kernels, ps[i].first_start, ps[i].last_end, ps[i].busy,
               ps[i].max_kernel, ps[i].runs);
    return 0;
}

/* Per (pid, device): the trace is sorted by device, so each device's pids
 * are gathered in one pass over its kernels. */
static int cmd_devices(void)
{
    for (size_t i = 0; i < nk;) {
        int dev = k[i].dev;
        size_t end = i;
        while (end < nk && k[end].dev == dev)
            end++;
        nps = 0;
        for (size_t j = i; j < end; j++)
            account(&k[j]);
        for (size_t j = 0; j < nps; j++)
            printf("pid=%ld dev=%d kernels=%zu first_start=%" PRIu64 " last_end=%" PRIu64
                   " busy_ns=%" PRIu64 "\n",
                   ps[j].pid, dev, ps[j].kernels, ps[j].first_start, ps[j].last_end, ps[j].busy);
        i = end;
    }
    return 0;
}

static int cmd_shares(int npid, char **pids)
{
    collect();
    long want[256];
    size_t nw = 0;
    if (npid > 256)
        die("too many pids", NULL);
    for (int i = 0; i < npid; i++)
        want[nw++] = (long)parse_u64(pids[i]);
    if (nw == 0)
        for (size_t i = 0; i < nps; i++)
            want[nw++] = ps[i].pid;
    uint64_t w0 = 0, w1 = UINT64_MAX;
    for (size_t i = 0; i < nw; i++) {
        struct pstat *p = NULL;
        for (size_t j = 0; j < nps; j++)
            if (ps[j].pid == want[i])
                p = &ps[j];
        if (!p) {
            printf("pid=%ld has no kernel in the trace\n", want[i]);
            return 1;
        }
        if (p->first_start > w0)
            w0 = p->first_start;
        if (p->last_end < w1)
            w1 = p->last_end;
    }
    if (nw == 0 || w1 <= w0) {
        printf("window_ns=0 (the pids never all ran at once)\n");
        return 1;
    }
    uint64_t busy[256] = {0}, total = 0;
    for (size_t i = 0; i < nk; i++) {
        for (size_t j = 0; j < nw; j++) {
            if (k[i].pid != want[j])
                continue;
            uint64_t s = k[i].start > w0 ? k[i].start : w0;
            uint64_t e = k[i].end < w1 ? k[i].end : w1;
            if (e > s) {
                busy[j] += e - s;
                total += e - s;
            }
        }
    }
    printf("window_ns=%" PRIu64 " window_start=%" PRIu64 " window_end=%" PRIu64
           " busy_ns=%" PRIu64 "\n", w1 - w0, w0, w1, total);
    for (size_t j = 0; j < nw; j++)
        printf("pid=%ld busy_ns=%" PRIu64 " share=%.4f\n", want[j], busy[j],
               total ? (double)busy[j] / (double)total : 0.0);
    return total ? 0 : 1;
}

/* ---- points in time ------------------------------------------------------------ */

static const struct kern *first_of(long pid, uint64_t after)
{
    const struct kern *best = NULL;
    for (size_t i = 0; i < nk; i++)
        if (k[i].pid == pid && k[i].start >= after && (!best || k[i].start < best->start))
            best = &k[i];
    return best;
}

static int cmd_first(long pid, uint64_t after)
{
    const struct kern *f = first_of(pid, after);
    if (!f) {
        printf("pid=%ld has no kernel starting at or after %" PRIu64 "\n", pid, after);
        return 1;
    }
    printf("start=%" PRIu64 " end=%" PRIu64 "\n", f->start, f->end);
    return 0;
}

static int cmd_latency(long pid, uint64_t submit)
{
    const struct kern *f = first_of(pid, submit);
    if (!f) {
        printf("pid=%ld has no kernel starting at or after %" PRIu64 "\n", pid, submit);
        return 1;
    }
    const struct kern *prev = NULL;
    uint64_t own_prev_end = 0;
    for (size_t i = 0; i < nk; i++) {
        if (k[i].pid != pid && k[i].start < submit && (!prev || k[i].start > prev->start))
            prev = &k[i];
        if (k[i].pid == pid && k[i].end <= submit && k[i].end > own_prev_end)
            own_prev_end = k[i].end;
    }
    printf("latency_ns=%" PRIu64 " start=%" PRIu64 " prev_pid=%ld prev_start=%" PRIu64
           " prev_end=%" PRIu64 " own_prev_end=%" PRIu64 "\n",
           f->start - submit, f->start, prev ? prev->pid : 0L, prev ? prev->start : 0,
           prev ? prev->end : 0, own_prev_end);
    return 0;
}

static int cmd_handoffs(long from, long to)
{
    for (size_t i = 1; i < nk; i++) {
        if (k[i - 1].pid == from && k[i].pid == to && k[i - 1].dev == k[i].dev)
            printf("from_end=%" PRIu64 " to_start=%" PRIu64 " gap_ns=%" PRId64 "\n",
                   k[i - 1].end, k[i].start, (int64_t)(k[i].start - k[i - 1].end));
    }
    return 0;
}

/* ---- gaps in a union ----------------------------------------------------------- */

static int by_start(const void *pa, const void *pb)
{
    const struct kern *a = pa, *b = pb;
    return a->start < b->start ? -1 : a->start > b->start;
}

struct gapstat {
    uint64_t busy, longest, lstart, lend, over;
};

static void gap_seen(struct gapstat *g, uint64_t from, uint64_t to, uint64_t over_ns)
{
    uint64_t d = to - from;
    if (d > g->longest) {
        g->longest = d;
        g->lstart = from;
        g->lend = to;
    }
    if (d > over_ns && g->over++ < 20)
        printf("gap start=%" PRIu64 " end=%" PRIu64 " gap_ns=%" PRIu64 "\n", from, to, d);
}

static int cmd_gaps(uint64_t w0, uint64_t w1, uint64_t over_ns, int npid, char **pids)
{
    if (w1 <= w0)
        die("the window ends before it starts", NULL);
    long want[256];
    if (npid > 256)
        die("too many pids", NULL);
    for (int j = 0; j < npid; j++)
        want[j] = (long)parse_u64(pids[j]);
    struct kern *u = malloc((nk ? nk : 1) * sizeof *u);
    if (!u)
        die("out of memory", NULL);
    size_t nu = 0;
    for (size_t i = 0; i < nk; i++)
        for (int j = 0; j < npid; j++)
            if (k[i].pid == want[j] && k[i].end > w0 && k[i].start < w1) {
                u[nu++] = k[i];
                break;
            }
    qsort(u, nu, sizeof *u, by_start);
    struct gapstat g = {0};
    uint64_t cur = w0; /* the union covers [w0, cur) */
    for (size_t i = 0; i < nu; i++) {
        uint64_t s = u[i].start > w0 ? u[i].start : w0, e = u[i].end < w1 ? u[i].end : w1;
        if (s > cur)
            gap_seen(&g, cur, s, over_ns);
        if (e > cur) {
            g.busy += e - (s > cur ? s : cur);
            cur = e;
        }
    }
    if (w1 > cur)
        gap_seen(&g, cur, w1, over_ns);
    free(u);
    printf("window_ns=%" PRIu64 " busy_ns=%" PRIu64 " longest_gap_ns=%" PRIu64
           " gap_start=%" PRIu64 " gap_end=%" PRIu64 " gaps_over=%" PRIu64 "\n",
           w1 - w0, g.busy, g.longest, g.lstart, g.lend, g.over);
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: trace_check TRACE overlap | summary | devices | shares [PID...] |\n"
                    "       first PID [AFTER_NS] | latency PID SUBMIT_NS |\n"
                    "       handoffs FROM_PID TO_PID |\n"
                    "       gaps FROM_NS TO_NS OVER_NS PID...\n");
    exit(2);
}

int main(int argc, char **argv)
{
    if (argc < 3)
        usage();
    load(argv[1]);
    const char *cmd = argv[2];
    if (!strcmp(cmd, "overlap") && argc == 3)
        return cmd_overlap();
    if (!strcmp(cmd, "summary") && argc == 3)
        return cmd_summary();
    if (!strcmp(cmd, "devices") && argc == 3)
        return cmd_devices();
    if (!strcmp(cmd, "shares"))
        return cmd_shares(argc - 3, argv + 3);
    if (!strcmp(cmd, "first") && (argc == 4 || argc == 5))
        return cmd_first((long)parse_u64(argv[3]), argc == 5 ? parse_u64(argv[4]) : 0);
    if (!strcmp(cmd, "latency") && argc == 5)
        return cmd_latency((long)parse_u64(argv[3]), parse_u64(argv[4]));
    if (!strcmp(cmd, "handoffs") && argc == 5)
        return cmd_handoffs((long)parse_u64(argv[3]), (long)parse_u64(argv[4]));
    if (!strcmp(cmd, "gaps") && argc >= 7)
        return cmd_gaps(parse_u64(argv[3]), parse_u64(argv[4]), parse_u64(argv[5]), argc - 6,
                        argv + 6);
    usage();
    return 2;
}
