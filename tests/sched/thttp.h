/* thttp.h: one HTTP/1.0 GET on 127.0.0.1, for the tests that read
 * cushared's metrics page (test_daemon, tests/k8s/test_dp_plugin). */
#ifndef THTTP_H
#define THTTP_H

#include <stddef.h>
#include <stdint.h>

/* The whole answer, headers included, NUL-terminated in out (cut at cap -
 * 1); the test fails when nothing listens on the port. */
void th_get(uint16_t port, const char *path, char *out, size_t cap);

#endif
