/*
 * probe.h - does an inagg switch answer on its control port (probe.c), asked by the PMPI
 * interposer and the Open MPI component before their ranks join a job. Pure C, no MPI.
 */
#ifndef INAGG_PROBE_H
#define INAGG_PROBE_H

#include <stddef.h>

/*
 * 1 when the switch at `addr` ("HOST:PORT") accepts a TCP connection and answers a STATS
 * request within `ms` milliseconds in all; 0 otherwise, with the reason in `why` (naming
 * `knob`, the setting that gave `ms`, where the time ran out).
 */
int switch_probe(const char *addr, int ms, const char *knob, char *why, size_t len);

#endif
