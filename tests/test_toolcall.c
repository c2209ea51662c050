/* Tool calls: for each format, the grammar built from a tools array accepts
 * that format's call text and rejects a wrong name, a wrong argument type
 * and a missing required argument; auto is lazy (prose, then the call);
 * the parser turns the text back into OpenAI tool_calls whose name and
 * arguments are the ones written, leaving prose as content. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "tallow.h"
#include "test_util.h"

static const char tools[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"city\":{\"type\":\"string\"},\"days\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":14}},"
    "\"required\":[\"city\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"now\"}}]";

static char bytes[256];
static tl_grammar_vocab *vocab(void) {
    const char *t[257];
    size_t l[257];
    uint8_t k[257];
    for (int i = 0; i < 256; i++) bytes[i] = (char)i, t[i] = &bytes[i], l[i] = 1, k[i] = 0;
    t[256] = "<eos>", l[256] = 5, k[256] = 1;
    tl_grammar_vocab *v = NULL;
    CHECK(tl_grammar_vocab_init_pieces(257, t, l, k, &v) == TL_OK, "vocab");
    return v;
}

static int accepts(tl_grammar_vocab *v, tl_tool_format f, tl_tool_choice ch, const char *name, const char *text) {
    char *g = NULL;
    const char *const *trig = NULL;
    int32_t nt = 0;
    if (tl_tool_grammar(f, tools, sizeof tools - 1, ch, name, &g, &trig, &nt)) return -2;
    tl_grammar *gr = NULL;
    tl_status s = tl_grammar_init(v, g, strlen(g), NULL, NULL, &gr);
    CHECK(s == TL_OK, "tool grammar compiles: %s", tl_last_error());
    free(g);
    if (s) return -2;
    if (nt) tl_grammar_set_triggers(gr, trig, nt);
    int r = 1;
    for (const char *p = text; *p && r == 1; p++)
        if (tl_grammar_accept(gr, (uint8_t)*p)) r = -1;
    if (r == 1 && !tl_grammar_can_end(gr)) r = 0;
    if (r == 1 && nt && !tl_grammar_is_active(gr)) r = 2; /* never triggered */
    tl_grammar_free(gr);
    return r;
}

static void parse_check(tl_tool_format f, const char *text, const char *want_content, int want_n, const char *name0,
                        const char *city0) {
    char *content = NULL, *calls = NULL;
    CHECK(tl_tool_parse(f, text, strlen(text), &content, &calls) == TL_OK, "parse");
    if (!calls) return;
    cJSON *a = cJSON_Parse(calls);
    CHECK(cJSON_GetArraySize(a) == want_n, "format %d: %d calls in %s", f, want_n, calls);
    CHECK(!strcmp(content, want_content), "format %d content '%s' want '%s'", f, content, want_content);
    if (want_n) {
        const cJSON *fn = cJSON_GetObjectItem(cJSON_GetArrayItem(a, 0), "function");
        CHECK(!strcmp(cJSON_GetObjectItem(fn, "name")->valuestring, name0), "name");
        cJSON *args = cJSON_Parse(cJSON_GetObjectItem(fn, "arguments")->valuestring);
        const cJSON *city = cJSON_GetObjectItem(args, "city");
        CHECK(city0 ? city && !strcmp(city->valuestring, city0) : !city, "arguments %s",
              cJSON_GetObjectItem(fn, "arguments")->valuestring);
        cJSON_Delete(args);
    }
    cJSON_Delete(a);
    free(content);
    free(calls);
}

