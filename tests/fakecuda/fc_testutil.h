/* fc_testutil.h: helpers shared by the simulator's cmocka tests. */
#ifndef FC_TESTUTIL_H
#define FC_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cmocka.h>
#include <cuda.h>

#include "../progs/fckern.h"

/* Asserts a CUresult, printing its name on failure. */
#define CK(call) fct_check((call), CUDA_SUCCESS, #call, __FILE__, __LINE__)
#define CKR(call, want) fct_check((call), (want), #call, __FILE__, __LINE__)
void fct_check(CUresult got, CUresult want, const char *what, const char *file, int line);

#define MiB (1024ull * 1024ull)

uint64_t fct_now_ns(void);
double fct_ms_since(uint64_t t0_ns);
void fct_sleep_ms(unsigned ms);

/* Per-test fixture: the primary context of device 0, current, with the
 * kernels loaded (fct_kernels). Teardown resets the primary context and
 * checks that nothing of the test is still charged to the device. */
extern struct fck fct_kernels;
int fct_setup(void **state);
int fct_teardown(void **state);
CUcontext fct_ctx(void);

/* Host copies of device memory. */
uint32_t fct_get32(CUdeviceptr p);
uint64_t fct_get64(CUdeviceptr p);
/* True when every byte of [p, p+n) equals b. */
bool fct_all_bytes(CUdeviceptr p, size_t n, unsigned char b);

/* A driver entry point by name through cuGetProcAddress (e.g. the _ptsz
 * forms a program built for per-thread streams would get). */
void *fct_proc(const char *name, int version, cuuint64_t flags);

/* ---- helper processes ----------------------------------------------------
 * A multi-process test re-executes itself as `PROG --child ROLE args...`
 * (a fresh process that calls cuInit itself). The child reports lines on
 * fd 3 (fct_say) and takes one-character orders on stdin (fct_order). */

/* The parent's side. */
struct fct_child {
    pid_t pid;
    int to;                           /* its stdin */
    int from;                         /* its fd 3 */
};

/* Starts this program as `--child args...` (args[0] is the role; NULL
 * ends both lists). Each env entry "K=V" is set, a bare "K" removed, in the
 * child only; its stderr goes to errfd when errfd >= 0. */
struct fct_child fct_spawn(const char *const *args, const char *const *env, int errfd);
/* Reads one line the child wrote on fd 3 (without the newline); fails the
 * test if the child closes it first. */
void fct_child_line(struct fct_child *c, char *buf, size_t cap);
/* Reads one line and fails the test unless it starts with want. */
void fct_child_expect(struct fct_child *c, const char *want);
/* Sends the one-character order what to the child's stdin. */
void fct_child_say(struct fct_child *c, char what);
/* Closes both pipes, waits for the child: its exit status, or 128 + the
 * signal that ended it. */
int fct_child_reap(struct fct_child *c);

/* The child's side. */
struct fct_role {
    const char *name;
    int nargs;                        /* arguments it needs at least */
    int (*fn)(char **args);
};
/* True when argv is that of a helper process (`--child ROLE ...`). */
bool fct_is_child(int argc, char **argv);
/* A helper process's main: runs the role argv[2] names with the arguments
 * after it; 99 if fd 3 cannot be opened, 98 for an unknown role. */
int fct_child_main(int argc, char **argv, const struct fct_role *roles, size_t nroles);
/* Writes one formatted line on fd 3. */
void fct_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The next order on stdin, 0 once it is closed. */
char fct_order(void);
/* In a child: checks a CUresult; on failure reports "error CALL = N" and
 * exits with status 10. */
#define CCK(call) fct_child_check((call), #call)
void fct_child_check(CUresult got, const char *what);
/* In a child: cuInit, the primary context of device 0 made current, the
 * kernels loaded into fct_kernels (CCK on each). */
void fct_child_init(void);

#endif
