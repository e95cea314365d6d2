/* fc_texture.c: texture and surface objects.
 *
 * An object is the descriptors it was made with, kept for its context
 * (the catalogue's kernels sample no textures). The real driver does not
 * look at the device address of a LINEAR or PITCH2D resource when the
 * object is made (measured on an H100: an unmapped one is CUDA_SUCCESS,
 * bench/gpu/addr_probe.c), and neither does the simulator; it validates
 * the descriptors as the real driver does, with CUDA_ERROR_INVALID_VALUE:
 * resource type, format, 1, 2 or 4 channels, non-zero sizes, a pitch of
 * at least width x element size, no view of linear memory, known address
 * and filter modes. Formats beyond the eight plain ones are
 * CUDA_ERROR_NOT_SUPPORTED. Arrays are not simulated, so a resource
 * naming one is CUDA_ERROR_INVALID_HANDLE, and surfaces (array resources
 * only, as in the real API) cannot be made. Objects go with their context.
 *
 * The table is owned by this file, every access under `lock`.
 */
#include "fakecuda/fc_internal.h"

#include <stdlib.h>
#include <string.h>

struct tobj {
    unsigned long long id;           /* the CUtexObject / CUsurfObject */
    bool surface;
    struct fc_ctx *ctx;
    CUDA_RESOURCE_DESC res;
    CUDA_TEXTURE_DESC tex;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct tobj *objs;
static size_t nobjs, capobjs;
static unsigned long long next_id = 1;

/* Bytes per channel of a plain format; 0 for a format of the enumeration
 * the simulator does not handle (NV12, block-compressed...), -1 for none. */
static int format_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
        return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
        return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
        return 4;
    default:
        break;
    }
    unsigned v = (unsigned)f;
    bool known = v == 0x50 || (v >= 0x91 && v <= 0x9f) || (v >= 0xa1 && v <= 0xa9)
                 || (v >= 0xb0 && v <= 0xb5) || (v >= 0xc0 && v <= 0xcb);
    return known ? 0 : -1;
}

/* Element size of format x channels, or the error. */
static CUresult element(CUarray_format f, unsigned channels, size_t *size)
{
    int b = format_bytes(f);
    if (b < 0 || (channels != 1 && channels != 2 && channels != 4))
        return CUDA_ERROR_INVALID_VALUE;
    if (b == 0)
        return CUDA_ERROR_NOT_SUPPORTED;
    *size = (size_t)b * channels;
    return CUDA_SUCCESS;
}

/* An array resource: none exists here, so a non-NULL one is stale. */
static CUresult array_res(const void *handle)
{
    return handle ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE;
}

