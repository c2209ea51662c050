/* grammar/json_schema: JSON Schema -> GBNF.
 *
 * Each subschema becomes a rule; $ref targets (local JSON pointers) are
 * memoized by pointer, so recursive schemas give recursive rules. Objects
 * list their properties in the schema's order (required ones mandatory,
 * optional ones skippable); additional properties follow when allowed
 * (JSON Schema's default). oneOf is generated as anyOf: a grammar cannot
 * express "exactly one", so an instance matching two branches is accepted.
 * Any keyword not handled here is an error naming it and its location;
 * annotations (title, description, default, examples, ...) are ignored.
 * Owns: nothing after it returns. Calls: cJSON, grammar/js_buf, js_regex. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "grammar/js_buf.h"
#include "grammar/js_schema.h"

static const char *const js_annotations[] = {
    "title", "description", "default", "examples", "$schema", "$id", "id", "$comment", "deprecated",
    "readOnly", "writeOnly", "$defs", "definitions", "markdownDescription", "x-intellij-html-description", NULL};

static const char *const js_known[] = {
    "type", "properties", "required", "additionalProperties", "enum", "const", "items", "prefixItems",
    "minItems", "maxItems", "anyOf", "oneOf", "allOf", "$ref", "minLength", "maxLength", "pattern", "format",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "nullable", NULL};

static bool js_in(const char *const *list, const char *k) {
    for (int i = 0; list[i]; i++)
        if (!strcmp(list[i], k)) return true;
    return false;
}

tl_status js_fail(js_ctx *c, tl_status s, const char *path, const char *what, const char *arg) {
    (void)c;
    return tl_err(s, "json schema: at '%s%s': %s%s%s%s", path[0] == '#' ? "" : "#", path, what, arg ? " '" : "", arg ? arg : "",
                  arg ? "'" : "");
}

/* A fresh rule number: rule "r<N>". */
static int js_new_rule(js_ctx *c) { return c->n_rules++; }


/* Resolve a local "#/a/b" pointer against the root. */
const cJSON *js_resolve(js_ctx *c, const char *ref) {
    if (ref[0] != '#') return NULL;
    const cJSON *n = c->root;
    const char *p = ref + 1;
    while (*p == '/') {
        p++;
        char seg[256];
        size_t k = 0;
        while (*p && *p != '/' && k + 1 < sizeof seg) {
            if (p[0] == '~' && p[1] == '0') seg[k++] = '~', p += 2;
            else if (p[0] == '~' && p[1] == '1') seg[k++] = '/', p += 2;
            else seg[k++] = *p++;
        }
        seg[k] = 0;
        if (cJSON_IsArray(n)) {
            char *e;
            long i = strtol(seg, &e, 10);
            n = *e ? NULL : cJSON_GetArrayItem(n, (int)i);
        } else {
            n = cJSON_GetObjectItemCaseSensitive(n, seg);
        }
        if (!n) return NULL;
    }
    return *p ? NULL : n;
}

static tl_status js_ref(js_ctx *c, const char *ref, const char *path, int *rule) {
    for (int i = 0; i < c->n_refs; i++)
        if (!strcmp(c->refs[i].ref, ref)) {
            *rule = c->refs[i].rule;
            return TL_OK;
        }
    const cJSON *t = js_resolve(c, ref);
    if (!t) return js_fail(c, TL_ERR_UNSUPPORTED, path, "$ref not found or not a local '#/...' pointer:", ref);
    if (c->n_refs == JS_MAX_REFS) return js_fail(c, TL_ERR_UNSUPPORTED, path, "too many distinct $ref targets", NULL);
    int r = js_new_rule(c);
    c->refs[c->n_refs].ref = strdup(ref);
    c->refs[c->n_refs++].rule = r;
    /* the target's rule is generated into its own buffer; r ::= target */
    int body;
    tl_status s = js_gen(c, t, ref, &body);
    if (s) return s;
    jb_fmt(&c->out, "r%d ::= r%d\n", r, body);
    *rule = r;
    return TL_OK;
}

static tl_status js_literal_value(js_ctx *c, const cJSON *v, js_buf *b) {
    char *t = cJSON_PrintUnformatted(v);
    if (!t) return tl_err(TL_ERR_NOMEM, "json schema: out of memory");
    jb_lit(b, t, strlen(t));
    free(t);
    (void)c;
    return TL_OK;
}

