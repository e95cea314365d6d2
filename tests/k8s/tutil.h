/* tutil.h: helpers of the device plugin's tests: scratch directories, the
 * plugin as a child process, files. */
#ifndef TUTIL_H
#define TUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* A fresh directory under $TEST_TMP (or /tmp) into out[cap]. */
void tu_tmpdir(char *out, size_t cap, const char *tag);
/* The build tree ($CUSHARE_BUILD, default "build"), as an absolute path. */
const char *tu_build(void);
void tu_write(const char *path, const char *text);
/* The whole file as a string (malloc) or NULL. */
char *tu_read(const char *path);
void tu_mkdirs(const char *path);

/* Starts argv[0] with extra environment entries ("K=V", NULL-terminated),
 * stderr to errfile when not NULL. */
pid_t tu_spawn(char *const argv[], char *const env[], const char *errfile);
/* SIGTERM, then the exit status (or 128+signal), waiting at most 20 s. */
int tu_stop(pid_t pid);
/* The exit status of pid, waiting at most timeout_ms (-1 if still running). */
int tu_wait_exit(pid_t pid, int timeout_ms);
bool tu_exists(const char *path);

#endif