static CUresult check_res(const CUDA_RESOURCE_DESC *r)
{
    size_t es = 0;
    CUresult rc;
    if (r->flags)
        return CUDA_ERROR_INVALID_VALUE;
    switch (r->resType) {
    case CU_RESOURCE_TYPE_ARRAY:
        return array_res(r->res.array.hArray);
    case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
        return array_res(r->res.mipmap.hMipmappedArray);
    case CU_RESOURCE_TYPE_LINEAR:
        rc = element(r->res.linear.format, r->res.linear.numChannels, &es);
        if (rc == CUDA_SUCCESS && r->res.linear.sizeInBytes == 0)
            rc = CUDA_ERROR_INVALID_VALUE;
        return rc;
    case CU_RESOURCE_TYPE_PITCH2D:
        rc = element(r->res.pitch2D.format, r->res.pitch2D.numChannels, &es);
        if (rc == CUDA_SUCCESS
            && (r->res.pitch2D.width == 0 || r->res.pitch2D.height == 0
                || r->res.pitch2D.width > r->res.pitch2D.pitchInBytes / es))
            rc = CUDA_ERROR_INVALID_VALUE;
        return rc;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

static CUresult check_tex(const CUDA_TEXTURE_DESC *t)
{
    for (int i = 0; i < 3; i++)
        if ((unsigned)t->addressMode[i] > CU_TR_ADDRESS_MODE_BORDER)
            return CUDA_ERROR_INVALID_VALUE;
    if ((unsigned)t->filterMode > CU_TR_FILTER_MODE_LINEAR
        || (unsigned)t->mipmapFilterMode > CU_TR_FILTER_MODE_LINEAR)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* Registers an object for the current context; its id in *id. */
static CUresult add(bool surface, const CUDA_RESOURCE_DESC *res, const CUDA_TEXTURE_DESC *tex,
                    unsigned long long *id)
{
    struct fc_ctx *c;
    CUresult r = fc_ctx_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&lock);
    if (nobjs == capobjs) {
        size_t ncap = capobjs ? capobjs * 2 : 16;
        struct tobj *nv = realloc(objs, ncap * sizeof *nv);
        if (!nv) {
            pthread_mutex_unlock(&lock);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        objs = nv;
        capobjs = ncap;
    }
    struct tobj *o = &objs[nobjs++];
    memset(o, 0, sizeof *o);
    o->id = next_id++;
    o->surface = surface;
    o->ctx = c;
    o->res = *res;
    if (tex)
        o->tex = *tex;
    *id = o->id;
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

/* Under lock: the object `id` of that kind, or NULL. */
static struct tobj *find_locked(unsigned long long id, bool surface)
{
    for (size_t i = 0; i < nobjs; i++)
        if (objs[i].id == id && objs[i].surface == surface)
            return &objs[i];
    return NULL;
}

static CUresult destroy(unsigned long long id, bool surface)
{
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&lock);
    struct tobj *o = find_locked(id, surface);
    if (o)
        *o = objs[--nobjs];
    pthread_mutex_unlock(&lock);
    return o ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Copies out an object's descriptors (res and/or tex may be NULL). */
static CUresult describe(unsigned long long id, CUDA_RESOURCE_DESC *res, CUDA_TEXTURE_DESC *tex)
{
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&lock);
    struct tobj *o = find_locked(id, false);
    if (o && res)
        *res = o->res;
    if (o && tex)
        *tex = o->tex;
    pthread_mutex_unlock(&lock);
    return o ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuTexObjectCreate(CUtexObject *pTexObject, const CUDA_RESOURCE_DESC *pResDesc,
                                   const CUDA_TEXTURE_DESC *pTexDesc, const CUDA_RESOURCE_VIEW_DESC *pResViewDesc)
{
    FC_FAULT(cuTexObjectCreate);
    if (!pTexObject || !pResDesc || !pTexDesc)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_ready();
    if (r == CUDA_SUCCESS)
        r = check_res(pResDesc);
    if (r == CUDA_SUCCESS)
        r = check_tex(pTexDesc);
    if (r != CUDA_SUCCESS)
        return r;
    if (pResViewDesc)                  /* views are of arrays only */
        return CUDA_ERROR_INVALID_VALUE;
    return add(false, pResDesc, pTexDesc, pTexObject);
}

CUresult CUDAAPI cuTexObjectDestroy(CUtexObject texObject)
{
    FC_FAULT(cuTexObjectDestroy);
    return destroy(texObject, false);
}

CUresult CUDAAPI cuTexObjectGetResourceDesc(CUDA_RESOURCE_DESC *pResDesc, CUtexObject texObject)
{
    FC_FAULT(cuTexObjectGetResourceDesc);
    return pResDesc ? describe(texObject, pResDesc, NULL) : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuTexObjectGetTextureDesc(CUDA_TEXTURE_DESC *pTexDesc, CUtexObject texObject)
{
    FC_FAULT(cuTexObjectGetTextureDesc);
    return pTexDesc ? describe(texObject, NULL, pTexDesc) : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuSurfObjectCreate(CUsurfObject *pSurfObject, const CUDA_RESOURCE_DESC *pResDesc)
{
    FC_FAULT(cuSurfObjectCreate);
    if (!pSurfObject || !pResDesc)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (pResDesc->resType != CU_RESOURCE_TYPE_ARRAY || pResDesc->flags)
        return CUDA_ERROR_INVALID_VALUE;
    r = check_res(pResDesc);
    return r == CUDA_SUCCESS ? add(true, pResDesc, NULL, pSurfObject) : r;
}

CUresult CUDAAPI cuSurfObjectDestroy(CUsurfObject surfObject)
{
    FC_FAULT(cuSurfObjectDestroy);
    return destroy(surfObject, true);
}

void fc_texture_free_ctx(struct fc_ctx *c)
{
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nobjs;) {
        if (objs[i].ctx == c)
            objs[i] = objs[--nobjs];
        else
            i++;
    }
    pthread_mutex_unlock(&lock);
}

/* Forked child: the parent's objects are not the child's (the table stays
 * reachable through `forsaken` for leak checkers). */
static struct tobj *forsaken;
void fc_texture_atfork_child(void)
{
    pthread_mutex_init(&lock, NULL);
    forsaken = objs;
    objs = NULL;
    nobjs = capobjs = 0;
}
