/*
 * ctlmsg.h - the control messages between workers and the switch, as structs: the one place
 * that spells them. Lines travel over TCP (control/ctl.h moves them; this module says what
 * they mean):
 *
 *   worker -> switch   JOIN version= job= rank= world= slots= elems= float=fixed|native
 *                           protocol=switchml|p4sgd timeout=MS [optimizer=... params= lr=
 *                           beta1= beta2= eps= eps_place=inside|outside momentum= wd=
 *                           init=zero|seeded seed=] [compress=MODE [feedback=0]]
 *                           [verifier=HEX64 | proof=HEX64]
 *                      HELLO job= | BARRIER | LEAVE | STATS [json]
 *   admin -> switch    FABRIC [agg_ports=IF,IF,...|all] [add=any|fixed|float]  (fabricmsg.h)
 *   switch -> worker   CHALLENGE nonce=HEX32 job=new|exists      (the answer to HELLO)
 *                      JOINED id= token= threads= port= base= slots= elems= float= protocol=
 *                      ERR <refusal> <text>      refusal: version|timeout|invalid|unsupported|
 *                                                         refused|system
 *                      FAILED <text> | BARRIER_DONE | BYE | (STATS lines, then END)
 *                      FABRIC_STATE agg_ports= add=         (the answer to FABRIC)
 *                      SHUTDOWN <reason>   (the switch is stopping: to every member)
 *
 * The in-switch optimizer's configuration is one struct (wire_optimizer_t) with one encoder
 * and one decoder; the switch compares two joins' optimizers with wire_optimizer_equal().
 * Functions return 0, or a negative errno with a reason in the caller's buffer: -EPROTO for a
 * malformed line, -EPROTONOSUPPORT for another protocol version or an unserved protocol,
 * -ENOSPC when an encoded line does not fit.
 */
#ifndef INAGG_WIRE_CTLMSG_H
#define INAGG_WIRE_CTLMSG_H

#include <stddef.h>
#include <stdint.h>

#include "lib/base/optconf.h"

#define WIRE_JOB_NAME_MAX 64 /* bytes, with the terminating NUL */

enum wire_verb {
    WIRE_VERB_UNKNOWN = 0,
    WIRE_VERB_JOIN,
    WIRE_VERB_JOINED,
    WIRE_VERB_ERR,
    WIRE_VERB_FAILED,
    WIRE_VERB_BARRIER,
    WIRE_VERB_BARRIER_DONE,
    WIRE_VERB_LEAVE,
    WIRE_VERB_BYE,
    WIRE_VERB_STATS,
    WIRE_VERB_END,
    WIRE_VERB_HELLO,
    WIRE_VERB_CHALLENGE,
    WIRE_VERB_FABRIC, /* wire/fabricmsg.h: the L2 fabric's runtime settings */
    WIRE_VERB_FABRIC_STATE,
    WIRE_VERB_SHUTDOWN, /* the switch is stopping; its members' jobs end */
    WIRE_VERB_PING, /* a member's heartbeat on its control connection: answered PONG */
    WIRE_VERB_PONG,
    WIRE_VERB_COUNT
};

/* The verb of a control line (WIRE_VERB_UNKNOWN if none matches), and a verb's spelling. */
enum wire_verb wire_verb_of(const char *line);
const char *wire_verb_name(enum wire_verb v);

/* Why the switch refused a request: the word after ERR. */
enum wire_refusal {
    WIRE_REFUSED = 0, /* "refused": a policy said no (pool, duplicate rank, mismatch) */
    WIRE_REFUSED_VERSION, /* "version": another protocol version */
    WIRE_REFUSED_TIMEOUT, /* "timeout": not every rank joined in time */
    WIRE_REFUSED_INVALID, /* "invalid": a malformed or impossible request */
    WIRE_REFUSED_UNSUPPORTED, /* "unsupported": a feature this switch lacks */
    WIRE_REFUSED_SYSTEM, /* "system": the switch ran out of a resource */
    WIRE_REFUSED_BUSY, /* "busy": not now, maybe soon: the switch is at a limit that frees
                               up (job ids, slots, connections) or this address is locked out
                               of this job for a while; a worker retries (PROTOCOL.md 5.10) */
    WIRE_REFUSAL_COUNT
};

const char *wire_refusal_name(enum wire_refusal r);
/* "ERR <refusal> <text>" into line. */
void wire_err_format(enum wire_refusal r, const char *text, char *line, size_t cap);
/* "FAILED <reason>" into line. */
void wire_failed_format(const char *reason, char *line, size_t cap);
/* "SHUTDOWN <reason>" into line: the switch is stopping (PROTOCOL.md 5.7). */
void wire_shutdown_format(const char *reason, char *line, size_t cap);
/* The reason of a SHUTDOWN line ("" when it gives none); NULL if line is no SHUTDOWN. */
const char *wire_shutdown_parse(const char *line);
/* The refusal of an ERR line (WIRE_REFUSED for an unknown word) and a pointer to its text. */
enum wire_refusal wire_err_parse(const char *line, const char **text);

