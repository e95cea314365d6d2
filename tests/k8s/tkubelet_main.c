/* tkubelet_main.c: the test kubelet as a program, for a check on a real
 * node (bench/gpu/k8s_check.sh): serves Registration on DIR/kubelet.sock,
 * waits for the plugin to register RESOURCE, then does what the kubelet does
 * for one pod: GetDevicePluginOptions, ListAndWatch, GetPreferredAllocation
 * (one device), Allocate, PreStartContainer. Prints each answer, checks
 * them, writes the container's environment to ENVFILE (K=V lines) and
 * exits 0 when everything is right.
 *
 *   tkubelet --dir DIR [--resource NAME] [--env-out FILE] */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <grpc/grpc.h>

#include "k8s/dp_grpc.h"
#include "tclient.h"
#include "tkubelet.h"

#define WAIT_MS 30000

static int failures;

static void check(bool ok, const char *what)
{
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    failures += !ok;
}

static V1beta1__ListAndWatchResponse *list_once(struct tc *t)
{
    struct tc_stream *s = tc_list_open(t);
    V1beta1__ListAndWatchResponse *l = tc_list_next(s, WAIT_MS);
    tc_list_close(s);
    if (!l)
        return NULL;
    printf("ListAndWatch: %zu devices\n", l->n_devices);
    for (size_t i = 0; i < l->n_devices; i++)
        printf("  %s %s%s\n", l->devices[i]->id, l->devices[i]->health,
               l->devices[i]->topology && l->devices[i]->topology->n_nodes ? " (NUMA known)" : "");
    return l;
}

static char *prefer_one(struct tc *t, const V1beta1__ListAndWatchResponse *l)
{
    V1beta1__ContainerPreferredAllocationRequest c =
        V1BETA1__CONTAINER_PREFERRED_ALLOCATION_REQUEST__INIT;
    char **ids = calloc(l->n_devices + 1, sizeof *ids);
    for (size_t i = 0; i < l->n_devices; i++)
        ids[i] = l->devices[i]->id;
    c.available_deviceids = ids;
    c.n_available_deviceids = l->n_devices;
    c.allocation_size = 1;
    V1beta1__ContainerPreferredAllocationRequest *cs[1] = {&c};
    V1beta1__PreferredAllocationRequest rq = V1BETA1__PREFERRED_ALLOCATION_REQUEST__INIT;
    rq.n_container_requests = 1;
    rq.container_requests = cs;
    V1beta1__PreferredAllocationResponse *o = NULL;
    char msg[256], *pick = NULL;
    if (tc_call(t, DP_M_PREFER, &rq.base, &v1beta1__preferred_allocation_response__descriptor,
                (ProtobufCMessage **)&o, msg, sizeof msg) == GRPC_STATUS_OK &&
        o->n_container_responses == 1 && o->container_responses[0]->n_deviceids == 1)
        pick = strdup(o->container_responses[0]->deviceids[0]);
    printf("GetPreferredAllocation: %s\n", pick ? pick : msg);
    if (o)
        protobuf_c_message_free_unpacked(&o->base, NULL);
    free(ids);
    return pick;
}

static void print_alloc(const V1beta1__ContainerAllocateResponse *r)
{
    printf("Allocate response:\n");
    for (size_t i = 0; i < r->n_envs; i++)
        printf("  env    %s=%s\n", r->envs[i]->key, r->envs[i]->value);
    for (size_t i = 0; i < r->n_mounts; i++)
        printf("  mount  %s -> %s%s\n", r->mounts[i]->host_path, r->mounts[i]->container_path,
               r->mounts[i]->read_only ? " (ro)" : "");
    for (size_t i = 0; i < r->n_devices; i++)
        printf("  device %s -> %s (%s)\n", r->devices[i]->host_path,
               r->devices[i]->container_path, r->devices[i]->permissions);
    for (size_t i = 0; i < r->n_annotations; i++)
        printf("  annotation %s=%s\n", r->annotations[i]->key, r->annotations[i]->value);
}

static void check_alloc(const V1beta1__ContainerAllocateResponse *r, const char *pick,
                        const char *env_out)
{
    const char *vis = tc_env(r, "NVIDIA_VISIBLE_DEVICES");
    const char *sep = strstr(pick, "::");
    check(vis && sep && strlen(vis) == (size_t)(sep - pick) && !strncmp(vis, pick, strlen(vis)),
          "NVIDIA_VISIBLE_DEVICES is the UUID of the chosen device");
    check(tc_env(r, "CUSHARE_SOCKET") != NULL, "CUSHARE_SOCKET is set");
    bool exist = r->n_mounts >= 2;
    struct stat st;
    for (size_t i = 0; i < r->n_mounts; i++)
        exist &= stat(r->mounts[i]->host_path, &st) == 0;
    check(exist, "the library and the socket directory are mounted from paths that exist");
    FILE *f = env_out ? fopen(env_out, "w") : NULL;
    for (size_t i = 0; f && i < r->n_envs; i++)
        fprintf(f, "%s=%s\n", r->envs[i]->key, r->envs[i]->value);
    if (f)
        fclose(f);
}

