/*
 * dlpack.h - the DLPack ABI as nccl._nccl consumes it (DLPack 1.x).
 *
 * Our own declarations of the layouts fixed by the DLPack specification
 * (tensor, managed tensors legacy and versioned, the C exchange API table),
 * prefixed so that they never clash with a real dlpack.h.  C enums have the
 * size of int on every ABI we build for, hence the int32_t members.
 */
#ifndef NCCL4PY_DLPACK_H
#define NCCL4PY_DLPACK_H

#include <stdint.h>

#define N4P_DLPACK_MAJOR 1

/* capsule names (the Python DLPack protocol) */
#define N4P_CAPSULE_VERSIONED "dltensor_versioned"
#define N4P_CAPSULE_LEGACY "dltensor"
#define N4P_CAPSULE_VERSIONED_USED "used_dltensor_versioned"
#define N4P_CAPSULE_LEGACY_USED "used_dltensor"
#define N4P_CAPSULE_EXCHANGE_API "dlpack_exchange_api"

/* DLManagedTensorVersioned.flags */
#define N4P_DLFLAG_READ_ONLY ((uint64_t)1 << 0)

/* DLDataTypeCode */
enum {
    N4P_DL_INT = 0,
    N4P_DL_UINT = 1,
    N4P_DL_FLOAT = 2,
    N4P_DL_OPAQUE = 3,
    N4P_DL_BFLOAT = 4,
    N4P_DL_COMPLEX = 5,
    N4P_DL_BOOL = 6,
    N4P_DL_FLOAT8_E3M4 = 7,
    N4P_DL_FLOAT8_E4M3 = 8,
    N4P_DL_FLOAT8_E4M3B11FNUZ = 9,
    N4P_DL_FLOAT8_E4M3FN = 10,
    N4P_DL_FLOAT8_E4M3FNUZ = 11,
    N4P_DL_FLOAT8_E5M2 = 12,
    N4P_DL_FLOAT8_E5M2FNUZ = 13,
    N4P_DL_FLOAT8_E8M0FNU = 14,
    N4P_DL_FLOAT6_E2M3FN = 15,
    N4P_DL_FLOAT6_E3M2FN = 16,
    N4P_DL_FLOAT4_E2M1FN = 17,
};

typedef struct {
    uint32_t major;
    uint32_t minor;
} n4p_dlversion;

typedef struct {
    int32_t device_type; /* DLDeviceType */
    int32_t device_id;
} n4p_dldevice;

typedef struct {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} n4p_dldtype;

typedef struct {
    void *data;
    n4p_dldevice device;
    int32_t ndim;
    n4p_dldtype dtype;
    int64_t *shape;
    int64_t *strides; /* in elements; NULL = compact row-major */
    uint64_t byte_offset;
} n4p_dltensor;

/* legacy (capsule "dltensor"): the tensor comes first */
typedef struct n4p_dlmanaged {
    n4p_dltensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct n4p_dlmanaged *self);
} n4p_dlmanaged;

/* versioned (capsule "dltensor_versioned"): the tensor comes last */
typedef struct n4p_dlmanaged_v {
    n4p_dlversion version;
    void *manager_ctx;
    void (*deleter)(struct n4p_dlmanaged_v *self);
    uint64_t flags;
    n4p_dltensor dl_tensor;
} n4p_dlmanaged_v;

/* The DLPack C exchange API (DLPack >= 1.2): a table reached through
 * type(obj).__dlpack_c_exchange_api__ (a capsule "dlpack_exchange_api") or
 * the older int attribute __c_dlpack_exchange_api__.  Every function returns
 * 0, or -1 with a Python exception set. */
typedef struct n4p_dlexchange_header {
    n4p_dlversion version;
    struct n4p_dlexchange_header *prev_api; /* older major versions */
} n4p_dlexchange_header;

typedef struct {
    n4p_dlexchange_header header;
    int (*managed_tensor_allocator)(n4p_dltensor *prototype, n4p_dlmanaged_v **out,
                                    void *error_ctx,
                                    void (*set_error)(void *ctx, const char *kind,
                                                      const char *msg));
    int (*managed_tensor_from_py_object_no_sync)(void *py_object, n4p_dlmanaged_v **out);
    int (*managed_tensor_to_py_object_no_sync)(n4p_dlmanaged_v *tensor, void **out_py_object);
    /* may be NULL; fills a caller-owned tensor that borrows the object's
     * storage (shape/strides valid until control returns to Python) */
    int (*dltensor_from_py_object_no_sync)(void *py_object, n4p_dltensor *out);
    int (*current_work_stream)(int32_t device_type, int32_t device_id, void **out_stream);
} n4p_dlexchange_api;

/* The layouts on LP64 platforms, as fixed by the specification. */
#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(n4p_dltensor) == 48, "DLTensor layout");
_Static_assert(sizeof(n4p_dlmanaged) == 64, "DLManagedTensor layout");
_Static_assert(sizeof(n4p_dlmanaged_v) == 80, "DLManagedTensorVersioned layout");
_Static_assert(sizeof(n4p_dlexchange_api) == 56, "DLPackExchangeAPI layout");
#endif

#endif /* NCCL4PY_DLPACK_H */
