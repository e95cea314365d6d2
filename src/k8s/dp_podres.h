/* dp_podres.h: which pod holds an endpoint, from the kubelet's pod-resources
 * API, told to cushared.
 *
 * Allocate carries only device IDs, so the endpoint it makes names no pod.
 * Once its answer is out, the kubelet lists the container holding those IDs
 * in pod-resources List (API v1, on --pod-resources, by default
 * /var/lib/kubelet/pod-resources/kubelet.sock: a socket of the node that
 * only root reaches). So after each Allocate that made an endpoint the
 * plugin calls List, asynchronously on its completion queue with a
 * deadline, again with backoff until the container shows up or
 * --pod-resources-timeout has passed; then it sends cushared the endpoint's
 * pod, namespace and container (CTL_EP_IDENTITY) over a non-blocking
 * control connection driven by the loop's tick. Nothing here blocks the
 * loop, except dp_podres_settle (see there).
 *
 * Every name from the kubelet is checked as cushared checks labels (1-63
 * of [A-Za-z0-9._-], starting with a letter or digit; bytes, so a NUL
 * cannot hide the rest); a holder with a bad name, or IDs held by two pods,
 * names nothing. Answers larger than DP_PR_MAX_RECV are not read. A missing
 * socket, an older kubelet, a failing call or an older cushared leave
 * endpoints without a pod, each said once in the log. */
#ifndef DP_PODRES_H
#define DP_PODRES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "k8s/podresources.pb-c.h"

#define DP_PR_NAME_LEN 64           /* cushared's CS_NAME_LEN: 63 characters */
#define DP_PR_MAX_RECV (16 << 20)   /* bytes of a List answer (the kubelet's own client's) */
#define DP_PR_CALL_MS 5000          /* deadline of one List call */
#define DP_PR_WANTS_MAX 256         /* endpoints looked for at once; beyond, the oldest goes */

struct dp_plugin;
struct dp_pr_want;
struct dp_pr_list;

/* Who holds an allocation, as cushared takes it. */
struct dp_pr_who {
    char pod[DP_PR_NAME_LEN];
    char ns[DP_PR_NAME_LEN];
    char container[DP_PR_NAME_LEN]; /* "" when several containers of the pod hold it */
};

/* CTL_EP_IDENTITY on its way (fd -1: none). */
struct dp_pr_push {
    int fd;
    int stage;              /* waiting for WELCOME, then for CTL_DONE */
    uint64_t deadline;      /* CLOCK_MONOTONIC ns */
    struct dp_pr_want *w;   /* whose */
};

struct dp_podres {
    struct dp_plugin *p;
    bool on;                /* endpoints on and --pod-resources given */
    struct dp_pr_want *wants; /* endpoints whose pod is not named yet, oldest first */
    size_t nwants;
    struct dp_pr_list *list;  /* the List call in flight, or NULL */
    struct dp_pr_push push;
    bool api_down;          /* said that pod-resources does not answer; until it does */
    bool daemon_old;        /* said that cushared does not know CTL_EP_IDENTITY */
};

void dp_podres_init(struct dp_podres *pr, struct dp_plugin *p);
/* Allocate made the endpoint of ids (of resource res): look for its pod.
 * Replaces a search for the same endpoint (the IDs went to a new container). */
void dp_podres_want(struct dp_podres *pr, const char *res, char *const *ids, size_t nids);
/* Before Allocate sends a CREATE: a CTL_EP_IDENTITY already on its way
 * reaches cushared first, so that it never lands on the endpoint the CREATE
 * starts over. Waits at most DP_EP_TIMEOUT_MS, as Allocate's own requests
 * to the daemon do; returns at once when nothing is on its way. */
void dp_podres_settle(struct dp_podres *pr);
/* From the loop: advances the push, starts a List or a push that is due,
 * gives up on what waited too long. */
void dp_podres_tick(struct dp_podres *pr, uint64_t now);
/* Stopping: the List call is cancelled (it still completes on the queue),
 * the push dropped. */
void dp_podres_stop(struct dp_podres *pr);
void dp_podres_free(struct dp_podres *pr);

enum dp_pr_match {
    DP_PR_NONE,     /* no container holds exactly these IDs (yet) */
    DP_PR_FOUND,    /* *who filled */
    DP_PR_INVALID,  /* the holder's names are not names: why says which; nothing named */
    DP_PR_CONFLICT, /* two pods hold them: why says which; nothing named */
};

/* The container of r that holds exactly ids (nids of them, none repeated)
 * of resource res. Pure: for the tests too. */
enum dp_pr_match dp_podres_match(const V1__ListPodResourcesResponse *r, const char *res,
                                 char *const *ids, size_t nids, struct dp_pr_who *who,
                                 char *why, size_t cap);

#endif
