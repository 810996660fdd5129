/*
 * join_client.h - the one client side of joining a switch's job (PROTOCOL.md 5.8-5.10), used
 * by a worker joining its switch (worker/join.c) and by a leaf switch joining its spine
 * (switch/upstream.c):
 *
 *   [with a secret]  HELLO job=  ->  CHALLENGE nonce= job=new|exists
 *                    (the JOIN then carries the verifier for a new job, or the proof for the
 *                    nonce; the dataplane keys come from the verifier and that nonce)
 *   JOIN ...         ->  JOINED ...  |  ERR <refusal> <text>  |  SHUTDOWN <reason>
 *
 * A transient refusal ("busy", "system": a limit that frees up, a resource the switch ran
 * short of) is retried on a new connection after a backoff that starts at
 * JOIN_BACKOFF_MIN_MS and doubles up to JOIN_BACKOFF_MAX_MS (each wait drawn from its upper
 * half, so clients turned away together come back apart) until retry_ms from the first
 * attempt have passed. Every other refusal is final at once.
 */
#ifndef INAGG_CONTROL_JOIN_CLIENT_H
#define INAGG_CONTROL_JOIN_CLIENT_H

#include <stdatomic.h>
#include <stdint.h>

#include "lib/client/ctl.h"
#include "lib/wire/ctlmsg.h"
#include "lib/wire/dpauth.h"

#define JOIN_BACKOFF_MIN_MS 20u
#define JOIN_BACKOFF_MAX_MS 1000u

typedef struct join_request {
    const char *addr; /* the switch's control address, "HOST:PORT" */
    wire_join_t join; /* the JOIN to send; auth and mac are filled in here */
    const uint8_t *verifier; /* the job's verifier (SHA256_BYTES), or NULL: no secret */
    int block_ms; /* the longest a connect or a write may block */
    int answer_ms; /* the longest wait for CHALLENGE or JOINED */
    uint32_t retry_ms; /* transient refusals are retried this long; 0: never */
    const atomic_int *stop; /* optional: set, the client gives up within 100 ms */
} join_request_t;

typedef struct join_answer {
    int fd; /* the control connection on success, else -1 */
    wire_joined_t joined; /* on success: the job */
    int keyed; /* the dataplane keys below are set (a verifier, and dataplane
                                  authentication not turned off by join.no_dpauth) */
    dpauth_keys_t keys; /* keyed: this client's up key and the job's down key */
    int refusal; /* an ERR answer's enum wire_refusal, else -1 */
    uint32_t attempts; /* JOINs tried (more than one after transient refusals) */
} join_answer_t;

/* Join: 0 with *out set and out->fd open. On failure the connection is closed and the reason
 * written to err:
 *   -ECONNREFUSED   the switch refused (out->refusal says how; after the retries when it
 *                   was transient)
 *   -ETIMEDOUT      no connection or no answer in time
 *   -ESHUTDOWN      the switch is shutting down
 *   -EPROTO         an answer this client cannot use (no challenge, a bad JOINED, a job
 *                   with an authenticated dataplane but no keys here)
 *   -EINVAL         the JOIN line does not fit
 *   -ECANCELED      *stop was set
 *   or another -errno of the connection. rd is the connection's reader: what it holds after
 * the JOINED line belongs to the caller, who goes on reading the connection with it. */
int join_client_run(join_request_t *rq, ctl_reader_t *rd, join_answer_t *out, char *err,
                    size_t errlen);

#endif /* INAGG_CONTROL_JOIN_CLIENT_H */
