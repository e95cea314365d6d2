/* endpoint.c: see endpoint.h. */
#include "sched/endpoint.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "sched/buf.h"
#include "sched/server.h"

#define NS_PER_S 1000000000ull
#define EP_HEADER "cushared-endpoints 1\n"
#define EP_CONNS_MAX 65536u /* CTL_ENDPOINT.max_conns, as the codec checks it */

typedef char sd_sockpath[sizeof(((struct sockaddr_un *)0)->sun_path)];

/* ---- names and terms ------------------------------------------------------------ */

bool sd_ep_id_ok(const char *id)
{
    size_t n = strnlen(id, CS_NAME_LEN);
    if (n == 0 || n >= CS_NAME_LEN || id[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)id[i]) && !strchr("._-", id[i]))
            return false;
    return true;
}

/* A pod or namespace: "" or a name that starts with a letter or digit
 * (every Kubernetes name does), so that the state file needs no quoting
 * and "-" can stand for "". */
static bool label_ok(const char *s)
{
    return !s[0] || (isalnum((unsigned char)s[0]) && sd_ep_id_ok(s));
}

static void grant_of(const struct cs_msg_ctl_endpoint *m, struct sd_grant *g)
{
    memset(g, 0, sizeof *g);
    g->max_priority = m->max_priority;
    g->max_weight = m->max_weight;
    g->mem_limit = m->mem_limit;
    g->max_conns = m->max_conns;
    g->ngpus = m->ngpus;
    memcpy(g->gpus, m->gpus, (size_t)m->ngpus * CS_UUID_LEN);
    cs_strlcpy(g->pod, m->pod, sizeof g->pod);
    cs_strlcpy(g->ns, m->ns, sizeof g->ns);
    g->identity = g->pod[0] || g->ns[0];
    snprintf(g->source, sizeof g->source, "endpoint %.54s", m->id);
}

static bool grant_same(const struct sd_grant *a, const struct sd_grant *b)
{
    return a->max_priority == b->max_priority && a->max_weight == b->max_weight &&
           a->mem_limit == b->mem_limit && a->max_conns == b->max_conns &&
           a->ngpus == b->ngpus && memcmp(a->gpus, b->gpus, sizeof a->gpus) == 0 &&
           strcmp(a->pod, b->pod) == 0 && strcmp(a->ns, b->ns) == 0 &&
           strcmp(a->container, b->container) == 0;
}

static int check_terms(const struct cs_msg_ctl_endpoint *m, char *why, size_t cap)
{
    if (!sd_ep_id_ok(m->id)) {
        snprintf(why, cap, "endpoint id '%.63s' is not 1-63 of [A-Za-z0-9._-] not starting "
                           "with '.'", m->id);
        return -EINVAL;
    }
    if (!label_ok(m->pod) || !label_ok(m->ns)) {
        snprintf(why, cap, "pod and namespace must be empty or [A-Za-z0-9._-] starting with "
                           "a letter or digit");
        return -EINVAL;
    }
    return 0;
}

static struct sd_ep *find(const struct sd_server *s, const char *id)
{
    for (struct sd_ep *ep = s->eps.list; ep; ep = ep->next)
        if (strcmp(ep->id, id) == 0)
            return ep;
    return NULL;
}

struct sd_ep *sd_ep_by_tag(const struct sd_server *s, uint64_t tag)
{
    for (struct sd_ep *ep = s->eps.list; ep; ep = ep->next)
        if (ep->serial == tag)
            return ep;
    return NULL;
}

