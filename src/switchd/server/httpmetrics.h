/*
 * httpmetrics.h - a minimal HTTP/1.x server for one page, GET /metrics (the Prometheus
 * scrape), on a thread of its own. It can never be held up by its clients: sockets are
 * non-blocking, at most HTTPM_MAX_CLIENTS connections are open (a new one closes the oldest),
 * each has HTTPM_DEADLINE_MS from accept to its last byte sent, requests are at most
 * HTTPM_REQUEST_MAX bytes; one request per connection (Connection: close). Other paths get
 * 404, other methods 405, malformed requests 400.
 */
#ifndef INAGG_SWITCH_HTTPMETRICS_H
#define INAGG_SWITCH_HTTPMETRICS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define HTTPM_MAX_CLIENTS 8
#define HTTPM_DEADLINE_MS 5000
#define HTTPM_REQUEST_MAX 4096

typedef struct httpm httpm_t;

/* Listen on "HOST:PORT" (port 0: any) and serve render(ctx, out)'s text at /metrics.
 * 0, or a negative errno with the reason in err. */
int httpm_start(const char *host_port, void (*render)(void *ctx, FILE *out), void *ctx,
                httpm_t **out, char *err, size_t errlen);
uint16_t httpm_port(const httpm_t *h);
/* Stop the thread (within 100 ms), close every connection, free. NULL: nothing. */
void httpm_stop(httpm_t *h);

#endif /* INAGG_SWITCH_HTTPMETRICS_H */
