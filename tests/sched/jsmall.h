/* jsmall.h: a small strict JSON parser for tests (cusharectl status --json).
 * Parses a whole document into a tree; any syntax error fails the parse, so
 * a test that gets a tree has proved the output is valid JSON. */
#ifndef JSMALL_H
#define JSMALL_H

#include <stddef.h>

enum js_kind { JS_NULL, JS_BOOL, JS_NUM, JS_STR, JS_ARR, JS_OBJ };

struct js {
    enum js_kind kind;
    double num;      /* JS_NUM, JS_BOOL (0/1) */
    char *str;       /* JS_STR */
    char *key;       /* member name inside an object */
    struct js *kids; /* JS_ARR, JS_OBJ: array of n */
    size_t n;
};

/* NULL on a syntax error (with the offset in *err_at). */
struct js *js_parse(const char *text, size_t *err_at);
void js_free(struct js *j);
/* Member of an object, or NULL. */
const struct js *js_get(const struct js *o, const char *key);
const struct js *js_at(const struct js *a, size_t i);

#endif
