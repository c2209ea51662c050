/* grammar/toolcall: tool calls in the model's own syntax, from an OpenAI
 * `tools` array to a grammar, and from generated text back to calls.
 *   hermes  (Qwen3, Hermes): <tool_call>\n{"name": N, "arguments": A}\n</tool_call>, repeatable
 *   llama3  (Llama 3.1 JSON): optional <|python_tag|>, then {"name": N, "parameters": A}
 *   mistral: [TOOL_CALLS][{"name": N, "arguments": A}, ...]
 * A's grammar comes from each function's "parameters" schema. With
 * tool_choice auto the grammar is lazy: it starts at the format's opening
 * text (the triggers), so the model may answer in prose instead; required
 * and a named function constrain from the first token.
 * Owns: nothing after return. Calls: cJSON, grammar/js_schema. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/js_schema.h"

static const char *const tc_triggers[][3] = {
    {"<tool_call>", NULL, NULL},
    {"<|python_tag|>", "{\"name\"", NULL},
    {"[TOOL_CALLS]", NULL, NULL},
};

static tl_status tc_err(const char *what, const char *arg) {
    return tl_err(TL_ERR_FORMAT, "tools: %s%s%s%s", what, arg ? " '" : "", arg ? arg : "", arg ? "'" : "");
}

/* One alternative per function: "\"name\"" ws "," ws "\"<args key>\"" ws ":" ws A */
static tl_status tc_functions(const cJSON *tools, const char *only, const char *args_key, int *next, js_buf *b,
                              js_buf *alts) {
    int n = 0;
    for (const cJSON *t = tools->child; t; t = t->next) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type");
        if (!f || !cJSON_IsObject(f) || (type && (!cJSON_IsString(type) || strcmp(type->valuestring, "function"))))
            return tc_err("each tool must be {\"type\": \"function\", \"function\": {...}}", NULL);
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(f, "name");
        if (!cJSON_IsString(name) || !name->valuestring[0]) return tc_err("a function without a name", NULL);
        if (only && strcmp(only, name->valuestring)) continue;
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(f, "parameters");
        int r = 0;
        if (params) {
            tl_status s = js_schema_rules(params, NULL, next, b, &r);
            if (s) return tl_err_prefix(s, "tools: function '%s': ", name->valuestring);
        } else {
            r = (*next)++;
            jb_fmt(b, "r%d ::= \"{\" ws \"}\"\n", r);
        }
        cJSON *q = cJSON_CreateString(name->valuestring);
        char *qs = q ? cJSON_PrintUnformatted(q) : NULL;
        cJSON_Delete(q);
        if (!qs) return tl_err(TL_ERR_NOMEM, "tools: out of memory");
        if (n++) jb_str(alts, " | ");
        jb_str(alts, "( ");
        jb_lit(alts, qs, strlen(qs));
        free(qs);
        jb_fmt(alts, " ws \",\" ws \"\\\"%s\\\"\" ws \":\" ws r%d )", args_key, r);
    }
    if (!n) return only ? tc_err("tool_choice names no function in tools:", only) : tc_err("no functions in tools", NULL);
    return TL_OK;
}

tl_status tl_tool_grammar(tl_tool_format fmt, const char *tools_json, size_t len, tl_tool_choice choice,
                          const char *name, char **gbnf, const char *const **triggers, int32_t *n_triggers) {
    *gbnf = NULL;
    if (triggers) *triggers = NULL;
    if (n_triggers) *n_triggers = 0;
    if ((unsigned)fmt > TL_TOOLS_MISTRAL) return tl_err(TL_ERR_INVALID, "tools: unknown format %d", (int)fmt);
    if (choice == TL_TOOL_NONE) return TL_OK;
    if (choice == TL_TOOL_NAMED && (!name || !name[0])) return tl_err(TL_ERR_INVALID, "tools: tool_choice names no function");
    if (!tools_json || jb_utf8_bad(tools_json, len) != SIZE_MAX) return tc_err("tools is not valid UTF-8 text", NULL);
    cJSON *tools = cJSON_ParseWithLength(tools_json, len);
    if (!tools || !cJSON_IsArray(tools)) {
        cJSON_Delete(tools);
        return tc_err("tools must be a JSON array", NULL);
    }
    js_buf b = {0}, alts = {0};
    int next = 0;
    const char *only = choice == TL_TOOL_NAMED ? name : NULL;
    tl_status s = tc_functions(tools, only, fmt == TL_TOOLS_LLAMA3 ? "parameters" : "arguments", &next, &b, &alts);
    cJSON_Delete(tools);
    if (!s) {
        jb_fmt(&b, "call ::= \"{\" ws \"\\\"name\\\"\" ws \":\" ws ( %s ) ws \"}\"\n", alts.s);
        if (fmt == TL_TOOLS_HERMES)
            jb_str(&b, "root ::= tc ( ws tc )*\ntc ::= \"<tool_call>\" ws call ws \"</tool_call>\"\n");
        else if (fmt == TL_TOOLS_LLAMA3)
            jb_str(&b, "root ::= ( \"<|python_tag|>\" ws )? call\n");
        else
            jb_str(&b, "root ::= \"[TOOL_CALLS]\" ws \"[\" ws call ws ( \",\" ws call ws )* \"]\"\n");
        jb_str(&b, js_prelude_gbnf());
        if (b.oom) s = tl_err(TL_ERR_NOMEM, "tools: out of memory");
    }
    free(alts.s);
    if (s) {
        free(b.s);
        return s;
    }
    *gbnf = b.s;
    if (choice == TL_TOOL_AUTO && triggers && n_triggers) {
        *triggers = tc_triggers[fmt];
        *n_triggers = fmt == TL_TOOLS_LLAMA3 ? 2 : 1;
    }
    return TL_OK;
}

