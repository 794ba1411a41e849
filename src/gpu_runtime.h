/*
 * gpu_runtime.h - THE table of the tiny HIP / CUDA runtime layer.
 *
 * One line per runtime function.  HIP and the CUDA runtime give these
 * functions the same signature and the same status codes, so one table
 * serves both; only the symbol names differ.  Everything else is derived
 * from it with X-macros: the index enum, the function-pointer types, the
 * symbol-name table used by src/gpu_runtime.c, and the prototypes the test
 * stub (tests/gpu_runtime_stub.c) must implement.
 *
 * Columns: X(id, return type, (parameters), HIP symbol, CUDA symbol,
 *            HIP fallback symbol or "", CUDA fallback symbol or "")
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

#define N4P_GPU_API(X)                                                                        \
    X(GET_DEVICE_COUNT, int, (int *count), hipGetDeviceCount, cudaGetDeviceCount, "", "")      \
    X(GET_DEVICE, int, (int *device), hipGetDevice, cudaGetDevice, "", "")                     \
    X(SET_DEVICE, int, (int device), hipSetDevice, cudaSetDevice, "", "")                      \
    X(GET_DEVICE_PROPERTIES, int, (void *prop, int device), hipGetDevicePropertiesR0600,       \
      cudaGetDeviceProperties_v2, "hipGetDeviceProperties", "cudaGetDeviceProperties")         \
    X(DEVICE_GET_PCI_BUS_ID, int, (char *pciBusId, int len, int device), hipDeviceGetPCIBusId, \
      cudaDeviceGetPCIBusId, "", "")                                                           \
    X(DEVICE_SYNCHRONIZE, int, (void), hipDeviceSynchronize, cudaDeviceSynchronize, "", "")    \
    X(RUNTIME_GET_VERSION, int, (int *version), hipRuntimeGetVersion, cudaRuntimeGetVersion,   \
      "", "")                                                                                  \
    X(STREAM_CREATE_WITH_FLAGS, int, (void **stream, unsigned int flags),                      \
      hipStreamCreateWithFlags, cudaStreamCreateWithFlags, "", "")                             \
    X(STREAM_DESTROY, int, (void *stream), hipStreamDestroy, cudaStreamDestroy, "", "")        \
    X(STREAM_SYNCHRONIZE, int, (void *stream), hipStreamSynchronize, cudaStreamSynchronize,    \
      "", "")                                                                                  \
    X(STREAM_QUERY, int, (void *stream), hipStreamQuery, cudaStreamQuery, "", "")              \
    X(EVENT_CREATE_WITH_FLAGS, int, (void **event, unsigned int flags),                        \
      hipEventCreateWithFlags, cudaEventCreateWithFlags, "", "")                               \
    X(EVENT_DESTROY, int, (void *event), hipEventDestroy, cudaEventDestroy, "", "")            \
    X(EVENT_RECORD, int, (void *event, void *stream), hipEventRecord, cudaEventRecord, "", "") \
    X(EVENT_SYNCHRONIZE, int, (void *event), hipEventSynchronize, cudaEventSynchronize, "",    \
      "")                                                                                      \
    X(EVENT_QUERY, int, (void *event), hipEventQuery, cudaEventQuery, "", "")                  \
    X(EVENT_ELAPSED_TIME, int, (float *ms, void *start, void *stop), hipEventElapsedTime,      \
      cudaEventElapsedTime, "", "")                                                            \
    X(MALLOC, int, (void **ptr, size_t size), hipMalloc, cudaMalloc, "", "")                   \
    X(FREE, int, (void *ptr), hipFree, cudaFree, "", "")                                       \
    X(HOST_ALLOC, int, (void **ptr, size_t size, unsigned int flags), hipHostMalloc,           \
      cudaHostAlloc, "hipHostAlloc", "")                                                       \
    X(FREE_HOST, int, (void *ptr), hipHostFree, cudaFreeHost, "hipFreeHost", "")               \
    X(MEMCPY, int, (void *dst, const void *src, size_t size, int kind), hipMemcpy, cudaMemcpy, \
      "", "")                                                                                  \
    X(MEMCPY_ASYNC, int, (void *dst, const void *src, size_t size, int kind, void *stream),    \
      hipMemcpyAsync, cudaMemcpyAsync, "", "")                                                 \
    X(MEMSET, int, (void *ptr, int value, size_t size), hipMemset, cudaMemset, "", "")         \
    X(MEMSET_ASYNC, int, (void *ptr, int value, size_t size, void *stream), hipMemsetAsync,    \
      cudaMemsetAsync, "", "")                                                                 \
    X(POINTER_GET_ATTRIBUTES, int, (void *attributes, const void *ptr), hipPointerGetAttributes, \
      cudaPointerGetAttributes, "", "")                                                        \
    X(GET_ERROR_NAME, const char *, (int error), hipGetErrorName, cudaGetErrorName, "", "")    \
    X(GET_ERROR_STRING, const char *, (int error), hipGetErrorString, cudaGetErrorString, "",  \
      "")

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