static tl_status js_check_keys(js_ctx *c, const cJSON *s, const char *path) {
    for (const cJSON *k = s->child; k; k = k->next) {
        if (js_in(js_known, k->string) || js_in(js_annotations, k->string)) continue;
        return js_fail(c, TL_ERR_UNSUPPORTED, path, "unsupported keyword", k->string);
    }
    return TL_OK;
}

/* The rule for one type name with the schema's other keywords. */
static tl_status js_typed(js_ctx *c, const cJSON *s, const char *type, const char *path, js_buf *b) {
    if (!strcmp(type, "string")) return js_string(c, s, path, b);
    if (!strcmp(type, "integer") || !strcmp(type, "number")) return js_number(c, s, type[0] == 'i', path, b);
    if (!strcmp(type, "boolean")) return jb_str(b, "(\"true\" | \"false\")"), TL_OK;
    if (!strcmp(type, "null")) return jb_str(b, "\"null\""), TL_OK;
    if (!strcmp(type, "object")) return js_object(c, s, path, b);
    if (!strcmp(type, "array")) return js_array(c, s, path, b);
    return js_fail(c, TL_ERR_UNSUPPORTED, path, "unknown type", type);
}

static tl_status js_alts(js_ctx *c, const cJSON *arr, const char *path, const char *kw, js_buf *b) {
    if (!cJSON_IsArray(arr) || !cJSON_GetArraySize(arr))
        return js_fail(c, TL_ERR_FORMAT, path, "must be a non-empty array:", kw);
    jb_str(b, "(");
    int i = 0;
    for (const cJSON *x = arr->child; x; x = x->next, i++) {
        char sub[512];
        snprintf(sub, sizeof sub, "%s/%s/%d", path, kw, i);
        int r;
        tl_status s = js_gen(c, x, sub, &r);
        if (s) return s;
        jb_fmt(b, "%sr%d", i ? " | " : "", r);
    }
    jb_str(b, ")");
    return TL_OK;
}

/* allOf: merge object schemas (properties, required, additionalProperties,
 * type); one subschema is that subschema. Others are unsupported. */
static tl_status js_all_of(js_ctx *c, const cJSON *s, const cJSON *arr, const char *path, js_buf *b) {
    if (!cJSON_IsArray(arr) || !cJSON_GetArraySize(arr)) return js_fail(c, TL_ERR_FORMAT, path, "allOf must be a non-empty array", NULL);
    cJSON *m = cJSON_CreateObject(), *props = cJSON_CreateObject(), *req = cJSON_CreateArray();
    cJSON_AddItemToObject(m, "type", cJSON_CreateString("object"));
    tl_status st = TL_OK;
    const cJSON *addl = NULL;
    for (int pass = 0; pass < 2 && !st; pass++) {
        const cJSON *list = pass == 0 ? arr : NULL;
        const cJSON *items = list ? list->child : s;
        for (const cJSON *x = items; x && !st; x = list ? x->next : NULL) {
            const cJSON *y = x;
            for (int hop = 0; hop < 16 && cJSON_GetObjectItem(y, "$ref"); hop++) {
                const cJSON *r = cJSON_GetObjectItem(y, "$ref");
                y = cJSON_IsString(r) ? js_resolve(c, r->valuestring) : NULL;
                if (!y) break;
            }
            if (!y || !cJSON_IsObject(y)) {
                st = js_fail(c, TL_ERR_UNSUPPORTED, path, "allOf over a non-object subschema", NULL);
                break;
            }
            for (const cJSON *k = y->child; k && !st; k = k->next) {
                const char *n = k->string;
                if (js_in(js_annotations, n) || (pass == 1 && !strcmp(n, "allOf")) || !strcmp(n, "$ref")) continue;
                if (!strcmp(n, "type")) {
                    if (!cJSON_IsString(k) || strcmp(k->valuestring, "object"))
                        st = js_fail(c, TL_ERR_UNSUPPORTED, path, "allOf merges only object schemas", NULL);
                } else if (!strcmp(n, "properties")) {
                    for (const cJSON *p = k->child; p; p = p->next)
                        if (!cJSON_GetObjectItemCaseSensitive(props, p->string))
                            cJSON_AddItemToObject(props, p->string, cJSON_Duplicate(p, 1));
                } else if (!strcmp(n, "required")) {
                    for (const cJSON *p = k->child; p; p = p->next) cJSON_AddItemToArray(req, cJSON_Duplicate(p, 1));
                } else if (!strcmp(n, "additionalProperties")) {
                    addl = k;
                } else {
                    st = js_fail(c, TL_ERR_UNSUPPORTED, path, "keyword inside allOf not merged:", n);
                }
            }
        }
    }
    if (!st) {
        cJSON_AddItemToObject(m, "properties", props);
        cJSON_AddItemToObject(m, "required", req);
        if (addl) cJSON_AddItemToObject(m, "additionalProperties", cJSON_Duplicate(addl, 1));
        st = js_object(c, m, path, b);
    } else {
        cJSON_Delete(props);
        cJSON_Delete(req);
    }
    /* the merged schema must outlive the rules that point into it */
    if (c->n_keep < JS_MAX_KEEP) c->keep[c->n_keep++] = m;
    else cJSON_Delete(m);
    return st;
}