/* <dir>/<id>[/<file>]; -1 when it does not fit in cap. */
static int ep_path(const struct sd_server *s, const char *id, const char *file, char *out,
                   size_t cap)
{
    int n = file ? snprintf(out, cap, "%s/%s/%s", s->eps.dir, id, file)
                 : snprintf(out, cap, "%s/%s", s->eps.dir, id);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

/* ---- directories ---------------------------------------------------------------- */

/* Creates path (0755) if missing and opens it without following a symlink;
 * then it must be a directory of the daemon's user that nobody else may
 * write. fix_mode: give it 0755 whatever it had (an endpoint's own
 * directory); otherwise only one just created is (the umask may have cut
 * it), and one found writable by others is refused. */
static int own_dir(const char *path, bool fix_mode, char *why, size_t cap)
{
    if (mkdir(path, 0755) == 0) {
        fix_mode = true;
    } else if (errno != EEXIST) {
        int e = errno;
        snprintf(why, cap, "cannot create %s: %s", path, strerror(e));
        return -e;
    }
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        int e = errno;
        snprintf(why, cap, "%s is not a directory (or a symlink to one): %s", path,
                 strerror(e));
        if (fd >= 0)
            close(fd);
        return -(e == ELOOP ? ENOTDIR : e);
    }
    int rc = 0;
    if (st.st_uid != geteuid()) {
        snprintf(why, cap, "%s belongs to uid %u, not to the daemon's uid %u", path,
                 (unsigned)st.st_uid, (unsigned)geteuid());
        rc = -EPERM;
    } else if (fix_mode && (st.st_mode & 07777) != 0755 && fchmod(fd, 0755) < 0) {
        rc = -errno;
        snprintf(why, cap, "cannot chmod %s: %s", path, strerror(-rc));
    } else if (!fix_mode && (st.st_mode & 022)) {
        snprintf(why, cap, "%s is writable by group or others (mode %03o); refusing it", path,
                 (unsigned)(st.st_mode & 0777));
        rc = -EPERM;
    }
    close(fd);
    return rc;
}

int sd_ep_write_atomic(const char *dir, const char *name, const char *data, size_t len)
{
    char tmp[SD_PATH_LEN + CS_NAME_LEN], dst[SD_PATH_LEN + CS_NAME_LEN];
    int a = snprintf(tmp, sizeof tmp, "%s/.%s.XXXXXX", dir, name);
    int b = snprintf(dst, sizeof dst, "%s/%s", dir, name);
    if (a < 0 || b < 0 || (size_t)a >= sizeof tmp || (size_t)b >= sizeof dst) {
        errno = ENAMETOOLONG;
        return -1;
    }
    /* mkostemp creates with O_EXCL: a planted file or symlink of that name
     * makes it pick another; rename replaces a symlink at dst, never
     * writes through it. */
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    int rc = off == len && fchmod(fd, 0644) == 0 && fsync(fd) == 0 ? 0 : -1;
    int e = errno;
    if (close(fd) < 0 && rc == 0) {
        rc = -1;
        e = errno;
    }
    if (rc == 0 && rename(tmp, dst) < 0) {
        rc = -1;
        e = errno;
    }
    if (rc < 0)
        unlink(tmp);
    errno = e;
    return rc;
}

/* ---- persistence ---------------------------------------------------------------- */

/* One line: ep ID PRIORITY WEIGHT CONNS MEM GPUS|- POD|- NS|- [CONTAINER]. The
 * container only when there is one: a line without it is what an older
 * daemon wrote and reads. */
static void append_ep(struct sd_buf *b, const struct sd_ep *ep)
{
    const struct sd_grant *g = &ep->grant;
    sd_buf_printf(b, "ep %s %u %u %u %" PRIu64 " ", ep->id, g->max_priority, g->max_weight,
                  g->max_conns, g->mem_limit);
    for (uint32_t i = 0; i < g->ngpus; i++) {
        char uuid[CS_UUID_STR_LEN];
        cs_uuid_format(g->gpus[i], uuid);
        sd_buf_printf(b, "%s%s", i ? "," : "", uuid);
    }
    sd_buf_printf(b, "%s %s %s%s%s\n", g->ngpus ? "" : "-", g->pod[0] ? g->pod : "-",
                  g->ns[0] ? g->ns : "-", g->container[0] ? " " : "", g->container);
}

static void ep_save(struct sd_server *s)
{
    struct sd_buf b = {0};
    sd_buf_printf(&b, EP_HEADER);
    for (const struct sd_ep *ep = s->eps.list; ep; ep = ep->next)
        append_ep(&b, ep);
    if (b.oom)
        errno = ENOMEM;
    if (b.oom || sd_ep_write_atomic(s->eps.dir, SD_EP_STATE, b.p, b.len) < 0)
        cs_warn("cannot write %s/%s: %s (a restarted daemon will not recreate its endpoints)",
                s->eps.dir, SD_EP_STATE, strerror(errno));
    sd_buf_free(&b);
}