static void allocate(struct tc *t, const char *pick, const char *env_out)
{
    V1beta1__ContainerAllocateRequest c = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
    char *ids[1] = {(char *)pick};
    c.devices_ids = ids;
    c.n_devices_ids = 1;
    V1beta1__ContainerAllocateRequest *cs[1] = {&c};
    V1beta1__AllocateRequest rq = V1BETA1__ALLOCATE_REQUEST__INIT;
    rq.n_container_requests = 1;
    rq.container_requests = cs;
    V1beta1__AllocateResponse *a = NULL;
    char msg[256];
    grpc_status_code st = tc_call(t, DP_M_ALLOCATE, &rq.base, &v1beta1__allocate_response__descriptor,
                                  (ProtobufCMessage **)&a, msg, sizeof msg);
    check(st == GRPC_STATUS_OK && a->n_container_responses == 1, "Allocate answers");
    if (st != GRPC_STATUS_OK) {
        printf("  status %d: %s\n", (int)st, msg);
        return;
    }
    print_alloc(a->container_responses[0]);
    check_alloc(a->container_responses[0], pick, env_out);
    protobuf_c_message_free_unpacked(&a->base, NULL);
}

static void prestart(struct tc *t, const char *pick)
{
    V1beta1__PreStartContainerRequest rq = V1BETA1__PRE_START_CONTAINER_REQUEST__INIT;
    char *ids[1] = {(char *)pick};
    rq.devices_ids = ids;
    rq.n_devices_ids = 1;
    ProtobufCMessage *o = NULL;
    char msg[256], what[320];
    grpc_status_code st = tc_call(t, DP_M_PRESTART, &rq.base,
                                  &v1beta1__pre_start_container_response__descriptor, &o, msg,
                                  sizeof msg);
    snprintf(what, sizeof what, "PreStartContainer (GPU healthy, cushared answers)%s%s",
             st == GRPC_STATUS_OK ? "" : ": ", st == GRPC_STATUS_OK ? "" : msg);
    check(st == GRPC_STATUS_OK, what);
    if (o)
        protobuf_c_message_free_unpacked(o, NULL);
}

static void pod(struct tk *k, const char *dir, const char *resource, const char *env_out)
{
    const V1beta1__RegisterRequest *r = tk_wait_register(k, resource, 0, WAIT_MS);
    check(r != NULL, "the plugin registered");
    if (!r)
        return;
    printf("Register: version=%s endpoint=%s resource=%s pre_start_required=%d preferred=%d\n",
           r->version, r->endpoint, r->resource_name, r->options ? r->options->pre_start_required : 0,
           r->options ? r->options->get_preferred_allocation_available : 0);
    char sock[1024];
    snprintf(sock, sizeof sock, "%s/%s", dir, r->endpoint);
    struct tc *t = tc_open(sock);
    V1beta1__ListAndWatchResponse *l = list_once(t);
    bool healthy = l && l->n_devices > 0;
    for (size_t i = 0; l && i < l->n_devices; i++)
        healthy &= !strcmp(l->devices[i]->health, "Healthy");
    check(healthy, "ListAndWatch lists the GPU's devices, all healthy");
    char *pick = l ? prefer_one(t, l) : NULL;
    check(pick != NULL, "GetPreferredAllocation picks a device");
    if (pick) {
        allocate(t, pick, env_out);
        if (r->options && r->options->pre_start_required)
            prestart(t, pick);
    }
    free(pick);
    if (l)
        protobuf_c_message_free_unpacked(&l->base, NULL);
    tc_close(t);
}

int main(int argc, char **argv)
{
    const char *dir = NULL, *resource = "cushare.io/gpu", *env_out = NULL;
    static const struct option lo[] = {{"dir", required_argument, NULL, 'd'},
                                       {"resource", required_argument, NULL, 'r'},
                                       {"env-out", required_argument, NULL, 'e'},
                                       {NULL, 0, NULL, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        if (ch == 'd')
            dir = optarg;
        else if (ch == 'r')
            resource = optarg;
        else if (ch == 'e')
            env_out = optarg;
        else
            return 2;
    }
    if (!dir) {
        fprintf(stderr, "usage: tkubelet --dir DIR [--resource NAME] [--env-out FILE]\n");
        return 2;
    }
    grpc_init();
    struct tk *k = tk_start(dir, "kubelet.sock");
    printf("test kubelet on %s/kubelet.sock\n", dir);
    fflush(stdout);
    pod(k, dir, resource, env_out);
    tk_stop(k, false);
    grpc_shutdown();
    printf("%s\n", failures ? "tkubelet: FAIL" : "tkubelet: all checks passed");
    return failures ? 1 : 0;
}
