/* tools/serve: tool calls on /v1/chat/completions. The messages become the
 * JSON the chat template reads (tool_calls and tool results included); a
 * template that knows no tools gets them described in its system turn in
 * the Hermes syntax instead. The generated text is split into content and
 * OpenAI tool_calls by the library's tl_tool_parse; while streaming, a
 * scanner follows the calls as they are written so the name goes out once
 * it is complete and the arguments in pieces, each piece already in the
 * compact form tl_tool_parse gives the whole (cJSON's unformatted print),
 * so the streamed pieces join into exactly the non-streamed arguments.
 * Owns: a streaming job's scan state (srv_tc_stream). Calls: tallow.h
 * (tl_tool_parse), cJSON, serve_buf. */
#define _GNU_SOURCE /* memmem */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

#define SRV_TC_MAX 64 /* calls followed while streaming */

struct srv_tc_stream {
    srv_buf raw;          /* the job's text so far */
    size_t content_sent;  /* bytes of raw sent as content */
    int32_t n_named;      /* calls whose first delta went out */
    size_t args_sent[SRV_TC_MAX];
};

void srv_tc_free(struct srv_tc_stream *t) {
    if (!t) return;
    sb_free(&t->raw);
    free(t);
}

tl_tool_format srv_tool_format(const char *tmpl) {
    if (!tmpl || strstr(tmpl, "<tool_call>")) return TL_TOOLS_HERMES;
    if (strstr(tmpl, "[TOOL_CALLS]")) return TL_TOOLS_MISTRAL;
    if (strstr(tmpl, "<|python_tag|>") || strstr(tmpl, "ipython")) return TL_TOOLS_LLAMA3;
    return TL_TOOLS_HERMES;
}

bool srv_template_has_tools(const char *tmpl) { return tmpl && strstr(tmpl, "tools") != NULL; }

/* ---- messages for the template ------------------------------------------ */

static const char tc_system[] =
    "# Tools\n\nYou may call functions to answer. They are described below, one JSON object a line:\n<tools>\n";
static const char tc_system_end[] =
    "</tools>\n\nTo call a function, reply with a JSON object holding its name and its arguments inside "
    "<tool_call></tool_call> tags:\n<tool_call>\n{\"name\": \"<function name>\", \"arguments\": "
    "{<arguments as JSON>}}\n</tool_call>";

/* a tool call's arguments as an object where they are a JSON string of one */
static void tc_args_to_object(cJSON *calls) {
    for (cJSON *c = calls ? calls->child : NULL; c; c = c->next) {
        cJSON *f = cJSON_GetObjectItemCaseSensitive(c, "function");
        cJSON *a = f ? cJSON_GetObjectItemCaseSensitive(f, "arguments") : NULL;
        if (!cJSON_IsString(a)) continue;
        cJSON *o = cJSON_Parse(a->valuestring);
        if (o && cJSON_IsObject(o)) cJSON_ReplaceItemInObjectCaseSensitive(f, "arguments", o);
        else cJSON_Delete(o);
    }
}

/* the calls as Hermes text after the content */
static void tc_fold_calls(const cJSON *calls, srv_buf *b) {
    for (const cJSON *c = calls ? calls->child : NULL; c; c = c->next) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(c, "function");
        const cJSON *n = f ? cJSON_GetObjectItemCaseSensitive(f, "name") : NULL;
        const cJSON *a = f ? cJSON_GetObjectItemCaseSensitive(f, "arguments") : NULL;
        char *as = a ? cJSON_PrintUnformatted(a) : NULL;
        sb_printf(b, "%s<tool_call>\n{\"name\": ", b->n ? "\n" : "");
        sb_json_str(b, cJSON_IsString(n) ? n->valuestring : "", cJSON_IsString(n) ? strlen(n->valuestring) : 0);
        sb_printf(b, ", \"arguments\": %s}\n</tool_call>", as ? as : "{}");
        free(as);
    }
}

