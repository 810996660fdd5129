/*
 * env.c - the library's environment variables (see env.h): the table, and the only getenv
 * calls of libinagg.
 */
#include "lib/base/env.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/errmsg.h"

static const env_var_t vars[ENV_COUNT] = {
    [ENV_LOG] = {"INAGG_LOG", "level", "warn (the inagg command: info)",
                 "log level of the library's messages on stderr: error, warn, info or debug"},
    [ENV_LOG_FORMAT] = {"INAGG_LOG_FORMAT", "string", "text",
                        "form of each log line: text, kv (key=value) or json (one object)"},
    [ENV_TRANSPORT] = {"INAGG_TRANSPORT", "string", "udp",
                       "the workers' transport when inagg_options_t.transport is NULL: udp or "
                       "roce"},
    [ENV_FAULTS] = {"INAGG_FAULTS", "string", "none",
                    "fault injection spec of the workers' endpoints when "
                    "inagg_options_t.faults is NULL (drop=,dup=,reorder=,seed=)"},
    [ENV_JOB_SECRET] = {"INAGG_JOB_SECRET", "string", "none",
                        "the job secret when inagg_options_t.secret is NULL"},
    [ENV_JOB_SECRET_FILE] = {"INAGG_JOB_SECRET_FILE", "string", "none",
                             "a file holding the job secret when neither "
                             "inagg_options_t.secret nor secret_file nor INAGG_JOB_SECRET "
                             "gives one"},
    [ENV_ROCE_PSN] = {"INAGG_ROCE_PSN", "24-bit number", "random",
                      "roce: the first PSN of every QP (tests: PSN wrap-around)"},
    [ENV_ROCE_REPLAY] = {"INAGG_ROCE_REPLAY", "0|1", "1",
                         "roce: 0 sends every retransmission at new PSNs instead of its first "
                         "one at its first sending's"},
    [ENV_ROCE_MTU] = {"INAGG_ROCE_MTU", "256|512|1024|2048|4096", "from the interface",
                      "roce: the path MTU of the worker's messages (payload bytes per frame); "
                      "by default the largest whose frames the interface's MTU carries"},
    [ENV_CODEC_HELPER] = {"INAGG_CODEC_HELPER", "0|1", "1",
                          "0 codes every chunk on the engine thread, without the encoder "
                          "helper thread (to measure what the overlap is worth)"},
    [ENV_NO_DATAPLANE_AUTH] = {"INAGG_NO_DATAPLANE_AUTH", "0|1", "0",
                               "1 asks for a job whose dataplane packets carry no MAC (only "
                               "JOIN is authenticated) when inagg_options_t.no_dataplane_auth "
                               "is 0; the rank that registers the job decides"},
    [ENV_POLL] = {"INAGG_POLL", "sleep|busy|adaptive[:US]", "adaptive:200",
                  "how a rank waits for the switch's answer when inagg_options_t.poll_us is "
                  "0: sleep in the kernel, busy-poll, or poll US microseconds (default 200) "
                  "of each wait, then sleep"},
    [ENV_UDP_GSO] = {"INAGG_UDP_GSO", "0|1|auto", "auto",
                     "udp: same-destination, same-size packets of a batch leave as one "
                     "UDP_SEGMENT (GSO) send; auto: where the switch says it takes them "
                     "(JOINED gso=1), 0: never, 1: always"},
    [ENV_MULTICAST] = {"INAGG_MULTICAST", "0|1", "1",
                       "p4sgd over udp: 1 lets a switch with --multicast send this rank's "
                       "results once to the job's multicast group (JOIN mcast=1), 0 keeps "
                       "them addressed to the rank alone"},
    [ENV_FAILOVER] = {"INAGG_FAILOVER", "0|1", "1",
                      "switchml: 1 lets a communicator whose switch is lost join the job again "
                      "on the next switch of its list and recover the interrupted allreduce, 0 "
                      "fails it at once"},
    [ENV_SWITCH_TIMEOUT_MS] = {"INAGG_SWITCH_TIMEOUT_MS", "milliseconds", "2000",
                               "fail-over: a switch that answers no heartbeat on the control "
                               "connection this long is taken for dead (at most the job's "
                               "timeout)"},
    [ENV_REJOIN_MS] = {"INAGG_REJOIN_MS", "milliseconds", "10000",
                       "fail-over: how long a rank tries to join one generation's switch "
                       "before it moves on to the next entry of the list"},
    [ENV_FAILOVER_MAX] = {"INAGG_FAILOVER_MAX", "number", "3",
                          "fail-over: rounds of the switch list tried for one loss before the "
                          "communicator fails"},
};

const env_var_t *env_var(env_id_t id) { return (unsigned)id < ENV_COUNT ? &vars[id] : NULL; }

const char *env_get(env_id_t id) { return (unsigned)id < ENV_COUNT ? getenv(vars[id].name) : NULL; }

int env_flag(env_id_t id)
{
    const char *v = env_get(id);
    return !(v && strcmp(v, "0") == 0);
}

int env_u32(env_id_t id, uint32_t max, uint32_t *out, char *err, size_t errlen)
{
    const char *v = env_get(id);
    if (!v || !*v)
        return 0;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 0);
    if (errno || *end || v[0] == '-' || x > max)
        return set_err(err, errlen, -EINVAL, "%s='%s' is not a number of 0..%u", vars[id].name, v,
                       max);
    *out = (uint32_t)x;
    return 1;
}