static int parse_gpus(char *list, struct cs_msg_ctl_endpoint *m)
{
    if (strcmp(list, "-") == 0)
        return 0;
    char *save = NULL;
    for (char *u = strtok_r(list, ",", &save); u; u = strtok_r(NULL, ",", &save)) {
        if (m->ngpus == CS_MAX_DEVICES || cs_uuid_parse(u, m->gpus[m->ngpus]) < 0)
            return -1;
        m->ngpus++;
    }
    return m->ngpus ? 0 : -1;
}

static int parse_label(const char *tok, char *out)
{
    if (strcmp(tok, "-") == 0)
        return 0;
    if (strlen(tok) >= CS_NAME_LEN || !label_ok(tok))
        return -1;
    cs_strlcpy(out, tok, CS_NAME_LEN);
    return 0;
}

/* A line of append_ep into m and container (CS_NAME_LEN). The file is in
 * a directory of the daemon's, but every field is checked as if it came
 * from anyone: a bad one drops the line. */
static int parse_line(char *line, struct cs_msg_ctl_endpoint *m, char *container)
{
    memset(m, 0, sizeof *m);
    m->op = CS_EP_CREATE;
    container[0] = '\0';
    char *tok[11], *save = NULL;
    size_t n = 0;
    for (char *t = strtok_r(line, " \n", &save); t; t = strtok_r(NULL, " \n", &save)) {
        if (n == 11)
            return -1;
        tok[n++] = t;
    }
    uint64_t v[4];
    if ((n != 9 && n != 10) || strcmp(tok[0], "ep") != 0 || strlen(tok[1]) >= CS_NAME_LEN ||
        cs_parse_u64(tok[2], 0, CS_PRIO_COUNT - 1, &v[0]) < 0 ||
        cs_parse_u64(tok[3], 1, CS_WEIGHT_MAX, &v[1]) < 0 ||
        cs_parse_u64(tok[4], 0, EP_CONNS_MAX, &v[2]) < 0 ||
        cs_parse_u64(tok[5], 0, 1ull << 62, &v[3]) < 0 || parse_gpus(tok[6], m) < 0 ||
        parse_label(tok[7], m->pod) < 0 || parse_label(tok[8], m->ns) < 0 ||
        (n == 10 && (parse_label(tok[9], container) < 0 || !container[0])))
        return -1;
    if (container[0] && !m->pod[0] && !m->ns[0])
        return -1; /* a container names a process of a pod: never written without one */
    cs_strlcpy(m->id, tok[1], sizeof m->id);
    m->max_priority = (uint32_t)v[0];
    m->max_weight = (uint32_t)v[1];
    m->max_conns = (uint32_t)v[2];
    m->mem_limit = v[3];
    return sd_ep_id_ok(m->id) ? 0 : -1;
}

/* ---- one endpoint ---------------------------------------------------------------- */

/* Its directory and a listening socket in it, in the server's epoll set. */
static int ep_listen(struct sd_server *s, struct sd_ep *ep, char *why, size_t cap)
{
    sd_sockpath sock;
    char dir[SD_PATH_LEN + CS_NAME_LEN];
    if (ep_path(s, ep->id, SD_EP_SOCK, sock, sizeof sock) < 0) {
        snprintf(why, cap, "socket path %s/%s/%s is too long for a unix socket", s->eps.dir,
                 ep->id, SD_EP_SOCK);
        return -ENAMETOOLONG;
    }
    ep_path(s, ep->id, NULL, dir, sizeof dir);
    int rc = own_dir(dir, true, why, cap);
    if (rc < 0)
        return rc;
    unlink(sock); /* a previous daemon's: the directory is ours alone */
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, sock, sizeof sock);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    /* 0666: the container's uid is unknown; what a connection may claim
     * comes from the endpoint, not from who can open the socket. */
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || chmod(sock, 0666) < 0 ||
        listen(fd, 64) < 0 || sd_server_add_listener(s, fd, ep->serial) < 0) {
        rc = -errno;
        snprintf(why, cap, "cannot listen on %s: %s", sock, strerror(errno));
        if (fd >= 0)
            close(fd);
        return rc;
    }
    ep->lfd = fd;
    return 0;
}

/* Closes the listener and forgets the connections' link to it (they keep
 * running with their grant); with remove, deletes the socket and directory. */
