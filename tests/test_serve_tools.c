/* tests/test_serve_tools: `tallow serve`'s streamed tool calls. Model
 * outputs in the three syntaxes (prose before the call, whitespace the
 * grammar allows, numbers and escapes that compact differently from how
 * they were written, parallel calls, a call cut short) are fed to
 * srv_tc_delta in pieces of every size from 1 byte to the whole; the
 * deltas, reassembled the way an OpenAI client does (content joined,
 * tool_calls by index: id and name from the first, arguments joined), must
 * equal the non-streamed answer (srv_tool_result over tl_tool_parse), and
 * the arguments must equal the JSON written here by hand. A piece must also
 * never carry part of an opening tag as content.
 * Calls: tools/serve (serve_tools.c, serve_buf.c), cJSON. */
#include <cjson/cJSON.h>
#include <string.h>

#include "../tools/serve/serve.h"
#include "test_util.h"

typedef struct tc_case {
    tl_tool_format fmt;
    const char *text;
    const char *content; /* expected non-streamed content, NULL: none */
    int n_calls;
    const char *names[3];
    const char *args[3]; /* expected arguments (compared as JSON values) */
    const char *cut;     /* a call cut short: streamed as far as it got (this name), not parsed at the end */
} tc_case;

static const tc_case cases[] = {
    {TL_TOOLS_HERMES, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\n  \"city\": \"Paris\",\n  \"unit\": "
                      "\"celsius\"\n}}\n</tool_call>",
     NULL, 1, {"get_weather"}, {"{\"city\":\"Paris\",\"unit\":\"celsius\"}"}, NULL},
    {TL_TOOLS_HERMES, "Let me look.\n<tool_call>{\"name\":\"f\",\"arguments\":{\"x\": 1.50, \"y\": 1e2, \"s\": "
                      "\"a\\/b \\u00e9 \\\"q\\\" }\", \"l\": [ true, null, [ ] ], \"o\": { }}}</tool_call>\n"
                      "<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>",
     "Let me look.\n", 2, {"f", "g"},
     {"{\"x\":1.5,\"y\":100,\"s\":\"a/b \xc3\xa9 \\\"q\\\" }\",\"l\":[true,null,[]],\"o\":{}}", "{}"}, NULL},
    {TL_TOOLS_HERMES, "No call here, only <tool text and a < sign.", "No call here, only <tool text and a < sign.", 0,
     {0}, {0}, NULL},
    {TL_TOOLS_HERMES, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, 2", /* cut by max_tokens */
     "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, 2", 0, {0}, {0}, "f"},
    {TL_TOOLS_LLAMA3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\", \"days\": -3}}", NULL, 1,
     {"get_weather"}, {"{\"city\":\"Oslo\",\"days\":-3}"}, NULL},
    {TL_TOOLS_LLAMA3, "<|python_tag|>{\"name\": \"a\", \"parameters\": {\"k\": \"v\"}}; {\"name\": \"b\", "
                      "\"parameters\": {\"n\": 0.25}}",
     NULL, 2, {"a", "b"}, {"{\"k\":\"v\"}", "{\"n\":0.25}"}, NULL},
    {TL_TOOLS_MISTRAL, "[TOOL_CALLS]\n[\n{\n  \"name\": \"get_weather\",\n  \"arguments\": {\"city\": \"Rome\"}\n},"
                       " {\"name\": \"h\", \"arguments\": {\"deep\": {\"er\": [[\"x\"]]}}}]",
     NULL, 2, {"get_weather", "h"}, {"{\"city\":\"Rome\"}", "{\"deep\":{\"er\":[[\"x\"]]}}"}, NULL},
};

static bool json_equal(const char *a, const char *b) {
    cJSON *x = cJSON_Parse(a), *y = cJSON_Parse(b);
    bool eq = x && y && cJSON_Compare(x, y, true);
    cJSON_Delete(x);
    cJSON_Delete(y);
    return eq;
}

typedef struct reassembled {
    srv_buf content;
    int n;
    char id[3][64], name[3][64];
    srv_buf args[3];
    bool shape_ok;
} reassembled;