/* The in-switch optimizer a job asks for. */
typedef struct wire_optimizer {
    int present; /* 0: no optimizer (the other fields are ignored) */
    optim_config_t step; /* kind, lr, beta1, beta2, eps and its placement, momentum, wd */
    uint64_t params; /* parameters the switch holds: 1 .. 2^32 */
    int seeded; /* initial parameters: 0 zeros, 1 drawn from `seed` */
    uint64_t seed;
} wire_optimizer_t;

int wire_optimizer_equal(const wire_optimizer_t *a, const wire_optimizer_t *b);
/* The optimizer as the JOIN line spells it ("none" when absent), for messages. */
void wire_optimizer_format(const wire_optimizer_t *o, char *buf, size_t cap);

/* The most ranks one result may sum across switch levels (contributors=). */
#define WIRE_MAX_CONTRIBUTORS 65536u

typedef struct wire_join {
    uint32_t version;
    char job[WIRE_JOB_NAME_MAX];
    uint32_t rank, world, slots, elems;
    uint32_t float_mode; /* inagg_float_mode_t */
    uint32_t protocol; /* inagg_protocol_t */
    uint32_t timeout_ms; /* 0: the switch's bound */
    wire_optimizer_t opt;
    char compress[48]; /* compress=MODE (codec_parse's spelling; the switch checks it);
                            empty: none */
    uint32_t no_feedback; /* feedback=0: no error feedback in a lossy compressed job */
    uint32_t contributors; /* contributors=N: the ranks whose data this rank's contributions
                              sum (a leaf switch joining its spine); 0 or 1: itself */
    int auth; /* enum wire_auth: which of verifier= / proof= the line carries */
    uint8_t mac[32]; /* its value (wire/auth.h) */
    uint32_t no_dpauth; /* dpauth=0: a job with a secret whose dataplane goes without MACs
                            (the registering rank's word holds for the job) */
    uint32_t mcast; /* mcast=1: this rank can take its results from the job's multicast
                            group (JOINED mcast=), not only at its own address */
    uint32_t gen; /* gen=G: the job's generation, 0 at its first join and one more at each
                     fail-over of its ranks to a switch joined anew (absent: 0) */
} wire_join_t;

enum wire_auth { WIRE_AUTH_NONE = 0, WIRE_AUTH_VERIFIER, WIRE_AUTH_PROOF };

/* Encode a JOIN line. -ENOSPC if it does not fit in cap. */
int wire_join_format(const wire_join_t *j, char *line, size_t cap);
/* Decode a JOIN line: every field checked for syntax and range (job name 1..63 characters
 * without spaces or '='; world 1..INAGG_MAX_WORLD; rank < world; slots >= 1; elems
 * 1..WIRE_MAX_ELEMS; known float mode and protocol; a valid optimizer). On failure *refusal
 * says which kind (version, invalid, unsupported) and why holds the text. */
int wire_join_parse(const char *line, wire_join_t *j, enum wire_refusal *refusal, char *why,
                    size_t why_cap);

typedef struct wire_joined {
    uint64_t token; /* 64 random bits (never 0) */
    uint32_t id, threads, port, base, slots, elems;
    uint32_t float_mode, protocol;
    uint32_t contributors; /* contributors=N: the ranks whose data a result sums, when it is
                              not the world (a leaf's jobs: every host under the spine); 0:
                              the world. Fixed-point scaling and averages divide by it */
    uint32_t dpauth; /* dpauth=1: every dataplane packet carries a MAC under the rank's
                              keys from this JOIN (wire/dpauth.h) */
    uint32_t gso; /* gso=1: the switch takes a UDP_SEGMENT (GSO) send as the datagrams it
                              holds, by whatever path it receives (switches before it did not
                              say so, and one on AF_PACKET dropped such a send) */
    uint32_t mcast_addr; /* mcast=GROUP:PORT: the switch sends a round's result once, to this
                              IPv4 multicast group (host order; 0: none) and port, when every
                              rank's copy would be the same; each rank joins it */
    uint32_t mcast_port;
} wire_joined_t;

/* Encode a JOINED line. -ENOSPC if it does not fit in cap. */
int wire_joined_format(const wire_joined_t *j, char *line, size_t cap);
int wire_joined_parse(const char *line, wire_joined_t *j, char *why, size_t why_cap);

/* "fixed"/"native" and "switchml"/"p4sgd": the spellings of the JOIN and JOINED lines. */
const char *wire_float_mode_name(uint32_t float_mode);
const char *wire_protocol_name(uint32_t protocol);
/* 0 and the value, or -EINVAL for an unknown name. */
int wire_protocol_parse(const char *name, uint32_t *protocol);

#endif /* INAGG_WIRE_CTLMSG_H */
