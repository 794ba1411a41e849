/*
 * errors.c - result strings and the "last error" text.
 *
 * Every failure records a message in three places: a thread-local buffer
 * (what ncclGetLastError returns on the failing thread), a process-wide copy
 * (what other threads see when they have no error of their own) and, when a
 * communicator is involved, the communicator itself.  Group execution runs
 * the operations of several communicators on helper threads; the group code
 * copies the communicator's text back to the calling thread.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* getrandom, syscall, strtok_r, ... */
#endif
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

static _Thread_local char tls_err[N4P_ERRLEN];
static char g_err[N4P_ERRLEN];
static pthread_mutex_t g_err_lock = PTHREAD_MUTEX_INITIALIZER;

void n4p_set_error_text(const char *text)
{
    snprintf(tls_err, sizeof tls_err, "%s", text);
    pthread_mutex_lock(&g_err_lock);
    snprintf(g_err, sizeof g_err, "%s", text);
    pthread_mutex_unlock(&g_err_lock);
}

const char *n4p_thread_error(void)
{
    return tls_err;
}

static void vset(ncclComm_t comm, const char *fmt, va_list ap)
{
    char msg[N4P_ERRLEN];
    char full[N4P_ERRLEN];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (comm != NULL && comm->magic == N4P_COMM_MAGIC)
        snprintf(full, sizeof full, "nccl4py host backend, rank %d of %d: %.440s",
                 comm->rank, comm->nranks, msg);
    else
        snprintf(full, sizeof full, "nccl4py host backend: %.480s", msg);
    n4p_set_error_text(full);
    if (comm != NULL && comm->magic == N4P_COMM_MAGIC)
        snprintf(comm->errmsg, sizeof comm->errmsg, "%s", full);
    n4p_log(N4P_LOG_WARN, comm, "%s", full);
}

void n4p_set_error(ncclComm_t comm, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vset(comm, fmt, ap);
    va_end(ap);
}

ncclResult_t n4p_fail(ncclComm_t comm, ncclResult_t rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vset(comm, fmt, ap);
    va_end(ap);
    return rc;
}

/* Make `rc` the sticky error of `comm` (the first one wins). */
ncclResult_t n4p_comm_failed(ncclComm_t comm, ncclResult_t rc)
{
    if (comm != NULL && rc != ncclSuccess && rc != ncclInProgress) {
        int expected = ncclSuccess;
        atomic_compare_exchange_strong(&comm->error, &expected, (int)rc);
    }
    return rc;
}

N4P_EXPORT const char *ncclGetErrorString(ncclResult_t result)
{
    switch (result) {
    case ncclSuccess:
        return "no error";
    case ncclUnhandledCudaError:
        return "unhandled device runtime error";
    case ncclSystemError:
        return "operating-system call failed (memory, shared memory or "
               "another system resource)";
    case ncclInternalError:
        return "internal error in the communication library";
    case ncclInvalidArgument:
        return "invalid argument";
    case ncclInvalidUsage:
        return "invalid usage of the library";
    case ncclRemoteError:
        return "a remote rank failed, exited or reported an error";
    case ncclInProgress:
        return "operation still in progress";
    case ncclTimeout:
        return "timed out waiting for other ranks";
    default:
        return "unknown result code";
    }
}

N4P_EXPORT const char *ncclGetLastError(ncclComm_t comm)
{
    if (tls_err[0] != '\0')
        return tls_err;
    if (comm != NULL && comm->magic == N4P_COMM_MAGIC && comm->errmsg[0] != '\0')
        return comm->errmsg;
    /* Another thread's failure: hand out a stable thread-local copy. */
    static _Thread_local char copy[N4P_ERRLEN];
    pthread_mutex_lock(&g_err_lock);
    memcpy(copy, g_err, sizeof copy);
    pthread_mutex_unlock(&g_err_lock);
    return copy;
}
