/*
 * config_colls.c - the per-call-config collectives of NCCL 2.31+
 * (ncclAllReduceConfig, ...): the plain collective with an ncclCollConfig_t.
 *
 * The config is read as NCCL 2.32.3 reads it: only its first `size` bytes
 * belong to the caller and are laid over NCCL_COLLCONFIG_INITIALIZER (so a
 * shorter, older config leaves the newer fields at their defaults and a
 * longer, newer one has its tail ignored); `version` is not checked.  A
 * config that NCCL refuses is refused with ncclInvalidArgument before the
 * call does anything, so no rank waits for it: a wrong magic (which
 * includes a `size` too small to reach it), forceAlgSelection other than 0
 * or 1, a CTAPolicy outside 0..3 other than NCCL_CONFIG_UNDEF_INT.
 *
 * The tuning fields (CTAs, cluster size, algorithm selection, CTA policy,
 * profiler tag) choose how a GPU runs the collective, never its result, so
 * this backend ignores them, and the vendor extensions (`ext`) too, as NCCL
 * does.  A launch completion event is refused: there is no device event to
 * record.  config == NULL is the plain call.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <string.h>

#include "entry.h"

#define CTA_POLICY_MAX (NCCL_CTA_POLICY_EFFICIENCY | NCCL_CTA_POLICY_ZERO)

static ncclResult_t check_config(const char *fn, ncclComm_t comm,
                                 const ncclCollConfig_t *config)
{
    if (config == NULL)
        return ncclSuccess;
    ncclCollConfig_t c = NCCL_COLLCONFIG_INITIALIZER;
    c.magic = 0; /* a config too short to hold one has no magic */
    size_t n = config->size < sizeof c ? config->size : sizeof c;
    memcpy(&c, config, n);
    ncclResult_t rc = ncclSuccess;
    if (c.magic != NCCL_API_MAGIC)
        rc = n4p_fail(comm, ncclInvalidArgument,
                      "%s: ncclCollConfig_t magic mismatch (got 0x%x, expected 0x%x; size "
                      "%zu): initialise the config with NCCL_COLLCONFIG_INITIALIZER",
                      fn, c.magic, NCCL_API_MAGIC, config->size);
    else if (c.forceAlgSelection != 0 && c.forceAlgSelection != 1)
        rc = n4p_fail(comm, ncclInvalidArgument,
                      "%s: config->forceAlgSelection=%d is invalid, accepted values are 0 "
                      "or 1", fn, c.forceAlgSelection);
    else if (c.CTAPolicy != NCCL_CONFIG_UNDEF_INT &&
             (c.CTAPolicy < 0 || c.CTAPolicy > CTA_POLICY_MAX))
        rc = n4p_fail(comm, ncclInvalidArgument,
                      "%s: config->CTAPolicy=%d is invalid, accepted values are 0 to %d or "
                      "NCCL_CONFIG_UNDEF_INT", fn, c.CTAPolicy, CTA_POLICY_MAX);
    else if (c.launchCompletionEvent != NULL)
        rc = n4p_fail(comm, ncclInvalidArgument,
                      "%s: config->launchCompletionEvent is not supported: the host backend "
                      "has no device events (leave it NULL)", fn);
    return n4p_group_note(rc);
}

/* nccl<Name>Config(<the plain parameters>, config): the config checked, then
 * the plain call.  The parameters are the API table's (src/gen/host_api_decls.h), so each
 * definition matches its declaration there. */
#define CONFIG_COLL(name)                                                               \
    N4P_EXPORT ncclResult_t name##Config(N4P_PARAMS_##name, const ncclCollConfig_t *config) \
    {                                                                                   \
        ncclResult_t rc = check_config(#name "Config", comm, config);                   \
        return rc != ncclSuccess ? rc : name(N4P_ARGS_##name);                          \
    }

N4P_HOST_CONFIG_COLLS(CONFIG_COLL)