/* one delta object's members: {"content": ..., "tool_calls": [...]} */
static void take_delta(reassembled *r, const char *members, size_t n) {
    srv_buf w = {0};
    sb_puts(&w, "{");
    sb_add(&w, members, n);
    sb_puts(&w, "}");
    cJSON *d = cJSON_Parse(w.p);
    sb_free(&w);
    if (!d) {
        r->shape_ok = false;
        return;
    }
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(d, "content");
    if (cJSON_IsString(c)) sb_puts(&r->content, c->valuestring);
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(d, "tool_calls");
    for (const cJSON *x = calls ? calls->child : NULL; x; x = x->next) {
        const cJSON *idx = cJSON_GetObjectItemCaseSensitive(x, "index");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(x, "id");
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(x, "function");
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(f, "name");
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(f, "arguments");
        int k = cJSON_IsNumber(idx) ? idx->valueint : -1;
        if (k < 0 || k > 2 || !cJSON_IsString(a)) {
            r->shape_ok = false;
            continue;
        }
        if (k == r->n) { /* a new call: id, type and name come first */
            if (!cJSON_IsString(id) || !cJSON_IsString(nm)) r->shape_ok = false;
            snprintf(r->id[k], sizeof r->id[k], "%s", cJSON_IsString(id) ? id->valuestring : "");
            snprintf(r->name[k], sizeof r->name[k], "%s", cJSON_IsString(nm) ? nm->valuestring : "");
            r->n++;
        } else if (k > r->n || id || nm) {
            r->shape_ok = false;
        }
        sb_puts(&r->args[k], a->valuestring);
    }
    cJSON_Delete(d);
}

static void run_case(int ci, const tc_case *tc, size_t step) {
    srv_call c = {.tools = true, .tool_fmt = tc->fmt};
    snprintf(c.id, sizeof c.id, "chatcmpl-test%d", ci);
    srv_job j = {.call = &c};
    reassembled r = {.shape_ok = true};
    size_t n = strlen(tc->text);
    bool any = false, leak = false;
    for (size_t at = 0;; at += step) {
        bool final = at >= n;
        size_t k = final ? 0 : (n - at < step ? n - at : step);
        srv_buf d = {0};
        if (srv_tc_delta(&c, &j, tc->text + at, k, final, &d, &any)) {
            take_delta(&r, d.p, d.n);
            if (!final && r.n == 0 && r.content.p && strstr(r.content.p, "<tool_c") && tc->n_calls) leak = true;
        }
        sb_free(&d);
        if (final) break;
    }
    char *content;
    void *calls;
    srv_tool_result(&c, tc->text, n, &content, &calls);
    int nc = cJSON_GetArraySize(calls);
    CHECK(nc == tc->n_calls, "case %d: %d calls parsed, want %d", ci, nc, tc->n_calls);
    CHECK((content == NULL) == (tc->content == NULL) && (!content || !strcmp(content, tc->content)),
          "case %d: content %s", ci, content ? content : "(null)");
    CHECK(r.shape_ok && !leak, "case %d step %zu: delta shape (leak %d)", ci, step, leak);
    CHECK(any == (nc > 0), "case %d step %zu: any_call", ci, step);
    const char *sc = r.content.p ? r.content.p : "";
    if (tc->cut) { /* the stream began the call; its text is not repeated as content */
        CHECK(r.n == 1 && !strcmp(r.name[0], tc->cut) && !sc[0] && r.args[0].p && strlen(r.args[0].p) < n,
              "case %d step %zu: a cut call streams as far as it got (%d, '%s')", ci, step, r.n, sc);
        r.n = 0;
    } else {
        CHECK(r.n == nc, "case %d step %zu: %d calls streamed, %d parsed", ci, step, r.n, nc);
        CHECK(!strcmp(sc, content ? content : ""), "case %d step %zu: streamed content '%s'", ci, step, sc);
    }
    int k = 0;
    for (const cJSON *x = calls ? ((cJSON *)calls)->child : NULL; x && k < 3; x = x->next, k++) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(x, "function");
        const char *id = cJSON_GetObjectItemCaseSensitive(x, "id")->valuestring;
        const char *nm = cJSON_GetObjectItemCaseSensitive(f, "name")->valuestring;
        const char *a = cJSON_GetObjectItemCaseSensitive(f, "arguments")->valuestring;
        CHECK(!strcmp(nm, tc->names[k]) && json_equal(a, tc->args[k]), "case %d call %d: %s %s", ci, k, nm, a);
        if (k < r.n) {
            const char *sa = r.args[k].p ? r.args[k].p : "";
            CHECK(!strcmp(r.id[k], id) && !strcmp(r.name[k], nm) && !strcmp(sa, a),
                  "case %d step %zu call %d: streamed %s %s '%s' vs %s %s '%s'", ci, step, k, r.id[k], r.name[k], sa,
                  id, nm, a);
        }
    }
    for (int i = 0; i < 3; i++) sb_free(&r.args[i]);
    sb_free(&r.content);
    free(content);
    cJSON_Delete(calls);
    srv_tc_free(j.tcs);
}

int main(void) {
    for (int ci = 0; ci < (int)(sizeof cases / sizeof cases[0]); ci++) {
        size_t n = strlen(cases[ci].text);
        for (size_t step = 1; step <= n; step += step < 8 ? 1 : 5) run_case(ci, &cases[ci], step);
        run_case(ci, &cases[ci], n);
    }
    return test_finish();
}
