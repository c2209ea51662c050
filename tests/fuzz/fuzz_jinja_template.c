/* tests/fuzz/fuzz_jinja_template: libFuzzer harness for the Jinja
 * interpreter with the template as input (a chat template comes inside a
 * model file): parsed with HF's options and rendered through
 * chat_template_apply with a conversation that has a system prompt, tool
 * calls, a tool result and tools, under limits smaller than the defaults
 * so each run stays short (the limits are what is being tested).
 * Owns: nothing. Calls: text/chat_template, jinja. */
#include "fuzz_util.h"
#include "jinja/jinja.h"

static const char messages[] =
    "[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\"Hi \\u00e9 <b>\"},"
    "{\"role\":\"assistant\",\"content\":\"A\",\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\","
    "\"function\":{\"name\":\"f\",\"arguments\":{\"x\":1,\"y\":[true,null,2.5]}}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"r\"},{\"role\":\"user\",\"content\":\"U2\"}]";
static const char tools[] = "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":\"d\","
                            "\"parameters\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\"}}}}}]";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    jinja_template *t;
    jinja_options opt = jinja_hf_options();
    if (jinja_parse((const char *)data, size, &opt, &t) != TL_OK) return 0;
    jinja_limits lim = {.max_output = 1 << 20, .max_memory = 32u << 20, .max_steps = 200000};
    jinja_env *e;
    if (jinja_env_init(&lim, &e) == TL_OK) {
        tl_status st = jinja_env_set_json(e, "messages", messages, sizeof messages - 1);
        if (st == TL_OK) st = jinja_env_set_json(e, "tools", tools, sizeof tools - 1);
        if (st == TL_OK) st = jinja_env_set_bool(e, "add_generation_prompt", true);
        if (st == TL_OK) st = jinja_env_set_str(e, "bos_token", "<s>");
        if (st == TL_OK) st = jinja_env_set_str(e, "eos_token", "</s>");
        if (st == TL_OK) st = jinja_env_set_json_object(e, "{\"enable_thinking\": false, \"n\": 3}", 32);
        char *out;
        size_t n;
        if (st == TL_OK && jinja_render(t, e, &out, &n) == TL_OK) {
            if (strlen(out) > n) __builtin_trap(); /* NUL-terminated at n (NULs inside are allowed) */
            fuzz_sink += (unsigned)n;
            free(out);
        }
        jinja_env_free(e);
    }
    jinja_template_free(t);
    return 0;
}
