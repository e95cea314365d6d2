/* fc_gnode.c: explicit graph construction: memcpy, memset, kernel and
 * empty nodes (cuGraphAdd*Node, cuGraphAddNode), dependencies, and node
 * parameters on the graph (Get/SetParams, cuGraphNodeSetParams).
 *
 * Parameters are validated as the real driver does (fc_gparams.c): a
 * memcpy or memset node on an address that is not mapped is refused with
 * CUDA_ERROR_INVALID_VALUE when it is created or set. Other node types
 * (host, event, child graph, memory, conditional...) answer
 * CUDA_ERROR_NOT_SUPPORTED through cuGraphAddNode as through their own
 * entry points (not simulated). A failed call leaves the graph as it was.
 */
#include "fakecuda/fc_internal.h"

#include <string.h>

#define ANY_TYPE (-1)

/* The node behind h, of type `want` (ANY_TYPE: any). */
static CUresult node_get(CUgraphNode h, int want, struct fc_gnode **out)
{
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_gnode *n = (struct fc_gnode *)h;
    if (!fc_handle_is(n, FC_H_GNODE) || (want != ANY_TYPE && (int)n->type != want))
        return CUDA_ERROR_INVALID_VALUE;
    *out = n;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------ parameters */

static CUresult set_copy(struct fc_gnode *n, const CUDA_MEMCPY3D *p, CUcontext ctx)
{
    struct fc_op op;
    struct fc_opnd o[2];
    CUresult r = p ? fc_gp_ctx(ctx) : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = fc_gp_copy(p, &op, o);
    if (r != CUDA_SUCCESS)
        return r;
    n->op = op;
    n->u.copy.p = *p;
    n->u.copy.ctx = ctx;
    memcpy(n->u.copy.opnd, o, sizeof o);
    return CUDA_SUCCESS;
}

static CUresult set_memset(struct fc_gnode *n, const CUDA_MEMSET_NODE_PARAMS *p, CUcontext ctx)
{
    struct fc_op op;
    CUresult r = p ? fc_gp_ctx(ctx) : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = fc_gp_memset(p, &op);
    if (r != CUDA_SUCCESS)
        return r;
    n->op = op;
    n->u.set.p = *p;
    n->u.set.ctx = ctx;
    return CUDA_SUCCESS;
}

static CUresult set_kernel(struct fc_gnode *n, const CUDA_KERNEL_NODE_PARAMS *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned g[3] = { p->gridDimX, p->gridDimY, p->gridDimZ };
    unsigned b[3] = { p->blockDimX, p->blockDimY, p->blockDimZ };
    struct fc_op op;
    CUresult r = fc_gp_kernel(p->func, p->kern, g, b, p->sharedMemBytes, p->kernelParams,
                              p->extra, &op);
    if (r != CUDA_SUCCESS)
        return r;
    n->op = op;
    n->u.kern.ctx = p->ctx;
    n->u.kern.kern = p->func ? NULL : p->kern;
    fc_gp_kernel_argp(n);
    return CUDA_SUCCESS;
}

/* cuGraphNodeSetParams and cuGraphAddNode: np's type must be n's. */
static CUresult set_generic(struct fc_gnode *n, const CUgraphNodeParams *np)
{
    CUresult r = fc_node_params_check(np);
    if (r != CUDA_SUCCESS)
        return r;
    if (np->type != n->type)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_MEMSET_NODE_PARAMS m;
    CUDA_KERNEL_NODE_PARAMS k;
    switch (np->type) {
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        return set_copy(n, &np->memcpy.copyParams, np->memcpy.copyCtx);
    case CU_GRAPH_NODE_TYPE_MEMSET:
        m = fc_memset_from_v2(&np->memset);
        return set_memset(n, &m, np->memset.ctx);
    case CU_GRAPH_NODE_TYPE_KERNEL:
        k = fc_kernel_from_v3(&np->kernel);
        return set_kernel(n, &k);
    default:
        return CUDA_SUCCESS;           /* empty: nothing to set */
    }
}

/* ----------------------------------------------------------------- adding */

static CUresult add_begin(CUgraphNode *ph, CUgraph h, CUgraphNodeType type, struct fc_graph **g,
                          struct fc_gnode **n)
{
    if (!ph)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_graph_get(h, g);
    if (r != CUDA_SUCCESS)
        return r;
    *n = fc_gnode_alloc(type);
    return *n ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* r: the outcome of setting n's parameters. */
static CUresult add_end(CUgraphNode *ph, struct fc_graph *g, struct fc_gnode *n, CUresult r,
                        const CUgraphNode *deps, const CUgraphEdgeData *edges, size_t ndeps)
{
    if (r == CUDA_SUCCESS)
        r = fc_gnode_attach(g, n, deps, edges, ndeps);
    if (r != CUDA_SUCCESS) {
        fc_gnode_discard(n);
        return r;
    }
    *ph = (CUgraphNode)n;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphAddEmptyNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                     const CUgraphNode *dependencies, size_t numDependencies)
{
    FC_FAULT(cuGraphAddEmptyNode);
    struct fc_graph *g;
    struct fc_gnode *n;
    CUresult r = add_begin(phGraphNode, hGraph, CU_GRAPH_NODE_TYPE_EMPTY, &g, &n);
    if (r != CUDA_SUCCESS)
        return r;
    return add_end(phGraphNode, g, n, CUDA_SUCCESS, dependencies, NULL, numDependencies);
}

CUresult CUDAAPI cuGraphAddMemcpyNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                      const CUgraphNode *dependencies, size_t numDependencies,
                                      const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
    FC_FAULT(cuGraphAddMemcpyNode);
    struct fc_graph *g;
    struct fc_gnode *n;
    CUresult r = add_begin(phGraphNode, hGraph, CU_GRAPH_NODE_TYPE_MEMCPY, &g, &n);
    if (r != CUDA_SUCCESS)
        return r;
    return add_end(phGraphNode, g, n, set_copy(n, copyParams, ctx), dependencies, NULL,
                   numDependencies);
}

CUresult CUDAAPI cuGraphAddMemsetNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                      const CUgraphNode *dependencies, size_t numDependencies,
                                      const CUDA_MEMSET_NODE_PARAMS *memsetParams, CUcontext ctx)
{
    FC_FAULT(cuGraphAddMemsetNode);
    struct fc_graph *g;
    struct fc_gnode *n;
    CUresult r = add_begin(phGraphNode, hGraph, CU_GRAPH_NODE_TYPE_MEMSET, &g, &n);
    if (r != CUDA_SUCCESS)
        return r;
    return add_end(phGraphNode, g, n, set_memset(n, memsetParams, ctx), dependencies, NULL,
                   numDependencies);
}

