/* tools/serve: request bodies -> srv_req. Every field is checked for type
 * and range; the first problem becomes an OpenAI-shaped 400 naming the
 * field. JSON null counts as absent (clients send it for defaults).
 * Unknown fields are ignored, as OpenAI's own server does. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

#define BAD(e, param, ...) (srv_err_set((e), 400, "invalid_request_error", NULL, (param), __VA_ARGS__), false)

static const cJSON *field(const cJSON *o, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return (v && !cJSON_IsNull(v)) ? v : NULL;
}

static bool get_num(const cJSON *o, const char *name, double lo, double hi, float *out, srv_err *e) {
    const cJSON *v = field(o, name);
    if (!v) return true;
    if (!cJSON_IsNumber(v)) return BAD(e, name, "'%s' must be a number", name);
    if (!(v->valuedouble >= lo && v->valuedouble <= hi))
        return BAD(e, name, "'%s' is %g; it must be in [%g, %g]", name, v->valuedouble, lo, hi);
    *out = (float)v->valuedouble;
    return true;
}

static bool is_int(const cJSON *v, double lo, double hi) {
    return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble) && v->valuedouble >= lo &&
           v->valuedouble <= hi;
}

static bool get_int(const cJSON *o, const char *name, double lo, double hi, int32_t *out, bool *given, srv_err *e) {
    const cJSON *v = field(o, name);
    if (!v) return true;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble))
        return BAD(e, name, "'%s' must be an integer", name);
    if (!(v->valuedouble >= lo && v->valuedouble <= hi))
        return BAD(e, name, "'%s' is %.0f; it must be in [%.0f, %.0f]", name, v->valuedouble, lo, hi);
    *out = (int32_t)v->valuedouble;
    if (given) *given = true;
    return true;
}

static bool get_bool(const cJSON *o, const char *name, bool *out, srv_err *e) {
    const cJSON *v = field(o, name);
    if (!v) return true;
    if (!cJSON_IsBool(v)) return BAD(e, name, "'%s' must be a boolean", name);
    *out = cJSON_IsTrue(v);
    return true;
}

/* token ids [0, n_vocab) */
static bool parse_tokens(const cJSON *a, int32_t n_vocab, const char *param, srv_prompt *p, srv_err *e) {
    int n = cJSON_GetArraySize(a);
    if (n == 0) return BAD(e, param, "'%s' is an empty list of tokens", param);
    p->tok = malloc((size_t)n * sizeof *p->tok);
    if (!p->tok) return BAD(e, param, "out of memory");
    int i = 0;
    for (const cJSON *t = a->child; t; t = t->next, i++) {
        if (!is_int(t, 0, (double)n_vocab - 1))
            return BAD(e, param, "'%s[%d]' must be a token id in [0, %d)", param, i, n_vocab);
        p->tok[i] = (int32_t)t->valuedouble;
    }
    p->n_tok = n;
    return true;
}

/* a string, a token list, a list of strings or a list of token lists */
static bool parse_prompts(const cJSON *v, int32_t n_vocab, const char *name, srv_req *r, srv_err *e) {
    if (!v) return BAD(e, name, "'%s' is required", name);
    if (cJSON_IsString(v)) {
        r->prompts[0].text = v->valuestring;
        r->prompts[0].len = strlen(v->valuestring);
        r->n_prompts = 1;
        return true;
    }
    if (!cJSON_IsArray(v)) return BAD(e, name, "'%s' must be a string or a list", name);
    int n = cJSON_GetArraySize(v);
    if (n == 0) return BAD(e, name, "'%s' is empty", name);
    if (cJSON_IsNumber(v->child)) return parse_tokens(v, n_vocab, name, &r->prompts[r->n_prompts++], e);
    if (n > SRV_MAX_PROMPTS) return BAD(e, name, "'%s' has %d entries; at most %d", name, n, SRV_MAX_PROMPTS);
    int i = 0;
    for (const cJSON *p = v->child; p; p = p->next, i++) {
        char param[48];
        snprintf(param, sizeof param, "%s[%d]", name, i);
        srv_prompt *sp = &r->prompts[r->n_prompts++];
        if (cJSON_IsString(p)) {
            sp->text = p->valuestring;
            sp->len = strlen(p->valuestring);
        } else if (cJSON_IsArray(p)) {
            if (!parse_tokens(p, n_vocab, param, sp, e)) return false;
        } else {
            return BAD(e, param, "'%s' must be a string or a list of token ids", param);
        }
    }
    return true;
}

