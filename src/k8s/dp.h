/* dp.h: cushare-device-plugin, the kubelet device plugin (API v1beta1) that
 * advertises shares of the node's GPUs and tells the kubelet how to run a
 * container under libcushare.so.
 *
 * Modules (all prefixed dp_):
 *   dp_config   flags and environment -> struct dp_config
 *   dp_nvml     NVML loaded with dlopen, versioned-symbol fallbacks
 *   dp_ids      device IDs of the advertised resources
 *   dp_build    ListAndWatch / Allocate / GetPreferredAllocation replies
 *   dp_arena    bump allocator the replies are built in
 *   dp_grpc     protobuf-c <-> gRPC byte buffers, completion-queue tags,
 *               unary client calls
 *   dp_server   one gRPC server (DevicePlugin service) per resource
 *   dp_service  its unary methods: options, preferred allocation, Allocate,
 *               PreStartContainer
 *   dp_endpoint the daemon endpoint each container of a slots resource gets
 *   dp_podres   which pod holds an endpoint: the kubelet's pod-resources
 *               API, then CTL_EP_IDENTITY to the daemon
 *   dp_register the kubelet Registration client
 *   dp_install  the library and ld.so.preload files containers mount
 *   dp_watch    inotify on the kubelet's device-plugins directory
 *   dp_health   periodic GPU health
 *   dp_loop     the single thread that drives everything
 *   dp_main     the program: settings, NVML, files, loop
 * The APIs' messages come from api.proto and podresources.proto, compiled by
 * protoc-c at build time.
 */
#ifndef DP_H
#define DP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define DP_API_VERSION "v1beta1"
#define DP_DOMAIN "cushare.io"
#define DP_MAX_GPUS 64
#define DP_MAX_RES 16
#define DP_PATH_MAX 256
/* sun_path holds 108 bytes including the NUL. */
#define DP_SOCK_PATH_MAX 107
/* Buffers that hold a directory plus a file name (lengths checked at start). */
#define DP_JOIN_MAX (DP_PATH_MAX + 192)
/* The kubelet rejects device IDs longer than this. */
#define DP_ID_MAX 63
#define DP_UUID_MAX 80
#define DP_HEALTHY "Healthy"
#define DP_UNHEALTHY "Unhealthy"

enum dp_kind {
    DP_KIND_SLOTS,  /* N shares of each GPU: "UUID::k" */
    DP_KIND_MEMORY, /* one ID per `unit` bytes of each GPU: "UUID::mk" */
};

enum dp_inject {
    DP_INJECT_ENV,     /* LD_PRELOAD=<container lib> */
    DP_INJECT_PRELOAD, /* a file naming the lib mounted at /etc/ld.so.preload */
    DP_INJECT_NONE,    /* mount the lib only; the image preloads it itself */
};

enum dp_placement {
    DP_PLACE_SPREAD, /* prefer the GPU with the most free IDs */
    DP_PLACE_PACK,   /* prefer the GPU with the fewest free IDs */
};

/* One advertised resource (one registration, one socket). */
struct dp_resource {
    char name[128];    /* "cushare.io/gpu" */
    char endpoint[160]; /* socket file name in the plugin directory */
    enum dp_kind kind;
    unsigned slots;     /* SLOTS: IDs per GPU (0 until defaults are applied) */
    uint64_t unit;      /* MEMORY: bytes per ID */
    int priority;       /* CS_PRIO_*, or -1: the container decides */
    unsigned weight;    /* 0: the container decides */
    uint64_t mem_limit; /* bytes, 0: the container decides */
};

struct dp_config {
    char plugin_dir[DP_PATH_MAX]; /* the kubelet's device-plugins directory */
    char kubelet_sock[64];        /* its registration socket, in plugin_dir */
    char nvml_lib[DP_PATH_MAX];   /* dlopen name or path of NVML */
    char sysfs[DP_PATH_MAX];      /* for NUMA nodes of PCI devices */
    char lib[DP_PATH_MAX];        /* libcushare.so on the host */
    char lib_container[DP_PATH_MAX];
    char install_lib[DP_PATH_MAX];   /* copied to `lib` at start, "" = no */
    char daemon_socket[DP_PATH_MAX]; /* cushared's socket; in pods, the same path
                                        names their endpoint's socket */
    char preload_file[DP_PATH_MAX];  /* host file for DP_INJECT_PRELOAD */
    enum dp_inject inject;
    enum dp_placement placement;
    bool require_daemon; /* CUSHARE_REQUIRE_DAEMON=1 in containers */
    bool prestart;       /* PreStartContainer checks GPU health and the daemon */
    bool device_nodes;   /* Allocate adds /dev/nvidia* device specs */
    bool endpoints;      /* slots: a daemon endpoint per container (dp_endpoint) */
    char pod_resources[DP_PATH_MAX]; /* the kubelet's pod-resources socket, "" = off:
                                        who holds an endpoint (dp_podres) */
    unsigned pod_resources_timeout_s; /* how long after Allocate to look for the pod */
    unsigned slots;      /* default IDs per GPU of SLOTS resources */
    uint64_t unit;       /* default bytes per ID of MEMORY resources */
    unsigned health_ms;  /* health check period */
    int log_level;
    size_t nres;
    struct dp_resource res[DP_MAX_RES];
};

/* One physical GPU, as discovered. */
struct dp_gpu {
    char uuid[DP_UUID_MAX];
    char name[96];
    uint64_t mem_total;
    int minor; /* /dev/nvidia<minor>, -1 unknown */
    int numa;  /* NUMA node, -1 unknown */
    bool healthy;
    bool xid_dead; /* a critical Xid seen: unhealthy until restarted */
    void *handle;  /* nvmlDevice_t */
};

struct dp_node {
    size_t ngpus;
    struct dp_gpu gpu[DP_MAX_GPUS];
};

/* Aborts with a message: the plugin has no sensible way on without memory
 * (the DaemonSet restarts it), and it keeps every caller short. */
void *dp_xmalloc(size_t n);
void *dp_xcalloc(size_t n, size_t size);
char *dp_xstrdup(const char *s);

#endif