int main(void) {
    tl_grammar_vocab *v = vocab();
    const char *hermes = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"days\": 3}}\n</tool_call>";
    CHECK(accepts(v, TL_TOOLS_HERMES, TL_TOOL_REQUIRED, NULL, hermes) == 1, "hermes call accepted");
    CHECK(accepts(v, TL_TOOLS_HERMES, TL_TOOL_REQUIRED, NULL,
                  "<tool_call>{\"name\": \"now\", \"arguments\": {}}</tool_call>\n<tool_call>{\"name\": \"now\", \"arguments\": {}}</tool_call>") == 1,
          "two hermes calls");
    CHECK(accepts(v, TL_TOOLS_HERMES, TL_TOOL_REQUIRED, NULL, "<tool_call>{\"name\": \"rain\"") == -1, "unknown name rejected");
    CHECK(accepts(v, TL_TOOLS_HERMES, TL_TOOL_REQUIRED, NULL,
                  "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": 5") == -1, "wrong type rejected");
    CHECK(accepts(v, TL_TOOLS_HERMES, TL_TOOL_REQUIRED, NULL,
                  "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"a\", \"days\": 15") == -1, "days > 14 rejected");
    CHECK(accepts(v, TL_TOOLS_HERMES, TL_TOOL_REQUIRED, NULL,
                  "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"days\"") == -1, "missing required rejected");
    CHECK(accepts(v, TL_TOOLS_HERMES, TL_TOOL_NAMED, "now", hermes) == -1, "named: other function rejected");
    CHECK(accepts(v, TL_TOOLS_HERMES, TL_TOOL_REQUIRED, NULL, "Sure! <tool_call>") == -1, "required: no prose first");
    char auto_text[512];
    snprintf(auto_text, sizeof auto_text, "Let me check. %s", hermes);
    CHECK(accepts(v, TL_TOOLS_HERMES, TL_TOOL_AUTO, NULL, auto_text) == 1, "auto: prose then a call");
    CHECK(accepts(v, TL_TOOLS_HERMES, TL_TOOL_AUTO, NULL, "Just prose.") == 2, "auto: prose only, never triggered");
    char *g = (char *)1;
    CHECK(tl_tool_grammar(TL_TOOLS_HERMES, tools, sizeof tools - 1, TL_TOOL_NONE, NULL, &g, NULL, NULL) == TL_OK && !g,
          "none: no grammar");
    CHECK(tl_tool_grammar(TL_TOOLS_HERMES, tools, sizeof tools - 1, TL_TOOL_NAMED, "nope", &g, NULL, NULL) != TL_OK &&
              strstr(tl_last_error(), "'nope'"), "named function not in tools is an error");
    CHECK(tl_tool_grammar(TL_TOOLS_HERMES, "[{\"type\":\"function\"}]", 22, TL_TOOL_AUTO, NULL, &g, NULL, NULL) != TL_OK,
          "malformed tools refused");

    const char *llama = "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}";
    CHECK(accepts(v, TL_TOOLS_LLAMA3, TL_TOOL_REQUIRED, NULL, llama) == 1, "llama3 python_tag call");
    CHECK(accepts(v, TL_TOOLS_LLAMA3, TL_TOOL_REQUIRED, NULL, llama + 14) == 1, "llama3 bare JSON call");
    CHECK(accepts(v, TL_TOOLS_LLAMA3, TL_TOOL_AUTO, NULL, "Checking: {\"name\": \"now\", \"parameters\": {}}") == 1,
          "llama3 auto on {\"name\"");
    const char *mistral = "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lyon\"}}, {\"name\": \"now\", \"arguments\": {}}]";
    CHECK(accepts(v, TL_TOOLS_MISTRAL, TL_TOOL_REQUIRED, NULL, mistral) == 1, "mistral calls");
    CHECK(accepts(v, TL_TOOLS_MISTRAL, TL_TOOL_REQUIRED, NULL, "[TOOL_CALLS]{") == -1, "mistral needs an array");

    parse_check(TL_TOOLS_HERMES, auto_text, "Let me check. ", 1, "get_weather", "Oslo");
    parse_check(TL_TOOLS_HERMES, "No tools needed.", "No tools needed.", 0, NULL, NULL);
    parse_check(TL_TOOLS_HERMES, "a <tool_call>{broken", "a <tool_call>{broken", 0, NULL, NULL);
    parse_check(TL_TOOLS_LLAMA3, llama, "", 1, "get_weather", "Rome");
    parse_check(TL_TOOLS_LLAMA3, "{\"name\": \"now\", \"parameters\": {}}; {\"name\": \"now\", \"parameters\": {}}", "", 2, "now", NULL);
    parse_check(TL_TOOLS_MISTRAL, mistral, "", 2, "get_weather", "Lyon");
    tl_grammar_vocab_free(v);
    return test_finish();
}