/* content: a string, or a list of {"type": "text", "text": ...} parts */
static bool parse_content(const cJSON *c, int i, const char *role, srv_req *r, srv_err *e) {
    char param[48];
    snprintf(param, sizeof param, "messages[%d].content", i);
    if (!c) {
        if (!strcmp(role, "assistant")) { /* an assistant turn that only called tools */
            r->msgs[i].content = "";
            return true;
        }
        return BAD(e, param, "'%s' is required", param);
    }
    if (cJSON_IsString(c)) {
        r->msgs[i].content = c->valuestring;
        return true;
    }
    if (!cJSON_IsArray(c)) return BAD(e, param, "'%s' must be a string or a list of content parts", param);
    srv_buf b = {0};
    int j = 0;
    for (const cJSON *p = c->child; p; p = p->next, j++) {
        const cJSON *type = cJSON_IsObject(p) ? field(p, "type") : NULL;
        const cJSON *text = cJSON_IsObject(p) ? field(p, "text") : NULL;
        if (cJSON_IsString(type) && (!strcmp(type->valuestring, "image_url") || !strcmp(type->valuestring, "input_audio") ||
                                     !strcmp(type->valuestring, "image") || !strcmp(type->valuestring, "audio"))) {
            sb_free(&b);
            bool img = type->valuestring[0] == 'i' && type->valuestring[1] == 'm';
            return BAD(e, param, "'%s[%d]' is an %s part; this model has no %s input (only text parts are supported)",
                       param, j, type->valuestring, img ? "vision" : "audio");
        }
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") || !cJSON_IsString(text)) {
            sb_free(&b);
            return BAD(e, param, "'%s[%d]' must be {\"type\": \"text\", \"text\": \"...\"} (only text is supported)",
                       param, j);
        }
        sb_puts(&b, text->valuestring);
    }
    sb_add(&b, "", 0);
    if (b.oom || !b.p) {
        sb_free(&b);
        return BAD(e, param, "out of memory");
    }
    r->msg_own[i] = b.p;
    r->msgs[i].content = b.p;
    return true;
}

static bool parse_messages(const cJSON *root, srv_req *r, srv_err *e) {
    const cJSON *m = field(root, "messages");
    if (!m) return BAD(e, "messages", "'messages' is required");
    if (!cJSON_IsArray(m)) return BAD(e, "messages", "'messages' must be a list");
    int n = cJSON_GetArraySize(m);
    if (n == 0) return BAD(e, "messages", "'messages' is empty; it needs at least one message");
    if (n > 100000) return BAD(e, "messages", "'messages' has %d entries; at most 100000", n);
    r->msgs = calloc((size_t)n, sizeof *r->msgs);
    r->msg_own = calloc((size_t)n, sizeof *r->msg_own);
    if (!r->msgs || !r->msg_own) return BAD(e, "messages", "out of memory");
    r->n_msgs = n;
    int i = 0;
    for (const cJSON *it = m->child; it; it = it->next, i++) {
        char param[48];
        snprintf(param, sizeof param, "messages[%d]", i);
        if (!cJSON_IsObject(it)) return BAD(e, param, "'%s' must be an object", param);
        const cJSON *role = field(it, "role");
        snprintf(param, sizeof param, "messages[%d].role", i);
        if (!cJSON_IsString(role)) return BAD(e, param, "'%s' must be a string", param);
        static const char *const roles[] = {"system", "user", "assistant", "tool", "developer", "function"};
        bool known = false;
        for (size_t k = 0; k < sizeof roles / sizeof roles[0]; k++) known |= !strcmp(role->valuestring, roles[k]);
        if (!known)
            return BAD(e, param, "'%s' is '%.40s'; expected system, user, assistant, tool or developer", param,
                       role->valuestring);
        r->msgs[i].role = role->valuestring;
        if (!parse_content(field(it, "content"), i, role->valuestring, r, e)) return false;
    }
    return true;
}