static CUresult add_kernel(CUgraphNode *ph, CUgraph hGraph, const CUgraphNode *deps, size_t ndeps,
                           const CUDA_KERNEL_NODE_PARAMS *p)
{
    struct fc_graph *g;
    struct fc_gnode *n;
    CUresult r = add_begin(ph, hGraph, CU_GRAPH_NODE_TYPE_KERNEL, &g, &n);
    if (r != CUDA_SUCCESS)
        return r;
    return add_end(ph, g, n, set_kernel(n, p), deps, NULL, ndeps);
}

CUresult CUDAAPI cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
                                         const CUgraphNode *dependencies, size_t numDependencies,
                                         const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    FC_FAULT(cuGraphAddKernelNode_v2);
    return add_kernel(phGraphNode, hGraph, dependencies, numDependencies, nodeParams);
}

CUresult CUDAAPI cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                      const CUgraphNode *dependencies, size_t numDependencies,
                                      const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    FC_FAULT(cuGraphAddKernelNode);
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_KERNEL_NODE_PARAMS p = fc_kernel_from_v1(nodeParams);
    return add_kernel(phGraphNode, hGraph, dependencies, numDependencies, &p);
}

static CUresult add_generic(CUgraphNode *ph, CUgraph hGraph, const CUgraphNode *deps,
                            const CUgraphEdgeData *edges, size_t ndeps, CUgraphNodeParams *np)
{
    CUresult r = fc_node_params_check(np);
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_graph *g;
    struct fc_gnode *n;
    r = add_begin(ph, hGraph, np->type, &g, &n);
    if (r != CUDA_SUCCESS)
        return r;
    return add_end(ph, g, n, set_generic(n, np), deps, edges, ndeps);
}

