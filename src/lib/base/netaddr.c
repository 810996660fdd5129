/*
 * netaddr.c - IPv4 "HOST:PORT" addresses (see netaddr.h).
 */
#include "lib/base/netaddr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int netaddr_parse(const char *text, uint16_t default_port, struct sockaddr_in *out)
{
    char host[256];
    const char *colon = strrchr(text, ':');
    size_t hlen = colon ? (size_t)(colon - text) : strlen(text);
    if (hlen == 0 || hlen >= sizeof(host))
        return -EINVAL;
    memcpy(host, text, hlen);
    host[hlen] = '\0';
    long port = default_port;
    if (colon) {
        char *end;
        port = strtol(colon + 1, &end, 10);
        if (*end != '\0' || end == colon + 1 || port < 0 || port > 65535)
            return -EINVAL;
    } else if (default_port == 0) {
        return -EINVAL;
    }
    memset(out, 0, sizeof(*out));
    out->sin_family = AF_INET;
    out->sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &out->sin_addr) == 1)
        return 0;
    struct addrinfo hints = {.ai_family = AF_INET}, *res = NULL;
    if (getaddrinfo(host, NULL, &hints, &res) != 0 || !res)
        return -EHOSTUNREACH;
    out->sin_addr = ((struct sockaddr_in *)res->ai_addr)->sin_addr;
    freeaddrinfo(res);
    return 0;
}

void netaddr_explain(const char *text, int rc, char *buf, size_t len)
{
    if (rc != -EHOSTUNREACH) {
        snprintf(buf, len, "malformed address (expected HOST:PORT, PORT 0..65535)");
        return;
    }
    char host[256];
    const char *colon = strrchr(text, ':');
    size_t hlen = colon ? (size_t)(colon - text) : strlen(text);
    snprintf(host, sizeof(host), "%.*s", (int)(hlen < sizeof(host) ? hlen : sizeof(host) - 1),
             text);
    struct addrinfo hints = {.ai_family = AF_INET}, *res = NULL;
    int gai = getaddrinfo(host, NULL, &hints, &res); /* again, for its reason */
    if (res)
        freeaddrinfo(res);
    snprintf(buf, len, "host '%s' could not be resolved: %s", host,
             gai != 0 ? gai_strerror(gai) : "no IPv4 address");
}

void netaddr_format(const struct sockaddr_in *a, char *buf, size_t len)
{
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
    snprintf(buf, len, "%s:%u", ip, (unsigned)ntohs(a->sin_port));
}
