/* hook_ipc.c: CUDA IPC of swappable memory (src/hook/ipc.c), on the
 * simulated GPU with a scripted scheduler.
 *
 * Proves: exporting an allocation marks its segment unswappable and says
 * so (stats, USAGE); a full revoke then moves everything else but leaves
 * the exported memory on the GPU; another process imports it while the
 * exporter is swapped out, reads the exporter's data and writes its own,
 * which the exporter sees after its next grant; a small allocation that is
 * exported pins only its chunk, and later small allocations go elsewhere;
 * opening twice counts references; a freed export, a dead exporter and
 * malformed requests to the exporter's socket are refused with an error and
 * cost the exporter nothing; a driver without descriptor handles gets a
 * refusal that says why and what to do; an allocation made of parts
 * (CUSHARE_SEG_PART, 64 MiB in these tests) is exported whole, every part
 * unswappable, and the importer maps every part side by side.
 *
 * The importer is this program again (argv[1] == "import"), started with
 * posix_spawn, running under cushare without a scheduler.
 */
#include "hooktest.h"
#include "mock_sched.h"

#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static struct mock_sched *mock;
static const char *self;

#define BIG (8 * MiB)
#define SMALL 4096u

/* ---- the importer (a child process) --------------------------------------- */

static void hex_encode(const CUipcMemHandle *h, char out[129])
{
    const unsigned char *b = (const unsigned char *)h->reserved;
    for (int i = 0; i < 64; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
}

static bool hex_decode(const char *s, CUipcMemHandle *h)
{
    if (strlen(s) != 128)
        return false;
    for (int i = 0; i < 64; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1)
            return false;
        h->reserved[i] = (char)v;
    }
    return true;
}

/* A driver that cannot export VMM memory (FAKECUDA_FD_HANDLES=0): the
 * export is refused with NOT_SUPPORTED and one warning naming the cause
 * and CUSHARE_SWAP=off, never an opaque driver error. */
static int no_fd_handles(void)
{
    ht_context();
    CUdeviceptr p;
    if (cuMemAlloc(&p, 4 * MiB) != CUDA_SUCCESS)
        return 30;
    int capable = 1;
    if (cuPointerGetAttribute(&capable, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, p) !=
            CUDA_SUCCESS || capable)
        return 31;
    const char *path = ht_path("noexport-stderr.log");
    FILE *log = fopen(path, "w+");
    int saved = dup(2);
    if (!log || saved < 0 || dup2(fileno(log), 2) != 2)
        return 32;
    CUipcMemHandle h;
    CUresult r = cuIpcGetMemHandle(&h, p);
    dup2(saved, 2);
    close(saved);
    if (r != CUDA_ERROR_NOT_SUPPORTED)
        return 33;
    char buf[1024] = {0};
    rewind(log);
    size_t n = fread(buf, 1, sizeof buf - 1, log);
    fclose(log);
    if (n == 0 || !strstr(buf, "CUDA IPC cannot export") || !strstr(buf, "CUSHARE_SWAP=off"))
        return 34;
    return cuMemFree(p) == CUDA_SUCCESS ? 0 : 35;
}

/* argv: import HANDLE WORDS EXPECT ADD  -> opens, checks every word is
 *       EXPECT, adds ADD, opens again (same pointer), closes twice.
 *       refused HANDLE                -> expects INVALID_HANDLE.
 *       nofd                          -> no_fd_handles().
 * Exit 0 on success; the failing step's number otherwise. */
