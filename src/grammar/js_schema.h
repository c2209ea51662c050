/* grammar/js_schema: internals of the JSON Schema converter shared by its
 * files (json_schema.c: dispatch, $ref, combinators; js_types.c: the
 * per-type rules; js_regex.c: pattern). Internal to grammar/. */
#ifndef TL_GRAMMAR_JS_SCHEMA_H
#define TL_GRAMMAR_JS_SCHEMA_H

#include <cjson/cJSON.h>

#include "base/status.h"
#include "tallow.h"
#include "grammar/js_buf.h"

/* The JSON value rules (no root) that the built-in JSON-object grammar and
 * every converted schema share. */
#define JS_VALUE_GBNF                                                                                \
    "value  ::= object | array | string | number | \"true\" | \"false\" | \"null\"\n"                  \
    "object ::= \"{\" ws ( member ( \",\" ws member )* )? \"}\"\n"                                       \
    "member ::= string \":\" ws value ws\n"                                                           \
    "array  ::= \"[\" ws ( value ws ( \",\" ws value ws )* )? \"]\"\n"                                   \
    "string ::= \"\\\"\" char* \"\\\"\"\n"                                                             \
    "char   ::= [^\"\\\\\\x00-\\x1f] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" hex hex hex hex )\n"             \
    "hex    ::= [0-9a-fA-F]\n"                                                                       \
    "number ::= \"-\"? ( \"0\" | [1-9] [0-9]* ) ( \".\" [0-9]+ )? ( [eE] [-+]? [0-9]+ )?\n"                \
    "ws     ::= [ \\t\\n\\r]{0,20}\n"

#define JS_MAX_REFS 4096
#define JS_MAX_KEEP 1024
#define JS_MAX_DEPTH 256

typedef struct js_ctx {
    const cJSON *root;
    js_buf out; /* finished rules */
    int n_rules;
    struct {
        char *ref;
        int rule;
    } refs[JS_MAX_REFS];
    int n_refs;
    cJSON *keep[JS_MAX_KEEP]; /* merged allOf schemas */
    int n_keep;
    int depth;
    tl_json_schema_params p;
} js_ctx;

tl_status js_fail(js_ctx *c, tl_status s, const char *path, const char *what, const char *arg);
const cJSON *js_resolve(js_ctx *c, const char *ref);
/* Rules for a whole schema appended to *out, numbered from *next_rule
 * (advanced), so several schemas can share one grammar; *root_rule is the
 * schema's rule. The rules use those of js_prelude_gbnf(), which the caller
 * appends once. */
tl_status js_schema_rules(const cJSON *schema, const tl_json_schema_params *params, int *next_rule, js_buf *out,
                          int *root_rule);
const char *js_prelude_gbnf(void);
/* Generate subschema s as a new rule; *rule is its number. */
tl_status js_gen(js_ctx *c, const cJSON *s, const char *path, int *rule);
/* Append the GBNF expression for s as that type to b. */
tl_status js_string(js_ctx *c, const cJSON *s, const char *path, js_buf *b);
tl_status js_number(js_ctx *c, const cJSON *s, bool integer, const char *path, js_buf *b);
tl_status js_object(js_ctx *c, const cJSON *s, const char *path, js_buf *b);
tl_status js_array(js_ctx *c, const cJSON *s, const char *path, js_buf *b);
/* A JSON Schema pattern (ECMA regex subset) as the GBNF of the JSON string
 * contents it matches (the quotes excluded). */
tl_status js_regex(js_ctx *c, const char *re, const char *path, js_buf *b);

#endif
