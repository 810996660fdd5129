/*
 * stage.h - device memory reached through pinned host memory: what the CollNet side does
 * with NCCL_PTR_CUDA buffers, since the switch's transport reads and writes host memory. A
 * registered CUDA buffer gets a pinned host copy of its size; an allreduce copies its input
 * down before it starts and its result up when it completes. Built with the CUDA runtime
 * when the Makefile finds it (INAGG_NCCL_CUDA); without it every call says so.
 */
#ifndef INAGG_NCCL_STAGE_H
#define INAGG_NCCL_STAGE_H

#include <stddef.h>

/* 1 when CUDA buffers can be staged (built with CUDA and a device is present); else 0 with
 * the reason in `why`. */
int stage_available(char *why, size_t whylen);

/* A pinned host buffer of `bytes`, or NULL with the reason in `err`. */
void *stage_alloc(size_t bytes, char *err, size_t errlen);
void stage_free(void *host);

/* Copy between device and host memory, synchronously: 0, or -1 with the reason in `err`. */
int stage_down(void *host, const void *dev, size_t bytes, char *err, size_t errlen);
int stage_up(void *dev, const void *host, size_t bytes, char *err, size_t errlen);

#endif /* INAGG_NCCL_STAGE_H */