static int importer(int argc, char **argv)
{
    if (strcmp(argv[1], "nofd") == 0)
        return no_fd_handles();
    CUipcMemHandle h;
    if (argc < 3 || !hex_decode(argv[2], &h))
        return 10;
    ht_context();
    CUdeviceptr p, again;
    if (strcmp(argv[1], "refused") == 0)
        return cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) ==
                       CUDA_ERROR_INVALID_HANDLE
                   ? 0
                   : 11;
    if (argc != 6)
        return 12;
    uint64_t words = strtoull(argv[3], NULL, 0);
    uint32_t expect = (uint32_t)strtoul(argv[4], NULL, 0), add = (uint32_t)strtoul(argv[5], NULL, 0);
    if (cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) != CUDA_SUCCESS)
        return 13;
    if (ht_device_sum(p, words) != (uint64_t)expect * words)
        return 14;
    if (fck_add32(0, p, words, add) != CUDA_SUCCESS || cuCtxSynchronize() != CUDA_SUCCESS)
        return 15;
    if (cuIpcOpenMemHandle(&again, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) != CUDA_SUCCESS ||
        again != p)
        return 16;
    if (cuIpcCloseMemHandle(again) != CUDA_SUCCESS)
        return 17;
    if (ht_device_sum(p, words) != (uint64_t)(expect + add) * words)
        return 18; /* still mapped after the first close */
    if (cuIpcCloseMemHandle(p) != CUDA_SUCCESS)
        return 19;
    if (cuIpcCloseMemHandle(p) == CUDA_SUCCESS)
        return 20; /* nothing left to close */
    return 0;
}

/* Runs this program in mode `mode` with args (and `extra` in its
 * environment when not NULL); returns its exit status. */
static int run_child(const char *mode, const CUipcMemHandle *h, uint64_t words, uint32_t expect,
                     uint32_t add, char *extra)
{
    char hex[129], w[32], e[32], a[32];
    hex_encode(h, hex);
    snprintf(w, sizeof w, "%llu", (unsigned long long)words);
    snprintf(e, sizeof e, "%u", expect);
    snprintf(a, sizeof a, "%u", add);
    char *argv[] = {(char *)self, (char *)mode, hex, w, e, a, NULL};
    /* No scheduler for the importer: it must not need one. */
    static char nosock[4200];
    snprintf(nosock, sizeof nosock, "CUSHARE_SOCKET=%s", ht_path("importer-none.sock"));
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 3, sizeof *env);
    assert_non_null(env);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "CUSHARE_SOCKET=", 15) != 0)
            env[k++] = environ[i];
    env[k++] = nosock;
    if (extra)
        env[k++] = extra;
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, env), 0);
    free(env);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static int run_importer(const char *mode, const CUipcMemHandle *h, uint64_t words, uint32_t expect,
                        uint32_t add)
{
    return run_child(mode, h, words, expect, add, NULL);
}

/* ---- the exporter ------------------------------------------------------------ */

static int setup(void **state)
{
    (void)state;
    ht_context();
    return 0;
}

static CUdeviceptr a, b, c;
static CUipcMemHandle ha, hc;

static void export_pins_memory_and_says_so(void **state)
{
    (void)state;
    CK(cuMemAlloc(&a, BIG));
    CK(cuMemAlloc(&b, BIG));
    CK(cuMemAlloc(&c, SMALL));
    CK(fck_fill32(0, a, BIG / 4, 3));
    CK(fck_fill32(0, b, BIG / 4, 5));
    CK(fck_fill32(0, c, SMALL / 4, 9));
    CK(cuCtxSynchronize());
    assert_int_equal(ht_stats(0).mem_unswappable, 0);
    int capable = 0;
    CK(cuPointerGetAttribute(&capable, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, a));
    assert_true(capable);
    CK(cuIpcGetMemHandle(&ha, a));
    CK(cuIpcGetMemHandle(&hc, c));
    /* A second export of the same allocation names the same memory. */
    CUipcMemHandle again;
    CK(cuIpcGetMemHandle(&again, a));
    assert_memory_equal(&again, &ha, sizeof ha);
    struct cushare_stats s = ht_stats(0);
    assert_int_equal(s.mem_unswappable, BIG + 2 * MiB); /* c pins its 2 MiB chunk */
    /* ...and the scheduler hears it. */
    struct cs_msg m;
    bool told = false;
    for (int i = 0; i < 40 && !told; i++)
        told = mock_wait(mock, CS_MSG_USAGE, 100, &m, NULL) &&
               m.u.usage.unswappable == BIG + 2 * MiB;
    assert_true(told);
}

