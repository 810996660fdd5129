/*
 * endpoints.h - the switch list a communicator may fail over along (failover.c): the
 * switch_addr of inagg_comm_create (and so $INAGG_SWITCH and `--switch` wherever a CLI passes
 * it on) is one switch "HOST:PORT", the shards of one job "HOST:PORT,HOST:PORT,...", or a
 * fail-over list "HOST:PORT;HOST:PORT;..." of single switches. Generation g of a job runs on
 * entry g % n of the list, so every rank picks the same switch for the same generation
 * without asking the others.
 */
#ifndef INAGG_WORKER_ENDPOINTS_H
#define INAGG_WORKER_ENDPOINTS_H

#include <stddef.h>
#include <stdint.h>

#define ENDPOINTS_MAX 8u /* switches a fail-over list may name */
#define ENDPOINT_TEXT_MAX 64u /* "HOST:PORT" of one entry, with its NUL */

typedef struct endpoint_list {
    uint32_t n; /* entries (>= 1) */
    char text[ENDPOINTS_MAX][ENDPOINT_TEXT_MAX];
} endpoint_list_t;

/* Split a switch address at ';' into *out: 0, or -EINVAL with the reason in err (an empty
 * entry, a trailing ';', more than ENDPOINTS_MAX entries, an entry too long, or shards ("A,B")
 * inside a list of more than one entry). Each entry's address itself is checked by the
 * caller (parse_shards in comm.c), which names the bad one. */
int endpoints_parse(const char *text, endpoint_list_t *out, char *err, size_t errlen);

/* The entry generation gen runs on. */
static inline const char *endpoint_of_gen(const endpoint_list_t *l, uint32_t gen)
{
    return l->text[gen % l->n];
}

#endif /* INAGG_WORKER_ENDPOINTS_H */