CUresult CUDAAPI cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                   const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                   CUgraphNodeParams *nodeParams)
{
    FC_FAULT(cuGraphAddNode_v2);
    return add_generic(phGraphNode, hGraph, dependencies, dependencyData, numDependencies, nodeParams);
}

CUresult CUDAAPI cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                size_t numDependencies, CUgraphNodeParams *nodeParams)
{
    FC_FAULT(cuGraphAddNode);
    return add_generic(phGraphNode, hGraph, dependencies, NULL, numDependencies, nodeParams);
}

/* ----------------------------------------------------------- dependencies */

/* Every edge is checked before any is added: a refused call adds none. */
static CUresult add_deps(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
                         const CUgraphEdgeData *edges, size_t n)
{
    struct fc_graph *g;
    CUresult r = fc_graph_get(hGraph, &g);
    if (r != CUDA_SUCCESS)
        return r;
    if (n && (!from || !to))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < n; i++) {
        struct fc_gnode *f = (struct fc_gnode *)from[i], *t = (struct fc_gnode *)to[i];
        if (!fc_handle_is(f, FC_H_GNODE) || !fc_handle_is(t, FC_H_GNODE) || f->graph != g
            || t->graph != g || f == t || fc_gnode_has_dep(t, f)
            || !fc_edge_default(edges ? &edges[i] : NULL))
            return CUDA_ERROR_INVALID_VALUE;
        for (size_t j = 0; j < i; j++)
            if (from[j] == from[i] && to[j] == to[i])
                return CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t i = 0; i < n && r == CUDA_SUCCESS; i++)
        r = fc_gnode_add_dep((struct fc_gnode *)to[i], (struct fc_gnode *)from[i]);
    return r;
}

CUresult CUDAAPI cuGraphAddDependencies(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
                                        size_t numDependencies)
{
    FC_FAULT(cuGraphAddDependencies);
    return add_deps(hGraph, from, to, NULL, numDependencies);
}

CUresult CUDAAPI cuGraphAddDependencies_v2(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
                                           const CUgraphEdgeData *edgeData, size_t numDependencies)
{
    FC_FAULT(cuGraphAddDependencies_v2);
    return add_deps(hGraph, from, to, edgeData, numDependencies);
}

/* ------------------------------------------------------ node parameters */

/* The node behind h for a call whose parameter pointer p may not be NULL. */
static CUresult node_arg(CUgraphNode h, int want, const void *p, struct fc_gnode **out)
{
    return p ? node_get(h, want, out) : CUDA_ERROR_INVALID_VALUE;
}

/* kernelParams point at the node's copy of the arguments. */
static void kernel_out(struct fc_gnode *n, CUDA_KERNEL_NODE_PARAMS *p)
{
    const struct fc_op *op = &n->op;
    *p = (CUDA_KERNEL_NODE_PARAMS){
        .func = n->u.kern.kern ? NULL : op->u.kernel.f,
        .gridDimX = op->u.kernel.grid[0], .gridDimY = op->u.kernel.grid[1],
        .gridDimZ = op->u.kernel.grid[2], .blockDimX = op->u.kernel.block[0],
        .blockDimY = op->u.kernel.block[1], .blockDimZ = op->u.kernel.block[2],
        .sharedMemBytes = op->u.kernel.shmem, .kernelParams = n->u.kern.argp,
        .kern = n->u.kern.kern, .ctx = n->u.kern.ctx,
    };
}

/* Copies the parameters of h, a node of type `want`, out to p (the
 * structure of that type: CUDA_MEMCPY3D, CUDA_MEMSET_NODE_PARAMS,
 * CUDA_KERNEL_NODE_PARAMS). */
static CUresult params_out(CUgraphNode h, int want, void *p)
{
    struct fc_gnode *n;
    CUresult r = node_arg(h, want, p, &n);
    if (r != CUDA_SUCCESS)
        return r;
    if (want == CU_GRAPH_NODE_TYPE_MEMCPY)
        *(CUDA_MEMCPY3D *)p = n->u.copy.p;
    else if (want == CU_GRAPH_NODE_TYPE_MEMSET)
        *(CUDA_MEMSET_NODE_PARAMS *)p = n->u.set.p;
    else
        kernel_out(n, p);
    return CUDA_SUCCESS;
}

