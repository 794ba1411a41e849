/*
 * registration.c - ncclMemAlloc / ncclMemFree, buffer registration and
 * windows (bookkeeping only: handles are distinct valid pointers), and the
 * windows' device pointers, which exist for the caller's own rank only.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <unistd.h>

#include "entry.h"

/* --------------------------------------------------- registration etc. -- */

N4P_EXPORT ncclResult_t ncclMemAlloc(void **ptr, size_t size)
{
    if (ptr == NULL)
        return n4p_fail(NULL, ncclInvalidArgument, "ptr is NULL");
    long page = sysconf(_SC_PAGESIZE);
    void *p = NULL;
    if (posix_memalign(&p, page > 0 ? (size_t)page : 4096u, size ? size : 1) != 0)
        return n4p_fail(NULL, ncclSystemError, "cannot allocate %zu bytes", size);
    *ptr = p;
    return ncclSuccess;
}

N4P_EXPORT ncclResult_t ncclMemFree(void *ptr)
{
    free(ptr);
    return ncclSuccess;
}

static n4p_reg *reg_new(ncclComm_t comm, void *buff, size_t size, int flags,
                        bool window)
{
    n4p_reg *r;
    if (window) {
        struct ncclWindow_vidmem *w = calloc(1, sizeof *w);
        r = w ? &w->reg : NULL;
    } else {
        r = calloc(1, sizeof *r);
    }
    if (r == NULL)
        return NULL;
    r->magic = N4P_COMM_MAGIC;
    r->buff = buff;
    r->size = size;
    r->flags = flags;
    r->window = window;
    r->rank = comm->rank;
    pthread_mutex_lock(&comm->lock);
    r->next = comm->regs;
    comm->regs = r;
    pthread_mutex_unlock(&comm->lock);
    return r;
}

/* Unlink and return the registration `r` if `comm` owns it. */
static n4p_reg *reg_take(ncclComm_t comm, const n4p_reg *r, bool window)
{
    pthread_mutex_lock(&comm->lock);
    for (n4p_reg **pp = &comm->regs; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == r && r->window == window) {
            n4p_reg *found = *pp;
            *pp = found->next;
            pthread_mutex_unlock(&comm->lock);
            return found;
        }
    }
    pthread_mutex_unlock(&comm->lock);
    return NULL;
}

static bool reg_owned(ncclComm_t comm, const n4p_reg *r, bool window)
{
    bool ok = false;
    pthread_mutex_lock(&comm->lock);
    for (n4p_reg *p = comm->regs; p != NULL; p = p->next)
        if (p == r && p->window == window)
            ok = true;
    pthread_mutex_unlock(&comm->lock);
    return ok;
}

N4P_EXPORT ncclResult_t ncclCommRegister(ncclComm_t comm, void *buff, size_t size,
                                         void **handle)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    if (handle == NULL || (buff == NULL && size > 0))
        return n4p_fail(comm, ncclInvalidArgument,
                        "NULL handle pointer or buffer");
    n4p_reg *r = reg_new(comm, buff, size, 0, false);
    if (r == NULL)
        return n4p_fail(comm, ncclSystemError, "out of memory");
    *handle = r;
    return ncclSuccess;
}

N4P_EXPORT ncclResult_t ncclCommDeregister(ncclComm_t comm, void *handle)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    n4p_reg *r = reg_take(comm, handle, false);
    if (r == NULL)
        return n4p_fail(comm, ncclInvalidArgument,
                        "handle %p is not registered with this communicator",
                        handle);
    r->magic = 0;
    free(r);
    return ncclSuccess;
}

N4P_EXPORT ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff,
                                               size_t size, ncclWindow_t *win,
                                               int winFlags)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    if (win == NULL || (buff == NULL && size > 0))
        return n4p_fail(comm, ncclInvalidArgument, "NULL window pointer or buffer");
    n4p_reg *r = reg_new(comm, buff, size, winFlags, true);
    if (r == NULL)
        return n4p_fail(comm, ncclSystemError, "out of memory");
    *win = (struct ncclWindow_vidmem *)r; /* reg is the first member */
    return ncclSuccess;
}

N4P_EXPORT ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    n4p_reg *r = win ? reg_take(comm, &win->reg, true) : NULL;
    if (r == NULL)
        return n4p_fail(comm, ncclInvalidArgument,
                        "window %p is not registered with this communicator",
                        (void *)win);
    r->magic = 0;
    free(win);
    return ncclSuccess;
}

N4P_EXPORT ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win,
                                          void **outUserPtr)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    if (outUserPtr == NULL || win == NULL || !reg_owned(comm, &win->reg, true))
        return n4p_fail(comm, ncclInvalidArgument,
                        "unknown window or NULL output pointer");
    *outUserPtr = win->reg.buff;
    return ncclSuccess;
}

/* ------------------------------------ window device-pointer queries -- */

N4P_EXPORT ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t window,
                                                        size_t offset, void **outPtr)
{
    (void)window;
    (void)offset;
    if (outPtr == NULL)
        return n4p_fail(NULL, ncclInvalidArgument, "outPtr is NULL");
    *outPtr = NULL; /* no multicast memory on the host */
    return ncclSuccess;
}

static ncclResult_t own_window_ptr(ncclWindow_t window, size_t offset, int rank,
                                   void **out)
{
    if (out == NULL || window == NULL || window->reg.magic != N4P_COMM_MAGIC)
        return n4p_fail(NULL, ncclInvalidArgument,
                        "invalid window or NULL output pointer");
    if (rank != window->reg.rank)
        return n4p_fail(NULL, ncclInvalidUsage,
                        "the memory of rank %d is not mapped in this process "
                        "(the host backend only maps the caller's own window)",
                        rank);
    if (offset > window->reg.size)
        return n4p_fail(NULL, ncclInvalidArgument,
                        "offset %zu is beyond the window size %zu", offset,
                        window->reg.size);
    *out = (char *)window->reg.buff + offset;
    return ncclSuccess;
}

N4P_EXPORT ncclResult_t ncclGetLsaDevicePointer(ncclWindow_t window, size_t offset,
                                                int lsaRank, void **outPtr)
{
    return own_window_ptr(window, offset, lsaRank, outPtr);
}

N4P_EXPORT ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset,
                                                 int peer, void **outPtr)
{
    return own_window_ptr(window, offset, peer, outPtr);
}
