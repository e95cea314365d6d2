/* fc_shm.c: the cross-process state: creation/attachment of the shared
 * object, the robust lock, and device memory accounting.
 *
 * Capacity is shared by every process on the same FAKECUDA_SHM. Each
 * process charges what it allocates to its own slot of the device's table;
 * free = total - sum(used of live slots). There is no daemon: the slot of a
 * process that exited or was SIGKILLed is reclaimed by whoever next takes
 * the lock to account or to answer cuMemGetInfo (pid liveness + start time
 * from /proc, so a reused pid is not mistaken for the dead owner).
 */
#include "fakecuda/fc_shm.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The mapping and this process's identity come from fc_proc (set during
 * cuInit, read-only afterwards). my_slot caches our slot index per device;
 * it is only read and written under the shm lock. */
static int my_slot[FC_MAX_DEVICES] = { -1, -1, -1, -1, -1, -1, -1, -1 };

static struct fc_shm *shm(void) { return fc_proc.shm; }

void fc_shm_lock(void)
{
    int r = pthread_mutex_lock(&shm()->lock);
    if (r == EOWNERDEAD) {
        /* The holder died mid-update; the tables tolerate that (dead
         * owners are reclaimed), so the state is usable as is. */
        pthread_mutex_consistent(&shm()->lock);
    } else if (r != 0) {
        fc_log("shared state lock failed: %s", strerror(r));
        abort();
    }
}

void fc_shm_unlock(void)
{
    pthread_mutex_unlock(&shm()->lock);
}

bool fc_shm_owner_alive(int32_t pid, uint64_t start)
{
    if (pid == fc_proc.pid)
        return start == fc_proc.start;
    return fc_proc_alive(pid, start);
}

static void shm_init_fresh(struct fc_shm *s, const struct fc_config *cfg)
{
    memset(s, 0, sizeof *s);
    s->layout = FC_SHM_LAYOUT;
    s->ndev = (uint32_t)cfg->ndev;
    s->mem_bytes = cfg->mem_bytes;
    s->size = sizeof *s;
    s->timeslice_ns = cfg->timeslice_ns;
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&s->lock, &a);
    pthread_mutexattr_destroy(&a);
    atomic_store_explicit(&s->magic, FC_SHM_MAGIC, memory_order_release);
}

/* Waits up to 2 s for the creator to size and initialize the object. */
static struct fc_shm *shm_map_existing(int fd, size_t size)
{
    struct stat st = { 0 };
    for (int i = 0; i < 200; i++) {
        if (fstat(fd, &st) == 0 && (size_t)st.st_size >= size)
            break;
        fc_sleep_ns(10000000);
    }
    if ((size_t)st.st_size < size)
        return NULL;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return NULL;
    struct fc_shm *s = p;
    for (int i = 0; i < 200; i++) {
        if (atomic_load_explicit(&s->magic, memory_order_acquire) == FC_SHM_MAGIC)
            return s;
        fc_sleep_ns(10000000);
    }
    munmap(p, size);
    return NULL;
}

static CUresult shm_check_layout(const struct fc_shm *s, const char *name)
{
    if (s->layout != FC_SHM_LAYOUT || s->size != sizeof *s) {
        fc_log("%s was made by another simulator build (layout %u, size %llu; "
               "want %u, %zu); remove /dev/shm%s",
               name, s->layout, (unsigned long long)s->size, FC_SHM_LAYOUT,
               sizeof *s, name);
        return CUDA_ERROR_OPERATING_SYSTEM;
    }
    return CUDA_SUCCESS;
}

