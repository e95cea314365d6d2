/* fc_error.c: cuGetErrorName and cuGetErrorString for every CUresult.
 *
 * fc_errors.inc is generated at build time from the cuda.h in use (see
 * mk/fakecuda.mk): one FC_ERR(NAME, "derived text") per enumerator, so a
 * newer header can never leave a code without a name. The texts of the
 * codes programs commonly print are the real driver's; the rest are
 * derived from the name. The wording below was checked against the real
 * driver (580, CUDA 13.0).
 */
#include "fakecuda/fc_internal.h"

#include <stddef.h>
#include <string.h>

struct errdesc {
    CUresult code;
    const char *name;
    const char *text;
};

static const struct errdesc table[] = {
#define FC_ERR(name, text) { name, #name, text },
#include "fc_errors.inc"
#undef FC_ERR
};

/* The real driver's wording where it matters (tests and logs compare it). */
static const struct errdesc known[] = {
    { CUDA_SUCCESS, NULL, "no error" },
    { CUDA_ERROR_INVALID_VALUE, NULL, "invalid argument" },
    { CUDA_ERROR_OUT_OF_MEMORY, NULL, "out of memory" },
    { CUDA_ERROR_NOT_INITIALIZED, NULL, "initialization error" },
    { CUDA_ERROR_DEINITIALIZED, NULL, "driver shutting down" },
    { CUDA_ERROR_NO_DEVICE, NULL, "no CUDA-capable device is detected" },
    { CUDA_ERROR_OPERATING_SYSTEM, NULL, "OS call failed or operation not supported on this OS" },
    { CUDA_ERROR_ILLEGAL_STATE, NULL, "the operation cannot be performed in the present state" },
    { CUDA_ERROR_MISALIGNED_ADDRESS, NULL, "misaligned address" },
    { CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, NULL, "peer access is not supported between these two devices" },
    { CUDA_ERROR_INVALID_DEVICE, NULL, "invalid device ordinal" },
    { CUDA_ERROR_INVALID_IMAGE, NULL, "device kernel image is invalid" },
    { CUDA_ERROR_INVALID_CONTEXT, NULL, "invalid device context" },
    { CUDA_ERROR_NO_BINARY_FOR_GPU, NULL, "no kernel image is available for execution on the device" },
    { CUDA_ERROR_FILE_NOT_FOUND, NULL, "file not found" },
    { CUDA_ERROR_INVALID_HANDLE, NULL, "invalid resource handle" },
    { CUDA_ERROR_NOT_FOUND, NULL, "named symbol not found" },
    { CUDA_ERROR_NOT_READY, NULL, "device not ready" },
    { CUDA_ERROR_ILLEGAL_ADDRESS, NULL, "an illegal memory access was encountered" },
    { CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, NULL, "too many resources requested for launch" },
    { CUDA_ERROR_LAUNCH_TIMEOUT, NULL, "the launch timed out and was terminated" },
    { CUDA_ERROR_CONTEXT_IS_DESTROYED, NULL, "context is destroyed" },
    { CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, NULL, "part or all of the requested memory range is already mapped" },
    { CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, NULL, "pointer does not correspond to a registered memory region" },
    { CUDA_ERROR_LAUNCH_FAILED, NULL, "unspecified launch failure" },
    { CUDA_ERROR_NOT_PERMITTED, NULL, "operation not permitted" },
    { CUDA_ERROR_NOT_SUPPORTED, NULL, "operation not supported" },
    { CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, NULL, "operation not permitted when stream is capturing" },
    { CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, NULL, "operation failed due to a previous error during capture" },
    { CUDA_ERROR_STREAM_CAPTURE_MERGE, NULL, "operation would result in a merge of separate capture sequences" },
    { CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, NULL, "capture was not ended in the same stream as it began" },
    { CUDA_ERROR_STREAM_CAPTURE_UNJOINED, NULL, "capturing stream has unjoined work" },
    { CUDA_ERROR_STREAM_CAPTURE_ISOLATION, NULL, "dependency created on uncaptured work in another stream" },
    { CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, NULL, "operation would make the legacy stream depend on a capturing blocking stream" },
    { CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, NULL, "attempt to terminate a thread-local capture sequence from another thread" },
    { CUDA_ERROR_UNKNOWN, NULL, "unknown error" },
};

static const struct errdesc *lookup(CUresult code)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].code == code)
            return &table[i];
    return NULL;
}

CUresult CUDAAPI cuGetErrorName(CUresult error, const char **pStr)
{
    FC_FAULT(cuGetErrorName);
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    const struct errdesc *d = lookup(error);
    *pStr = d ? d->name : NULL;
    return d ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    const struct errdesc *d = lookup(error);
    if (!d) {
        *pStr = NULL;
        return CUDA_ERROR_INVALID_VALUE;
    }
    *pStr = d->text;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (known[i].code == error)
            *pStr = known[i].text;
    return CUDA_SUCCESS;
}

const char *fc_error_name(CUresult code)
{
    const struct errdesc *d = lookup(code);
    return d ? d->name : NULL;
}

bool fc_error_by_name(const char *name, size_t len, CUresult *out)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strlen(table[i].name) == len && memcmp(table[i].name, name, len) == 0) {
            *out = table[i].code;
            return true;
        }
    }
    return false;
}
