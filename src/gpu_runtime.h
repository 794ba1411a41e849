/*
 * gpu_runtime.h - the tiny HIP / CUDA runtime layer: what its table
 * (src/gpu_runtime.def, generated into the X-macro N4P_GPU_API) gives C,
 * and the constants both runtimes share.
 *
 * Derived from the table here: the index enum, the function-pointer types;
 * in src/gpu_runtime.c the symbol names; in the test stub
 * (tests/gpu_runtime_stub.c) the prototypes it must implement.
 *
 * Handles (streams, events) are opaque pointers.  The device-properties
 * struct differs between the runtimes and versions, but both begin with
 * `char name[256]`; it is read into a large zeroed buffer and only the
 * name is used.  Pointer attributes likewise begin with
 * `int type; int device;` in CUDA >= 11 and ROCm >= 6.
 */
#ifndef NCCL4PY_GPU_RUNTIME_H
#define NCCL4PY_GPU_RUNTIME_H

#include <stddef.h>

#include "gen/gpu_api.h" /* N4P_GPU_API(X), from src/gpu_runtime.def */

/* Index of each entry: N4P_GPU_<id>. */
#define N4P_GPU_ENUM_(id, ret, params, hip, cuda, hip_alt, cuda_alt) N4P_GPU_##id,
enum { N4P_GPU_API(N4P_GPU_ENUM_) N4P_GPU_COUNT };

/* Function-pointer type of each entry: n4p_gpu_<id>_fn. */
#define N4P_GPU_TYPEDEF_(id, ret, params, hip, cuda, hip_alt, cuda_alt) \
    typedef ret(*n4p_gpu_##id##_fn) params;
N4P_GPU_API(N4P_GPU_TYPEDEF_)

/* Status codes shared by both runtimes (same values in hip_runtime_api.h and
 * driver_types.h). */
enum {
    N4P_GPU_SUCCESS = 0,
    N4P_GPU_ERROR_INSUFFICIENT_DRIVER = 35,
    N4P_GPU_ERROR_NO_DEVICE = 100,
    N4P_GPU_ERROR_NOT_READY = 600,
};

/* Shared flag and enum values. */
enum {
    N4P_GPU_MEMCPY_DEFAULT = 4,          /* hipMemcpyDefault / cudaMemcpyDefault */
    N4P_GPU_STREAM_NON_BLOCKING = 1,     /* hipStreamNonBlocking / cudaStreamNonBlocking */
    N4P_GPU_EVENT_DISABLE_TIMING = 2,    /* hipEventDisableTiming / cudaEventDisableTiming */
    N4P_GPU_HOST_ALLOC_PORTABLE = 1,     /* hipHostMallocPortable / cudaHostAllocPortable */
};

/* Memory types reported by pointer attributes (CUDA >= 11, ROCm >= 6). */
enum {
    N4P_GPU_MEM_UNREGISTERED = 0,
    N4P_GPU_MEM_HOST = 1,
    N4P_GPU_MEM_DEVICE = 2,
    N4P_GPU_MEM_MANAGED = 3,
};

/* Leading fields common to hipPointerAttribute_t and cudaPointerAttributes. */
typedef struct {
    int type;
    int device;
    void *device_pointer;
    void *host_pointer;
} n4p_gpu_pointer_attributes;

/* Room for hipDeviceProp_t / cudaDeviceProp of any version (both ~1-1.5 KiB). */
#define N4P_GPU_PROP_BYTES 8192

#endif /* NCCL4PY_GPU_RUNTIME_H */
