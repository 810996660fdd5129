/* proto.c - the table of slot protocols this switch serves (see proto.h). */
#include "switch/proto.h"

#include <stddef.h>
#include <stdio.h>

#include "base/util.h"

static const switch_proto_ops_t *const protocols[] = {&proto_switchml, &proto_p4sgd};

const switch_proto_ops_t *proto_find(uint32_t id)
{
    for (size_t i = 0; i < INAGG_ARRAY_LEN(protocols); i++)
        if (protocols[i]->id == id)
            return protocols[i];
    return NULL;
}

uint32_t proto_accepts_any(void)
{
    uint32_t any = 0;
    for (size_t i = 0; i < INAGG_ARRAY_LEN(protocols); i++)
        any |= protocols[i]->accepts;
    return any;
}

void proto_list(char *buf, size_t cap)
{
    size_t off = 0, n = INAGG_ARRAY_LEN(protocols);
    buf[0] = '\0';
    for (size_t i = 0; i < n && off < cap; i++)
        off += (size_t)snprintf(buf + off, cap - off, "%s%s",
                                i == 0       ? ""
                                : i + 1 == n ? " and "
                                             : ", ",
                                protocols[i]->name);
}
