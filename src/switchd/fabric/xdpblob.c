/*
 * xdpblob.c - embeds the BPF object the Makefile builds from xdp/steer.bpf.c (its path in
 * INAGG_STEER_BPF_OBJ) with the assembler's .incbin; see xdpblob.h.
 */
#include "switchd/fabric/xdpblob.h"

#ifndef INAGG_STEER_BPF_OBJ
#error "build with -DINAGG_STEER_BPF_OBJ=\"path of steer.bpf.o\" (the Makefile does)"
#endif

__asm__(".section .rodata\n"
        ".balign 8\n"
        "inagg_steer_bpf_start:\n"
        ".incbin \"" INAGG_STEER_BPF_OBJ "\"\n"
        "inagg_steer_bpf_end:\n"
        ".previous\n");

extern const unsigned char inagg_steer_bpf_start[], inagg_steer_bpf_end[];

const void *xdpblob_steer(size_t *len)
{
    *len = (size_t)(inagg_steer_bpf_end - inagg_steer_bpf_start);
    return inagg_steer_bpf_start;
}
