/*
 * api_decls.h - declarations of every exported function, taken from the
 * function-pointer types generated from the API table (src/nccl_api.def).
 * Declaring each symbol with `__typeof__(*(xxx_fn)0)` makes the compiler
 * reject any definition whose prototype differs from the table.
 */
#ifndef N4P_HOST_API_DECLS_H
#define N4P_HOST_API_DECLS_H

#include "gen/api_table.h"

#define N4P_DECLARE(name) extern __typeof__(*(name##_fn)0) name;

N4P_DECLARE(ncclAllGather)
N4P_DECLARE(ncclAllReduce)
N4P_DECLARE(ncclAllReduceWithBias)
N4P_DECLARE(ncclAllToAllv)
N4P_DECLARE(ncclAlltoAll)
N4P_DECLARE(ncclBcast)
N4P_DECLARE(ncclBroadcast)
N4P_DECLARE(ncclCommAbort)
N4P_DECLARE(ncclCommCount)
N4P_DECLARE(ncclCommCuDevice)
N4P_DECLARE(ncclCommDeregister)
N4P_DECLARE(ncclCommDestroy)
N4P_DECLARE(ncclCommFinalize)
N4P_DECLARE(ncclCommGetAsyncError)
N4P_DECLARE(ncclCommInitAll)
N4P_DECLARE(ncclCommInitRank)
N4P_DECLARE(ncclCommInitRankConfig)
N4P_DECLARE(ncclCommInitRankScalable)
N4P_DECLARE(ncclCommMemStats)
N4P_DECLARE(ncclCommQueryProperties)
N4P_DECLARE(ncclCommRegister)
N4P_DECLARE(ncclCommResume)
N4P_DECLARE(ncclCommRevoke)
N4P_DECLARE(ncclCommShrink)
N4P_DECLARE(ncclCommSplit)
N4P_DECLARE(ncclCommSuspend)
N4P_DECLARE(ncclCommUserRank)
N4P_DECLARE(ncclCommWindowDeregister)
N4P_DECLARE(ncclCommWindowRegister)
N4P_DECLARE(ncclGather)
N4P_DECLARE(ncclGetErrorString)
N4P_DECLARE(ncclGetLastError)
N4P_DECLARE(ncclGetLsaDevicePointer)
N4P_DECLARE(ncclGetLsaMultimemDevicePointer)
N4P_DECLARE(ncclGetPeerDevicePointer)
N4P_DECLARE(ncclGetUniqueId)
N4P_DECLARE(ncclGetVersion)
N4P_DECLARE(ncclGroupEnd)
N4P_DECLARE(ncclGroupSimulateEnd)
N4P_DECLARE(ncclGroupStart)
N4P_DECLARE(ncclMemAlloc)
N4P_DECLARE(ncclMemFree)
N4P_DECLARE(ncclRecv)
N4P_DECLARE(ncclRedOpCreatePreMulSum)
N4P_DECLARE(ncclRedOpDestroy)
N4P_DECLARE(ncclReduce)
N4P_DECLARE(ncclReduceScatter)
N4P_DECLARE(ncclScatter)
N4P_DECLARE(ncclSend)
N4P_DECLARE(ncclWinGetUserPtr)
/* RCCL's current spelling of ncclAllToAllv. */
extern __typeof__(*(ncclAllToAllv_fn)0) ncclAlltoAllv;

#undef N4P_DECLARE
#endif /* N4P_HOST_API_DECLS_H */