static tl_status js_body(js_ctx *c, const cJSON *s, const char *path, js_buf *b) {
    if (cJSON_IsBool(s)) {
        if (cJSON_IsTrue(s)) return jb_str(b, "value"), TL_OK;
        return js_fail(c, TL_ERR_UNSUPPORTED, path, "schema false matches nothing", NULL);
    }
    if (!cJSON_IsObject(s)) return js_fail(c, TL_ERR_FORMAT, path, "a schema must be an object or a boolean", NULL);
    tl_status st = js_check_keys(c, s, path);
    if (st) return st;
    const cJSON *ref = cJSON_GetObjectItem(s, "$ref");
    const cJSON *en = cJSON_GetObjectItem(s, "enum"), *cn = cJSON_GetObjectItem(s, "const");
    const cJSON *any = cJSON_GetObjectItem(s, "anyOf"), *one = cJSON_GetObjectItem(s, "oneOf");
    const cJSON *all = cJSON_GetObjectItem(s, "allOf"), *type = cJSON_GetObjectItem(s, "type");
    const cJSON *nul = cJSON_GetObjectItem(s, "nullable");
    bool nullable = nul && cJSON_IsTrue(nul);
    /* a keyword that picks the value's form takes the whole schema: any
     * other constraint beside it would be dropped, so it is an error */
    const cJSON *lead = ref ? ref : cn ? cn : en ? en : any ? any : one ? one : all;
    if (lead && lead != en && lead != cn) {
        for (const cJSON *k = s->child; k; k = k->next)
            if (k != lead && !js_in(js_annotations, k->string) && strcmp(k->string, "nullable") &&
                !(lead == all && (!strcmp(k->string, "type") || !strcmp(k->string, "properties") ||
                                  !strcmp(k->string, "required") || !strcmp(k->string, "additionalProperties"))))
                return js_fail(c, TL_ERR_UNSUPPORTED, path, "keyword beside $ref/anyOf/oneOf/allOf:", k->string);
    }
    if (nullable) jb_str(b, "(\"null\" | ");
    if (ref) {
        int r = 0;
        if (!cJSON_IsString(ref)) return js_fail(c, TL_ERR_FORMAT, path, "$ref must be a string", NULL);
        if ((st = js_ref(c, ref->valuestring, path, &r))) return st;
        jb_fmt(b, "r%d", r);
    } else if (cn) {
        st = js_literal_value(c, cn, b);
    } else if (en) {
        if (!cJSON_IsArray(en) || !cJSON_GetArraySize(en)) return js_fail(c, TL_ERR_FORMAT, path, "enum must be a non-empty array", NULL);
        jb_str(b, "(");
        for (const cJSON *x = en->child; x && !st; x = x->next) {
            if (x != en->child) jb_str(b, " | ");
            st = js_literal_value(c, x, b);
        }
        jb_str(b, ")");
    } else if (any || one) {
        if (any && one) return js_fail(c, TL_ERR_UNSUPPORTED, path, "anyOf together with oneOf", NULL);
        st = js_alts(c, any ? any : one, path, any ? "anyOf" : "oneOf", b);
    } else if (all) {
        st = js_all_of(c, s, all, path, b);
    } else if (cJSON_IsArray(type)) {
        jb_str(b, "(");
        for (const cJSON *x = type->child; x && !st; x = x->next) {
            if (!cJSON_IsString(x)) return js_fail(c, TL_ERR_FORMAT, path, "type list of non-strings", NULL);
            if (x != type->child) jb_str(b, " | ");
            st = js_typed(c, s, x->valuestring, path, b);
        }
        jb_str(b, ")");
    } else if (cJSON_IsString(type)) {
        st = js_typed(c, s, type->valuestring, path, b);
    } else if (type) {
        return js_fail(c, TL_ERR_FORMAT, path, "type must be a string or a list", NULL);
    } else if (cJSON_GetObjectItem(s, "properties") || cJSON_GetObjectItem(s, "additionalProperties") ||
               cJSON_GetObjectItem(s, "required")) {
        st = js_object(c, s, path, b);
    } else if (cJSON_GetObjectItem(s, "items") || cJSON_GetObjectItem(s, "prefixItems")) {
        st = js_array(c, s, path, b);
    } else {
        /* no constraint that names a type: any value, but a lone type
         * keyword (minLength without type) would be silently loose */
        for (const cJSON *k = s->child; k; k = k->next)
            if (!js_in(js_annotations, k->string) && strcmp(k->string, "nullable"))
                return js_fail(c, TL_ERR_UNSUPPORTED, path, "keyword without a type", k->string);
        jb_str(b, "value");
    }
    if (nullable) jb_str(b, ")");
    return st;
}

