/*
 * cn_handle.h - the CollNet listen handle: what one rank tells the others through NCCL before
 * they join one switch job. Every rank's listen() fills one with its own switch address
 * ($INAGG_SWITCH) and a fresh job name; connect() receives all of them and every rank joins
 * the job rank 0's handle names, on rank 0's switch, as its NCCL rank of NCCL's rank count.
 */
#ifndef INAGG_NCCL_CN_HANDLE_H
#define INAGG_NCCL_CN_HANDLE_H

#include <stddef.h>
#include <stdint.h>

#include "nccl_abi.h"

#define CN_MAGIC "inaggCN1"
#define CN_VERSION 1u
#define CN_SWITCH_MAX 80 /* "HOST:PORT[,HOST:PORT...]" and its NUL */
#define CN_JOB_MAX 32

typedef struct {
    char magic[8]; /* CN_MAGIC, no NUL */
    uint32_t version; /* CN_VERSION */
    uint32_t has_switch; /* 1: switch_addr names the switch */
    char switch_addr[CN_SWITCH_MAX];
    char job[CN_JOB_MAX]; /* "nccl-" and 16 random hex digits */
} cn_handle_t;
_Static_assert(sizeof(cn_handle_t) == NCCL_NET_HANDLE_MAXSIZE, "one NCCL handle");

/* Fill `h` with `switch_addr` (NULL or "": none) and a fresh job name: 0, or -1 with the
 * reason in `err`. */
int cn_handle_make(cn_handle_t *h, const char *switch_addr, char *err, size_t errlen);

/* Read rank `rank`'s handle out of NCCL's bytes, checking it is one of ours and whole: 0, or -1
 * with the reason in `err`. */
int cn_handle_read(const void *raw, int rank, cn_handle_t *out, char *err, size_t errlen);

#endif /* INAGG_NCCL_CN_HANDLE_H */
