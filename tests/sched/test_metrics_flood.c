/* test_metrics_flood.c: the metrics endpoint under connection floods
 * (issue 17, item 6: it stopped answering with 40 half-open requests).
 *
 * A real cushared with --metrics 127.0.0.1:0. Attackers open TCP
 * connections that send half a request and hang (or a whole request and
 * never read the answer); meanwhile a GPU client's HELLO, ATTACH, ACQUIRE
 * and GRANT must go through (the scheduling loop, which drives the endpoint
 * on its own thread, is not stalled), and a complete scrape must answer
 * with the whole page. Loopback addresses other than 127.0.0.1 stand for
 * other hosts. Waits are liveness limits (TC_WAIT_MS and the like); the
 * scrape's time is printed, not asserted. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "sched/mguard.h"
#include "tclient.h"

#define HALF_REQUEST "GET /metrics HTTP/1.1\r\nHost: cushare\r\nUser-Agent: slow"
#define FULL_REQUEST "GET /metrics HTTP/1.0\r\nHost: cushare\r\n\r\n"
#define MAX_FLOOD 200

static struct tc_daemon d;
static uint16_t port;
static pid_t flooder; /* test_continuous_flood's, killed by teardown */

static int setup(void **state)
{
    (void)state;
    if (tc_daemon_start(&d, "mflood", tc_node_conf(NULL, 1u << 0), "--metrics", "127.0.0.1:0", NULL) < 0)
        fail_msg("cushared did not start; see %s", d.log);
    /* "metrics on http://127.0.0.1:PORT/metrics", logged before it serves;
     * the last one is this daemon's (every test's daemon logs to one file). */
    FILE *f = fopen(d.log, "r");
    assert_non_null(f);
    char line[2048];
    unsigned p = 0;
    while (fgets(line, sizeof line, f)) {
        const char *at = strstr(line, "metrics on http://127.0.0.1:");
        if (at)
            sscanf(at, "metrics on http://127.0.0.1:%u/", &p);
    }
    fclose(f);
    assert_true(p > 0 && p < 65536);
    port = (uint16_t)p;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (flooder > 0) {
        kill(flooder, SIGKILL);
        waitpid(flooder, NULL, 0);
        flooder = 0;
    }
    if (d.pid > 0)
        assert_int_equal(tc_daemon_stop(&d, SIGTERM), 0); /* clean exit, always */
    return 0;
}

static void set_timeouts(int fd, int secs)
{
    struct timeval tv = {.tv_sec = secs};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv); /* connect() too */
}

/* A connection to the endpoint from 127.0.0.<src>; rcvbuf 0: the default. */
static int tcp_open(unsigned src, int rcvbuf)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    set_timeouts(fd, TC_WAIT_MS / 1000);
    if (rcvbuf)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000000u | src)};
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        fail_msg("bind 127.0.0.%u: %s", src, strerror(errno));
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(0x7f000001u);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        fail_msg("connect from 127.0.0.%u: %s", src, strerror(errno));
    return fd;
}

/* n connections that send text and hang, from 127.0.0.<src0> up to
 * 127.0.0.<src0 + nsrc - 1> in turn. */
static void flood(int *fds, size_t n, unsigned src0, unsigned nsrc, const char *text,
                  int rcvbuf)
{
    for (size_t i = 0; i < n; i++) {
        fds[i] = tcp_open(src0 + (unsigned)(i % nsrc), rcvbuf);
        assert_int_equal(send(fds[i], text, strlen(text), MSG_NOSIGNAL), (ssize_t)strlen(text));
    }
}

/* Connections of fds[first], fds[first + step], ... the server still keeps
 * open (no EOF, no reset, nothing sent). */
