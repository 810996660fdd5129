/* peers.c - the per-address accounting of the control plane (see peers.h). */
#include "switchd/server/peers.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/util.h"

int peers_init(peer_table_t *t, uint32_t cap)
{
    t->p = calloc(cap, sizeof(*t->p));
    t->cap = t->p ? cap : 0;
    return t->p ? 0 : -ENOMEM;
}

void peers_free(peer_table_t *t)
{
    INAGG_FREE_CLEAR(t->p);
    t->cap = 0;
}

static void key_of(const struct sockaddr_storage *ss, uint8_t key[16])
{
    memset(key, 0, 16);
    if (ss->ss_family == AF_INET6) {
        memcpy(key, &((const struct sockaddr_in6 *)(const void *)ss)->sin6_addr, 16);
    } else if (ss->ss_family == AF_INET) {
        key[10] = key[11] = 0xff;
        memcpy(key + 12, &((const struct sockaddr_in *)(const void *)ss)->sin_addr, 4);
    }
}

peer_t *peers_get(peer_table_t *t, const struct sockaddr_storage *ss)
{
    uint8_t key[16];
    key_of(ss, key);
    peer_t *free_one = NULL;
    for (uint32_t i = 0; i < t->cap; i++) {
        peer_t *p = &t->p[i];
        if (p->used && memcmp(p->addr, key, 16) == 0)
            return p;
        if (!p->used && !free_one)
            free_one = p;
    }
    if (free_one) {
        *free_one = (peer_t){.used = 1};
        memcpy(free_one->addr, key, 16);
    }
    return free_one;
}

void peers_release(peer_t *p)
{
    if (p && p->conns == 0 && p->slots == 0)
        p->used = 0;
}

void peers_format(const peer_t *p, char *buf, size_t cap)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (memcmp(p->addr, mapped, 12) == 0)
        inet_ntop(AF_INET, p->addr + 12, buf, (socklen_t)cap);
    else
        inet_ntop(AF_INET6, p->addr, buf, (socklen_t)cap);
}
