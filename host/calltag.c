/*
 * calltag.c - the caller's tag of a collective: a short name for its data
 * (nccl.torch gives the torch dtype of tensors the library sees as another
 * type: int16 widened to int32 or moved as bytes, bool as uint8).  The
 * collectives submitted while a tag is set carry it in their description
 * (rounds.c), so ranks whose tags differ fail as a mismatch naming both.
 * Collectives without a tag compare as before; sends and receives do not
 * compare tags.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <string.h>

#include "entry.h"

/* Set the tag of the collectives `comm` submits from now on (NULL or "":
 * none); longer tags are cut to N4P_TAG_LEN - 1 bytes.  The tag stays until
 * it is set again. */
N4P_EXPORT ncclResult_t nccl4pyHostSetCallTag(ncclComm_t comm, const char *tag);
N4P_EXPORT ncclResult_t nccl4pyHostSetCallTag(ncclComm_t comm, const char *tag)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    memset(comm->call_tag, 0, sizeof comm->call_tag);
    if (tag != NULL)
        strncpy(comm->call_tag, tag, sizeof comm->call_tag - 1);
    return ncclSuccess;
}