static void ep_destroy(struct sd_server *s, struct sd_ep *ep, bool remove)
{
    if (ep->lfd >= 0)
        close(ep->lfd); /* also leaves the epoll set */
    for (struct sd_conn *c = s->conns; c; c = c->next)
        if (c->ep == ep)
            c->ep = NULL;
    sd_sockpath sock;
    char dir[SD_PATH_LEN + CS_NAME_LEN];
    if (ep_path(s, ep->id, SD_EP_SOCK, sock, sizeof sock) == 0)
        unlink(sock);
    if (remove && ep_path(s, ep->id, NULL, dir, sizeof dir) == 0 && rmdir(dir) < 0 &&
        errno != ENOENT)
        cs_warn("endpoint %s: cannot remove %s: %s", ep->id, dir, strerror(errno));
    free(ep);
}

static void reply_path(const struct sd_server *s, const struct sd_ep *ep, char *text,
                       size_t cap)
{
    if (ep_path(s, ep->id, SD_EP_SOCK, text, cap) < 0)
        snprintf(text, cap, "(path too long)");
}

/* A new endpoint (container: its allocation's, "" unknown). save: persist
 * now (not while loading the state). */
static int ep_new(struct sd_server *s, const struct cs_msg_ctl_endpoint *m, const char *container,
                  bool save, char *text, size_t cap)
{
    if (s->eps.n >= s->cfg.max_endpoints) {
        snprintf(text, cap, "too many endpoints (max_endpoints = %u)", s->cfg.max_endpoints);
        return -ENOSPC;
    }
    int rc = own_dir(s->eps.dir, false, text, cap);
    if (rc < 0)
        return rc;
    struct sd_ep *ep = calloc(1, sizeof *ep);
    if (!ep) {
        snprintf(text, cap, "out of memory");
        return -ENOMEM;
    }
    ep->serial = SD_EP_TAG | ++s->eps.next_serial;
    cs_strlcpy(ep->id, m->id, sizeof ep->id);
    grant_of(m, &ep->grant);
    cs_strlcpy(ep->grant.container, container, sizeof ep->grant.container);
    ep->lfd = -1;
    ep->idle_since = sd_server_now(s);
    if ((rc = ep_listen(s, ep, text, cap)) < 0) {
        free(ep);
        return rc;
    }
    ep->next = s->eps.list;
    s->eps.list = ep;
    s->eps.n++;
    if (save)
        ep_save(s);
    cs_info("endpoint %s: created (%s, weight <= %u%s%s)", ep->id,
            cs_priority_name((int)ep->grant.max_priority), ep->grant.max_weight,
            ep->grant.identity ? ", pod " : "", ep->grant.identity ? ep->grant.pod : "");
    reply_path(s, ep, text, cap);
    return 0;
}

static int ep_create(struct sd_server *s, const struct cs_msg_ctl_endpoint *m, char *text,
                     size_t cap)
{
    int rc = check_terms(m, text, cap);
    if (rc < 0)
        return rc;
    struct sd_ep *ep = find(s, m->id);
    if (!ep)
        return ep_new(s, m, "", true, text, cap);
    struct sd_grant g;
    grant_of(m, &g);
    if (!grant_same(&ep->grant, &g)) {
        memcpy(&ep->grant, &g, sizeof g);
        ep_save(s);
        cs_info("endpoint %s: new terms for new connections", ep->id);
    }
    reply_path(s, ep, text, cap);
    return 0;
}

static void ep_unlink(struct sd_server *s, struct sd_ep *ep)
{
    for (struct sd_ep **pp = &s->eps.list; *pp; pp = &(*pp)->next) {
        if (*pp == ep) {
            *pp = ep->next;
            s->eps.n--;
            return;
        }
    }
}

static int ep_remove(struct sd_server *s, const char *id, char *text, size_t cap)
{
    struct sd_ep *ep = find(s, id);
    if (!ep) {
        snprintf(text, cap, "no endpoint '%.63s'", id);
        return -ENOENT;
    }
    ep_unlink(s, ep);
    ep_destroy(s, ep, true);
    ep_save(s);
    cs_info("endpoint %s: removed", id);
    snprintf(text, cap, "removed %.63s", id);
    return 0;
}

