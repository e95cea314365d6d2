/* test_metrics.c: the page the metrics endpoint serves (src/sched/metrics.c),
 * rendered from a real server driven over socketpairs with made-up
 * credentials (as test_access does), read back with a parser of the
 * Prometheus text format written here:
 *
 * - every line of the page is a comment or a well-formed sample;
 * - every client series, histograms included, carries pod, namespace and
 *   container, believed from the owner (escaped, whatever printable
 *   characters they hold) and "" from a tenant, whose claims are dropped;
 * - a client's series leave with it, so the page's size is bounded by the
 *   clients connected, not by the clients ever seen;
 * - cushare_gpu_demotions_total counts the clients demoted to low, weight 1
 *   and not the unresponsive ones that already were (the per-client gauge
 *   cushare_client_unresponsive says 3 and 1).
 *
 * promtool's own check runs on a real daemon's page in
 * tests/e2e/prometheus_check.sh. */
#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/log.h"
#include "sched/metrics.h"
#include "sched/policy_int.h"
#include "sched/server.h"
#include "tserver.h"

#define OWNER 500u
#define TENANT 60001u

static struct sd_config cfg;
static struct sd_server srv;

static int setup(void **state)
{
    (void)state;
    cs_log_init("test_metrics", CS_LOG_ERROR);
    sd_config_defaults(&cfg);
    ts_start(&srv, &cfg, NULL, OWNER);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sd_server_fini(&srv);
    return 0;
}

struct peer {
    int fd;            /* our end */
    struct sd_conn *c; /* the daemon's */
};

struct who {
    uint32_t pid, uid, prio, weight;
    const char *name, *pod, *ns, *container;
};

/* A client that says HELLO (with LABELS) and attaches the node's GPU. */
static struct peer join(const struct who *w)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv),
                     0);
    struct peer p = {.fd = sv[1], .c = sd_conn_adopt(&srv, sv[0], w->pid, w->uid, w->uid)};
    assert_non_null(p.c);
    struct cs_msg m = {.type = CS_MSG_HELLO};
    m.u.hello.flags = CS_HELLO_LABELS;
    m.u.hello.priority = w->prio;
    m.u.hello.weight = w->weight;
    m.u.hello.proto_min = 1;
    strcpy(m.u.hello.name, w->name);
    strcpy(m.u.hello.pod, w->pod);
    strcpy(m.u.hello.ns, w->ns);
    ts_say(&srv, p.c, &m);
    m = (struct cs_msg){.type = CS_MSG_LABELS};
    strcpy(m.u.labels.container, w->container);
    ts_say(&srv, p.c, &m);
    m = (struct cs_msg){.type = CS_MSG_ATTACH};
    m.u.attach.uuid[0] = 0x17;
    m.u.attach.total_mem = 1ull << 30;
    ts_say(&srv, p.c, &m);
    assert_non_null(p.c->client);
    assert_non_null(p.c->client->slot[0]);
    return p;
}

static void leave(struct peer *p)
{
    p->c->dead = true; /* as an EOF would do */
    sd_server_settle(&srv);
    close(p->fd);
}

/* ---- the text format, read back ---------------------------------------------------- */

#define MAX_LABELS 12

struct sample {
    char name[128];
    size_t nlabels;
    char key[MAX_LABELS][32];
    char val[MAX_LABELS][CS_NAME_LEN * 2];
    double value;
};

static const char *parse_name(const char *p, char *out, size_t cap)
{
    size_t n = 0;
    if (!isalpha((unsigned char)*p) && *p != '_' && *p != ':')
        return NULL;
    while ((isalnum((unsigned char)*p) || *p == '_' || *p == ':') && n + 1 < cap)
        out[n++] = *p++;
    out[n] = '\0';
    return p;
}

/* A label value after its opening quote: \\, \" and \n are the only
 * escapes; ends at the closing quote. NULL when malformed. */
