/* jsmall.c: see jsmall.h. Recursive descent over RFC 8259, depth-limited. */
#include "jsmall.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

struct parser {
    const char *s;
    size_t i;
    int depth;
    int bad;
};

static void ws(struct parser *p)
{
    while (p->s[p->i] == ' ' || p->s[p->i] == '\n' || p->s[p->i] == '\t' || p->s[p->i] == '\r')
        p->i++;
}

static int value(struct parser *p, struct js *out);

static char *string(struct parser *p)
{
    if (p->s[p->i] != '"')
        return NULL;
    size_t start = ++p->i;
    char *o = malloc(strlen(p->s + start) + 1);
    size_t n = 0;
    while (o && p->s[p->i] && p->s[p->i] != '"') {
        char c = p->s[p->i++];
        if ((unsigned char)c < 0x20)
            break;
        if (c == '\\') {
            char e = p->s[p->i++];
            const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
            const char *k = e ? strchr(from, e) : NULL;
            if (!k)
                break; /* \u is never produced by cusharectl: reject */
            c = to[k - from];
        }
        o[n++] = c;
    }
    if (!o || p->s[p->i] != '"') {
        free(o);
        return NULL;
    }
    p->i++;
    o[n] = '\0';
    return o;
}

static int number(struct parser *p, struct js *out)
{
    const char *start = p->s + p->i;
    size_t j = p->i;
    if (p->s[j] == '-')
        j++;
    if (!isdigit((unsigned char)p->s[j]))
        return -1;
    if (p->s[j] == '0' && isdigit((unsigned char)p->s[j + 1]))
        return -1; /* no leading zeros */
    char *end;
    out->kind = JS_NUM;
    out->num = strtod(start, &end);
    p->i += (size_t)(end - start);
    return 0;
}

static int push(struct js *parent, struct js *kid)
{
    struct js *nk = realloc(parent->kids, (parent->n + 1) * sizeof *nk);
    if (!nk)
        return -1;
    parent->kids = nk;
    parent->kids[parent->n++] = *kid;
    return 0;
}

static int container(struct parser *p, struct js *out, char close, int is_obj)
{
    out->kind = is_obj ? JS_OBJ : JS_ARR;
    p->i++;
    ws(p);
    if (p->s[p->i] == close) {
        p->i++;
        return 0;
    }
    for (;;) {
        struct js kid;
        memset(&kid, 0, sizeof kid);
        ws(p);
        if (is_obj) {
            kid.key = string(p);
            ws(p);
            if (!kid.key || p->s[p->i++] != ':') {
                free(kid.key);
                return -1;
            }
        }
        if (value(p, &kid) < 0 || push(out, &kid) < 0) {
            js_free(&kid);
            return -1;
        }
        ws(p);
        char c = p->s[p->i++];
        if (c == close)
            return 0;
        if (c != ',')
            return -1;
    }
}

static int value(struct parser *p, struct js *out)
{
    if (++p->depth > 64)
        return -1;
    ws(p);
    int rc = 0;
    char c = p->s[p->i];
    if (c == '{')
        rc = container(p, out, '}', 1);
    else if (c == '[')
        rc = container(p, out, ']', 0);
    else if (c == '"')
        rc = (out->kind = JS_STR, (out->str = string(p)) ? 0 : -1);
    else if (!strncmp(p->s + p->i, "true", 4))
        p->i += 4, out->kind = JS_BOOL, out->num = 1;
    else if (!strncmp(p->s + p->i, "false", 5))
        p->i += 5, out->kind = JS_BOOL, out->num = 0;
    else if (!strncmp(p->s + p->i, "null", 4))
        p->i += 4, out->kind = JS_NULL;
    else
        rc = number(p, out);
    p->depth--;
    return rc;
}

struct js *js_parse(const char *text, size_t *err_at)
{
    struct parser p = {text, 0, 0, 0};
    struct js *root = calloc(1, sizeof *root);
    if (!root)
        return NULL;
    int rc = value(&p, root);
    ws(&p);
    if (rc < 0 || p.s[p.i] != '\0') {
        if (err_at)
            *err_at = p.i;
        js_free(root);
        free(root);
        return NULL;
    }
    return root;
}

void js_free(struct js *j)
{
    if (!j)
        return;
    for (size_t i = 0; i < j->n; i++)
        js_free(&j->kids[i]);
    free(j->kids);
    free(j->str);
    free(j->key);
    j->kids = NULL;
    j->str = j->key = NULL;
    j->n = 0;
}

const struct js *js_get(const struct js *o, const char *key)
{
    if (!o || o->kind != JS_OBJ)
        return NULL;
    for (size_t i = 0; i < o->n; i++)
        if (strcmp(o->kids[i].key, key) == 0)
            return &o->kids[i];
    return NULL;
}

const struct js *js_at(const struct js *a, size_t i)
{
    return a && a->kind == JS_ARR && i < a->n ? &a->kids[i] : NULL;
}
