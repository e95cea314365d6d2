/* tclient.h: a scripted protocol client and process helpers for the daemon
 * integration test. It speaks the real protocol over the real socket, one
 * call per message, so a test reads like the exchange it checks:
 *
 *     int a = tc_client(sock, CS_PRIO_NORMAL, 1, "alpha");
 *     tc_attach(a, 0, GPU0, 0, 0);
 *     tc_acquire(a, 0);
 *     uint64_t lease = tc_expect_grant(a, 0);
 *
 * Every wait has a generous time limit (TC_WAIT_MS); the tests assert what
 * happens and in which order, not how fast, except where timing is the
 * point (and then with wide margins). */
#ifndef TCLIENT_H
#define TCLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/proto.h"

#define TC_WAIT_MS 10000

/* The paths the test uses: the build tree's programs and a scratch dir. */
const char *tc_build(void);
const char *tc_tmp(void);
void tc_bin(char *out, size_t cap, const char *prog);

/* ---- the daemon ----------------------------------------------------------------- */

struct tc_daemon {
    pid_t pid;
    uint64_t spawn_ms;  /* tc_now_ms() just before the fork */
    char sock[108];
    char conf[256];
    char log[256];
};

/* Starts cushared on <tmp>/<name>/s.sock with config text conf (may be
 * NULL) and extra arguments (NULL-terminated), and waits until it answers.
 * Returns 0 or -1. */
int tc_daemon_start(struct tc_daemon *d, const char *name, const char *conf, ...);
/* Same socket, new process (a restart). */
int tc_daemon_restart(struct tc_daemon *d);
/* Sends sig and reaps it; returns its exit status (or 128+signal). */
int tc_daemon_stop(struct tc_daemon *d, int sig);
bool tc_log_contains(const struct tc_daemon *d, const char *text);

/* ---- a client ---------------------------------------------------------------------- */

int tc_connect(const char *sock);
/* Connect + HELLO + WELCOME. Returns the fd; *id gets the client id. */
int tc_client_full(const char *sock, uint32_t prio, uint32_t weight, const char *name,
                   uint32_t flags, uint64_t prev_id, uint64_t *id);
int tc_client(const char *sock, uint32_t prio, uint32_t weight, const char *name);
void tc_send(int fd, const struct cs_msg *m);
/* A daemon configuration naming the node's GPUs: `gpus = <tc_uuid(i)>:16G` for
 * each bit i of mask, then conf. The clients here name made-up GPUs, which a
 * daemon refuses unless its node has them. Returns a static buffer. */
const char *tc_node_conf(const char *conf, unsigned mask);
void tc_attach(int fd, uint32_t slot, uint8_t gpu, uint32_t flags, uint64_t lease);
void tc_acquire(int fd, uint32_t slot);
void tc_release(int fd, uint32_t slot, uint64_t lease);
void tc_usage(int fd, uint32_t slot, uint32_t flags, uint64_t resident, uint64_t footprint);
/* Waits for the next message and requires its type. */
void tc_expect(int fd, uint16_t type, struct cs_msg *out);
uint64_t tc_expect_grant(int fd, uint32_t slot);
/* Returns the revoke's reason; *lease gets its lease id. */
uint32_t tc_expect_revoke(int fd, uint32_t slot, uint64_t *lease);
/* Requires that nothing arrives for ms. */
void tc_quiet(int fd, int ms);
/* Requires that the daemon closes the connection (an ERROR may come first). */
void tc_expect_closed(int fd);
void tc_uuid(uint8_t gpu, uint8_t out[CS_UUID_LEN]);

/* ---- processes ----------------------------------------------------------------------- */

struct tc_out {
    int status;     /* exit status, or 128+signal */
    char out[65536];
    char err[16384];
};

/* Runs argv (argv[0] a path) as uid (-1: unchanged) with extra environment
 * entries env (NULL-terminated "K=V" list, may be NULL); captures output. */
void tc_run(struct tc_out *o, uid_t uid, char *const env[], char *const argv[]);
/* cusharectl --socket sock ARGS... */
void tc_ctl(struct tc_out *o, uid_t uid, const char *sock, ...);

uint64_t tc_now_ms(void);

#endif
