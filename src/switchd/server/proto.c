/* proto.c - the table of slot protocols this switch serves (see proto.h). */
#include "switchd/server/proto.h"

#include <stddef.h>

#include "lib/base/textlist.h"
#include "lib/base/util.h"

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
    size_t len = 0, n = INAGG_ARRAY_LEN(protocols);
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++)
        len = textlist_add(buf, cap, len, i, n, protocols[i]->name);
}