static bool parse_stop(const cJSON *root, srv_req *r, srv_err *e) {
    const cJSON *s = field(root, "stop");
    if (!s) return true;
    if (cJSON_IsString(s)) {
        if (s->valuestring[0]) r->stop[r->n_stop++] = s->valuestring;
        return true;
    }
    if (!cJSON_IsArray(s)) return BAD(e, "stop", "'stop' must be a string or a list of strings");
    if (cJSON_GetArraySize(s) > SRV_MAX_STOP) return BAD(e, "stop", "'stop' has more than %d strings", SRV_MAX_STOP);
    for (const cJSON *it = s->child; it; it = it->next) {
        if (!cJSON_IsString(it)) return BAD(e, "stop", "'stop' must be a string or a list of strings");
        if (it->valuestring[0]) r->stop[r->n_stop++] = it->valuestring;
    }
    return true;
}

static bool parse_lora(const cJSON *root, int32_t n_lora, srv_req *r, srv_err *e) {
    const cJSON *l = field(root, "lora");
    if (!l) return true;
    if (!cJSON_IsArray(l)) return BAD(e, "lora", "'lora' must be a list of {\"id\", \"scale\"}");
    if (cJSON_GetArraySize(l) > SRV_MAX_LORA) return BAD(e, "lora", "'lora' has more than %d entries", SRV_MAX_LORA);
    r->lora_given = true;
    int i = 0;
    for (const cJSON *it = l->child; it; it = it->next, i++) {
        char param[32];
        snprintf(param, sizeof param, "lora[%d]", i);
        if (!cJSON_IsObject(it)) return BAD(e, param, "'%s' must be {\"id\", \"scale\"}", param);
        const cJSON *id = field(it, "id"), *sc = field(it, "scale");
        if (!id || !is_int(id, 0, (double)n_lora - 1))
            return BAD(e, param, "'%s.id' must be an adapter id in [0, %d) (GET /lora-adapters lists them)", param,
                       n_lora);
        float scale = 1.0f;
        if (sc && !(cJSON_IsNumber(sc) && isfinite(sc->valuedouble) && fabs(sc->valuedouble) <= 1e4))
            return BAD(e, param, "'%s.scale' must be a number", param);
        if (sc) scale = (float)sc->valuedouble;
        r->lora[r->n_lora++] = (srv_lora_pick){(int32_t)id->valuedouble, scale};
    }
    return true;
}

/* {"token id": bias, ...}, bias in [-100, 100] */
static bool parse_bias(const cJSON *lb, int32_t n_vocab, srv_req *r, srv_err *e) {
    if (!lb) return true;
    if (!cJSON_IsObject(lb)) return BAD(e, "logit_bias", "'logit_bias' must be an object of token id: bias");
    int n = cJSON_GetArraySize(lb);
    if (n > SRV_MAX_BIAS) return BAD(e, "logit_bias", "'logit_bias' has %d entries; at most %d", n, SRV_MAX_BIAS);
    if (n == 0) return true;
    r->bias = malloc((size_t)n * sizeof *r->bias);
    if (!r->bias) return BAD(e, "logit_bias", "out of memory");
    for (const cJSON *it = lb->child; it; it = it->next) {
        char *end;
        long id = strtol(it->string, &end, 10);
        if (!it->string[0] || *end || id < 0 || id >= n_vocab)
            return BAD(e, "logit_bias", "'logit_bias' key '%.32s' is not a token id in [0, %d)", it->string, n_vocab);
        if (!cJSON_IsNumber(it) || !(it->valuedouble >= -100 && it->valuedouble <= 100))
            return BAD(e, "logit_bias", "'logit_bias[\"%.32s\"]' must be a number in [-100, 100]", it->string);
        r->bias[r->n_bias++] = (tl_logit_bias){(int32_t)id, (float)it->valuedouble};
    }
    return true;
}

