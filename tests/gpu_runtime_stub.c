/*
 * A recording stand-in for libamdhip64.so, built by the tests (never a real
 * runtime).  It implements every entry of src/gpu_runtime.h under its HIP
 * name; the prototypes below are generated from that table, so a signature
 * that drifts from the table fails to compile.
 *
 * Behaviour: GPU_STUB_DEVICES devices (default 2; 0 answers hipErrorNoDevice;
 * GPU_STUB_COUNT_STATUS=N makes hipGetDeviceCount fail with status N, e.g. 35
 * hipErrorInsufficientDriver as on a machine without the driver),
 * "device" memory is host memory (so tests can read it), streams and events
 * are small heap objects, copies are synchronous, events complete at once
 * (unless held, see gpuStubHoldEvents).  gpuStubLastCall() names the last
 * function called, gpuStubCallCount(name) counts calls.
 */
#define _GNU_SOURCE
#include "gpu_runtime.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))

/* prototypes from the table (HIP names) */
#define STUB_PROTO_(id, ret, params, hip, cuda, hip_alt, cuda_alt) EXPORT ret hip params;
N4P_GPU_API(STUB_PROTO_)

static const char *const stub_names[] = {
#define STUB_NAME_(id, ret, params, hip, cuda, hip_alt, cuda_alt) #hip,
    N4P_GPU_API(STUB_NAME_)
};
static long stub_counts[N4P_GPU_COUNT];
static const char *stub_last = "";
static pthread_mutex_t stub_mu = PTHREAD_MUTEX_INITIALIZER;