/* Sets the parameters of h, a node of type `want` (ANY_TYPE: p is a
 * CUgraphNodeParams), from p as params_out's; memcpy and memset nodes keep
 * the context they were made with. */
static CUresult params_in(CUgraphNode h, int want, const void *p)
{
    struct fc_gnode *n;
    CUresult r = node_arg(h, want, p, &n);
    if (r != CUDA_SUCCESS)
        return r;
    switch (want) {
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        return set_copy(n, p, n->u.copy.ctx);
    case CU_GRAPH_NODE_TYPE_MEMSET:
        return set_memset(n, p, n->u.set.ctx);
    case CU_GRAPH_NODE_TYPE_KERNEL:
        return set_kernel(n, p);
    default:
        return set_generic(n, p);
    }
}

CUresult CUDAAPI cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
    FC_FAULT(cuGraphNodeGetType);
    struct fc_gnode *n;
    CUresult r = node_arg(hNode, ANY_TYPE, type, &n);
    if (r == CUDA_SUCCESS)
        *type = n->type;
    return r;
}

CUresult CUDAAPI cuGraphNodeSetParams(CUgraphNode hNode, CUgraphNodeParams *nodeParams)
{
    FC_FAULT(cuGraphNodeSetParams);
    return params_in(hNode, ANY_TYPE, nodeParams);
}

CUresult CUDAAPI cuGraphMemcpyNodeGetParams(CUgraphNode hNode, CUDA_MEMCPY3D *nodeParams)
{
    FC_FAULT(cuGraphMemcpyNodeGetParams);
    return params_out(hNode, CU_GRAPH_NODE_TYPE_MEMCPY, nodeParams);
}

CUresult CUDAAPI cuGraphMemcpyNodeSetParams(CUgraphNode hNode, const CUDA_MEMCPY3D *nodeParams)
{
    FC_FAULT(cuGraphMemcpyNodeSetParams);
    return params_in(hNode, CU_GRAPH_NODE_TYPE_MEMCPY, nodeParams);
}

CUresult CUDAAPI cuGraphMemsetNodeGetParams(CUgraphNode hNode, CUDA_MEMSET_NODE_PARAMS *nodeParams)
{
    FC_FAULT(cuGraphMemsetNodeGetParams);
    return params_out(hNode, CU_GRAPH_NODE_TYPE_MEMSET, nodeParams);
}

CUresult CUDAAPI cuGraphMemsetNodeSetParams(CUgraphNode hNode, const CUDA_MEMSET_NODE_PARAMS *nodeParams)
{
    FC_FAULT(cuGraphMemsetNodeSetParams);
    return params_in(hNode, CU_GRAPH_NODE_TYPE_MEMSET, nodeParams);
}

CUresult CUDAAPI cuGraphKernelNodeGetParams_v2(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    FC_FAULT(cuGraphKernelNodeGetParams_v2);
    return params_out(hNode, CU_GRAPH_NODE_TYPE_KERNEL, nodeParams);
}

CUresult CUDAAPI cuGraphKernelNodeGetParams(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    FC_FAULT(cuGraphKernelNodeGetParams);
    CUDA_KERNEL_NODE_PARAMS p;
    CUresult r = nodeParams ? params_out(hNode, CU_GRAPH_NODE_TYPE_KERNEL, &p)
                            : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        *nodeParams = fc_kernel_to_v1(&p);
    return r;
}

CUresult CUDAAPI cuGraphKernelNodeSetParams_v2(CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    FC_FAULT(cuGraphKernelNodeSetParams_v2);
    return params_in(hNode, CU_GRAPH_NODE_TYPE_KERNEL, nodeParams);
}

CUresult CUDAAPI cuGraphKernelNodeSetParams(CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    FC_FAULT(cuGraphKernelNodeSetParams);
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_KERNEL_NODE_PARAMS p = fc_kernel_from_v1(nodeParams);
    return params_in(hNode, CU_GRAPH_NODE_TYPE_KERNEL, &p);
}
