/* test_fsafe.c: the checks of src/common/fsafe.c, each refusal with its
 * reason, and that nothing is written through a planted link.
 *
 * Runs as any user in a fresh directory under TEST_TMP. The cases that
 * need a file or directory owned by someone else (or a root-owned sticky
 * directory) are made with chown and run only as root (CI runs as root);
 * as another user they are skipped with a message. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/fsafe.h"

#define OTHER_UID 65534 /* nobody */

static char base[512];
static char err[512];

/* base/name into a rotating static buffer. */
static const char *P(const char *name)
{
    static char buf[8][1024];
    static int next;
    char *b = buf[next++ % 8];
    snprintf(b, sizeof buf[0], "%s/%s", base, name);
    return b;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void expect_file(const char *path, const char *text)
{
    char buf[256] = {0};
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    assert_string_equal(buf, text);
}

/* The call failed with errno e and a message containing `why`. */
static void expect_refused(int rc, int e, const char *why)
{
    int got = errno;
    if (rc != -1 || got != e || !strstr(err, why))
        fail_msg("expected -1/%s with '%s'; got %d/%s: '%s'", strerror(e), why, rc,
                 strerror(got), err);
}

static mode_t mode_of(const char *path)
{
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    return st.st_mode & 07777;
}

static int setup(void **state)
{
    (void)state;
    static int n;
    const char *t = getenv("TEST_TMP");
    snprintf(base, sizeof base, "%s/fsafe-%d-%d", t && *t ? t : "/tmp", (int)getpid(), n++);
    assert_int_equal(mkdir(base, 0700), 0);
    err[0] = '\0';
    return 0;
}

static bool need_root(void)
{
    if (geteuid() == 0)
        return true;
    print_message("not root: cannot make files of another owner; skipped\n");
    return false;
}

/* ---- cs_fs_split ------------------------------------------------------- */

static void test_split(void **state)
{
    (void)state;
    char d[16];
    assert_string_equal(cs_fs_split("/a/b/c.sock", d, sizeof d), "c.sock");
    assert_string_equal(d, "/a/b");
    assert_string_equal(cs_fs_split("/x.sock", d, sizeof d), "x.sock");
    assert_string_equal(d, "/");
    assert_string_equal(cs_fs_split("x.sock", d, sizeof d), "x.sock");
    assert_string_equal(d, ".");
    assert_null(cs_fs_split("/a-long-directory/x", d, 8));
}

/* ---- directories ------------------------------------------------------- */

/* Missing components are made with exactly the mode asked, whatever the
 * umask; an existing good directory passes again. */
static void test_ensure_creates(void **state)
{
    (void)state;
    mode_t old = umask(0);
    assert_int_equal(cs_fs_ensure_dir(P("a/b/c"), 0700, err, sizeof err), 0);
    umask(077);
    assert_int_equal(cs_fs_ensure_dir(P("d"), 0755, err, sizeof err), 0);
    umask(old);
    assert_int_equal(mode_of(P("a")), 0700);
    assert_int_equal(mode_of(P("a/b/c")), 0700);
    assert_int_equal(mode_of(P("d")), 0755);
    assert_int_equal(cs_fs_ensure_dir(P("a/b/c"), 0700, err, sizeof err), 0);
    assert_int_equal(cs_fs_check_dir(P("a/b/c"), err, sizeof err), 0);
    /* Relative paths are taken from the working directory. */
    char cwd[1024];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(base), 0);
    assert_int_equal(cs_fs_ensure_dir("rel/x", 0700, err, sizeof err), 0);
    assert_int_equal(chdir(cwd), 0);
    assert_int_equal(mode_of(P("rel/x")), 0700);
}

static void test_dir_refusals(void **state)
{
    (void)state;
    /* Writable by others: not fixed, refused. */
    assert_int_equal(mkdir(P("open"), 0700), 0);
    assert_int_equal(chmod(P("open"), 0777), 0);
    expect_refused(cs_fs_ensure_dir(P("open"), 0700, err, sizeof err), EPERM,
                   "is writable by group or others (mode 0777)");
    assert_int_equal(mode_of(P("open")), 0777);
    assert_int_equal(chmod(P("open"), 0770), 0);
    expect_refused(cs_fs_check_dir(P("open"), err, sizeof err), EPERM, "writable by group");
    /* A symbolic link, even to a good directory of ours. */
    assert_int_equal(mkdir(P("real"), 0700), 0);
    assert_int_equal(symlink(P("real"), P("link")), 0);
    expect_refused(cs_fs_ensure_dir(P("link"), 0700, err, sizeof err), EPERM,
                   "is a symbolic link, not a directory");
    /* A file. */
    write_file(P("file"), "x");
    expect_refused(cs_fs_ensure_dir(P("file"), 0700, err, sizeof err), ENOTDIR,
                   "is not a directory");
    expect_refused(cs_fs_ensure_dir(P("file/sub"), 0700, err, sizeof err), ENOTDIR,
                   "is not a directory");
    /* Missing, without creating. */
    expect_refused(cs_fs_check_dir(P("none"), err, sizeof err), ENOENT, "none");
    /* Not absolute and no working directory problems: a plain empty path. */
    expect_refused(cs_fs_check_dir("", err, sizeof err), EINVAL, "empty path");
}

