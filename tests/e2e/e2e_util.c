/* e2e_util: small helpers for the end-to-end scheduling tests (tests/e2e).
 *
 *   e2e_util now
 *       CLOCK_MONOTONIC in ns (the clock of FAKECUDA_TRACE).
 *   e2e_util kill PID
 *       Sends SIGKILL to PID and prints the CLOCK_MONOTONIC ns read just
 *       before kill(2) (measured in the killing process itself, so no
 *       fork/exec lies between the timestamp and the signal).
 *   e2e_util status FILE
 *       Parses `cusharectl status --json` output (strictly: invalid JSON
 *       fails) and prints it as key=value lines for the shell:
 *         daemon pid=.. clients=.. mode=.. protocol_errors=..
 *         gpu index=.. holders=.. waiters=.. switches=.. quantum_ms=..
 *             restoring=0|1 revoke_timeouts=.. forced_releases=.. capacity=..
 *             client_reserve=..
 *         client gpu=.. pid=.. uid=.. name=.. priority=.. weight=.. state=..
 *                gpu_ms=.. wait_ms=.. slices=.. preemptions=.. revokes=..
 *                forced=.. footprint=.. idle=0|1 timeslice_us=.. tsg=..
 *                tsg_requested_us=.. tsg_applied_us=.. tsg_status=.. lc=..
 *                lc_mode=.. lc_preempted=.. lc_bursts=.. resident=.. overhead=..
 *       Exit 2 if the file cannot be read or parsed or lacks a field.
 */
#include "../sched/jsmall.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void bad(const char *what, const char *arg)
{
    fprintf(stderr, "e2e_util: %s%s\n", what, arg ? arg : "");
    exit(2);
}

static const struct js *need(const struct js *o, const char *key, enum js_kind kind)
{
    const struct js *v = o ? js_get(o, key) : NULL;
    if (!v || v->kind != kind)
        bad("status: missing or mistyped field ", key);
    return v;
}

static double num(const struct js *o, const char *key)
{
    return need(o, key, JS_NUM)->num;
}

static const char *str(const struct js *o, const char *key)
{
    return need(o, key, JS_STR)->str;
}

static int cmd_status(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        bad("cannot open ", path);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf)
        bad("out of memory", NULL);
    size_t r;
    while ((r = fread(buf + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
            if (!buf)
                bad("out of memory", NULL);
        }
    }
    fclose(f);
    buf[n] = 0;
    size_t at = 0;
    struct js *j = js_parse(buf, &at);
    if (!j) {
        char where[32];
        snprintf(where, sizeof where, "%zu", at);
        bad("status: invalid JSON at offset ", where);
    }
    const struct js *d = need(j, "daemon", JS_OBJ);
    printf("daemon pid=%.0f clients=%.0f mode=%s protocol_errors=%.0f\n", num(d, "pid"),
           num(d, "clients"), str(d, "mode"), num(d, "protocol_errors"));
    const struct js *gpus = need(j, "gpus", JS_ARR);
    for (size_t g = 0; g < gpus->n; g++) {
        const struct js *gp = js_at(gpus, g);
        printf("gpu index=%.0f holders=%.0f waiters=%.0f switches=%.0f quantum_ms=%.0f "
               "restoring=%d revoke_timeouts=%.0f forced_releases=%.0f capacity=%.0f "
               "client_reserve=%.0f\n",
               num(gp, "index"), num(gp, "holders"), num(gp, "waiters"), num(gp, "switches"),
               num(gp, "quantum_ms"), need(gp, "restoring", JS_BOOL)->num != 0,
               num(gp, "revoke_timeouts"), num(gp, "forced_releases"),
               num(gp, "mem_capacity_bytes"), num(gp, "mem_client_reserve_bytes"));
        const struct js *cl = need(gp, "clients", JS_ARR);
        for (size_t c = 0; c < cl->n; c++) {
            const struct js *x = js_at(cl, c);
            printf("client gpu=%.0f pid=%.0f uid=%.0f name=%s priority=%s weight=%.0f "
                   "state=%s gpu_ms=%.0f wait_ms=%.0f slices=%.0f preemptions=%.0f "
                   "revokes=%.0f forced=%.0f footprint=%.0f idle=%d timeslice_us=%.0f tsg=%s "
                   "tsg_requested_us=%.0f tsg_applied_us=%.0f tsg_status=%.0f lc=%s lc_mode=%s "
                   "lc_preempted=%.0f lc_bursts=%.0f resident=%.0f overhead=%.0f\n",
                   num(gp, "index"), num(x, "pid"), num(x, "uid"), str(x, "name"),
                   str(x, "priority"), num(x, "weight"), str(x, "state"),
                   num(x, "gpu_s") * 1e3, num(x, "wait_s") * 1e3, num(x, "slices"),
                   num(x, "preemptions"), num(x, "revokes"), num(x, "forced_releases"),
                   num(x, "mem_footprint_bytes"), need(x, "idle", JS_BOOL)->num != 0,
                   num(x, "timeslice_us"), str(x, "tsg_mechanism"), num(x, "tsg_requested_us"),
                   num(x, "tsg_applied_us"), num(x, "tsg_status"), str(x, "lc_mechanism"),
                   str(x, "lc_mode"), num(x, "lc_preempted"), num(x, "lc_bursts"),
                   num(x, "mem_resident_bytes"), num(x, "mem_overhead_bytes"));
        }
    }
    js_free(j); /* frees what the root holds; the root itself: */
    free(j);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "now")) {
        printf("%" PRIu64 "\n", now_ns());
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "kill")) {
        char *end;
        errno = 0;
        long pid = strtol(argv[2], &end, 10);
        if (errno || *end || pid <= 1)
            bad("kill: not a pid: ", argv[2]);
        uint64_t t = now_ns();
        if (kill((pid_t)pid, SIGKILL) != 0) {
            perror("e2e_util: kill");
            return 1;
        }
        printf("%" PRIu64 "\n", t);
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "status"))
        return cmd_status(argv[2]);
    fprintf(stderr, "usage: e2e_util now | kill PID | status FILE\n");
    return 2;
}
