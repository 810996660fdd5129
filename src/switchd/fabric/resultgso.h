/*
 * resultgso.h - the transmit stage's result coalescing (resultgso.c): consecutive UDP result
 * frames that leave one port by one send socket go as one UDP GSO super-frame.
 */
#ifndef INAGG_FABRIC_RESULTGSO_H
#define INAGG_FABRIC_RESULTGSO_H

#include <stdint.h>

#include "lib/netio/udpgso.h"
#include "switchd/fabric/fport.h"

/* The run of results being coalesced into one super-frame. */
typedef struct result_gso {
    udpgso_t b;
    uint32_t port; /* the run's port and send socket */
    int fd;
    int off; /* the kernel refused a super-frame: no more coalescing */
} result_gso_t;

/* Take a UDP result frame leaving ports[port] by send socket fd into the run (1; counted on
 * the port when the run leaves), sending the run first when the frame cannot join it; 0: the
 * frame cannot be coalesced (send it as it is, after resultgso_flush). resultgso_flush sends
 * the run; it ends every pass of the transmit stage. */
int resultgso_add(result_gso_t *r, fport_t *ports, uint32_t port, int fd, const uint8_t *frame,
                  uint32_t len);
void resultgso_flush(result_gso_t *r, fport_t *ports);

#endif /* INAGG_FABRIC_RESULTGSO_H */