/* A component above: writable by others (not root's sticky) or a link of
 * ours to a good directory. */
static void test_above(void **state)
{
    (void)state;
    assert_int_equal(mkdir(P("pub"), 0700), 0);
    assert_int_equal(chmod(P("pub"), 0777), 0);
    expect_refused(cs_fs_ensure_dir(P("pub/mine"), 0700, err, sizeof err), EPERM,
                   "pub is writable by others (mode 0777) and is not a root-owned sticky");
    assert_int_equal(access(P("pub/mine"), F_OK), -1); /* nothing created below it */
    /* Sticky but not root's: the owner could still replace entries. */
    assert_int_equal(chmod(P("pub"), 01777), 0);
    if (geteuid() != 0)
        expect_refused(cs_fs_ensure_dir(P("pub/mine"), 0700, err, sizeof err), EPERM,
                       "not a root-owned sticky");
    else /* root's own sticky directory, like /tmp */
        assert_int_equal(cs_fs_ensure_dir(P("pub/mine"), 0700, err, sizeof err), 0);
    /* A link above, ours, to a directory of ours: followed. */
    assert_int_equal(mkdir(P("target"), 0700), 0);
    assert_int_equal(symlink(P("target"), P("via")), 0);
    assert_int_equal(cs_fs_ensure_dir(P("via/sub"), 0700, err, sizeof err), 0);
    assert_int_equal(mode_of(P("target/sub")), 0700);
}

/* Another user's directory or link: refused with both uids named. */
static void test_other_owner(void **state)
{
    (void)state;
    if (!need_root())
        skip();
    assert_int_equal(mkdir(P("theirs"), 0755), 0);
    assert_int_equal(chown(P("theirs"), OTHER_UID, OTHER_UID), 0);
    expect_refused(cs_fs_ensure_dir(P("theirs"), 0700, err, sizeof err), EPERM,
                   "is owned by uid 65534, not 0: someone else created it");
    expect_refused(cs_fs_ensure_dir(P("theirs/sub"), 0700, err, sizeof err), EPERM,
                   "is owned by uid 65534 (neither root nor 0)");
    assert_int_equal(mkdir(P("mine"), 0700), 0);
    assert_int_equal(symlink(P("mine"), P("theirlink")), 0);
    assert_int_equal(lchown(P("theirlink"), OTHER_UID, OTHER_UID), 0);
    expect_refused(cs_fs_ensure_dir(P("theirlink/sub"), 0700, err, sizeof err), EPERM,
                   "is a symbolic link owned by uid 65534");
    /* A root-owned shared (sticky, world-writable) directory is no place
     * for a daemon's own files. */
    assert_int_equal(mkdir(P("tmp"), 0700), 0);
    assert_int_equal(chmod(P("tmp"), 01777), 0);
    expect_refused(cs_fs_ensure_dir(P("tmp"), 0700, err, sizeof err), EPERM,
                   "is a shared directory (mode 1777)");
}

/* ---- the client's socket check ------------------------------------------ */

static void make_socket(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    close(fd);
}

static void test_socket(void **state)
{
    (void)state;
    assert_int_equal(mkdir(P("run"), 0755), 0);
    /* No daemon yet (missing socket, missing directory): ENOENT, not a
     * trust failure; an existing good directory passes without a socket. */
    assert_int_equal(cs_fs_check_socket(P("run/d.sock"), err, sizeof err), 0);
    expect_refused(cs_fs_check_socket(P("gone/d.sock"), err, sizeof err), ENOENT, "gone");
    assert_int_equal(chmod(P("run"), 0777), 0);
    expect_refused(cs_fs_check_socket(P("run/d.sock"), err, sizeof err), EPERM,
                   "writable by group or others");
    if (!need_root())
        return;
    /* Root's own directory (the system daemon's /run/cushare) is trusted. */
    assert_int_equal(chmod(P("run"), 0755), 0);
    assert_int_equal(cs_fs_check_socket(P("run/d.sock"), err, sizeof err), 0);
    /* Planted: another user's directory. */
    assert_int_equal(mkdir(P("planted"), 0755), 0);
    assert_int_equal(chown(P("planted"), OTHER_UID, OTHER_UID), 0);
    expect_refused(cs_fs_check_socket(P("planted/d.sock"), err, sizeof err), EPERM,
                   "is owned by uid 65534, not 0 or root");
    /* A root-owned sticky directory: the socket's own owner decides. */
    assert_int_equal(mkdir(P("sticky"), 0700), 0);
    assert_int_equal(chmod(P("sticky"), 01777), 0);
    expect_refused(cs_fs_check_socket(P("sticky/d.sock"), err, sizeof err), ENOENT, "d.sock");
    make_socket(P("sticky/d.sock"));
    assert_int_equal(cs_fs_check_socket(P("sticky/d.sock"), err, sizeof err), 0);
    assert_int_equal(lchown(P("sticky/d.sock"), OTHER_UID, OTHER_UID), 0);
    expect_refused(cs_fs_check_socket(P("sticky/d.sock"), err, sizeof err), EPERM,
                   "owned by uid 65534 (neither root nor 0) in a shared directory");
    write_file(P("sticky/f.sock"), "");
    expect_refused(cs_fs_check_socket(P("sticky/f.sock"), err, sizeof err), EPERM,
                   "is not a socket");
}