static size_t count_open(const int *fds, size_t n, size_t first, size_t step)
{
    size_t open = 0;
    char c;
    for (size_t i = first; i < n; i += step) {
        ssize_t r = recv(fds[i], &c, 1, MSG_PEEK | MSG_DONTWAIT);
        open += r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
    return open;
}

static void close_all(int *fds, size_t n)
{
    for (size_t i = 0; i < n; i++)
        close(fds[i]);
}

/* A complete scrape from 127.0.0.1: the whole page (the endpoint's own
 * series come last), in out. Prints how long it took. */
static void scrape(char *out, size_t cap, const char *what)
{
    uint64_t t0 = tc_now_ms();
    int fd = tcp_open(1, 0);
    assert_int_equal(send(fd, FULL_REQUEST, strlen(FULL_REQUEST), MSG_NOSIGNAL),
                     (ssize_t)strlen(FULL_REQUEST));
    size_t len = 0;
    ssize_t r;
    while (len < cap - 1 && (r = recv(fd, out + len, cap - 1 - len, 0)) > 0)
        len += (size_t)r;
    out[len] = '\0';
    close(fd);
    printf("scrape during %s: %zu bytes in %llu ms\n", what, len,
           (unsigned long long)(tc_now_ms() - t0));
    if (!strstr(out, "200 OK") || !strstr(out, "\ncushare_clients ") ||
        !strstr(out, "\ncushare_metrics_connections_evicted_total "))
        fail_msg("scrape during %s: no complete page (%zu bytes): %.300s", what, len, out);
}

static unsigned long long page_num(const char *page, const char *name)
{
    char want[128];
    snprintf(want, sizeof want, "\n%s ", name);
    const char *at = strstr(page, want);
    if (!at)
        fail_msg("no %s on the page", name);
    return strtoull(at + strlen(want), NULL, 10);
}

/* HELLO, ATTACH, ACQUIRE, GRANT: the scheduling loop answers. */
static void gpu_client_runs(const char *name)
{
    uint64_t t0 = tc_now_ms();
    int a = tc_client(d.sock, CS_PRIO_NORMAL, 1, name);
    tc_attach(a, 0, 0, 0, 0);
    tc_acquire(a, 0);
    tc_expect_grant(a, 0);
    close(a);
    printf("GPU client %s: HELLO to GRANT in %llu ms\n", name,
           (unsigned long long)(tc_now_ms() - t0));
}

/* 40, then 200 half-open requests from the scraper's own address: the
 * scrape and the GPU client go through; the address keeps at most
 * SD_MGUARD_PER_ADDR connections, older ones evicted. */
static void test_half_open_same_address(void **state)
{
    (void)state;
    static char page[1 << 17];
    static int fds[MAX_FLOOD];
    const size_t sizes[] = {40, MAX_FLOOD};
    for (size_t k = 0; k < 2; k++) {
        size_t n = sizes[k];
        flood(fds, n, 1, 1, HALF_REQUEST, 0);
        gpu_client_runs(n == 40 ? "during-40" : "during-200");
        char what[64];
        snprintf(what, sizeof what, "%zu half-open requests", n);
        scrape(page, sizeof page, what);
        assert_true(page_num(page, "cushare_metrics_connections_evicted_total") >= 1);
        assert_true(page_num(page, "cushare_metrics_connections") <= SD_MGUARD_MAX);
        assert_true(count_open(fds, n, 0, 1) <= SD_MGUARD_PER_ADDR);
        close_all(fds, n);
    }
}

/* 200 half-open requests from 25 other addresses (8 each: the total cap,
 * not the per-address one, is what fills up): the scrape still answers,
 * no address keeps more than its share, the endpoint no more than its cap. */
static void test_half_open_many_addresses(void **state)
{
    (void)state;
    static char page[1 << 17];
    static int fds[MAX_FLOOD];
    const unsigned nsrc = MAX_FLOOD / SD_MGUARD_PER_ADDR;
    flood(fds, MAX_FLOOD, 2, nsrc, HALF_REQUEST, 0);
    gpu_client_runs("many-addresses");
    scrape(page, sizeof page, "200 half-open requests from 25 addresses");
    assert_true(count_open(fds, MAX_FLOOD, 0, 1) <= SD_MGUARD_MAX);
    for (unsigned s = 0; s < nsrc; s++)
        assert_true(count_open(fds, MAX_FLOOD, s, nsrc) <= SD_MGUARD_PER_ADDR);
    assert_true(page_num(page, "cushare_metrics_connections") <= SD_MGUARD_MAX);
    close_all(fds, MAX_FLOOD);
}

/* A page larger than a slow reader's buffers (16 clients registered), and
 * readers that ask for it and never read: the daemon's non-blocking writes
 * never hold up the loop, and a scrape gets its whole page. */
static void test_slow_readers(void **state)
{
    (void)state;
    static char page[1 << 18];
    int gpu[16];
    for (int i = 0; i < 16; i++) {
        char name[32];
        snprintf(name, sizeof name, "filler-%d", i);
        gpu[i] = tc_client(d.sock, CS_PRIO_NORMAL, 1, name);
        tc_attach(gpu[i], 0, 0, 0, 0);
    }
    int fds[SD_MGUARD_PER_ADDR];
    flood(fds, SD_MGUARD_PER_ADDR, 3, 1, FULL_REQUEST, 1024);
    gpu_client_runs("slow-readers");
    scrape(page, sizeof page, "8 slow readers");
    assert_true(strlen(page) > 64 * 1024); /* the page was big enough to matter */
    close_all(fds, SD_MGUARD_PER_ADDR);
    for (int i = 0; i < 16; i++)
        close(gpu[i]);
}

/* A flooder that never stops: keeps MAX_FLOOD half-open connections from
 * 127.0.0.4, replacing each one the server closes, until killed. */
static pid_t start_flooder(void)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid > 0)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    static int fds[MAX_FLOOD];
    for (size_t i = 0;; i = (i + 1) % MAX_FLOOD) {
        if (fds[i] > 0)
            close(fds[i]);
        fds[i] = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000004u)};
        bind(fds[i], (struct sockaddr *)&sa, sizeof sa);
        sa.sin_port = htons(port);
        sa.sin_addr.s_addr = htonl(0x7f000001u);
        if (connect(fds[i], (struct sockaddr *)&sa, sizeof sa) == 0)
            send(fds[i], HALF_REQUEST, strlen(HALF_REQUEST), MSG_NOSIGNAL);
    }
}