CUresult fc_shm_attach(const struct fc_config *want, struct fc_config *got,
                       struct fc_shm **out, size_t *out_size)
{
    size_t size = fc_page_round(sizeof(struct fc_shm));
    for (int attempt = 0; attempt < 2; attempt++) {
        int fd = shm_open(want->shm_name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd >= 0) {
            if (ftruncate(fd, (off_t)size) != 0) {
                close(fd);
                shm_unlink(want->shm_name);
                return CUDA_ERROR_OPERATING_SYSTEM;
            }
            void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            close(fd);
            if (p == MAP_FAILED)
                return CUDA_ERROR_OPERATING_SYSTEM;
            shm_init_fresh(p, want);
            *got = *want;
            *out = p;
            *out_size = size;
            return CUDA_SUCCESS;
        }
        if (errno != EEXIST) {
            fc_log("shm_open %s: %s", want->shm_name, strerror(errno));
            return CUDA_ERROR_OPERATING_SYSTEM;
        }
        fd = shm_open(want->shm_name, O_RDWR | O_CLOEXEC, 0600);
        if (fd < 0)
            continue;                /* removed meanwhile: create it */
        struct fc_shm *s = shm_map_existing(fd, size);
        close(fd);
        if (!s) {
            /* Its creator died before initializing it: start over. */
            fc_log("%s was never initialized; recreating it", want->shm_name);
            shm_unlink(want->shm_name);
            continue;
        }
        CUresult r = shm_check_layout(s, want->shm_name);
        if (r != CUDA_SUCCESS) {
            munmap(s, size);
            return r;
        }
        *got = *want;
        got->ndev = (int)s->ndev;
        got->mem_bytes = s->mem_bytes;
        if (got->ndev != want->ndev || got->mem_bytes != want->mem_bytes)
            fc_log("%s exists with %d device(s) of %llu MiB; using that, not "
                   "FAKECUDA_DEVICES=%d FAKECUDA_MEM_MB=%llu",
                   want->shm_name, got->ndev,
                   (unsigned long long)(got->mem_bytes >> 20), want->ndev,
                   (unsigned long long)(want->mem_bytes >> 20));
        got->timeslice_ns = s->timeslice_ns;
        if (got->timeslice_ns != want->timeslice_ns)
            fc_log("%s exists with FAKECUDA_TIMESLICE_US=%llu; using that, not %llu",
                   want->shm_name, (unsigned long long)(got->timeslice_ns / 1000),
                   (unsigned long long)(want->timeslice_ns / 1000));
        *out = s;
        *out_size = size;
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_OPERATING_SYSTEM;
}

/* Under the lock: frees the slots of dead processes on dev. */
static void reap_slots(struct fc_shm_dev *d)
{
    for (int i = 0; i < FC_MAX_PROCS; i++) {
        struct fc_slot *sl = &d->slot[i];
        if (sl->pid && !fc_shm_owner_alive(sl->pid, sl->start))
            memset(sl, 0, sizeof *sl);
    }
}

static uint64_t used_total(const struct fc_shm_dev *d)
{
    uint64_t sum = 0;
    for (int i = 0; i < FC_MAX_PROCS; i++)
        sum += d->slot[i].used;
    return sum;
}

/* Under the lock: this process's slot on dev, made when create is set. */
static struct fc_slot *own_slot(struct fc_shm_dev *d, int dev, bool create)
{
    int i = my_slot[dev];
    if (i >= 0 && d->slot[i].pid == fc_proc.pid && d->slot[i].start == fc_proc.start)
        return &d->slot[i];
    for (i = 0; i < FC_MAX_PROCS; i++) {
        if (d->slot[i].pid == fc_proc.pid && d->slot[i].start == fc_proc.start) {
            my_slot[dev] = i;
            return &d->slot[i];
        }
    }
    if (!create)
        return NULL;
    for (i = 0; i < FC_MAX_PROCS; i++) {
        if (d->slot[i].pid == 0) {
            d->slot[i].start = fc_proc.start;
            d->slot[i].used = 0;
            d->slot[i].pid = fc_proc.pid;
            my_slot[dev] = i;
            return &d->slot[i];
        }
    }
    return NULL;
}

CUresult fc_shm_charge(int dev, uint64_t bytes)
{
    struct fc_shm_dev *d = &shm()->dev[dev];
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    fc_shm_lock();
    reap_slots(d);
    if (used_total(d) + bytes <= shm()->mem_bytes) {
        struct fc_slot *sl = own_slot(d, dev, true);
        if (sl) {
            sl->used += bytes;
            r = CUDA_SUCCESS;
        }
    }
    fc_shm_unlock();
    return r;
}

void fc_shm_uncharge(int dev, uint64_t bytes)
{
    struct fc_shm_dev *d = &shm()->dev[dev];
    fc_shm_lock();
    struct fc_slot *sl = own_slot(d, dev, false);
    if (sl) {
        sl->used -= bytes < sl->used ? bytes : sl->used;
        if (sl->used == 0)
            memset(sl, 0, sizeof *sl);   /* keep the table short */
    }
    fc_shm_unlock();
}

void fc_shm_meminfo(int dev, uint64_t *free_b, uint64_t *total_b)
{
    struct fc_shm_dev *d = &shm()->dev[dev];
    fc_shm_lock();
    reap_slots(d);
    uint64_t used = used_total(d), total = shm()->mem_bytes;
    fc_shm_unlock();
    *total_b = total;
    *free_b = used < total ? total - used : 0;
}

/* After fork the child is a different process: forget the cached slots
 * (the parent's stay the parent's). Called with no other thread running. */
void fc_shm_atfork_child(void)
{
    for (int i = 0; i < FC_MAX_DEVICES; i++)
        my_slot[i] = -1;
}
