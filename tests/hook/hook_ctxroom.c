/* hook_ctxroom.c: a process that cannot create its context on a full GPU
 * asks the scheduler for room instead of failing.
 *
 * A child process (without the hook) fills the simulated GPU and sits idle.
 * This process's cuDevicePrimaryCtxRetain then fails for lack of memory; the
 * hook sends ROOM flagged CS_ROOM_CONTEXT; the scripted scheduler refuses
 * the first two (every victim busy just then), then "makes room" by ending
 * the idle child; the hook keeps asking, and the retry creates the context.
 */
#include "hooktest.h"
#include "mock_sched.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static struct mock_sched *mock;
static _Atomic pid_t filler; /* written by the mock thread, read by the test */
static _Atomic int context_rooms;

/* The child: take all the memory it can get, say so, wait to be killed.
 * It allocates in shrinking steps until even 2 MiB fails: a real driver
 * reports more free memory than one allocation can take (its own reserve,
 * fragmentation), so "free minus a little" in one piece is not enough. */
static int fill_gpu(void)
{
    CUcontext c;
    CUdeviceptr p;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&c, 0) || cuCtxSetCurrent(c))
        return 1;
    size_t got = 0;
    for (size_t step = (size_t)1 << 30; step >= (2u << 20); step /= 4)
        while (cuMemAlloc(&p, step) == CUDA_SUCCESS)
            got += step;
    if (got == 0)
        return 1;
    if (write(3, "k", 1) != 1)
        return 1;
    for (;;)
        pause();
}

static void make_room(const struct cs_msg_room *r, void *arg)
{
    (void)arg;
    if (!(r->flags & CS_ROOM_CONTEXT))
        return;
    if (++context_rooms <= 2) {
        mock_set_room_status(mock, CUDA_ERROR_OUT_OF_MEMORY);
        return;
    }
    mock_set_room_status(mock, 0);
    if (filler > 0) {
        kill(filler, SIGKILL);
        waitpid(filler, NULL, 0);
        filler = 0;
    }
}

static void context_on_a_full_gpu(void **state)
{
    (void)state;
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    filler = fork();
    if (filler == 0) {
        close(pfd[0]);
        dup2(pfd[1], 3);
        unsetenv("LD_PRELOAD");
        execl("/proc/self/exe", "hook_ctxroom", "--fill", (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    char ok;
    assert_int_equal(read(pfd[0], &ok, 1), 1);
    close(pfd[0]);

    CUcontext c;
    CK(cuInit(0));
    CK(cuDevicePrimaryCtxRetain(&c, 0));
    assert_true(context_rooms >= 3);
    assert_int_equal(filler, 0);
    CK(cuCtxSetCurrent(c));
    CUdeviceptr p;
    CK(cuMemAlloc(&p, 4096));
    CK(cuMemFree(p));
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--fill"))
        return fill_gpu();
    static char env_sock[4200];
    snprintf(env_sock, sizeof env_sock, "CUSHARE_SOCKET=%s", ht_path("ctxroom.sock"));
    const char *const env[] = {env_sock, NULL};
    hooktest_preload(argc, argv, env);
    mock = mock_start(ht_path("ctxroom.sock"), 60000);
    assert_non_null(mock);
    mock_set_room_hook(mock, make_room, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(context_on_a_full_gpu),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    if (filler > 0)
        kill(filler, SIGKILL);
    mock_stop(mock);
    return rc;
}
