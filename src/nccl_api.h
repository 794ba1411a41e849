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

/* The newest NCCL whose layouts structs.def holds: the version a new struct
 * carries; a newer NCCL loaded is reported (loader.c). */
#define NCCL4PY_ABI_VERSION_CODE 23206 /* NCCL 2.32.6 */
/* The version a new ncclCollConfig_t carries: its layout is NCCL 2.32.6's. */
#define NCCL4PY_COLL_CONFIG_VERSION NCCL4PY_ABI_VERSION_CODE

/* nccl.h's single #defines (NCCL_UNIQUE_ID_BYTES, NCCL_CONFIG_UNDEF_INT, ...),
 * from enums.def. */
#include "gen/nccl_constants.h"
/* The magic of NCCL_SIM_INFO_INITIALIZER (a literal in nccl.h). */
#define NCCL_SIM_INFO_MAGIC 0x74685283u

typedef struct ncclComm *ncclComm_t;
typedef struct ncclWindow_vidmem *ncclWindow_t;
typedef void *cudaStream_t; /* hipStream_t on ROCm: also a pointer */

typedef struct {
    char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

/* The enums, from enums.def (ncclResult_t, ncclRedOp_t, ncclGinType_t, ...). */
#define N4P_ENUM(CType, PyClass, base, doc) typedef enum {
#define N4P_VALUE(CType, CName, PyName, value) CName = value,
#define N4P_ENUM_END(CType) } CType;
/* and nccl.h's #define groups as constants (NCCL_CTA_POLICY_ZERO, ...) */
#define N4P_DEFINES(Group, CoreClass, base, doc) enum {
#define N4P_DEFINE(Group, CName, PyName, value, OldName) CName = value,
#define N4P_DEFINES_END(Group) };
#include "enums.def"

/* The data types, from dtypes.def (ncclInt8 = 0, ..., ncclNumTypes). */
typedef enum {
#define N4P_DTYPE(Name, value, size, array_name, dl_code, kernel) nccl##Name = value,
#define N4P_DTYPE_ALIAS(Alias, Name) nccl##Alias = nccl##Name,
#include "dtypes.def"
    ncclNumTypes = 0
#define N4P_DTYPE(Name, value, size, array_name, dl_code, kernel) + 1
#include "dtypes.def"
} ncclDataType_t;

/* Opaque handle of a parameter, owned by the library. */
typedef struct ncclParamHandle *ncclParamHandle_t;

/* The structs with fields, from structs.def, with their LP64 sizes and
 * offsets checked.  A field of kind BOOLS is an array of N4P_BOOLS_LEN, of
 * kind U8X4 / PTRX4 an array of 4.  ncclDevComm_t is the layout of NCCL 2.31
 * and later, the one a library stamped with our version writes; structs.c
 * reads the 2.30 layout from its version field. */
#define N4P_BOOLS_LEN 64
#define N4P_DIM_SIZE
#define N4P_DIM_U32
#define N4P_DIM_I32
#define N4P_DIM_U8
#define N4P_DIM_F32
#define N4P_DIM_CSTR
#define N4P_DIM_PTR
#define N4P_DIM_U64
#define N4P_DIM_BOOLS [N4P_BOOLS_LEN]
#define N4P_DIM_U8I
#define N4P_DIM_U8X4 [4]
#define N4P_DIM_PTRX4 [4]
#define N4P_DIM_SUB
#define N4P_STRUCT(Type, PyName, KIND, picklable) typedef struct {
#define N4P_UNION(Type, PyName, KIND, picklable) typedef union {
#define N4P_FIELD(Type, ctype, cname, pyname, kind, offset, initial, api) ctype cname N4P_DIM_##kind;
#define N4P_STRUCT_END(Type, size) } Type;
#include "structs.def"

#if UINTPTR_MAX == UINT64_MAX && !defined(__cplusplus)
#define N4P_FIELD(Type, ctype, cname, pyname, kind, offset, initial, api) \
    _Static_assert(offsetof(Type, cname) == offset, #Type "." #cname " is at offset " #offset);
#define N4P_STRUCT_END(Type, size) _Static_assert(sizeof(Type) == size, #Type " has " #size " bytes");
#include "structs.def"
#endif

#include "nccl_api_232.h"

#ifdef __cplusplus
}
#endif

#endif /* NCCL4PY_NCCL_API_H */
