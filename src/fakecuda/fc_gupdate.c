/* fc_gupdate.c: changing an instantiated graph: cuGraphExec*NodeSetParams,
 * cuGraphExecNodeSetParams and cuGraphExecUpdate.
 *
 * An exec node is named by the graph node it was instantiated from; the
 * handle is only compared with the exec's (a node destroyed since, or one
 * of another graph, is CUDA_ERROR_INVALID_VALUE, never followed).
 *
 * Rules, as measured on the real driver (bench/gpu/addr_probe.c):
 *  - new parameters are validated like a node's (fc_gparams.c), address
 *    checks included: an unmapped operand is INVALID_VALUE;
 *  - a memcpy node's operands must be what its graph node's were when that
 *    node was created or last set (host- or device-located; of a context
 *    or VMM), whatever is mapped there now: else INVALID_VALUE;
 *  - memsets and kernels need only valid parameters;
 *  - cuGraphExecUpdate pairs the nodes in launch order (fc_gexec.c) and
 *    takes the graph's parameters when the topology and node types match
 *    and every memcpy node's operands are as the exec's; it does not look
 *    at addresses. Otherwise it changes nothing, answers
 *    CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE and says why in its result info.
 */
#include "fakecuda/fc_internal.h"

#include <stdlib.h>
#include <string.h>

/* The exec node instantiated from h, of type `type`. */
static CUresult xnode_get(CUgraphExec hx, CUgraphNode h, CUgraphNodeType type, struct fc_xnode **out)
{
    struct fc_gexec *x;
    CUresult r = fc_gexec_get(hx, &x);
    if (r != CUDA_SUCCESS)
        return r;
    for (size_t i = 0; i < x->n; i++) {
        if (x->v[i].orig == (const void *)h) {
            if (x->v[i].type != type)
                return CUDA_ERROR_INVALID_VALUE;
            *out = &x->v[i];
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_VALUE;
}

static CUresult exec_copy(CUgraphExec hx, CUgraphNode h, const CUDA_MEMCPY3D *p, CUcontext ctx)
{
    struct fc_xnode *xn;
    CUresult r = xnode_get(hx, h, CU_GRAPH_NODE_TYPE_MEMCPY, &xn);
    if (r == CUDA_SUCCESS)
        r = p ? fc_gp_ctx(ctx) : CUDA_ERROR_INVALID_VALUE;
    struct fc_op op;
    struct fc_opnd o[2];
    if (r == CUDA_SUCCESS)
        r = fc_gp_copy(p, &op, o);
    if (r != CUDA_SUCCESS)
        return r;
    if (!fc_opnd_same(o, xn->opnd))
        return CUDA_ERROR_INVALID_VALUE;
    xn->op = op;
    return CUDA_SUCCESS;
}

static CUresult exec_memset(CUgraphExec hx, CUgraphNode h, const CUDA_MEMSET_NODE_PARAMS *p,
                            CUcontext ctx)
{
    struct fc_xnode *xn;
    CUresult r = xnode_get(hx, h, CU_GRAPH_NODE_TYPE_MEMSET, &xn);
    if (r == CUDA_SUCCESS)
        r = p ? fc_gp_ctx(ctx) : CUDA_ERROR_INVALID_VALUE;
    struct fc_op op;
    if (r == CUDA_SUCCESS)
        r = fc_gp_memset(p, &op);
    if (r == CUDA_SUCCESS)
        xn->op = op;
    return r;
}

static CUresult exec_kernel(CUgraphExec hx, CUgraphNode h, const CUDA_KERNEL_NODE_PARAMS *p)
{
    struct fc_xnode *xn;
    CUresult r = xnode_get(hx, h, CU_GRAPH_NODE_TYPE_KERNEL, &xn);
    if (r == CUDA_SUCCESS && !p)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r != CUDA_SUCCESS)
        return r;
    unsigned g[3] = { p->gridDimX, p->gridDimY, p->gridDimZ };
    unsigned b[3] = { p->blockDimX, p->blockDimY, p->blockDimZ };
    struct fc_op op;
    r = fc_gp_kernel(p->func, p->kern, g, b, p->sharedMemBytes, p->kernelParams, p->extra, &op);
    if (r == CUDA_SUCCESS)
        xn->op = op;
    return r;
}

CUresult CUDAAPI cuGraphExecMemcpyNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
    FC_FAULT(cuGraphExecMemcpyNodeSetParams);
    return exec_copy(hGraphExec, hNode, copyParams, ctx);
}

CUresult CUDAAPI cuGraphExecMemsetNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                const CUDA_MEMSET_NODE_PARAMS *memsetParams, CUcontext ctx)
{
    FC_FAULT(cuGraphExecMemsetNodeSetParams);
    return exec_memset(hGraphExec, hNode, memsetParams, ctx);
}

CUresult CUDAAPI cuGraphExecKernelNodeSetParams_v2(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                   const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    FC_FAULT(cuGraphExecKernelNodeSetParams_v2);
    return exec_kernel(hGraphExec, hNode, nodeParams);
}