/* ---- files ----------------------------------------------------------------- */

static void test_open_append(void **state)
{
    (void)state;
    int fd = cs_fs_open_append(P("log"), err, sizeof err);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "a\n", 2), 2);
    close(fd);
    assert_int_equal(mode_of(P("log")), 0600);
    fd = cs_fs_open_append(P("log"), err, sizeof err);
    assert_true(fd >= 0);
    assert_int_equal(fcntl(fd, F_GETFL) & (O_APPEND | O_NONBLOCK), O_APPEND);
    assert_int_equal(write(fd, "b\n", 2), 2);
    close(fd);
    expect_file(P("log"), "a\nb\n");
    /* A planted link is not followed: its target keeps its content. */
    write_file(P("victim"), "keep");
    assert_int_equal(symlink(P("victim"), P("link.log")), 0);
    expect_refused(cs_fs_open_append(P("link.log"), err, sizeof err), ELOOP,
                   "a symbolic link: not following it");
    expect_file(P("victim"), "keep");
    /* A second name of another file. */
    assert_int_equal(link(P("victim"), P("hard.log")), 0);
    expect_refused(cs_fs_open_append(P("hard.log"), err, sizeof err), EPERM, "2 hard links");
    expect_file(P("victim"), "keep");
    /* A FIFO: refused at once (no reader: ENXIO), not waited on; with a
     * reader, refused for what it is. */
    assert_int_equal(mkfifo(P("fifo.log"), 0600), 0);
    expect_refused(cs_fs_open_append(P("fifo.log"), err, sizeof err), ENXIO, "cannot open");
    int rd = open(P("fifo.log"), O_RDONLY | O_NONBLOCK);
    assert_true(rd >= 0);
    expect_refused(cs_fs_open_append(P("fifo.log"), err, sizeof err), EPERM,
                   "is not a regular file");
    close(rd);
    if (!need_root())
        return;
    write_file(P("theirs.log"), "");
    assert_int_equal(chown(P("theirs.log"), OTHER_UID, OTHER_UID), 0);
    expect_refused(cs_fs_open_append(P("theirs.log"), err, sizeof err), EPERM,
                   "is owned by uid 65534, not 0");
}

/* No temporary file left behind: only the names expected in dir. */
static void expect_entries(const char *dir, int n)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "test $(ls -A '%s' | wc -l) -eq %d", dir, n);
    assert_int_equal(system(cmd), 0);
}

static void test_write_atomic(void **state)
{
    (void)state;
    assert_int_equal(cs_fs_write_atomic(base, "state", "one\n", 4), 0);
    expect_file(P("state"), "one\n");
    assert_int_equal(mode_of(P("state")), 0600);
    assert_int_equal(cs_fs_write_atomic(base, "state", "two\n", 4), 0);
    expect_file(P("state"), "two\n");
    expect_entries(base, 1);
    /* Links planted at the name and at the old predictable temporary name:
     * the first is replaced by the new file, neither target is written. */
    write_file(P("victim1"), "keep1");
    write_file(P("victim2"), "keep2");
    assert_int_equal(unlink(P("state")), 0);
    assert_int_equal(symlink(P("victim1"), P("state")), 0);
    assert_int_equal(symlink(P("victim2"), P("state.tmp")), 0);
    assert_int_equal(cs_fs_write_atomic(base, "state", "three\n", 6), 0);
    expect_file(P("victim1"), "keep1");
    expect_file(P("victim2"), "keep2");
    struct stat st;
    assert_int_equal(lstat(P("state"), &st), 0);
    assert_true(S_ISREG(st.st_mode));
    expect_file(P("state"), "three\n");
    assert_int_equal(lstat(P("state.tmp"), &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    expect_entries(base, 4);
    /* A directory that is gone: an error, nothing left anywhere. */
    assert_int_equal(cs_fs_write_atomic(P("gone"), "state", "x", 1), -1);
    assert_int_equal(errno, ENOENT);
}

#define T(f) cmocka_unit_test_setup(f, setup)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_split),      T(test_ensure_creates), T(test_dir_refusals),
        T(test_above),      T(test_other_owner),    T(test_socket),
        T(test_open_append), T(test_write_atomic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
