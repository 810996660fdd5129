/*
 * xdpblob.h - the compiled XDP program (xdp/steer.bpf.c as a BPF ELF object), embedded in
 * the binary by xdpblob.c so that `inagg` needs no file installed beside it.
 */
#ifndef INAGG_FABRIC_XDPBLOB_H
#define INAGG_FABRIC_XDPBLOB_H

#include <stddef.h>

/* The object's bytes, its length in *len. */
const void *xdpblob_steer(size_t *len);

#endif /* INAGG_FABRIC_XDPBLOB_H */
