/* jobs.h: the worker's jobs (jobs.c). */
#ifndef CS_HOOK_JOBS_H
#define CS_HOOK_JOBS_H

/* Registers the jobs with the worker. Once, from the constructor. */
void cs_jobs_init(void);

#endif