CUresult CUDAAPI cuGraphExecKernelNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    FC_FAULT(cuGraphExecKernelNodeSetParams);
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_KERNEL_NODE_PARAMS p = fc_kernel_from_v1(nodeParams);
    return exec_kernel(hGraphExec, hNode, &p);
}

CUresult CUDAAPI cuGraphExecNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                          CUgraphNodeParams *nodeParams)
{
    FC_FAULT(cuGraphExecNodeSetParams);
    CUresult r = fc_node_params_check(nodeParams);
    if (r != CUDA_SUCCESS)
        return r;
    CUDA_MEMSET_NODE_PARAMS m;
    CUDA_KERNEL_NODE_PARAMS k;
    struct fc_xnode *xn;
    switch (nodeParams->type) {
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        return exec_copy(hGraphExec, hNode, &nodeParams->memcpy.copyParams, nodeParams->memcpy.copyCtx);
    case CU_GRAPH_NODE_TYPE_MEMSET:
        m = fc_memset_from_v2(&nodeParams->memset);
        return exec_memset(hGraphExec, hNode, &m, nodeParams->memset.ctx);
    case CU_GRAPH_NODE_TYPE_KERNEL:
        k = fc_kernel_from_v3(&nodeParams->kernel);
        return exec_kernel(hGraphExec, hNode, &k);
    default:                           /* empty: only checks the node */
        return xnode_get(hGraphExec, hNode, CU_GRAPH_NODE_TYPE_EMPTY, &xn);
    }
}

/* ------------------------------------------------------------------ update */

struct verdict {
    CUgraphExecUpdateResult result;
    CUgraphNode node, from;
};

/* Why graph node `nw` (with the others of `v`) cannot update `old`:
 * CU_GRAPH_EXEC_UPDATE_SUCCESS when it can. */
static struct verdict pair(const struct fc_xnode *v, const struct fc_xnode *nw,
                           const struct fc_xnode *old)
{
    struct verdict d = { CU_GRAPH_EXEC_UPDATE_SUCCESS, (CUgraphNode)nw->orig, NULL };
    if (nw->ndeps != old->ndeps) {
        d.result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        return d;
    }
    for (size_t i = 0; i < nw->ndeps; i++) {
        if (nw->deps[i] != old->deps[i]) {
            d.result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
            d.from = (CUgraphNode)v[nw->deps[i]].orig;
            return d;
        }
    }
    if (nw->type != old->type)
        d.result = CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
    else if (nw->type == CU_GRAPH_NODE_TYPE_MEMCPY && !fc_opnd_same(nw->opnd, old->opnd))
        d.result = CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
    return d;
}

static struct verdict judge(const struct fc_gexec *x, const struct fc_xnode *v, size_t n)
{
    struct verdict d = { CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, NULL, NULL };
    if (n != x->n)
        return d;
    for (size_t i = 0; i < n; i++) {
        d = pair(v, &v[i], &x->v[i]);
        if (d.result != CU_GRAPH_EXEC_UPDATE_SUCCESS)
            return d;
    }
    return d;
}

static CUresult exec_update(CUgraphExec hx, CUgraph hg, struct verdict *d)
{
    *d = (struct verdict){ CU_GRAPH_EXEC_UPDATE_ERROR, NULL, NULL };
    struct fc_gexec *x;
    struct fc_graph *g;
    CUresult r = fc_gexec_get(hx, &x);
    if (r == CUDA_SUCCESS)
        r = fc_graph_get(hg, &g);
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_xnode *v;
    r = fc_xnodes_build(g, &v);
    if (r == CUDA_ERROR_INVALID_VALUE) {             /* a cycle */
        d->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    }
    if (r != CUDA_SUCCESS)
        return r;
    *d = judge(x, v, g->n);
    if (d->result == CU_GRAPH_EXEC_UPDATE_SUCCESS) {
        d->node = NULL;
        for (size_t i = 0; i < x->n; i++) {
            x->v[i].op = v[i].op;
            memcpy(x->v[i].opnd, v[i].opnd, sizeof x->v[i].opnd);
        }
    }
    fc_xnodes_free(v, g->n);
    return d->result == CU_GRAPH_EXEC_UPDATE_SUCCESS ? CUDA_SUCCESS
                                                     : CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
}

CUresult CUDAAPI cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph,
                                      CUgraphExecUpdateResultInfo *resultInfo)
{
    FC_FAULT(cuGraphExecUpdate_v2);
    if (!resultInfo)
        return CUDA_ERROR_INVALID_VALUE;
    struct verdict d;
    CUresult r = exec_update(hGraphExec, hGraph, &d);
    resultInfo->result = d.result;
    resultInfo->errorNode = d.node;
    resultInfo->errorFromNode = d.from;
    return r;
}

CUresult CUDAAPI cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphNode *hErrorNode_out,
                                   CUgraphExecUpdateResult *updateResult_out)
{
    FC_FAULT(cuGraphExecUpdate);
    if (!hErrorNode_out || !updateResult_out)
        return CUDA_ERROR_INVALID_VALUE;
    struct verdict d;
    CUresult r = exec_update(hGraphExec, hGraph, &d);
    *updateResult_out = d.result;
    *hErrorNode_out = d.node;
    return r;
}
