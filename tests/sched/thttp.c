/* thttp.c: see thttp.h. */
#include "thttp.h"

#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

void th_get(uint16_t port, const char *path, char *out, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port),
                             .sin_addr.s_addr = htonl(0x7f000001)};
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    char req[256];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n", path);
    assert_int_equal(send(fd, req, (size_t)n, 0), n);
    size_t len = 0;
    ssize_t r;
    while ((r = recv(fd, out + len, cap - 1 - len, 0)) > 0)
        len += (size_t)r;
    out[len] = '\0';
    close(fd);
}