static bool parse_generation(const cJSON *root, srv_req *r, int32_t n_vocab, int32_t n_lora, srv_err *e) {
    /* 0 only scores an echoed prompt (checked with echo) */
    if (!get_int(root, "max_tokens", 0, 1 << 24, &r->max_tokens, NULL, e)) return false;
    if (!get_int(root, "max_completion_tokens", 0, 1 << 24, &r->max_tokens, NULL, e)) return false;
    if (!get_num(root, "temperature", 0, 2, &r->sp.temp, e)) return false;
    if (!get_num(root, "top_p", 0, 1, &r->sp.top_p, e)) return false;
    if (!get_num(root, "min_p", 0, 1, &r->sp.min_p, e)) return false;
    if (!get_int(root, "top_k", 0, 1 << 24, &r->sp.top_k, NULL, e)) return false;
    if (!get_num(root, "presence_penalty", -2, 2, &r->presence_penalty, e)) return false;
    if (!get_num(root, "frequency_penalty", -2, 2, &r->frequency_penalty, e)) return false;
    const cJSON *seed = field(root, "seed");
    if (seed) {
        if (!is_int(seed, -9007199254740992.0, 9007199254740992.0)) return BAD(e, "seed", "'seed' must be an integer");
        r->sp.seed = (uint64_t)(int64_t)seed->valuedouble;
        r->seed_given = true;
    }
    if (!get_int(root, "n", 1, SRV_MAX_N, &r->n, NULL, e)) return false;
    if (!get_bool(root, "stream", &r->stream, e)) return false;
    if (!get_bool(root, "ignore_eos", &r->ignore_eos, e)) return false;
    /* extension: completion pressure's margin (tl_sampler_params.grammar_finish; -1 off) */
    if (!get_int(root, "grammar_finish", -1, 1 << 24, &r->sp.grammar_finish, NULL, e)) return false;
    const cJSON *so = field(root, "stream_options");
    if (so) {
        if (!cJSON_IsObject(so)) return BAD(e, "stream_options", "'stream_options' must be an object");
        if (!get_bool(so, "include_usage", &r->include_usage, e)) return false;
    }
    if (!parse_bias(field(root, "logit_bias"), n_vocab, r, e)) return false;
    return parse_stop(root, r, e) && parse_lora(root, n_lora, r, e);
}

/* response_format {"type": "text" | "json_object" | "json_schema",
 * "json_schema": {"schema": ...}}, or a GBNF "grammar" (llama-server's) */
static bool parse_format(const cJSON *root, srv_req *r, srv_err *e) {
    const cJSON *g = field(root, "grammar"), *rf = field(root, "response_format");
    if (g) {
        if (!cJSON_IsString(g)) return BAD(e, "grammar", "'grammar' must be a GBNF string");
        r->gbnf = strdup(g->valuestring);
        r->gbnf_param = "grammar";
        return r->gbnf ? true : BAD(e, "grammar", "out of memory");
    }
    if (!rf) return true;
    const cJSON *type = cJSON_IsObject(rf) ? field(rf, "type") : NULL;
    if (!cJSON_IsString(type))
        return BAD(e, "response_format", "'response_format' must be {\"type\": \"text\", \"json_object\" or "
                                         "\"json_schema\"}");
    r->gbnf_param = "response_format";
    if (!strcmp(type->valuestring, "text")) return true;
    if (!strcmp(type->valuestring, "json_object")) {
        r->gbnf = strdup(tl_grammar_json_gbnf());
        return r->gbnf ? true : BAD(e, "response_format", "out of memory");
    }
    if (strcmp(type->valuestring, "json_schema"))
        return BAD(e, "response_format.type", "'response_format.type' '%.40s' is not text, json_object or json_schema",
                   type->valuestring);
    const cJSON *js = field(rf, "json_schema");
    const cJSON *schema = cJSON_IsObject(js) ? field(js, "schema") : NULL;
    if (!cJSON_IsObject(schema))
        return BAD(e, "response_format.json_schema", "'response_format.json_schema.schema' must be an object");
    char *txt = cJSON_PrintUnformatted(schema);
    if (!txt) return BAD(e, "response_format", "out of memory");
    const tl_json_schema_params jp = tl_json_schema_default_params();
    tl_status st = tl_json_schema_to_gbnf(txt, strlen(txt), &jp, &r->gbnf);
    free(txt);
    if (st != TL_OK)
        return BAD(e, "response_format.json_schema", "the JSON schema cannot be used: %s", tl_last_error());
    return true;
}

