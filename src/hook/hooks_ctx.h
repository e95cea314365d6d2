/* hooks_ctx.h: context and device entry points (hooks_ctx.c). */
#ifndef CS_HOOK_HOOKS_CTX_H
#define CS_HOOK_HOOKS_CTX_H

/* After fork(), in the child: forget the primary contexts. */
void cs_ctx_hooks_reset_after_fork(void);

#endif