bool srv_chat_messages_json(const srv_req *r, bool fold, char **out, srv_err *e) {
    *out = NULL;
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(r->json, "messages");
    cJSON *arr = cJSON_CreateArray();
    bool tools = fold && r->tools_json && r->tool_choice != TL_TOOL_NONE;
    bool ok = arr != NULL;
    int32_t i = 0;
    for (const cJSON *m = msgs ? msgs->child : NULL; m && ok; m = m->next, i++) {
        const char *role = r->msgs[i].role, *content = r->msgs[i].content;
        const cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
        if (!cJSON_IsArray(calls)) calls = NULL;
        srv_buf text = {0};
        sb_puts(&text, content);
        if (fold && !strcmp(role, "tool")) {
            text.n = 0;
            sb_puts(&text, "<tool_response>\n");
            sb_puts(&text, content);
            sb_puts(&text, "\n</tool_response>");
            role = "user";
        }
        if (fold && calls) tc_fold_calls(calls, &text);
        if (tools && i == 0 && !strcmp(role, "system")) sb_puts(&text, "\n\n");
        if (tools && i == 0) {
            srv_buf sys = {0};
            sb_puts(&sys, tc_system);
            cJSON *tl = cJSON_Parse(r->tools_json);
            for (const cJSON *t = tl ? tl->child : NULL; t; t = t->next) {
                char *ts = cJSON_PrintUnformatted(t);
                sb_puts(&sys, ts ? ts : "");
                sb_puts(&sys, "\n");
                free(ts);
            }
            cJSON_Delete(tl);
            sb_puts(&sys, tc_system_end);
            if (!strcmp(role, "system")) {
                sb_add(&text, sys.p ? sys.p : "", sys.n);
            } else {
                cJSON *s = cJSON_CreateObject();
                cJSON_AddStringToObject(s, "role", "system");
                cJSON_AddStringToObject(s, "content", sys.p ? sys.p : "");
                cJSON_AddItemToArray(arr, s);
            }
            sb_free(&sys);
        }
        sb_add(&text, "", 0);
        cJSON *o = cJSON_CreateObject();
        ok = o && !text.oom;
        if (ok) {
            cJSON_AddStringToObject(o, "role", role);
            cJSON_AddStringToObject(o, "content", text.p ? text.p : "");
            static const char *const keep[] = {"name", "tool_call_id"};
            for (size_t k = 0; k < 2; k++) {
                const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, keep[k]);
                if (cJSON_IsString(v)) cJSON_AddStringToObject(o, keep[k], v->valuestring);
            }
            if (calls && !fold) {
                cJSON *cc = cJSON_Duplicate(calls, 1);
                tc_args_to_object(cc);
                cJSON_AddItemToObject(o, "tool_calls", cc);
            }
            cJSON_AddItemToArray(arr, o);
        }
        sb_free(&text);
    }
    if (ok) ok = (*out = cJSON_PrintUnformatted(arr)) != NULL;
    cJSON_Delete(arr);
    if (!ok) srv_err_set(e, 500, "server_error", NULL, NULL, "out of memory rendering the messages");
    return ok;
}

/* ---- results ---------------------------------------------------------------- */

/* call_<request>_<k>; Mistral's templates insist on 9 letters and digits
 * when the call comes back in the history, so there a hash of the same */
