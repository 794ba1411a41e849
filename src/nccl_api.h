/*
 * nccl_api.h - our own declaration of the NCCL / RCCL host ABI.
 *
 * No CUDA or ROCm header is needed: streams are opaque pointers and every
 * type below is declared from the published ABI (enum values, struct layouts
 * on LP64).  The layouts follow NCCL 2.30 (which RCCL 2.30.4 shares); a
 * library that knows a shorter ncclConfig_t reads only `size` bytes of it.
 *
 * This header is shared by the Python extension, the host backend and the
 * recording stub used by the tests.
 */
#ifndef NCCL4PY_NCCL_API_H
#define NCCL4PY_NCCL_API_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NCCL4PY_ABI_VERSION_CODE 23004 /* NCCL 2.30.4 */

#define NCCL_UNIQUE_ID_BYTES 128
#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR (-1)
#define NCCL_UNDEF_FLOAT (-1.0f)
#define NCCL_API_MAGIC 0xcafebeefu
#define NCCL_SIM_INFO_MAGIC 0x74685283u

typedef struct ncclComm *ncclComm_t;
typedef struct ncclWindow_vidmem *ncclWindow_t;
typedef void *cudaStream_t; /* hipStream_t on ROCm: also a pointer */

typedef struct {
    char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7,
    ncclTimeout = 8,
    ncclNumResults = 9
} ncclResult_t;

typedef enum {
    ncclSum = 0,
    ncclProd = 1,
    ncclMax = 2,
    ncclMin = 3,
    ncclAvg = 4,
    ncclNumOps = 5,
    ncclMaxRedOp = 0x7fffffff
} ncclRedOp_t;

typedef enum {
    ncclInt8 = 0,
    ncclChar = 0,
    ncclUint8 = 1,
    ncclInt32 = 2,
    ncclInt = 2,
    ncclUint32 = 3,
    ncclInt64 = 4,
    ncclUint64 = 5,
    ncclFloat16 = 6,
    ncclHalf = 6,
    ncclFloat32 = 7,
    ncclFloat = 7,
    ncclFloat64 = 8,
    ncclDouble = 8,
    ncclBfloat16 = 9,
    ncclFloat8e4m3 = 10,
    ncclFloat8e5m2 = 11,
    ncclNumTypes = 12
} ncclDataType_t;

typedef enum {
    ncclScalarDevice = 0,
    ncclScalarHostImmediate = 1
} ncclScalarResidence_t;

typedef enum {
    ncclStatGpuMemSuspend = 0,
    ncclStatGpuMemSuspended = 1,
    ncclStatGpuMemPersist = 2,
    ncclStatGpuMemTotal = 3
} ncclCommMemStat_t;

typedef enum {
    NCCL_GIN_TYPE_NONE = 0,
    NCCL_GIN_TYPE_PROXY = 2,
    NCCL_GIN_TYPE_GDAKI = 3,
    NCCL_GIN_TYPE_GPI_OR_ROCSHMEM = 4, /* NCCL: GPI, RCCL: ROCSHMEM */
    NCCL_GIN_TYPE_ANVIL = 5            /* RCCL only */
} ncclGinType_t;

typedef enum {
    NCCL_GIN_CONNECTION_NONE = 0,
    NCCL_GIN_CONNECTION_FULL = 1,
    NCCL_GIN_CONNECTION_RAIL = 2
} ncclGinConnectionType_t;

/* ncclConfig_t as of NCCL 2.30 / RCCL 2.30.4: 96 bytes on LP64. */
typedef struct {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int blocking;
    int cgaClusterSize;
    int minCTAs;
    int maxCTAs;
    const char *netName;
    int splitShare;
    int trafficClass;
    const char *commName;
    int collnetEnable;
    int CTAPolicy;
    int shrinkShare;
    int nvlsCTAs;
    int nChannelsPerNetPeer;
    int nvlinkCentricSched;
    int graphUsageMode;
    int numRmaCtx;
    int maxP2pPeers;
} ncclConfig_t;

typedef struct {
    size_t size;
    unsigned int magic;
    unsigned int version;
    float estimatedTime;
} ncclSimInfo_t;

typedef struct {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int rank;
    int nRanks;
    int cudaDev;
    int nvmlDev;
    uint8_t deviceApiSupport; /* bool in C++ */
    uint8_t multimemSupport;
    ncclGinType_t ginType;
    int nLsaTeams;
    uint8_t hostRmaSupport;
    ncclGinType_t railedGinType;
} ncclCommProperties_t;

typedef struct {
    int opCnt;
    int peer;
    int sigIdx;
    int ctx;
} ncclWaitSignalDesc_t;

/* Device-communicator requirements, 2.30 layout (size/magic/version header;
 * the library reads `size` bytes). */
typedef struct {
    size_t size;
    unsigned int magic;
    unsigned int version;
    void *resourceRequirementsList;
    void *teamRequirementsList;
    uint8_t lsaMultimem;
    int barrierCount;
    int lsaBarrierCount;
    int railGinBarrierCount;
    int lsaLLA2ABlockCount;
    int lsaLLA2ASlotCount;
    uint8_t ginForceEnable;
    int ginContextCount;
    int ginSignalCount;
    int ginCounterCount;
    ncclGinConnectionType_t ginConnectionType;
    uint8_t ginExclusiveContexts;
    int ginQueueDepth;
    int ginTrafficClass;
    int worldGinBarrierCount;
} ncclDevCommRequirements_t;

/* ncclDevComm_t is filled by the library and only ever handed back to it or
 * to device code.  Its layout changes between releases, so we treat it as
 * opaque storage that is larger than every published layout. */
#define NCCL4PY_DEV_COMM_BYTES 1024
typedef struct {
    _Alignas(16) unsigned char opaque[NCCL4PY_DEV_COMM_BYTES];
} ncclDevComm_t;

#include "nccl_api_232.h"

#ifdef __cplusplus
}
#endif

#endif /* NCCL4PY_NCCL_API_H */
