/* fsafe.h: directories and files that other users cannot redirect.
 *
 * The per-user runtime directory may sit in a world-writable place
 * (/tmp/cushare-<uid> without XDG_RUNTIME_DIR): whoever creates it first
 * owns what goes in it, and a symbolic link planted there turns our log or
 * state file into a write to any file of ours. So a directory is used only
 * after it has been checked, never "fixed" silently:
 *
 *   - every existing component above it is a directory owned by root or by
 *     us, writable by nobody else unless it is a root-owned sticky directory
 *     such as /tmp (a component that is a symbolic link must be owned by
 *     root or us too; its target is checked like a directory);
 *   - the directory itself is a real directory (lstat: not a symbolic link),
 *     owned by us (or, where the caller allows it, root) and writable by
 *     neither group nor others.
 *
 * Inside such a directory nobody else can create, rename or remove an
 * entry, so files opened there with O_NOFOLLOW (logs) or written through
 * mkstemp + rename (state) cannot be redirected between a check and a use.
 *
 * Every function is allocation-free (stack buffers, no FILE streams) so
 * that the hook may link this module; the hook uses only cs_fs_check_socket. Errors
 * return -1 with errno set (EPERM: the path is not trusted; ENOENT: it does
 * not exist; otherwise the failing call's) and, where there is an `err`
 * buffer, a sentence naming the path and the reason.
 */
#ifndef CS_FSAFE_H
#define CS_FSAFE_H

#include <stddef.h>
#include <sys/types.h>

/* The mode of a socket directory the daemon or cushare-run creates: 0755
 * for root (the system daemon's /run/cushare: other users must reach its
 * socket), 0700 for anyone else (a private daemon: /tmp/cushare-<uid> or
 * $XDG_RUNTIME_DIR/cushare, nobody else's business). */
mode_t cs_fs_sock_dir_mode(void);

/* The directory part of path into dir ("." without a slash, "/" for
 * "/name"); returns the name part (a pointer into path). NULL when dir is
 * too small. */
const char *cs_fs_split(const char *path, char *dir, size_t cap);

/* Creates the missing components of absolute `path`, each with exactly
 * `mode` (umask ignored), then checks the whole path as above, the final
 * directory owned by our euid. 0 or -1 (errno, err). */
int cs_fs_ensure_dir(const char *path, mode_t mode, char *err, size_t cap);

/* The check alone, for a directory that must already exist. */
int cs_fs_check_dir(const char *path, char *err, size_t cap);

/* Whether a client may trust the daemon socket at `sock`: its directory
 * passes the check with the final directory owned by our euid or by root;
 * or the directory is a root-owned sticky one (like /tmp), and then the
 * socket itself must exist and be owned by our euid or by root (nobody can
 * replace another user's entry in a sticky directory). ENOENT when the
 * directory or, in a sticky one, the socket does not exist. No allocation,
 * no stdio beyond snprintf into err. */
int cs_fs_check_socket(const char *sock, char *err, size_t cap);

/* Opens a log for appending: O_WRONLY|O_APPEND|O_CREAT|O_NOFOLLOW|O_CLOEXEC,
 * mode 0600, then refuses (closes) anything that is not a regular file
 * owned by our euid with a single link. Returns the descriptor or -1. */
int cs_fs_open_append(const char *path, char *err, size_t cap);

/* Replaces dir/name with len bytes of data atomically: a mkstemp file in
 * dir (O_EXCL: never follows a planted link), written, fsync'd, renamed
 * over name (rename replaces a symbolic link at name, never follows it).
 * dir must be one that passed the check. File mode 0600. 0 or -1 (errno);
 * the temporary file is removed on failure. */
int cs_fs_write_atomic(const char *dir, const char *name, const void *data, size_t len);

#endif
