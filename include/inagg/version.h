/* version.h - inagg's version, at compile time. inagg_version() gives it at run time. */
#ifndef INAGG_VERSION_H
#define INAGG_VERSION_H

#define INAGG_VERSION_MAJOR 0
#define INAGG_VERSION_MINOR 1
#define INAGG_VERSION_PATCH 0
#define INAGG_VERSION_NUMBER                                                                       \
    ((INAGG_VERSION_MAJOR * 10000u) + (INAGG_VERSION_MINOR * 100u) + INAGG_VERSION_PATCH)
#define INAGG_VERSION_STRING "0.1.0"

/* Version of the wire format and control protocol; a mismatch is refused at join. */
#define INAGG_PROTOCOL_VERSION 4

#endif /* INAGG_VERSION_H */