/* tools: [{"type": "function", "function": {"name", "description",
 * "parameters"}}]; tool_choice: "auto" | "none" | "required" |
 * {"type": "function", "function": {"name": N}} naming one of them */
static bool parse_tools(const cJSON *root, srv_req *r, srv_err *e) {
    const cJSON *tools = field(root, "tools"), *tc = field(root, "tool_choice");
    r->tool_choice = TL_TOOL_AUTO;
    if (tools) {
        if (!cJSON_IsArray(tools)) return BAD(e, "tools", "'tools' must be a list of {\"type\": \"function\", ...}");
        if (cJSON_GetArraySize(tools) > 128) return BAD(e, "tools", "'tools' has more than 128 entries");
        int i = 0;
        for (const cJSON *t = tools->child; t; t = t->next, i++) {
            char param[48];
            snprintf(param, sizeof param, "tools[%d]", i);
            if (!cJSON_IsObject(t)) return BAD(e, param, "'%s' must be an object", param);
            const cJSON *type = field(t, "type"), *f = field(t, "function");
            if (type && (!cJSON_IsString(type) || strcmp(type->valuestring, "function")))
                return BAD(e, param, "'%s.type' must be \"function\"", param);
            if (!cJSON_IsObject(f)) return BAD(e, param, "'%s.function' must be an object", param);
            const cJSON *name = field(f, "name"), *pa = field(f, "parameters");
            snprintf(param, sizeof param, "tools[%d].function.name", i);
            if (!cJSON_IsString(name) || !name->valuestring[0]) return BAD(e, param, "'%s' must be a non-empty string", param);
            snprintf(param, sizeof param, "tools[%d].function.parameters", i);
            if (pa && !cJSON_IsObject(pa)) return BAD(e, param, "'%s' must be a JSON Schema object", param);
        }
        if (i > 0 && !(r->tools_json = cJSON_PrintUnformatted(tools))) return BAD(e, "tools", "out of memory");
    }
    if (!get_bool(root, "parallel_tool_calls", &r->parallel_tools, e)) return false;
    if (!tc) return true;
    if (cJSON_IsString(tc)) {
        if (!strcmp(tc->valuestring, "none")) r->tool_choice = TL_TOOL_NONE;
        else if (!strcmp(tc->valuestring, "required")) r->tool_choice = TL_TOOL_REQUIRED;
        else if (strcmp(tc->valuestring, "auto"))
            return BAD(e, "tool_choice", "'tool_choice' '%.40s' is not auto, none, required or a function",
                       tc->valuestring);
    } else {
        const cJSON *f = cJSON_IsObject(tc) ? field(tc, "function") : NULL;
        const cJSON *name = cJSON_IsObject(f) ? field(f, "name") : NULL;
        if (!cJSON_IsString(name))
            return BAD(e, "tool_choice", "'tool_choice' must be a string or {\"type\": \"function\", "
                                         "\"function\": {\"name\": ...}}");
        r->tool_choice = TL_TOOL_NAMED;
        r->tool_name = name->valuestring;
    }
    if (r->tool_choice == TL_TOOL_NONE || r->tool_choice == TL_TOOL_AUTO) return true;
    if (!r->tools_json) return BAD(e, "tool_choice", "'tool_choice' asks for a tool call but 'tools' is empty");
    if (r->tool_choice == TL_TOOL_REQUIRED) return true;
    for (const cJSON *t = tools->child; t; t = t->next)
        if (!strcmp(field(field(t, "function"), "name")->valuestring, r->tool_name)) return true;
    return BAD(e, "tool_choice", "'tool_choice' names the function '%.60s', which is not in 'tools'", r->tool_name);
}

