/*
 * env.h - every environment variable the library honours, in one table (name, type, default,
 * what it does), and the one place they are read. `inagg --help` prints the table and
 * docs/API.md lists it; tests/cli_env.sh checks that no other file of the library calls
 * getenv and that the two lists agree. A new variable is a row here and a line in API.md.
 */
#ifndef INAGG_BASE_ENV_H
#define INAGG_BASE_ENV_H

#include <stddef.h>
#include <stdint.h>

typedef enum env_id {
    ENV_LOG,
    ENV_LOG_FORMAT,
    ENV_TRANSPORT,
    ENV_FAULTS,
    ENV_JOB_SECRET,
    ENV_JOB_SECRET_FILE,
    ENV_ROCE_PSN,
    ENV_ROCE_REPLAY,
    ENV_ROCE_MTU,
    ENV_CODEC_HELPER,
    ENV_NO_DATAPLANE_AUTH,
    ENV_POLL,
    ENV_UDP_GSO,
    ENV_MULTICAST,
    ENV_FAILOVER,
    ENV_SWITCH_TIMEOUT_MS,
    ENV_REJOIN_MS,
    ENV_FAILOVER_MAX,
    ENV_COUNT
} env_id_t;

typedef struct env_var {
    const char *name; /* "INAGG_..." */
    const char *type; /* how its value is read: "string", "0|1", "level", "24-bit number" */
    const char *def; /* what applies when it is unset */
    const char *doc; /* what it does, one sentence */
} env_var_t;

/* Row id of the table (NULL past the end). */
const env_var_t *env_var(env_id_t id);

/* The variable's value as the environment holds it (NULL: unset). */
const char *env_get(env_id_t id);

/* A "0|1" variable: 0 when it is set to "0", else 1 (unset, or any other value). */
int env_flag(env_id_t id);

/* A number variable: 1 with *out set, 0 when unset or empty, -EINVAL when it is not a
 * number of at most max (a reason naming the variable in err). */
int env_u32(env_id_t id, uint32_t max, uint32_t *out, char *err, size_t errlen);

#endif /* INAGG_BASE_ENV_H */