static int eps_off(const struct sd_server *s, char *text, size_t cap)
{
    if (s->eps.dir[0])
        return 0;
    snprintf(text, cap, "endpoints are off on this daemon (endpoint_dir = none, or no socket)");
    return -EOPNOTSUPP;
}

int sd_ep_request(struct sd_server *s, const struct cs_msg_ctl_endpoint *m, char *text,
                  size_t cap)
{
    int rc = eps_off(s, text, cap);
    if (rc < 0)
        return rc;
    return m->op == CS_EP_CREATE ? ep_create(s, m, text, cap) : ep_remove(s, m->id, text, cap);
}

/* ---- identity: the pod an existing endpoint serves --------------------------------- */

/* One field of an identity: what g names stays; what it does not is filled
 * in. False when g names something else. */
static bool fill(char *have, const char *want)
{
    if (have[0] && want[0] && strcmp(have, want) != 0)
        return false;
    if (!have[0])
        cs_strlcpy(have, want, CS_NAME_LEN);
    return true;
}

/* g names the pod, namespace and container of m where it named none; false
 * (g unchanged) when it named others. */
static bool identity_fill(struct sd_grant *g, const struct cs_msg_ctl_ep_identity *m)
{
    struct sd_grant t = *g;
    if (!fill(t.pod, m->pod) || !fill(t.ns, m->ns) || !fill(t.container, m->container))
        return false;
    t.identity = true;
    *g = t;
    return true;
}

static int check_identity(const struct cs_msg_ctl_ep_identity *m, char *why, size_t cap)
{
    if (!sd_ep_id_ok(m->id)) {
        snprintf(why, cap, "endpoint id '%.63s' is not 1-63 of [A-Za-z0-9._-]", m->id);
        return -EINVAL;
    }
    if (!m->pod[0] || !m->ns[0] || !label_ok(m->pod) || !label_ok(m->ns) ||
        !label_ok(m->container)) {
        snprintf(why, cap, "pod and namespace (and a container, if given) must be 1-63 of "
                           "[A-Za-z0-9._-] starting with a letter or digit");
        return -EINVAL;
    }
    return 0;
}

int sd_ep_identity(struct sd_server *s, const struct cs_msg_ctl_ep_identity *m, char *text,
                   size_t cap)
{
    int rc = eps_off(s, text, cap);
    if (rc < 0 || (rc = check_identity(m, text, cap)) < 0)
        return rc;
    struct sd_ep *ep = find(s, m->id);
    if (!ep) {
        snprintf(text, cap, "no endpoint '%.63s'", m->id);
        return -ENOENT;
    }
    struct sd_grant g = ep->grant;
    if (!identity_fill(&g, m)) {
        snprintf(text, cap, "endpoint %.63s already names %.63s/%.63s container '%.63s'; "
                            "CREATE it again to name another", ep->id, ep->grant.ns,
                 ep->grant.pod, ep->grant.container);
        return -EEXIST;
    }
    if (!grant_same(&g, &ep->grant)) {
        ep->grant = g;
        ep_save(s);
        cs_info("endpoint %s: pod %s/%s, container %s", ep->id, g.ns, g.pod,
                g.container[0] ? g.container : "(unknown)");
    }
    /* The connections already open on it: a client that came before the
     * device plugin learned the pod is shown with it from now on. One that
     * names another pod (CREATEd with other terms since) keeps its own. */
    for (struct sd_conn *c = s->conns; c; c = c->next)
        if (c->ep == ep && identity_fill(&c->grant, m))
            sd_dispatch_identity_changed(c);
    snprintf(text, cap, "endpoint %.63s: pod %.63s/%.63s", ep->id, g.ns, g.pod);
    return 0;
}

/* ---- connections and idleness ---------------------------------------------------- */

uint32_t sd_ep_max_conns(const struct sd_server *s, const struct sd_ep *ep)
{
    return ep->grant.max_conns ? ep->grant.max_conns : s->cfg.endpoint_max_conns;
}

void sd_ep_conn_opened(struct sd_server *s, struct sd_ep *ep, struct sd_conn *c)
{
    (void)s;
    memcpy(&c->grant, &ep->grant, sizeof c->grant);
    c->ep = ep;
    c->on_endpoint = true;
    ep->nconns++;
}

