/* nvrm.h: the parts of the NVIDIA resource manager's ioctl ABI that
 * channel-group control uses: escapes, the NVOS parameter blocks of
 * RM_ALLOC, RM_FREE and RM_CONTROL, the channel-group alloc params and the
 * timeslice control (open-gpu-kernel-modules: nv_escape.h, nvos.h,
 * ctrla06c.h; checked against a recording of driver 580.159.04).
 *
 * Our own minimal copies, so no NVIDIA header is needed to build; the
 * static assertions pin every size and offset. One definition for the
 * interposer (tsg.c), its test (tests/hook/hook_tsg.c, which plays the
 * driver) and the recorder (bench/lc/nvtrace.c).
 */
#ifndef CS_HOOK_NVRM_H
#define CS_HOOK_NVRM_H

#include <stddef.h>
#include <stdint.h>

#define NV_IOCTL_MAGIC 0x46u /* 'F' */
#define NV_ESC_RM_FREE 0x29u
#define NV_ESC_RM_CONTROL 0x2Au
#define NV_ESC_RM_ALLOC 0x2Bu

/* _IOWR('F', nr, size) */
#define NV_IOWR(nr, size) ((3ul << 30) | ((unsigned long)(size) << 16) | (NV_IOCTL_MAGIC << 8) | (nr))

struct nvos00 { /* NVOS00_PARAMETERS: RM_FREE */
    uint32_t hRoot, hObjectParent, hObjectOld, status;
};
struct nvos21 { /* NVOS21_PARAMETERS: RM_ALLOC, old form */
    uint32_t hRoot, hObjectParent, hObjectNew, hClass;
    uint64_t pAllocParms;
    uint32_t paramsSize, status;
};
struct nvos64 { /* NVOS64_PARAMETERS: RM_ALLOC with rights (what libcuda 580 uses) */
    uint32_t hRoot, hObjectParent, hObjectNew, hClass;
    uint64_t pAllocParms, pRightsRequested;
    uint32_t paramsSize, flags, status, pad;
};
struct nvos54 { /* NVOS54_PARAMETERS: RM_CONTROL */
    uint32_t hClient, hObject, cmd, flags;
    uint64_t params;
    uint32_t paramsSize, status;
};
/* NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS up to engineType (the full struct
 * is 20 bytes: a trailing NvBool and padding). */
struct nv_chgrp_alloc {
    uint32_t hObjectError, hObjectEccError, hVASpace, engineType;
};
struct nva06c_timeslice { /* NVA06C_CTRL_TIMESLICE_PARAMS */
    uint64_t timesliceUs;
};

_Static_assert(sizeof(struct nvos00) == 16, "NVOS00 is 16 bytes");
_Static_assert(sizeof(struct nvos21) == 32, "NVOS21 is 32 bytes");
_Static_assert(offsetof(struct nvos21, pAllocParms) == 16 && offsetof(struct nvos21, status) == 28,
               "NVOS21 layout");
_Static_assert(sizeof(struct nvos64) == 48, "NVOS64 is 48 bytes (request 0xc030462b)");
_Static_assert(offsetof(struct nvos64, pAllocParms) == 16 && offsetof(struct nvos64, flags) == 36 &&
                   offsetof(struct nvos64, status) == 40,
               "NVOS64 layout");
_Static_assert(sizeof(struct nvos54) == 32, "NVOS54 is 32 bytes (request 0xc020462a)");
_Static_assert(offsetof(struct nvos54, params) == 16 && offsetof(struct nvos54, paramsSize) == 24 &&
                   offsetof(struct nvos54, status) == 28,
               "NVOS54 layout");
_Static_assert(offsetof(struct nv_chgrp_alloc, engineType) == 12, "engineType at offset 12");
_Static_assert(sizeof(struct nva06c_timeslice) == 8, "timeslice params are one NvU64");

#define NV_REQ_FREE NV_IOWR(NV_ESC_RM_FREE, sizeof(struct nvos00))       /* 0xc0104629 */
#define NV_REQ_CONTROL NV_IOWR(NV_ESC_RM_CONTROL, sizeof(struct nvos54)) /* 0xc020462a */
#define NV_REQ_ALLOC21 NV_IOWR(NV_ESC_RM_ALLOC, sizeof(struct nvos21))   /* 0xc020462b */
#define NV_REQ_ALLOC64 NV_IOWR(NV_ESC_RM_ALLOC, sizeof(struct nvos64))   /* 0xc030462b */
_Static_assert(NV_REQ_FREE == 0xc0104629ul && NV_REQ_CONTROL == 0xc020462aul &&
                   NV_REQ_ALLOC21 == 0xc020462bul && NV_REQ_ALLOC64 == 0xc030462bul,
               "request codes (as recorded from driver 580)");

#define NV_CLASS_ROOT 0x0u             /* NV01_ROOT */
#define NV_CLASS_ROOT_NON_PRIV 0x1u    /* NV01_ROOT_NON_PRIV */
#define NV_CLASS_ROOT_CLIENT 0x41u     /* NV01_ROOT_CLIENT: what libcuda allocates */
#define NV_CLASS_CHANNEL_GROUP 0xa06cu /* KEPLER_CHANNEL_GROUP_A */

#define NV_CMD_SET_TIMESLICE 0xa06c0103u /* NVA06C_CTRL_CMD_SET_TIMESLICE */
#define NV_CMD_GET_TIMESLICE 0xa06c0104u /* NVA06C_CTRL_CMD_GET_TIMESLICE */

#define NVOS64_FLAGS_FINN_SERIALIZED 0x1u

/* NV2080_ENGINE_TYPE_GR0..GR7 (GR1..7 exist under MIG). */
#define NV_ENGINE_GR_FIRST 0x1u
#define NV_ENGINE_GR_LAST 0x8u
#define NV_ENGINE_UNKNOWN 0xffffffffu

/* nvstatuscodes.h */
#define NV_OK 0x00u
#define NV_ERR_BUSY_RETRY 0x03u
#define NV_ERR_INSUFFICIENT_PERMISSIONS 0x1Bu
#define NV_ERR_INVALID_ARGUMENT 0x1Fu
#define NV_ERR_INVALID_CLIENT 0x23u
#define NV_ERR_INVALID_OBJECT 0x31u
#define NV_ERR_INVALID_OBJECT_HANDLE 0x33u
#define NV_ERR_INVALID_OBJECT_PARENT 0x36u
#define NV_ERR_INVALID_PARAM_STRUCT 0x3Au
#define NV_ERR_INVALID_PARAMETER 0x3Bu
#define NV_ERR_NOT_SUPPORTED 0x56u
#define NV_ERR_OBJECT_NOT_FOUND 0x57u
#define NV_ERR_OUT_OF_RANGE 0x5Bu

#endif