static const char *parse_value(const char *p, char *out, size_t cap)
{
    size_t n = 0;
    for (; *p != '"'; p++) {
        if (*p == '\0' || *p == '\n' || n + 1 >= cap)
            return NULL;
        if (*p == '\\') {
            p++;
            if (*p != '\\' && *p != '"' && *p != 'n')
                return NULL;
            out[n++] = *p == 'n' ? '\n' : *p;
        } else {
            out[n++] = *p;
        }
    }
    out[n] = '\0';
    return p + 1;
}

static const char *parse_labels(const char *p, struct sample *s)
{
    while (*p != '}') {
        if (s->nlabels == MAX_LABELS)
            return NULL;
        p = parse_name(p, s->key[s->nlabels], sizeof s->key[0]);
        if (!p || *p++ != '=' || *p++ != '"')
            return NULL;
        p = parse_value(p, s->val[s->nlabels], sizeof s->val[0]);
        if (!p)
            return NULL;
        s->nlabels++;
        if (*p == ',')
            p++;
        else if (*p != '}')
            return NULL;
    }
    return p + 1;
}

/* One line of the page: a sample, name{labels} value. 0, or -1 when it is
 * malformed. */
static int parse_sample(const char *line, struct sample *s)
{
    memset(s, 0, sizeof *s);
    const char *p = parse_name(line, s->name, sizeof s->name);
    if (p && *p == '{')
        p = parse_labels(p + 1, s);
    if (!p || *p++ != ' ')
        return -1;
    char *end;
    s->value = strtod(p, &end);
    return end != p && *end == '\0' ? 0 : -1;
}

static const char *label(const struct sample *s, const char *key)
{
    for (size_t i = 0; i < s->nlabels; i++)
        if (strcmp(s->key[i], key) == 0)
            return s->val[i];
    return NULL;
}

/* The page, each line checked; calls fn for every sample. Returns the
 * number of samples. */
static size_t each_sample(void (*fn)(const struct sample *, void *), void *arg)
{
    struct sd_buf b = {0};
    sd_metrics_render(&srv, &b);
    assert_false(b.oom);
    size_t n = 0;
    for (char *line = strtok(b.p, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#') {
            assert_true(strncmp(line, "# HELP ", 7) == 0 || strncmp(line, "# TYPE ", 7) == 0);
            continue;
        }
        struct sample s;
        if (parse_sample(line, &s) < 0)
            fail_msg("malformed line: %s", line);
        n++;
        if (fn)
            fn(&s, arg);
    }
    sd_buf_free(&b);
    return n;
}

/* ---- tests -------------------------------------------------------------------------- */

struct want {
    uint32_t pid;
    const char *pod, *ns, *container, *name;
    size_t seen; /* client series of that pid */
};

static void check_client_labels(const struct sample *s, void *arg)
{
    struct want *w = arg;
    if (strncmp(s->name, "cushare_client_", 15) != 0)
        return;
    /* every client series, histogram parts too, carries all of them */
    static const char *const keys[] = {"gpu", "client", "pid", "uid", "priority",
                                       "pod", "namespace", "container"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!label(s, keys[i]))
            fail_msg("%s has no label %s", s->name, keys[i]);
    for (; w->name; w++) {
        if ((uint32_t)atol(label(s, "pid")) != w->pid)
            continue;
        assert_string_equal(label(s, "client"), w->name);
        assert_string_equal(label(s, "pod"), w->pod);
        assert_string_equal(label(s, "namespace"), w->ns);
        assert_string_equal(label(s, "container"), w->container);
        w->seen++;
    }
}

/* The owner's claims are believed and shown escaped, a tenant's dropped;
 * whatever printable characters they hold, the page still parses. */
static void test_client_labels(void **state)
{
    (void)state;
    char long63[CS_NAME_LEN];
    memset(long63, '"', sizeof long63 - 1);
    long63[sizeof long63 - 1] = '\0';
    const struct who own = {7001, OWNER, CS_PRIO_NORMAL, 1, "a\"b\\c", "p\",evil=\"1",
                            "ns\\", long63};
    const struct who ten = {7002, TENANT, CS_PRIO_NORMAL, 1, "t}{", "victim", "victims",
                            "server"};
    struct peer o = join(&own), t = join(&ten);
    struct want w[] = {{7001, own.pod, own.ns, own.container, own.name, 0},
                       {7002, "", "", "", ten.name, 0},
                       {0, NULL, NULL, NULL, NULL, 0}};
    each_sample(check_client_labels, w);
    /* 26 plain client series and 3 histograms, each a line per bucket,
     * _sum and _count */
    assert_int_equal(w[0].seen, 26 + 3 * (SD_HIST_BUCKETS + 2));
    assert_int_equal(w[0].seen, w[1].seen);
    leave(&o);
    leave(&t);
}