tl_status js_gen(js_ctx *c, const cJSON *s, const char *path, int *rule) {
    if (++c->depth > JS_MAX_DEPTH) return js_fail(c, TL_ERR_UNSUPPORTED, path, "schema nested too deeply", NULL);
    js_buf b = {0};
    int r = js_new_rule(c);
    tl_status st = js_body(c, s, path, &b);
    c->depth--;
    if (!st && b.oom) st = tl_err(TL_ERR_NOMEM, "json schema: out of memory");
    if (!st) jb_fmt(&c->out, "r%d ::= %s\n", r, b.s ? b.s : "\"\"");
    free(b.s);
    *rule = r;
    return st;
}

/* The primitives every converted schema may use. */
static const char js_prelude[] = JS_VALUE_GBNF "int    ::= \"-\"? ( \"0\" | [1-9] [0-9]* )\n";

tl_json_schema_params tl_json_schema_default_params(void) {
    tl_json_schema_params p;
    p.extra_properties = false;
    return p;
}

tl_status js_schema_rules(const cJSON *schema, const tl_json_schema_params *params, int *next_rule, js_buf *out,
                          int *root_rule) {
    js_ctx *c = calloc(1, sizeof *c);
    if (!c) return tl_err(TL_ERR_NOMEM, "json schema: out of memory");
    c->root = schema;
    c->p = params ? *params : tl_json_schema_default_params();
    c->n_rules = *next_rule;
    c->out = *out;
    tl_status st = js_gen(c, schema, "", root_rule);
    if (!st && c->out.oom) st = tl_err(TL_ERR_NOMEM, "json schema: out of memory");
    *out = c->out;
    *next_rule = c->n_rules;
    for (int i = 0; i < c->n_refs; i++) free(c->refs[i].ref);
    for (int i = 0; i < c->n_keep; i++) cJSON_Delete(c->keep[i]);
    free(c);
    return st;
}

const char *js_prelude_gbnf(void) { return js_prelude; }

tl_status tl_json_schema_to_gbnf(const char *schema, size_t len, const tl_json_schema_params *params, char **out) {
    *out = NULL;
    if (!schema) return tl_err(TL_ERR_INVALID, "json schema: NULL text");
    size_t bad = jb_utf8_bad(schema, len);
    if (bad != SIZE_MAX) return tl_err(TL_ERR_FORMAT, "json schema: invalid UTF-8 at byte %zu", bad);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(schema, len, &end, 0);
    if (!root) {
        size_t at = end ? (size_t)(end - schema) : 0;
        int line = 1, col = 1;
        for (size_t i = 0; i < at && i < len; i++) schema[i] == '\n' ? (line++, col = 1) : col++;
        return tl_err(TL_ERR_FORMAT, "json schema: line %d, column %d: invalid JSON", line, col);
    }
    js_buf b = {0};
    int next = 0, r = 0;
    tl_status st = js_schema_rules(root, params, &next, &b, &r);
    if (!st) {
        jb_fmt(&b, "root ::= r%d\n", r);
        jb_str(&b, js_prelude);
        if (b.oom) st = tl_err(TL_ERR_NOMEM, "json schema: out of memory");
    }
    cJSON_Delete(root);
    if (st) {
        free(b.s);
        return st;
    }
    *out = b.s;
    return TL_OK;
}
