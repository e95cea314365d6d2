/* worker.c: see worker.h. */
#include "hook/worker.h"
#include "hook/client.h"
#include "common/log.h"
#include "common/util.h"

#include <string.h>

/* Written once by the constructor (cs_worker_set_ops), before any thread
 * of ours exists; read-only afterwards. */
static const struct cs_worker_ops *worker_ops;

void cs_worker_set_ops(const struct cs_worker_ops *ops)
{
    worker_ops = ops;
}

/* The i-th queued job (0 = next); d->mu held. */
static struct cs_job *jobq_at(struct cs_jobq *q, unsigned i)
{
    return &q->jobs[(q->head + i) % CS_JOBQ];
}

static const struct cs_job *jobq_peek(const struct cs_jobq *q, unsigned i)
{
    return &q->jobs[(q->head + i) % CS_JOBQ];
}

static bool jobq_push(struct cs_jobq *q, struct cs_job job)
{
    if (q->count == CS_JOBQ)
        return false;
    job.conn = cs_client_generation();
    job.t0 = cs_now_ns();
    *jobq_at(q, q->count) = job;
    q->count++;
    pthread_cond_signal(&q->cv);
    return true;
}

bool cs_worker_push_locked(struct cs_dev *d, struct cs_job job)
{
    return jobq_push(&d->jobs.work, job);
}

bool cs_worker_push_pin_locked(struct cs_dev *d, struct cs_job job)
{
    return jobq_push(d->jobs.pinner_started ? &d->jobs.pins : &d->jobs.work, job);
}

bool cs_worker_has_locked(const struct cs_dev *d, uint8_t kind, uint64_t id)
{
    const struct cs_jobq *q = &d->jobs.work;
    for (unsigned i = 0; i < q->count; i++)
        if (jobq_peek(q, i)->kind == kind && jobq_peek(q, i)->id == id)
            return true;
    return false;
}

bool cs_worker_pending_locked(const struct cs_dev *d)
{
    return d->jobs.work.count > 0;
}

unsigned cs_worker_take_locked(struct cs_dev *d, uint8_t kind, struct cs_job *out)
{
    struct cs_jobq *q = &d->jobs.work;
    unsigned n = 0, kept = 0;
    for (unsigned i = 0; i < q->count; i++) {
        struct cs_job j = *jobq_at(q, i);
        if (j.kind == kind)
            out[n++] = j;
        else
            *jobq_at(q, kept++) = j;
    }
    q->count = kept;
    return n;
}

bool cs_worker_grant_queued_locked(const struct cs_dev *d, uint64_t lease_id)
{
    return (d->jobs.granting && d->jobs.granting_lease == lease_id) ||
           cs_worker_has_locked(d, CS_JOB_GRANT, lease_id);
}

/* Waits for the next job of q and takes it out; d->mu is taken and given
 * back. A GRANT taken off the worker's queue is marked as being granted in
 * the same critical section: a REVOKE for it that arrives in between must
 * find it somewhere (cs_worker_grant_queued_locked), or it would be ignored
 * and the lease kept until the daemon's revoke timeout. */
static struct cs_job jobq_pop(struct cs_dev *d, struct cs_jobq *q)
{
    pthread_mutex_lock(&d->mu);
    while (q->count == 0)
        pthread_cond_wait(&q->cv, &d->mu);
    struct cs_job job = *jobq_at(q, 0);
    q->head = (q->head + 1) % CS_JOBQ;
    q->count--;
    if (q == &d->jobs.work && job.kind == CS_JOB_GRANT) {
        d->jobs.granting = true;
        d->jobs.granting_lease = job.id;
    }
    pthread_mutex_unlock(&d->mu);
    return job;
}

static void run(struct cs_dev *d, const struct cs_job *job)
{
    if (worker_ops)
        worker_ops->run(d, job);
}

static void *worker_main(void *arg)
{
    struct cs_dev *d = arg;
    pthread_setname_np(pthread_self(), "cushare-work");
    for (;;) {
        struct cs_job job = jobq_pop(d, &d->jobs.work);
        run(d, &job);
        if (job.kind == CS_JOB_GRANT) { /* jobq_pop marked it granting */
            pthread_mutex_lock(&d->mu);
            d->jobs.granting = false;
            pthread_mutex_unlock(&d->mu);
        }
    }
    return NULL;
}

static void *pinner_main(void *arg)
{
    struct cs_dev *d = arg;
    pthread_setname_np(pthread_self(), "cushare-pin");
    for (;;) {
        struct cs_job job = jobq_pop(d, &d->jobs.pins);
        run(d, &job);
    }
    return NULL;
}

void cs_worker_start_locked(struct cs_dev *d)
{
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    if (!d->jobs.worker_started) {
        if (pthread_create(&d->jobs.worker, &a, worker_main, d) == 0)
            d->jobs.worker_started = true;
        else
            cs_error("cannot start the drain thread for GPU %d: revokes cannot be honoured",
                     d->ordinal);
    }
    if (!d->jobs.pinner_started && pthread_create(&d->jobs.pinner, &a, pinner_main, d) == 0)
        d->jobs.pinner_started = true;
    pthread_attr_destroy(&a);
}
