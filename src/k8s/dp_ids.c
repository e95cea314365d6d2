/* dp_ids.c: building and parsing device IDs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "k8s/dp_ids.h"

unsigned dp_ids_per_gpu(const struct dp_resource *r, const struct dp_gpu *g)
{
    if (r->kind == DP_KIND_SLOTS)
        return r->slots;
    uint64_t n = r->unit ? g->mem_total / r->unit : 0;
    return n > DP_MEM_IDS_MAX ? DP_MEM_IDS_MAX : (unsigned)n;
}

int dp_id_make(char *out, const struct dp_resource *r, const struct dp_gpu *g, unsigned k)
{
    int n = snprintf(out, DP_ID_MAX + 1, "%s::%s%u", g->uuid, r->kind == DP_KIND_MEMORY ? "m" : "",
                     k);
    return n < 0 || n > DP_ID_MAX ? -1 : 0;
}

int dp_id_parse(const struct dp_resource *r, const struct dp_node *n, const char *id, unsigned *k)
{
    const char *sep = strstr(id, "::");
    if (!sep)
        return -1;
    const char *num = sep + 2;
    if (r->kind == DP_KIND_MEMORY && *num++ != 'm')
        return -1;
    if (*num < '0' || *num > '9')
        return -1;
    char *end;
    unsigned long v = strtoul(num, &end, 10);
    if (*end || (num[0] == '0' && num[1]))
        return -1;
    size_t ulen = (size_t)(sep - id);
    for (size_t i = 0; i < n->ngpus; i++) {
        const struct dp_gpu *g = &n->gpu[i];
        if (strlen(g->uuid) == ulen && !memcmp(g->uuid, id, ulen) &&
            v < dp_ids_per_gpu(r, g)) {
            *k = (unsigned)v;
            return (int)i;
        }
    }
    return -1;
}