/* Lines of the daemon's log that libmicrohttpd's messages became. */
static size_t mhd_log_lines(void)
{
    FILE *f = fopen(d.log, "r");
    assert_non_null(f);
    char line[2048];
    size_t n = 0;
    while (fgets(line, sizeof line, f))
        n += strstr(line, " metrics: ") != NULL;
    fclose(f);
    return n;
}

/* While connections keep coming: the loop still schedules, scrapes answer,
 * and the thousands of evicted connections do not fill the log (at most 10
 * of libmicrohttpd's lines a minute and one saying how many were left out;
 * docs/metrics.md). */
static void test_continuous_flood(void **state)
{
    (void)state;
    static char page[1 << 17];
    size_t lines0 = mhd_log_lines();
    uint64_t t0 = tc_now_ms();
    flooder = start_flooder();
    usleep(200 * 1000); /* let it get going */
    for (int i = 0; i < 3; i++) {
        gpu_client_runs("continuous");
        scrape(page, sizeof page, "a continuous flood");
    }
    unsigned long long evicted = page_num(page, "cushare_metrics_connections_evicted_total");
    assert_true(evicted >= 1);
    size_t lines = mhd_log_lines() - lines0;
    size_t minutes = (size_t)((tc_now_ms() - t0) / 60000) + 1;
    printf("%llu connections evicted, %zu log lines\n", evicted, lines);
    assert_true(lines <= minutes * 11);
}

/* Half-open connections and nothing else going on: the loop's sleep ends
 * for the endpoint's timeout (5 s), so they are closed without any other
 * event. The limit is a liveness bound. */
static void test_idle_connections_time_out(void **state)
{
    (void)state;
    int fds[4];
    flood(fds, 4, 5, 1, HALF_REQUEST, 0);
    uint64_t t0 = tc_now_ms();
    while (count_open(fds, 4, 0, 1) > 0 && tc_now_ms() - t0 < 60000)
        usleep(50 * 1000);
    printf("half-open connections closed after %llu ms\n",
           (unsigned long long)(tc_now_ms() - t0));
    assert_int_equal(count_open(fds, 4, 0, 1), 0);
    close_all(fds, 4);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    const struct CMUnitTest tests[] = {
        T(test_half_open_same_address),
        T(test_half_open_many_addresses),
        T(test_slow_readers),
        T(test_continuous_flood),
        T(test_idle_connections_time_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