static bool parse_logprobs(const cJSON *root, srv_req *r, srv_err *e) {
    if (r->kind == SRV_CHAT) {
        if (!get_bool(root, "logprobs", &r->logprobs, e)) return false;
        bool given = false;
        if (!get_int(root, "top_logprobs", 0, SRV_MAX_TOP_LOGPROBS, &r->top_logprobs, &given, e)) return false;
        if (given && !r->logprobs)
            return BAD(e, "top_logprobs", "'top_logprobs' needs 'logprobs' set to true");
        if (r->max_tokens == 0) return BAD(e, "max_tokens", "'max_tokens' is 0; it must be at least 1");
        return true;
    }
    bool given = false; /* completions: logprobs is the number of alternatives */
    if (!get_int(root, "logprobs", 0, 5, &r->top_logprobs, &given, e)) return false;
    r->logprobs = given;
    if (!get_bool(root, "echo", &r->echo, e)) return false;
    if (r->max_tokens == 0 && !r->echo)
        return BAD(e, "max_tokens", "'max_tokens' is 0; it must be at least 1 (0 only with 'echo': true)");
    return true;
}

bool srv_req_parse(srv_kind kind, const char *body, size_t len, int32_t n_vocab, int32_t n_lora, srv_req *r,
                   srv_err *e) {
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->max_tokens = -1;
    r->n = 1;
    r->top_logprobs = 0;
    r->sp = tl_sampler_default_params();
    r->sp.temp = 1.0f; /* OpenAI's defaults: plain sampling at temperature 1 */
    r->sp.top_k = 0;
    r->sp.top_p = 1.0f;
    r->sp.min_p = 0.0f;
    size_t bad = srv_utf8_check(body, len);
    if (bad < len) return BAD(e, NULL, "the request body is not valid UTF-8 (byte %zu)", bad);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, false);
    if (!root) {
        size_t at = end ? (size_t)(end - body) : 0;
        return BAD(e, NULL, "the request body is not valid JSON (near byte %zu)", at);
    }
    r->json = root;
    if (end && end > body && (size_t)(end - body) < len) {
        for (const char *p = end; p < body + len; p++)
            if (*p != ' ' && *p != '\n' && *p != '\r' && *p != '\t' && *p != 0)
                return BAD(e, NULL, "the request body has bytes after its JSON value (byte %zu)", (size_t)(p - body));
    }
    if (!cJSON_IsObject(root)) return BAD(e, NULL, "the request body must be a JSON object");
    const cJSON *model = field(root, "model");
    if (model && !cJSON_IsString(model)) return BAD(e, "model", "'model' must be a string");
    r->model = model ? model->valuestring : NULL;
    if (kind == SRV_EMBED) {
        const cJSON *ef = field(root, "encoding_format");
        if (ef && (!cJSON_IsString(ef) || (strcmp(ef->valuestring, "float") && strcmp(ef->valuestring, "base64"))))
            return BAD(e, "encoding_format", "'encoding_format' must be \"float\" or \"base64\"");
        r->encoding_format = ef ? ef->valuestring : "float";
        return parse_prompts(field(root, "input"), n_vocab, "input", r, e);
    }
    if (kind == SRV_CHAT && (!parse_messages(root, r, e) || !parse_tools(root, r, e))) return false;
    if (kind == SRV_COMPLETION && !parse_prompts(field(root, "prompt"), n_vocab, "prompt", r, e)) return false;
    if ((int64_t)r->n * r->n_prompts > SRV_MAX_PROMPTS)
        return BAD(e, "n", "%d prompts x n = %d choices; at most %d", r->n_prompts, r->n, SRV_MAX_PROMPTS);
    return parse_generation(root, r, n_vocab, n_lora, e) && parse_logprobs(root, r, e) && parse_format(root, r, e);
}

void srv_req_free(srv_req *r) {
    for (int32_t i = 0; i < r->n_prompts; i++) free(r->prompts[i].tok);
    free(r->bias);
    free(r->gbnf);
    free(r->tools_json);
    if (r->msg_own)
        for (int32_t i = 0; i < r->n_msgs; i++) free(r->msg_own[i]);
    free(r->msg_own);
    free(r->msgs);
    cJSON_Delete(r->json);
    memset(r, 0, sizeof *r);
}