static void tc_call_id(const srv_call *c, int32_t k, char *buf, size_t cap) {
    const char *dash = strchr(c->id, '-');
    if (c->tool_fmt != TL_TOOLS_MISTRAL) {
        snprintf(buf, cap, "call_%s_%d", dash ? dash + 1 : c->id, k);
        return;
    }
    static const char al[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const char *p = c->id; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    h = (h ^ (uint64_t)k) * 1099511628211ull;
    char id[10];
    for (int i = 0; i < 9; i++) id[i] = al[h % 62], h /= 62;
    id[9] = 0;
    snprintf(buf, cap, "%s", id);
}

static bool tc_blank(const char *s) {
    for (; *s; s++)
        if (*s != ' ' && *s != '\n' && *s != '\t' && *s != '\r') return false;
    return true;
}

void srv_tool_result(const srv_call *c, const char *text, size_t len, char **content, void **calls) {
    char *prose = NULL, *cj = NULL;
    cJSON *arr = NULL;
    if (tl_tool_parse(c->tool_fmt, text, len, &prose, &cj) == TL_OK) arr = cJSON_Parse(cj);
    free(cj);
    if (!arr) { /* out of memory: the text as it is */
        free(prose);
        prose = malloc(len + 1);
        if (prose) memcpy(prose, text, len), prose[len] = 0;
        arr = cJSON_CreateArray();
    }
    int32_t k = 0;
    for (cJSON *x = arr ? arr->child : NULL; x; x = x->next, k++) {
        char id[64];
        tc_call_id(c, k, id, sizeof id);
        cJSON_ReplaceItemInObjectCaseSensitive(x, "id", cJSON_CreateString(id));
    }
    if (prose && tc_blank(prose)) free(prose), prose = NULL;
    *content = prose;
    *calls = arr;
}

/* ---- streaming ---------------------------------------------------------------- */

static const char *const tc_open[][2] = {
    {"<tool_call>", NULL}, {"<|python_tag|>", "{\"name\""}, {"[TOOL_CALLS]", NULL}};

static bool tc_ws(char ch) { return ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r'; }

/* end of the JSON string starting at s[p] == '"', or 0 if not closed yet */
static size_t tc_str_end(const char *s, size_t n, size_t p) {
    for (size_t i = p + 1; i < n; i++) {
        if (s[i] == '\\') i++;
        else if (s[i] == '"') return i + 1;
    }
    return 0;
}

/* a complete JSON scalar s[a..b) in cJSON's compact print */
static bool tc_put_scalar(const char *s, size_t a, size_t b, srv_buf *out) {
    cJSON *v = cJSON_ParseWithLength(s + a, b - a);
    char *p = v ? cJSON_PrintUnformatted(v) : NULL;
    cJSON_Delete(v);
    if (!p) return false;
    sb_puts(out, p);
    free(p);
    return true;
}

/* The JSON value at s[*p..n) as far as it is written, compacted into out;
 * a string or number still being written is held back. 1: complete
 * (*p after it), 0: not yet, -1: not JSON. */
static int tc_value(const char *s, size_t n, size_t *p, srv_buf *out) {
    int depth = 0;
    size_t i = *p;
    while (i < n) {
        char ch = s[i];
        if (tc_ws(ch)) {
            i++;
            continue;
        }
        if (ch == '{' || ch == '[') {
            sb_add(out, &ch, 1), depth++, i++;
            continue;
        }
        if (ch == '}' || ch == ']') {
            if (depth == 0) return -1;
            sb_add(out, &ch, 1), depth--, i++;
        } else if (ch == ',' || ch == ':') {
            if (depth == 0) return -1;
            sb_add(out, &ch, 1), i++;
            continue;
        } else if (ch == '"') {
            size_t e = tc_str_end(s, n, i);
            if (!e) return 0;
            if (!tc_put_scalar(s, i, e, out)) return -1;
            i = e;
        } else {
            size_t e = i;
            while (e < n && !tc_ws(s[e]) && !strchr(",:]}", s[e])) e++;
            if (e == n) return 0;
            if (!tc_put_scalar(s, i, e, out)) return -1;
            i = e;
        }
        if (depth == 0) {
            *p = i;
            return 1;
        }
    }
    return 0;
}

typedef struct tc_scan {
    size_t content_end;       /* raw bytes that are prose for sure */
    int32_t n;                /* calls whose name is complete */
    char *name[SRV_TC_MAX];   /* malloc'd */
    srv_buf args[SRV_TC_MAX]; /* compact arguments so far */
} tc_scan;

static size_t tc_skip_ws(const char *s, size_t n, size_t p) {
    while (p < n && tc_ws(s[p])) p++;
    return p;
}

static bool tc_lit(const char *s, size_t n, size_t *p, const char *lit) {
    size_t l = strlen(lit);
    if (*p + l > n || memcmp(s + *p, lit, l)) return false;
    *p += l;
    return true;
}

/* {"name": N, "<key>": A} at *p: sc->name/args[sc->n] as far as written.
 * true: the object is complete (*p after it). */
static bool tc_object(const char *s, size_t n, size_t *p, tc_scan *sc) {
    size_t i = tc_skip_ws(s, n, *p);
    if (!tc_lit(s, n, &i, "{")) return false;
    i = tc_skip_ws(s, n, i);
    if (!tc_lit(s, n, &i, "\"name\"")) return false;
    i = tc_skip_ws(s, n, i);
    if (!tc_lit(s, n, &i, ":")) return false;
    i = tc_skip_ws(s, n, i);
    size_t e = i < n && s[i] == '"' ? tc_str_end(s, n, i) : 0;
    if (!e || sc->n >= SRV_TC_MAX) return false;
    cJSON *nm = cJSON_ParseWithLength(s + i, e - i);
    if (!cJSON_IsString(nm)) {
        cJSON_Delete(nm);
        return false;
    }
    int32_t k = sc->n++;
    sc->name[k] = strdup(nm->valuestring);
    cJSON_Delete(nm);
    i = tc_skip_ws(s, n, e);
    if (!tc_lit(s, n, &i, ",")) return false;
    i = tc_skip_ws(s, n, i);
    e = i < n && s[i] == '"' ? tc_str_end(s, n, i) : 0;
    if (!e) return false;
    i = tc_skip_ws(s, n, e);
    if (!tc_lit(s, n, &i, ":")) return false;
    if (tc_value(s, n, &i, &sc->args[k]) != 1) return false;
    i = tc_skip_ws(s, n, i);
    if (!tc_lit(s, n, &i, "}")) return false;
    *p = i;
    return true;
}

static void tc_scan_text(tl_tool_format fmt, const char *s, size_t n, bool final, tc_scan *sc) {
    memset(sc, 0, sizeof *sc);
    size_t t = SIZE_MAX;
    const char *trig = NULL;
    for (int k = 0; k < 2; k++) {
        const char *o = tc_open[fmt][k];
        const char *f = o ? memmem(s, n, o, strlen(o)) : NULL;
        if (f && (size_t)(f - s) < t) t = (size_t)(f - s), trig = o;
    }
    if (t == SIZE_MAX) { /* prose, but for an end that may open a call */
        size_t hold = 0;
        for (int k = 0; k < 2 && !final; k++) {
            const char *o = tc_open[fmt][k];
            for (size_t l = o ? strlen(o) - 1 : 0; l > hold; l--)
                if (l <= n && !memcmp(s + n - l, o, l)) {
                    hold = l;
                    break;
                }
        }
        sc->content_end = n - hold;
        return;
    }
    sc->content_end = t;
    size_t p = t;
    if (fmt == TL_TOOLS_HERMES) {
        while (tc_lit(s, n, &p, "<tool_call>") && tc_object(s, n, &p, sc)) {
            p = tc_skip_ws(s, n, p);
            if (!tc_lit(s, n, &p, "</tool_call>")) break;
            p = tc_skip_ws(s, n, p);
        }
    } else if (fmt == TL_TOOLS_LLAMA3) {
        if (trig == tc_open[fmt][0]) p += strlen(trig);
        while (tc_object(s, n, &p, sc)) {
            p = tc_skip_ws(s, n, p);
            if (p < n && s[p] == ';') p++;
        }
    } else {
        p += strlen(trig);
        p = tc_skip_ws(s, n, p);
        if (tc_lit(s, n, &p, "["))
            while (tc_object(s, n, &p, sc)) {
                p = tc_skip_ws(s, n, p);
                if (!tc_lit(s, n, &p, ",")) break;
            }
    }
}

static void tc_scan_free(tc_scan *sc) {
    for (int32_t k = 0; k < sc->n; k++) free(sc->name[k]), sb_free(&sc->args[k]);
}

/* one tool_calls entry: the head (id, type, name) when new, then args */
static void tc_entry(const srv_call *c, srv_buf *out, int32_t k, const char *name, const char *args, size_t n_args,
                     bool *first) {
    char id[64];
    sb_printf(out, "%s{\"index\":%d,", *first ? "" : ",", k);
    *first = false;
    if (name) {
        tc_call_id(c, k, id, sizeof id);
        sb_printf(out, "\"id\":\"%s\",\"type\":\"function\",\"function\":{\"name\":", id);
        sb_json_str(out, name, strlen(name));
        sb_puts(out, ",\"arguments\":");
    } else {
        sb_puts(out, "\"function\":{\"arguments\":");
    }
    sb_json_str(out, args, n_args);
    sb_puts(out, "}}");
}

size_t srv_tc_released(const srv_job *j) {
    const struct srv_tc_stream *t = j->tcs;
    if (!t) return 0;
    return t->n_named > 0 ? t->raw.n : t->content_sent;
}

bool srv_tc_delta(const srv_call *c, srv_job *j, const char *text, size_t len, bool final, srv_buf *out,
                  bool *any_call) {
    *any_call = false;
    if (!j->tcs && !(j->tcs = calloc(1, sizeof *j->tcs))) return false;
    struct srv_tc_stream *t = j->tcs;
    sb_add(&t->raw, text, len);
    const char *s = t->raw.p ? t->raw.p : "";
    size_t n = t->raw.n;
    srv_buf calls = {0};
    bool first = true;
    size_t start = out->n;
    if (!final) {
        tc_scan sc;
        tc_scan_text(c->tool_fmt, s, n, false, &sc);
        if (sc.content_end > t->content_sent && t->n_named == 0) {
            sb_puts(out, "\"content\":");
            sb_json_str(out, s + t->content_sent, sc.content_end - t->content_sent);
            t->content_sent = sc.content_end;
        }
        for (int32_t k = 0; k < sc.n; k++) {
            bool head = k >= t->n_named;
            size_t have = sc.args[k].n, sent = head ? 0 : t->args_sent[k];
            if (!head && have <= sent) continue;
            tc_entry(c, &calls, k, head ? sc.name[k] : NULL, sc.args[k].p ? sc.args[k].p + sent : "", have - sent,
                     &first);
            t->args_sent[k] = have;
            if (head) t->n_named = k + 1;
        }
        tc_scan_free(&sc);
    } else { /* the end: whatever tl_tool_parse finds beyond what went out */
        char *content;
        void *arr;
        srv_tool_result(c, s, n, &content, &arr);
        const char *cs = content ? content : "";
        size_t cl = strlen(cs);
        /* a call cut short (max_tokens) that already went out as deltas
         * stays a call: its text is not sent again as content */
        if (cl > t->content_sent && cJSON_GetArraySize(arr) >= t->n_named) {
            sb_puts(out, "\"content\":");
            sb_json_str(out, cs + t->content_sent, cl - t->content_sent);
        }
        int32_t k = 0;
        for (const cJSON *x = arr ? ((cJSON *)arr)->child : NULL; x; x = x->next, k++) {
            const cJSON *f = cJSON_GetObjectItemCaseSensitive(x, "function");
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(f, "name");
            const cJSON *a = cJSON_GetObjectItemCaseSensitive(f, "arguments");
            const char *as = cJSON_IsString(a) ? a->valuestring : "{}";
            size_t al = strlen(as), sent = k < t->n_named ? t->args_sent[k] : 0;
            if (k < t->n_named && al > sent)
                tc_entry(c, &calls, k, NULL, as + sent, al - sent, &first);
            else if (k >= t->n_named)
                tc_entry(c, &calls, k, cJSON_IsString(nm) ? nm->valuestring : "", as, al, &first);
        }
        *any_call = k > 0;
        free(content);
        cJSON_Delete(arr);
    }
    if (calls.n) {
        if (out->n > start) sb_puts(out, ",");
        sb_puts(out, "\"tool_calls\":[");
        sb_add(out, calls.p, calls.n);
        sb_puts(out, "]");
    }
    sb_free(&calls);
    return out->n > start;
}