static void revoke_moves_everything_else(void **state)
{
    (void)state;
    struct cs_msg_release rel = mock_take_back(mock, CS_ALL_BYTES);
    /* b moves; a and c's chunk may not. */
    assert_int_equal(rel.swapped_bytes, BIG);
    struct cushare_stats s = ht_stats(0);
    assert_int_equal(s.mem_resident, BIG + 2 * MiB);
    assert_int_equal(s.mem_swapped, rel.swapped_bytes);
}

static void importer_shares_memory_while_exporter_is_out(void **state)
{
    (void)state;
    /* The exporter holds no lease and has swapped out: the importer still
     * sees its data, and its writes land in the exporter's memory. */
    assert_int_equal(run_importer("import", &ha, BIG / 4, 3, 4), 0);
    assert_int_equal(run_importer("import", &hc, SMALL / 4, 9, 1), 0);
    assert_int_equal(ht_stats(0).state, CUSHARE_LEASE_IDLE);
    assert_int_equal(ht_device_sum(a, BIG / 4), 7ull * (BIG / 4));
    assert_int_equal(ht_device_sum(c, SMALL / 4), 10ull * (SMALL / 4));
    assert_int_equal(ht_device_sum(b, BIG / 4), 5ull * (BIG / 4));
}

static void small_allocations_avoid_an_exported_chunk(void **state)
{
    (void)state;
    CUdeviceptr e;
    CK(cuMemAlloc(&e, SMALL));
    assert_true((e & ~(2 * MiB - 1)) != (c & ~(2 * MiB - 1)));
    CK(cuMemFree(e));
}