#define RECORD(id)                             \
    do {                                       \
        pthread_mutex_lock(&stub_mu);          \
        stub_counts[N4P_GPU_##id]++;           \
        stub_last = stub_names[N4P_GPU_##id];  \
        pthread_mutex_unlock(&stub_mu);        \
    } while (0)

EXPORT const char *
gpuStubLastCall(void)
{
    return stub_last;
}

EXPORT long
gpuStubCallCount(const char *name)
{
    for (int i = 0; i < N4P_GPU_COUNT; i++)
        if (strcmp(stub_names[i], name) == 0)
            return stub_counts[i];
    return -1;
}

enum { E_INVALID_VALUE = 1, E_OOM = 2, E_INVALID_DEVICE = 101, E_INVALID_HANDLE = 400 };

static int
ndevices(void)
{
    const char *s = getenv("GPU_STUB_DEVICES");
    return s ? atoi(s) : 2;
}

static _Thread_local int current;

/* allocations: a small table (ptr, size, device, kind) */
typedef struct {
    void *ptr;
    size_t size;
    int device;
    int type;
} alloc_t;
#define MAX_ALLOCS 4096
static alloc_t allocs[MAX_ALLOCS];

static int
track(void *p, size_t size, int type)
{
    pthread_mutex_lock(&stub_mu);
    for (int i = 0; i < MAX_ALLOCS; i++) {
        if (allocs[i].ptr == NULL) {
            allocs[i] = (alloc_t){p, size, current, type};
            pthread_mutex_unlock(&stub_mu);
            return 0;
        }
    }
    pthread_mutex_unlock(&stub_mu);
    return -1;
}

static int
untrack(void *p, int type)
{
    int found = -1;
    pthread_mutex_lock(&stub_mu);
    for (int i = 0; i < MAX_ALLOCS; i++) {
        if (allocs[i].ptr == p && allocs[i].type == type) {
            allocs[i].ptr = NULL;
            found = 0;
            break;
        }
    }
    pthread_mutex_unlock(&stub_mu);
    return found;
}

int hipGetDeviceCount(int *count)
{
    RECORD(GET_DEVICE_COUNT);
    const char *fail = getenv("GPU_STUB_COUNT_STATUS");
    if (fail != NULL && *fail != '\0') {
        *count = 0;
        return atoi(fail);
    }
    int n = ndevices();
    *count = n;
    return n > 0 ? 0 : N4P_GPU_ERROR_NO_DEVICE;
}

int hipGetDevice(int *device)
{
    RECORD(GET_DEVICE);
    *device = current;
    return 0;
}

int hipSetDevice(int device)
{
    RECORD(SET_DEVICE);
    if (device < 0 || device >= ndevices())
        return E_INVALID_DEVICE;
    current = device;
    return 0;
}

int hipGetDevicePropertiesR0600(void *prop, int device)
{
    RECORD(GET_DEVICE_PROPERTIES);
    if (device < 0 || device >= ndevices())
        return E_INVALID_DEVICE;
    snprintf((char *)prop, 256, "Stub GPU %d", device);
    return 0;
}

int hipDeviceGetPCIBusId(char *pciBusId, int len, int device)
{
    RECORD(DEVICE_GET_PCI_BUS_ID);
    if (device < 0 || device >= ndevices())
        return E_INVALID_DEVICE;
    snprintf(pciBusId, (size_t)len, "0000:%02x:00.0", 0x10 + device);
    return 0;
}

int hipDeviceSynchronize(void)
{
    RECORD(DEVICE_SYNCHRONIZE);
    return 0;
}

int hipRuntimeGetVersion(int *version)
{
    RECORD(RUNTIME_GET_VERSION);
    *version = 60400000;
    return 0;
}

typedef struct {
    int device;
    unsigned int flags;
    double t;
} object_t;

int hipStreamCreateWithFlags(void **stream, unsigned int flags)
{
    RECORD(STREAM_CREATE_WITH_FLAGS);
    object_t *s = calloc(1, sizeof *s);
    if (s == NULL)
        return E_OOM;
    s->device = current;
    s->flags = flags;
    *stream = s;
    return 0;
}

int hipStreamDestroy(void *stream)
{
    RECORD(STREAM_DESTROY);
    if (stream == NULL)
        return E_INVALID_HANDLE;
    free(stream);
    return 0;
}

int hipStreamSynchronize(void *stream)
{
    (void)stream;
    RECORD(STREAM_SYNCHRONIZE);
    return 0;
}

int hipStreamQuery(void *stream)
{
    (void)stream;
    RECORD(STREAM_QUERY);
    return 0;
}

int hipEventCreateWithFlags(void **event, unsigned int flags)
{
    RECORD(EVENT_CREATE_WITH_FLAGS);
    object_t *e = calloc(1, sizeof *e);
    if (e == NULL)
        return E_OOM;
    e->device = current;
    e->flags = flags;
    *event = e;
    return 0;
}

int hipEventDestroy(void *event)
{
    RECORD(EVENT_DESTROY);
    if (event == NULL)
        return E_INVALID_HANDLE;
    free(event);
    return 0;
}

int hipEventRecord(void *event, void *stream)
{
    (void)stream;
    RECORD(EVENT_RECORD);
    if (event == NULL)
        return E_INVALID_HANDLE;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ((object_t *)event)->t = (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
    return 0;
}

int hipEventSynchronize(void *event)
{
    RECORD(EVENT_SYNCHRONIZE);
    return event ? 0 : E_INVALID_HANDLE;
}

/* Events complete at once unless gpuStubHoldEvents(1) holds them: then every
 * event reads as not ready (600), as GPU work that never finishes would. */
static int stub_hold_events;

EXPORT void
gpuStubHoldEvents(int hold)
{
    __atomic_store_n(&stub_hold_events, hold, __ATOMIC_SEQ_CST);
}

int hipEventQuery(void *event)
{
    RECORD(EVENT_QUERY);
    if (event == NULL)
        return E_INVALID_HANDLE;
    return __atomic_load_n(&stub_hold_events, __ATOMIC_SEQ_CST) ? 600 : 0;
}

int hipEventElapsedTime(float *ms, void *start, void *stop)
{
    RECORD(EVENT_ELAPSED_TIME);
    if (start == NULL || stop == NULL)
        return E_INVALID_HANDLE;
    *ms = (float)(((object_t *)stop)->t - ((object_t *)start)->t);
    return 0;
}

int hipMalloc(void **ptr, size_t size)
{
    RECORD(MALLOC);
    if (size == 0) {
        *ptr = NULL;
        return 0;
    }
    if (size > ((size_t)1 << 40))
        return E_OOM;
    void *p = calloc(1, size);
    if (p == NULL || track(p, size, N4P_GPU_MEM_DEVICE) < 0) {
        free(p);
        return E_OOM;
    }
    *ptr = p;
    return 0;
}

int hipFree(void *ptr)
{
    RECORD(FREE);
    if (ptr == NULL)
        return 0;
    if (untrack(ptr, N4P_GPU_MEM_DEVICE) < 0)
        return E_INVALID_VALUE;
    free(ptr);
    return 0;
}

int hipHostMalloc(void **ptr, size_t size, unsigned int flags)
{
    (void)flags;
    RECORD(HOST_ALLOC);
    void *p = calloc(1, size ? size : 1);
    if (p == NULL || track(p, size, N4P_GPU_MEM_HOST) < 0) {
        free(p);
        return E_OOM;
    }
    *ptr = p;
    return 0;
}

int hipHostFree(void *ptr)
{
    RECORD(FREE_HOST);
    if (ptr == NULL)
        return 0;
    if (untrack(ptr, N4P_GPU_MEM_HOST) < 0)
        return E_INVALID_VALUE;
    free(ptr);
    return 0;
}

int hipMemcpy(void *dst, const void *src, size_t size, int kind)
{
    RECORD(MEMCPY);
    if (kind != N4P_GPU_MEMCPY_DEFAULT)
        return E_INVALID_VALUE;
    if (size)
        memmove(dst, src, size);
    return 0;
}

int hipMemcpyAsync(void *dst, const void *src, size_t size, int kind, void *stream)
{
    (void)stream;
    RECORD(MEMCPY_ASYNC);
    if (kind != N4P_GPU_MEMCPY_DEFAULT)
        return E_INVALID_VALUE;
    if (size)
        memmove(dst, src, size);
    return 0;
}

int hipMemset(void *ptr, int value, size_t size)
{
    RECORD(MEMSET);
    if (size)
        memset(ptr, value, size);
    return 0;
}

int hipMemsetAsync(void *ptr, int value, size_t size, void *stream)
{
    (void)stream;
    RECORD(MEMSET_ASYNC);
    if (size)
        memset(ptr, value, size);
    return 0;
}

int hipPointerGetAttributes(void *attributes, const void *ptr)
{
    RECORD(POINTER_GET_ATTRIBUTES);
    n4p_gpu_pointer_attributes *a = attributes;
    memset(a, 0, sizeof *a);
    pthread_mutex_lock(&stub_mu);
    for (int i = 0; i < MAX_ALLOCS; i++) {
        const char *base = allocs[i].ptr;
        if (base && (const char *)ptr >= base && (const char *)ptr < base + allocs[i].size) {
            a->type = allocs[i].type;
            a->device = allocs[i].device;
            a->device_pointer = (void *)ptr;
            break;
        }
    }
    pthread_mutex_unlock(&stub_mu);
    return 0;
}

const char *hipGetErrorName(int error)
{
    RECORD(GET_ERROR_NAME);
    switch (error) {
    case 0: return "hipSuccess";
    case E_INVALID_VALUE: return "hipErrorInvalidValue";
    case E_OOM: return "hipErrorOutOfMemory";
    case N4P_GPU_ERROR_NO_DEVICE: return "hipErrorNoDevice";
    case N4P_GPU_ERROR_INSUFFICIENT_DRIVER: return "hipErrorInsufficientDriver";
    case E_INVALID_DEVICE: return "hipErrorInvalidDevice";
    case E_INVALID_HANDLE: return "hipErrorInvalidHandle";
    default: return "hipErrorUnknown";
    }
}

const char *hipGetErrorString(int error)
{
    RECORD(GET_ERROR_STRING);
    switch (error) {
    case 0: return "no error";
    case E_INVALID_VALUE: return "invalid argument";
    case E_OOM: return "out of memory";
    case N4P_GPU_ERROR_NO_DEVICE: return "no ROCm-capable device is detected";
    case N4P_GPU_ERROR_INSUFFICIENT_DRIVER:
        return "driver version is insufficient for runtime version";
    case E_INVALID_DEVICE: return "invalid device ordinal";
    case E_INVALID_HANDLE: return "invalid resource handle";
    default: return "unknown error";
    }
}