/* Parse one {"name": N, "<key>": A} at *p; append an OpenAI tool call. */
static bool tc_one(const char **p, const char *end, const char *key, cJSON *calls) {
    const char *e = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(*p, (size_t)(end - *p), &e, 0);
    if (!o) return false;
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, "name");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!a && !strcmp(key, "parameters")) a = cJSON_GetObjectItemCaseSensitive(o, "arguments");
    if (!cJSON_IsString(n)) {
        cJSON_Delete(o);
        return false;
    }
    char *args = a ? cJSON_PrintUnformatted(a) : strdup("{}");
    cJSON *call = cJSON_CreateObject(), *fn = cJSON_CreateObject();
    char id[32];
    snprintf(id, sizeof id, "call_%d", cJSON_GetArraySize(calls));
    cJSON_AddStringToObject(call, "id", id);
    cJSON_AddStringToObject(call, "type", "function");
    cJSON_AddStringToObject(fn, "name", n->valuestring);
    cJSON_AddStringToObject(fn, "arguments", args ? args : "{}");
    cJSON_AddItemToObject(call, "function", fn);
    cJSON_AddItemToArray(calls, call);
    free(args);
    cJSON_Delete(o);
    *p = e;
    return true;
}

static const char *tc_skip_ws(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')) p++;
    return p;
}

static const char *tc_find(const char *p, const char *end, const char *s) {
    size_t l = strlen(s);
    for (; p + l <= end; p++)
        if (!memcmp(p, s, l)) return p;
    return NULL;
}

tl_status tl_tool_parse(tl_tool_format fmt, const char *text, size_t len, char **content, char **calls_json) {
    *content = NULL, *calls_json = NULL;
    if ((unsigned)fmt > TL_TOOLS_MISTRAL) return tl_err(TL_ERR_INVALID, "tools: unknown format %d", (int)fmt);
    const char *p = text, *end = text + len;
    cJSON *calls = cJSON_CreateArray();
    js_buf prose = {0};
    if (fmt == TL_TOOLS_HERMES) {
        const char *start;
        while ((start = tc_find(p, end, "<tool_call>"))) {
            jb_put(&prose, p, (size_t)(start - p));
            const char *q = tc_skip_ws(start + strlen("<tool_call>"), end);
            if (!tc_one(&q, end, "arguments", calls)) {
                p = start; /* not a call after all: it stays in the text */
                break;
            }
            q = tc_skip_ws(q, end);
            if (q + 12 <= end && !memcmp(q, "</tool_call>", 12)) q += 12;
            p = tc_skip_ws(q, end);
        }
    } else if (fmt == TL_TOOLS_LLAMA3) {
        const char *t = tc_find(p, end, "<|python_tag|>");
        const char *q = t ? t + strlen("<|python_tag|>") : tc_skip_ws(p, end);
        if (t || (q < end && *q == '{')) {
            const char *from = q;
            q = tc_skip_ws(q, end);
            if (tc_one(&q, end, "parameters", calls)) {
                jb_put(&prose, p, (size_t)((t ? t : from) - p));
                /* several calls may follow, separated by ";" */
                for (;;) {
                    const char *r = tc_skip_ws(q, end);
                    if (r < end && *r == ';') r = tc_skip_ws(r + 1, end);
                    if (r >= end || *r != '{' || !tc_one(&r, end, "parameters", calls)) break;
                    q = r;
                }
                p = q;
            }
        }
    } else {
        const char *t = tc_find(p, end, "[TOOL_CALLS]");
        if (t) {
            const char *q = tc_skip_ws(t + strlen("[TOOL_CALLS]"), end);
            const char *e = NULL;
            cJSON *arr = cJSON_ParseWithLengthOpts(q, (size_t)(end - q), &e, 0);
            if (arr && cJSON_IsArray(arr)) {
                jb_put(&prose, p, (size_t)(t - p));
                for (const cJSON *x = arr->child; x; x = x->next) {
                    char *one = cJSON_PrintUnformatted(x);
                    const char *op = one;
                    if (one) tc_one(&op, one + strlen(one), "arguments", calls);
                    free(one);
                }
                p = e;
            }
            cJSON_Delete(arr);
        }
    }
    jb_put(&prose, p, (size_t)(end - p));
    char *cj = cJSON_PrintUnformatted(calls);
    cJSON_Delete(calls);
    if (!cj || prose.oom) {
        free(cj);
        free(prose.s);
        return tl_err(TL_ERR_NOMEM, "tools: out of memory");
    }
    *content = prose.s ? prose.s : strdup("");
    *calls_json = cj;
    return TL_OK;
}
