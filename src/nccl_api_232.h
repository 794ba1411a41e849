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

/* A vendor option chained to a collective config (24 bytes). */
typedef struct ncclConfigExt {
    struct ncclConfigExt *next;
    struct {
        int vendorId;
        int optionId;
    } key;
    union {
        int i;
        const char *s;
        void *raw;
    } val;
} ncclConfigExt_t;

/* NCCL_COLLCONFIG_INITIALIZER: what a new CollConfig holds (structs.def). */
#define NCCL_COLLCONFIG_INITIALIZER                                                          \
    {                                                                                        \
        sizeof(ncclCollConfig_t), NCCL_API_MAGIC, NCCL4PY_COLL_CONFIG_VERSION,               \
            NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,             \
            NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, 1,          \
            NCCL_CONFIG_UNDEF_INT, 0, NCCL_CONFIG_UNDEF_PTR                                  \
    }

/* Encryption of the library's TCP sockets (2.32), passed by address. */
typedef struct ncclEncryptionConfig_v23200 ncclEncryptionConfig_t;

/* ncclTeam_t and ncclMultimemHandle_t (passed by value) are declared from
 * structs.def; `ncclTeam` is the C++ spelling some prototypes use. */
typedef ncclTeam_t ncclTeam;

typedef enum {
    NCCL_CFT_TEAM_FLAT = 0,
    NCCL_CFT_TEAM_HIER_MULTIMEM = 1,
    NCCL_CFT_TEAM_HIER_LSA = 2,
} ncclCftTeamMode_t;

/* A load/store endpoint id of the CFT (connection fabric) API. */
typedef uint32_t ncclCftLeId;

/* Opaque handle of a parameter, owned by the library (by value since
 * 2.30.7; 2.30.4 passed a pointer to the struct: the same machine ABI). */
typedef struct ncclParamHandle *ncclParamHandle_t;

/* Device-resource handles and requirements: filled by the library in the
 * caller's storage, passed by address only. */
typedef struct ncclDevResourceRequirements ncclDevResourceRequirements_t;
typedef struct ncclDevResourceRequirements ncclDevResourceRequirements;
typedef struct ncclLsaBarrierHandle ncclLsaBarrierHandle_t;
typedef struct ncclGinBarrierHandle ncclGinBarrierHandle_t;
typedef struct ncclLLA2AHandle ncclLLA2AHandle_t;
typedef struct ncclGinOutboxHandle ncclGinOutboxHandle;
typedef struct ncclGinInboxA2AHandle ncclGinInboxA2AHandle;

#endif /* NCCL4PY_NCCL_API_232_H */
