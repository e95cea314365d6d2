/* meter.c: see meter.h. */
#include "sched/meter.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/nvml.h"
#include "common/util.h"

struct sd_meter {
    /* Written by sd_meter_start before the thread exists, read-only after. */
    uint32_t ngpu;
    cs_nvml_device dev[SD_NODE_MAX_GPUS];
    uint8_t uuid[SD_NODE_MAX_GPUS][CS_UUID_LEN];
    uint64_t interval_ns;
    int efd;
    pthread_t thread;
    /* mu guards the rest (meter.h); cv wakes the thread to stop. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool waiting; /* posted holds a sample not taken yet */
    bool stopping;
    struct sd_meter_sample posted;
    /* The thread's own: the sample being read. */
    struct sd_meter_sample work;
};

/* ---- the thread ---------------------------------------------------------- */

static void mt_read(struct sd_meter *m)
{
    struct sd_meter_sample *s = &m->work;
    s->ngpu = m->ngpu;
    for (uint32_t i = 0; i < m->ngpu; i++) {
        struct sd_meter_gpu *g = &s->gpu[i];
        cs_nvml_proc p[SD_METER_PROCS];
        unsigned n = 0;
        memcpy(g->uuid, m->uuid[i], CS_UUID_LEN);
        g->err = cs_nvml_procs(m->dev[i], p, SD_METER_PROCS, &n);
        g->ok = g->err == CS_NVML_SUCCESS;
        g->n = g->ok ? n : 0;
        for (uint32_t j = 0; j < g->n; j++) {
            g->pid[j] = p[j].pid;
            g->used[j] = p[j].used;
        }
    }
}

/* Posts the sample just read, replacing one the loop has not taken: the
 * loop wants the newest figures, not every one. */
static void mt_post(struct sd_meter *m)
{
    pthread_mutex_lock(&m->mu);
    memcpy(&m->posted, &m->work, sizeof m->posted);
    if (!m->waiting) {
        uint64_t one = 1;
        ssize_t w = write(m->efd, &one, sizeof one);
        (void)w; /* a counter far from its limit: cannot fail */
        m->waiting = true;
    }
    pthread_mutex_unlock(&m->mu);
}

static void *mt_main(void *arg)
{
    struct sd_meter *m = arg;
    pthread_mutex_lock(&m->mu);
    while (!m->stopping) {
        pthread_mutex_unlock(&m->mu);
        mt_read(m);
        mt_post(m);
        pthread_mutex_lock(&m->mu);
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        uint64_t ns = (uint64_t)until.tv_nsec + m->interval_ns;
        until.tv_sec += (time_t)(ns / 1000000000u);
        until.tv_nsec = (long)(ns % 1000000000u);
        while (!m->stopping && pthread_cond_timedwait(&m->cv, &m->mu, &until) != ETIMEDOUT)
            ;
    }
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

/* ---- the loop's side ----------------------------------------------------- */

/* The GPUs NVML lists, by handle and UUID. 0, or -1 with the reason. */
static int mt_find_gpus(struct sd_meter *m, char *err, size_t cap)
{
    unsigned count = 0;
    cs_nvml_ret r = cs_nvml.count(&count);
    if (r != CS_NVML_SUCCESS) {
        snprintf(err, cap, "nvmlDeviceGetCount: %s", cs_nvml_err(r));
        return -1;
    }
    for (unsigned i = 0; i < count && m->ngpu < SD_NODE_MAX_GPUS; i++) {
        char txt[CS_NVML_UUID_LEN];
        uint64_t mem;
        char why[256];
        cs_nvml_device h;
        if (cs_nvml_describe(i, &h, txt, sizeof txt, &mem, why, sizeof why) < 0 ||
            cs_uuid_parse(txt, m->uuid[m->ngpu]) < 0)
            continue; /* discovery already said why */
        m->dev[m->ngpu++] = h;
    }
    if (m->ngpu == 0) {
        snprintf(err, cap, "NVML lists no GPU");
        return -1;
    }
    if (!cs_nvml.procs) {
        snprintf(err, cap, "NVML has no nvmlDeviceGetComputeRunningProcesses");
        return -1;
    }
    return 0;
}

static int mt_spawn(struct sd_meter *m, char *err, size_t cap)
{
    m->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (m->efd < 0) {
        snprintf(err, cap, "eventfd: %s", strerror(errno));
        return -1;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&m->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&m->mu, NULL);
    int e = pthread_create(&m->thread, NULL, mt_main, m);
    if (e) {
        snprintf(err, cap, "pthread_create: %s", strerror(e));
        pthread_cond_destroy(&m->cv);
        pthread_mutex_destroy(&m->mu);
        close(m->efd);
        return -1;
    }
    return 0;
}

int sd_meter_start(struct sd_meter **out, const char *nvml_lib, uint32_t interval_ms, char *err,
                   size_t cap)
{
    *out = NULL;
    struct sd_meter *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(err, cap, "out of memory");
        return -1;
    }
    m->interval_ns = (uint64_t)interval_ms * 1000000u;
    /* Threads inherit the creator's mask: NVML's and ours must leave every
     * signal to the loop's signalfd. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int rc = cs_nvml_open(nvml_lib ? nvml_lib : "libnvidia-ml.so.1", err, cap);
    if (rc == 0 && (rc = mt_find_gpus(m, err, cap)) == 0)
        rc = mt_spawn(m, err, cap);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc < 0) {
        cs_nvml_close();
        free(m);
        return -1;
    }
    *out = m;
    return 0;
}

int sd_meter_fd(const struct sd_meter *m)
{
    return m->efd;
}

bool sd_meter_take(struct sd_meter *m, struct sd_meter_sample *out)
{
    pthread_mutex_lock(&m->mu);
    bool got = m->waiting;
    if (got) {
        memcpy(out, &m->posted, sizeof *out);
        uint64_t n;
        ssize_t r = read(m->efd, &n, sizeof n);
        (void)r; /* readable exactly while waiting (meter.h) */
        m->waiting = false;
    }
    pthread_mutex_unlock(&m->mu);
    return got;
}

void sd_meter_stop(struct sd_meter *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    m->stopping = true;
    pthread_cond_signal(&m->cv);
    pthread_mutex_unlock(&m->mu);
    pthread_join(m->thread, NULL);
    cs_nvml_close();
    close(m->efd);
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
    free(m);
}