void sd_ep_conn_closed(struct sd_server *s, struct sd_conn *c)
{
    struct sd_ep *ep = c->ep;
    c->ep = NULL;
    if (ep && --ep->nconns == 0)
        ep->idle_since = sd_server_now(s);
}

uint64_t sd_ep_deadline(const struct sd_server *s)
{
    uint64_t ttl = (uint64_t)s->cfg.endpoint_idle_ttl_s * NS_PER_S, d = 0;
    for (const struct sd_ep *ep = s->eps.list; ep && ttl; ep = ep->next)
        if (ep->nconns == 0 && (!d || ep->idle_since + ttl < d))
            d = ep->idle_since + ttl;
    return d;
}

void sd_ep_tick(struct sd_server *s, uint64_t now)
{
    uint64_t ttl = (uint64_t)s->cfg.endpoint_idle_ttl_s * NS_PER_S;
    bool changed = false;
    for (struct sd_ep *ep = s->eps.list, *next; ep && ttl; ep = next) {
        next = ep->next;
        if (ep->nconns || now < ep->idle_since + ttl)
            continue;
        cs_info("endpoint %s: no connection for %u s; removing it", ep->id,
                s->cfg.endpoint_idle_ttl_s);
        ep_unlink(s, ep);
        ep_destroy(s, ep, true);
        changed = true;
    }
    if (changed)
        ep_save(s);
}

/* ---- start and stop --------------------------------------------------------------- */

/* Recreates the endpoints of endpoints.state; a bad line is skipped. */
static void ep_load(struct sd_server *s)
{
    char path[SD_PATH_LEN + CS_NAME_LEN];
    snprintf(path, sizeof path, "%s/%s", s->eps.dir, SD_EP_STATE);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (!f) {
        if (errno != ENOENT)
            cs_warn("cannot read %s: %s; no endpoint recreated", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return;
    }
    char line[1024], why[CS_TEXT_LEN];
    unsigned lineno = 1;
    if (!fgets(line, sizeof line, f) || strcmp(line, EP_HEADER) != 0) {
        cs_warn("%s: not an endpoint state file; no endpoint recreated", path);
        fclose(f);
        return;
    }
    while (fgets(line, sizeof line, f)) {
        lineno++;
        bool whole = strchr(line, '\n') != NULL;
        struct cs_msg_ctl_endpoint m;
        char container[CS_NAME_LEN];
        int rc = whole ? parse_line(line, &m, container) : -1;
        if (rc < 0)
            cs_warn("%s:%u: malformed line skipped", path, lineno);
        else if (find(s, m.id))
            cs_warn("%s:%u: endpoint %s given twice; the first kept", path, lineno, m.id);
        else if (ep_new(s, &m, container, false, why, sizeof why) < 0)
            cs_warn("%s:%u: endpoint %s not recreated: %s", path, lineno, m.id, why);
        for (int ch = 0; !whole && ch != '\n' && ch != EOF;)
            ch = fgetc(f); /* the rest of an overlong line */
    }
    fclose(f);
    ep_save(s); /* what could not be recreated is dropped */
}

void sd_ep_init(struct sd_server *s)
{
    struct sd_eps *e = &s->eps;
    memset(e, 0, sizeof *e);
    if (!s->have_socket || strcmp(s->cfg.endpoint_dir, "none") == 0)
        return;
    if (s->cfg.endpoint_dir[0]) {
        cs_strlcpy(e->dir, s->cfg.endpoint_dir, sizeof e->dir);
    } else {
        const char *slash = strrchr(s->sock_path, '/');
        int n = slash ? (int)(slash - s->sock_path) : 1;
        snprintf(e->dir, sizeof e->dir, "%.*s/endpoints", n, slash ? s->sock_path : ".");
    }
    char why[CS_TEXT_LEN];
    if (own_dir(e->dir, false, why, sizeof why) < 0) {
        cs_warn("endpoints: %s; none recreated, and CREATE fails until it is fixed", why);
        return;
    }
    ep_load(s);
}

void sd_ep_fini(struct sd_server *s)
{
    while (s->eps.list) {
        struct sd_ep *ep = s->eps.list;
        s->eps.list = ep->next;
        ep_destroy(s, ep, false);
    }
    s->eps.n = 0;
}
