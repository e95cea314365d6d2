/* fc_gparams.c: graph node parameters, as the real driver checks them.
 *
 * Memcpy and memset nodes are checked against the address map when they
 * are created and whenever their parameters are set, on the graph or on
 * an instantiated graph: an unmapped or inaccessible device address is
 * CUDA_ERROR_INVALID_VALUE (measured on an H100, bench/gpu/addr_probe.c).
 * Their work runs on whatever is mapped when the graph is launched, like
 * any copy (fc_copy.c checks again then).
 *
 * A memcpy node also records what each operand was when it was set
 * (struct fc_opnd): host- or device-located memory, and whether it
 * belongs to a context (cuMemAlloc, pinned host) or to none (VMM). The
 * real driver fixes this when the node is created or set, not at
 * instantiation: cuGraphExecMemcpyNodeSetParams refuses an operand that
 * differs and cuGraphExecUpdate fails on one (fc_gexec.c).
 *
 * Kernel nodes take cuLaunchKernel's checks (fc_launch.c); their
 * arguments are copied and never looked into, like the real driver's.
 */
#include "fakecuda/fc_internal.h"

#include <stddef.h>
#include <string.h>

CUresult fc_gp_ctx(CUcontext c)
{
    struct fc_ctx *cur;
    if (!c)
        return fc_ctx_current(&cur);     /* NULL: the current context */
    return fc_ctx_valid((struct fc_ctx *)c) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

/* What the operand at addr is now; is_dev false for a host pointer. */
static void opnd_of(uintptr_t addr, bool is_dev, int decl, struct fc_opnd *o)
{
    *o = (struct fc_opnd){ .decl = decl, .loc = CU_MEMORYTYPE_HOST, .dev = -1 };
    struct fc_range r;
    if (!is_dev || !fc_map_find(addr, &r))
        return;
    o->loc = r.dev_loc ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    o->vmm = r.kind == FC_R_VMM;
    o->dev = r.dev;
    o->ctx = r.ctx;
}

static bool opnd_eq(const struct fc_opnd *a, const struct fc_opnd *b)
{
    return a->decl == b->decl && a->loc == b->loc && a->vmm == b->vmm && a->dev == b->dev
           && a->ctx == b->ctx;
}

bool fc_opnd_same(const struct fc_opnd a[2], const struct fc_opnd b[2])
{
    return opnd_eq(&a[0], &b[0]) && opnd_eq(&a[1], &b[1]);
}

CUresult fc_gp_copy(const CUDA_MEMCPY3D *p, struct fc_op *op, struct fc_opnd opnd[2])
{
    struct fc_copy cp;
    CUresult r = fc_copy_from3d(p, &cp);
    if (r == CUDA_SUCCESS)
        r = fc_copy_check(&cp);
    if (r != CUDA_SUCCESS)
        return r;
    memset(op, 0, sizeof *op);
    op->kind = FC_OP_COPY;
    op->u.copy = cp;
    opnd_of(cp.dst, fc_copy_dst_dev(cp.dir), p->dstMemoryType, &opnd[0]);
    opnd_of(cp.src, fc_copy_src_dev(cp.dir), p->srcMemoryType, &opnd[1]);
    return CUDA_SUCCESS;
}

/* Zero-sized memset nodes are refused: a node always does work. */
CUresult fc_gp_memset(const CUDA_MEMSET_NODE_PARAMS *p, struct fc_op *op)
{
    if (!p || (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4)
        || p->width == 0 || p->height == 0)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_memset ms;
    CUresult r = fc_memset_make(p->dst, p->pitch, p->value, p->elementSize, p->width,
                                p->height, &ms);
    if (r != CUDA_SUCCESS)
        return r;
    if (!fc_memset_covered(&ms))
        return CUDA_ERROR_INVALID_VALUE;
    memset(op, 0, sizeof *op);
    op->kind = FC_OP_MEMSET;
    op->u.set = ms;
    return CUDA_SUCCESS;
}

CUresult fc_gp_kernel(CUfunction f, CUkernel kern, const unsigned g[3], const unsigned b[3],
                      unsigned shmem, void **params, void **extra, struct fc_op *op)
{
    memset(op, 0, sizeof *op);
    return fc_kernel_prepare(f ? f : (CUfunction)kern, g, b, shmem, params, extra, op);
}

void fc_gp_kernel_argp(struct fc_gnode *n)
{
    const struct fc_kdesc *k = n->op.u.kernel.k;
    memset(n->u.kern.argp, 0, sizeof n->u.kern.argp);
    for (int i = 0; i < k->nparams; i++)
        n->u.kern.argp[i] = n->op.u.kernel.args + k->poff[i];
}

/* cuda.h's v1 kernel node parameters are the first fields of v2's, and
 * v3's are v2's under another name: copied as bytes, the layouts pinned
 * down here. */
_Static_assert(sizeof(CUDA_KERNEL_NODE_PARAMS_v1) == offsetof(CUDA_KERNEL_NODE_PARAMS, kern),
               "v1 is v2's prefix");
_Static_assert(offsetof(CUDA_KERNEL_NODE_PARAMS_v1, extra) == offsetof(CUDA_KERNEL_NODE_PARAMS, extra),
               "v1 is v2's prefix");
_Static_assert(sizeof(CUDA_KERNEL_NODE_PARAMS_v3) == sizeof(CUDA_KERNEL_NODE_PARAMS)
                   && offsetof(CUDA_KERNEL_NODE_PARAMS_v3, ctx) == offsetof(CUDA_KERNEL_NODE_PARAMS, ctx),
               "v3 is v2");

CUDA_KERNEL_NODE_PARAMS fc_kernel_from_v1(const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
    CUDA_KERNEL_NODE_PARAMS k = { 0 };
    memcpy(&k, p, sizeof *p);
    return k;
}

/* A CUkernel goes where v1 has only func (a CUkernel launches as one). */
CUDA_KERNEL_NODE_PARAMS_v1 fc_kernel_to_v1(const CUDA_KERNEL_NODE_PARAMS *p)
{
    CUDA_KERNEL_NODE_PARAMS_v1 k;
    memcpy(&k, p, sizeof k);
    if (!k.func)
        k.func = (CUfunction)p->kern;
    return k;
}

CUDA_KERNEL_NODE_PARAMS fc_kernel_from_v3(const CUDA_KERNEL_NODE_PARAMS_v3 *p)
{
    CUDA_KERNEL_NODE_PARAMS k;
    memcpy(&k, p, sizeof k);
    return k;
}

CUDA_MEMSET_NODE_PARAMS fc_memset_from_v2(const CUDA_MEMSET_NODE_PARAMS_v2 *p)
{
    return (CUDA_MEMSET_NODE_PARAMS){
        .dst = p->dst, .pitch = p->pitch, .value = p->value, .elementSize = p->elementSize,
        .width = p->width, .height = p->height,
    };
}

CUresult fc_node_params_check(const CUgraphNodeParams *np)
{
    if (!np || np->reserved0[0] || np->reserved0[1] || np->reserved0[2] || np->reserved2)
        return CUDA_ERROR_INVALID_VALUE;
    switch (np->type) {
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        return np->memcpy.flags || np->memcpy.reserved ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_MEMSET:
    case CU_GRAPH_NODE_TYPE_KERNEL:
    case CU_GRAPH_NODE_TYPE_EMPTY:
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

static void captured_copy(struct fc_gnode *n, CUcontext ctx)
{
    const struct fc_copy *cp = &n->op.u.copy;
    n->type = CU_GRAPH_NODE_TYPE_MEMCPY;
    n->u.copy.ctx = ctx;
    CUDA_MEMCPY3D *p = &n->u.copy.p;
    memset(p, 0, sizeof *p);
    bool dd = fc_copy_dst_dev(cp->dir), sd = fc_copy_src_dev(cp->dir);
    p->srcMemoryType = sd ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    p->dstMemoryType = dd ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    if (sd)
        p->srcDevice = cp->src;
    else
        p->srcHost = (const void *)cp->src;
    if (dd)
        p->dstDevice = cp->dst;
    else
        p->dstHost = (void *)cp->dst;
    p->srcPitch = cp->spitch;
    p->dstPitch = cp->dpitch;
    p->srcHeight = cp->spitch ? cp->sslice / cp->spitch : 0;
    p->dstHeight = cp->dpitch ? cp->dslice / cp->dpitch : 0;
    p->WidthInBytes = cp->width;
    p->Height = cp->height;
    p->Depth = cp->depth;
    opnd_of(cp->dst, dd, p->dstMemoryType, &n->u.copy.opnd[0]);
    opnd_of(cp->src, sd, p->srcMemoryType, &n->u.copy.opnd[1]);
}

static void captured_memset(struct fc_gnode *n, CUcontext ctx)
{
    const struct fc_memset *ms = &n->op.u.set;
    n->type = CU_GRAPH_NODE_TYPE_MEMSET;
    n->u.set.ctx = ctx;
    n->u.set.p = (CUDA_MEMSET_NODE_PARAMS){
        .dst = ms->dst, .pitch = ms->pitch, .value = ms->value, .elementSize = ms->esize,
        .width = ms->width, .height = ms->height,
    };
}

void fc_gp_captured(struct fc_gnode *n, CUcontext ctx)
{
    switch (n->op.kind) {
    case FC_OP_KERNEL:
        n->type = CU_GRAPH_NODE_TYPE_KERNEL;
        n->u.kern.ctx = ctx;
        fc_gp_kernel_argp(n);
        break;
    case FC_OP_COPY:
        captured_copy(n, ctx);
        break;
    case FC_OP_MEMSET:
        captured_memset(n, ctx);
        break;
    case FC_OP_HOSTFN:
        n->type = CU_GRAPH_NODE_TYPE_HOST;
        break;
    default:                           /* stream memory operations */
        n->type = CU_GRAPH_NODE_TYPE_BATCH_MEM_OP;
    }
}
