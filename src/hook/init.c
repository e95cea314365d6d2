/* init.c: the library constructor and fork handling.
 *
 * The constructor only reads settings and prepares locks: no CUDA call, no
 * thread, no connection (those wait for the first hooked call), because it
 * runs inside every process the library is injected into, CUDA or not.
 */
#include "hook/client.h"
#include "hook/config.h"
#include "hook/device.h"
#include "hook/lease.h"
#include "hook/mem.h"
#include "hook/seg.h"

#include <pthread.h>

static void after_fork_child(void)
{
    cs_client_reset_after_fork();
    cs_dev_reset_after_fork();
    cs_mem_reset_after_fork();
    cs_seg_reset_after_fork();
    cs_ctx_hooks_reset_after_fork();
}

__attribute__((constructor)) static void cs_hook_ctor(void)
{
    cs_config_load();
    for (int i = 0; i < CS_MAX_DEVICES; i++)
        cs_lease_reset_after_fork(&cs_devs[i], i);
    cs_seg_reset_after_fork();
    pthread_atfork(NULL, NULL, after_fork_child);
}