static void open_in_the_exporting_process(void **state)
{
    (void)state;
    CUdeviceptr p, q;
    CK(cuIpcOpenMemHandle(&p, ha, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    assert_true(p != a);
    CK(cuIpcOpenMemHandle(&q, ha, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    assert_true(q == p);
    CK(fck_add32(0, p, BIG / 4, 1));
    CK(cuCtxSynchronize());
    assert_int_equal(ht_device_sum(a, BIG / 4), 8ull * (BIG / 4));
    CK(cuIpcCloseMemHandle(q));
    CK(cuIpcCloseMemHandle(p));
}

/* The exporter's socket, from the handle's bytes (ipc.c's wire layout:
 * magic[8], nonce, key, offset, size, pid, dev, part). */
static int connect_exporter(const CUipcMemHandle *h)
{
    uint64_t nonce;
    int32_t pid;
    memcpy(&nonce, h->reserved + 8, sizeof nonce);
    memcpy(&pid, h->reserved + 40, sizeof pid);
    assert_int_equal(pid, getpid());
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    int n = snprintf(sa.sun_path + 1, sizeof sa.sun_path - 1, "cushare-ipc-%d-%016llx", (int)pid,
                     (unsigned long long)nonce);
    int s = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    assert_true(s >= 0);
    assert_int_equal(connect(s, (struct sockaddr *)&sa,
                             (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n)),
                     0);
    return s;
}

/* Sends len bytes to h's exporter, returns the reply's status word (-1: no
 * reply) and whether a descriptor came with it. */
static int32_t ask_of(const CUipcMemHandle *h, const void *req, size_t len, bool *got_fd)
{
    int s = connect_exporter(h);
    if (len)
        assert_int_equal(send(s, req, len, 0), (ssize_t)len);
    else
        shutdown(s, SHUT_WR);
    char rep[16];
    char ctl[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {rep, sizeof rep};
    struct msghdr m = {0};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = ctl;
    m.msg_controllen = sizeof ctl;
    ssize_t n = recvmsg(s, &m, 0);
    close(s);
    struct cmsghdr *cm = n > 0 ? CMSG_FIRSTHDR(&m) : NULL;
    *got_fd = cm && cm->cmsg_type == SCM_RIGHTS;
    if (*got_fd) {
        int fd;
        memcpy(&fd, CMSG_DATA(cm), sizeof fd);
        close(fd);
    }
    int32_t status = -1;
    if (n == (ssize_t)sizeof rep)
        memcpy(&status, rep, sizeof status);
    return status;
}

static int32_t ask(const void *req, size_t len, bool *got_fd)
{
    return ask_of(&ha, req, len, got_fd);
}

#define PARTS (200 * MiB) /* parts of 64, 64, 64 and 8 MiB */

static void allocation_of_parts_is_exported_whole(void **state)
{
    (void)state;
    uint64_t pinned_before = ht_stats(0).mem_unswappable;
    CUdeviceptr p;
    CUipcMemHandle hp;
    CK(cuMemAlloc(&p, PARTS));
    CK(fck_fill32(0, p, PARTS / 4, 11));
    CK(cuCtxSynchronize());
    CK(cuIpcGetMemHandle(&hp, p + 100 * MiB)); /* from inside a part: the whole allocation */
    assert_int_equal(ht_stats(0).mem_unswappable, pinned_before + PARTS);
    uint64_t part;
    memcpy(&part, hp.reserved + 48, sizeof part);
    assert_int_equal(part, 64 * MiB);
    /* A full revoke moves none of it. */
    mock_take_back(mock, CS_ALL_BYTES);
    assert_int_equal(ht_stats(0).mem_resident, pinned_before + PARTS);
    /* The importer sees every part's bytes at one range (the handle's
     * offset: 100 MiB in), and its writes land in every part. */
    CUipcMemHandle whole = hp;
    uint64_t zero = 0;
    memcpy(whole.reserved + 24, &zero, sizeof zero); /* offset 0 */
    assert_int_equal(run_importer("import", &whole, PARTS / 4, 11, 2), 0);
    assert_int_equal(ht_device_sum(p, PARTS / 4), 13ull * (PARTS / 4));
    /* Each part is asked for by index (version 2); one past the last is
     * not there, nor is any part asked in version 1 but the first. */
    struct {
        uint32_t magic, version;
        uint64_t key;
        uint32_t index, pad;
    } req = {0x51495343u, 2u, 0, 3, 0};
    memcpy(&req.key, hp.reserved + 16, sizeof req.key);
    bool fd;
    assert_int_equal(ask_of(&hp, &req, sizeof req, &fd), 0);
    assert_true(fd);
    req.index = 4;
    assert_int_equal(ask_of(&hp, &req, sizeof req, &fd), ENOENT);
    assert_false(fd);
    req.index = 1;
    assert_int_equal(ask_of(&hp, &req, 20, &fd), EPROTO); /* neither size */
    assert_false(fd);
    /* A handle that says more parts than the allocation has is refused. */
    CUipcMemHandle bad = hp;
    uint64_t small_part = 2 * MiB;
    memcpy(bad.reserved + 48, &small_part, sizeof small_part);
    assert_int_equal(run_importer("refused", &bad, 0, 0, 0), 0);
    CK(cuMemFree(p));
    assert_int_equal(ht_stats(0).mem_unswappable, pinned_before);
    assert_int_equal(run_importer("refused", &hp, 0, 0, 0), 0);
}

static void malformed_requests_are_refused(void **state)
{
    (void)state;
    struct {
        uint32_t magic, version;
        uint64_t key;
    } req = {0x51495343u, 1u, 0};
    memcpy(&req.key, ha.reserved + 16, sizeof req.key);
    bool fd;
    assert_int_equal(ask(&req, sizeof req, &fd), 0); /* the real thing works */
    assert_true(fd);
    req.key ^= 1;
    assert_int_equal(ask(&req, sizeof req, &fd), ENOENT); /* a guessed key */
    assert_false(fd);
    req.key ^= 1;
    req.version = 99;
    assert_int_equal(ask(&req, sizeof req, &fd), EPROTO);
    assert_false(fd);
    req.version = 1;
    req.magic = 0;
    assert_int_equal(ask(&req, sizeof req, &fd), EPROTO);
    assert_int_equal(ask(&req, 3, &fd), EPROTO); /* short */
    assert_int_equal(ask(&req, 0, &fd), EPROTO); /* nothing at all */
    assert_false(fd);
    /* The exporter still serves. */
    assert_int_equal(run_importer("import", &ha, BIG / 4, 8, 1), 0);
    assert_int_equal(ht_device_sum(a, BIG / 4), 9ull * (BIG / 4));
}

static void freed_export_is_refused(void **state)
{
    (void)state;
    CUdeviceptr d;
    CUipcMemHandle hd;
    CK(cuMemAlloc(&d, BIG));
    CK(cuIpcGetMemHandle(&hd, d));
    assert_int_equal(ht_stats(0).mem_unswappable, 2 * BIG + 2 * MiB);
    CK(cuMemFree(d));
    assert_int_equal(ht_stats(0).mem_unswappable, BIG + 2 * MiB);
    assert_int_equal(run_importer("refused", &hd, 0, 0, 0), 0);
}

static void handle_of_a_dead_exporter_is_refused(void **state)
{
    (void)state;
    /* A handle naming a process that no longer exists (the spawned
     * importer's pid, once reaped). */
    CUipcMemHandle h = ha;
    pid_t gone;
    char *argv[] = {(char *)"true", NULL};
    assert_int_equal(posix_spawnp(&gone, "true", NULL, NULL, argv, environ), 0);
    int st;
    assert_int_equal(waitpid(gone, &st, 0), gone);
    int32_t pid = (int32_t)gone;
    memcpy(h.reserved + 40, &pid, sizeof pid);
    CUdeviceptr p;
    CKR(cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_ERROR_INVALID_HANDLE);
    /* Not ours at all: the driver's answer, whatever it is, not a crash. */
    CUipcMemHandle junk;
    memset(&junk, 0x5a, sizeof junk);
    assert_int_not_equal(cuIpcOpenMemHandle(&p, junk, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
                         CUDA_SUCCESS);
}

static void driver_without_fd_handles_refuses_with_reason(void **state)
{
    (void)state;
    /* Only the simulated driver can be told to lack descriptor handles. */
    char dev_name[128] = "";
    CK(cuDeviceGetName(dev_name, sizeof dev_name, 0));
    if (strcmp(dev_name, "cushare simulated GPU") != 0) {
        print_message("real GPU (%s): no driver without fd handles to try\n", dev_name);
        return;
    }
    CUipcMemHandle none;
    memset(&none, 0, sizeof none);
    assert_int_equal(run_child("nofd", &none, 0, 0, 0, (char *)"FAKECUDA_FD_HANDLES=0"), 0);
}

static void freeing_the_export_lets_memory_swap_again(void **state)
{
    (void)state;
    CK(cuMemFree(a));
    CK(cuMemFree(c));
    assert_int_equal(ht_stats(0).mem_unswappable, 0);
    struct cs_msg_release rel = mock_take_back(mock, CS_ALL_BYTES);
    assert_true(rel.swapped_bytes >= BIG); /* b */
    assert_int_equal(ht_stats(0).mem_resident, 0);
    assert_int_equal(ht_device_sum(b, BIG / 4), 5ull * (BIG / 4));
    CK(cuMemFree(b));
}

int main(int argc, char **argv)
{
    self = argv[0];
    if (argc > 1 && (strcmp(argv[1], "import") == 0 || strcmp(argv[1], "refused") == 0 ||
                     strcmp(argv[1], "nofd") == 0))
        return importer(argc, argv);
    mock = ht_mock_preload(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(export_pins_memory_and_says_so),
        cmocka_unit_test(revoke_moves_everything_else),
        cmocka_unit_test(importer_shares_memory_while_exporter_is_out),
        cmocka_unit_test(small_allocations_avoid_an_exported_chunk),
        cmocka_unit_test(open_in_the_exporting_process),
        cmocka_unit_test(allocation_of_parts_is_exported_whole),
        cmocka_unit_test(malformed_requests_are_refused),
        cmocka_unit_test(freed_export_is_refused),
        cmocka_unit_test(handle_of_a_dead_exporter_is_refused),
        cmocka_unit_test(driver_without_fd_handles_refuses_with_reason),
        cmocka_unit_test(freeing_the_export_lets_memory_swap_again),
    };
    int rc = cmocka_run_group_tests(tests, setup, NULL);
    mock_stop(mock);
    return rc;
}