static void count_clients(const struct sample *s, void *arg)
{
    *(size_t *)arg += strncmp(s->name, "cushare_client_", 15) == 0;
}

/* Series of clients that left disappear: the page grows with the clients
 * connected now, never with the clients seen. */
static void test_series_leave_with_the_client(void **state)
{
    (void)state;
    size_t none = 0, one = 0, two = 0, after = 0;
    size_t base = each_sample(count_clients, &none);
    assert_int_equal(none, 0);
    const struct who a = {7003, OWNER, CS_PRIO_NORMAL, 1, "a", "pa", "ns", "c"};
    const struct who b = {7004, OWNER, CS_PRIO_NORMAL, 1, "b", "pb", "ns", "c"};
    struct peer pa = join(&a);
    each_sample(count_clients, &one);
    struct peer pb = join(&b);
    each_sample(count_clients, &two);
    assert_true(one > 0);
    assert_int_equal(two, 2 * one);
    for (int i = 0; i < 50; i++) { /* many come and go */
        const struct who c = {8000u + (uint32_t)i, OWNER, CS_PRIO_NORMAL, 1, "c", "pc", "ns",
                              "c"};
        struct peer pc = join(&c);
        leave(&pc);
    }
    leave(&pa);
    each_sample(count_clients, &after);
    assert_int_equal(after, one); /* b's alone */
    leave(&pb);
    after = 0;
    assert_int_equal(each_sample(count_clients, &after), base);
    assert_int_equal(after, 0);
}

struct gauge {
    const char *name;
    const char *pid; /* NULL: any */
    double value;
    int found;
};

static void find_gauge(const struct sample *s, void *arg)
{
    struct gauge *g = arg;
    const char *pid = label(s, "pid");
    if (strcmp(s->name, g->name) == 0 && (!g->pid || (pid && strcmp(pid, g->pid) == 0))) {
        g->value = s->value;
        g->found++;
    }
}

static double value_of(const char *name, const char *pid)
{
    struct gauge g = {name, pid, 0, 0};
    each_sample(find_gauge, &g);
    assert_int_equal(g.found, 1);
    return g.value;
}

/* A normal client marked unresponsive is demoted and counted; one already
 * at low, weight 1 is marked but not counted as a demotion. */
static void test_demotions_counted(void **state)
{
    (void)state;
    const struct who n = {7005, OWNER, CS_PRIO_NORMAL, 4, "n", "", "", ""};
    const struct who l = {7006, OWNER, CS_PRIO_LOW, 1, "l", "", "", ""};
    struct peer pn = join(&n), pl = join(&l);
    assert_int_equal(value_of("cushare_gpu_demotions_total", NULL), 0);
    sd_unresponsive(&srv.policy, pn.c->client, "test", ts_still_clock(NULL));
    sd_unresponsive(&srv.policy, pl.c->client, "test", ts_still_clock(NULL));
    assert_int_equal(value_of("cushare_gpu_unresponsive_clients_total", NULL), 2);
    assert_int_equal(value_of("cushare_gpu_demotions_total", NULL), 1);
    assert_int_equal(value_of("cushare_client_unresponsive", "7005"), 3);
    assert_int_equal(value_of("cushare_client_unresponsive", "7006"), 1);
    leave(&pn);
    leave(&pl);
    /* the GPU's count outlives the clients' series */
    assert_int_equal(value_of("cushare_gpu_demotions_total", NULL), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_client_labels, setup, teardown),
        cmocka_unit_test_setup_teardown(test_series_leave_with_the_client, setup, teardown),
        cmocka_unit_test_setup_teardown(test_demotions_counted, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
