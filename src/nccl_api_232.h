/*
 * nccl_api_232.h - the types of the NCCL 2.28-2.32 host functions that take
 * or return teams, per-call configs, parameter handles and device-resource
 * handles, as NCCL 2.32.3 lays them out on LP64.  Included by nccl_api.h.
 *
 * The structs with Python classes (ncclTeam_t, ncclMultimemHandle_t,
 * ncclCollConfig_t) come from structs.def; the others are declared by tag
 * (they are only passed by address), except the vendor option a per-call
 * config chains.
 */
#ifndef NCCL4PY_NCCL_API_232_H
#define NCCL4PY_NCCL_API_232_H

/* ncclParamHandle_t is in nccl_api.h, NCCL_COLLCONFIG_INITIALIZER in the
 * generated gen/nccl_constants.h; the structs with Python classes come from
 * structs.def. */

/* ncclTeam_t and ncclMultimemHandle_t (passed by value) are declared from
 * structs.def; `ncclTeam` is the C++ spelling some prototypes use. */
typedef ncclTeam_t ncclTeam;

/* A load/store endpoint id of the CFT (connection fabric) API. */
typedef uint32_t ncclCftLeId;


/* Device-resource handles and requirements: filled by the library in the
 * caller's storage, passed by address only. */
typedef ncclDevResourceRequirements_t ncclDevResourceRequirements;
typedef struct ncclGinOutboxHandle ncclGinOutboxHandle;
typedef struct ncclGinInboxA2AHandle ncclGinInboxA2AHandle;

#endif /* NCCL4PY_NCCL_API_232_H */
