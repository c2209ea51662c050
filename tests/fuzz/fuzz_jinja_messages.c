/* tests/fuzz/fuzz_jinja_messages: libFuzzer harness for the Jinja
 * interpreter with the variables as input (what an HTTP request supplies):
 * the committed real chat templates (tests/fixtures/chat_templates, parsed
 * once) are rendered with the input as the messages JSON. The first byte
 * picks the template and add_generation_prompt; if the rest is a JSON
 * object with a "messages" member, its other members become variables too
 * (tools, enable_thinking, ...), else the whole rest is the messages.
 * Owns: the parsed templates (process lifetime). Calls: jinja. */
#include "fuzz_util.h"
#include "jinja/jinja.h"

static const char *const tmpl_files[] = {
    "deepseek-r1-distill-qwen-32b.jinja", "deepseek-v3.1.jinja", "llama-2-chat.jinja",
    "llama-3.1-8b-instruct.jinja", "mistral-7b-instruct-v0.1.jinja", "mistral-nemo-instruct-2407.jinja",
    "qwen2.5-7b-instruct.jinja", "smollm2-135m-instruct.jinja"};
#define N_TMPL (sizeof tmpl_files / sizeof tmpl_files[0])
static jinja_template *tmpl[N_TMPL];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *dir = getenv("TALLOW_TEMPLATES");
    if (!dir) dir = "tests/fixtures/chat_templates";
    int n = 0;
    for (size_t i = 0; i < N_TMPL; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, tmpl_files[i]);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        char buf[1 << 16];
        size_t len = fread(buf, 1, sizeof buf, f);
        fclose(f);
        jinja_options opt = jinja_hf_options();
        if (jinja_parse(buf, len, &opt, &tmpl[i]) == TL_OK) n++;
        else fprintf(stderr, "fuzz_jinja_messages: %s: %s\n", path, tl_last_error());
    }
    if (!n) {
        fprintf(stderr, "fuzz_jinja_messages: no template under %s (run from the source root)\n", dir);
        exit(1);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    jinja_template *t = tmpl[data[0] % N_TMPL];
    if (!t) return 0;
    const char *json = (const char *)data + 1;
    size_t len = size - 1;
    jinja_limits lim = {.max_output = 1 << 20, .max_memory = 32u << 20, .max_steps = 200000};
    jinja_env *e;
    if (jinja_env_init(&lim, &e) != TL_OK) return 0;
    tl_status st = jinja_env_set_json_object(e, json, len);
    bool has_messages = false;
    if (st == TL_OK) { /* an object: it carries messages (and more) only if it names them */
        char *probe;
        size_t n;
        jinja_template *pt;
        jinja_options opt = jinja_hf_options();
        static const char q[] = "{{ messages is defined }}";
        if (jinja_parse(q, sizeof q - 1, &opt, &pt) == TL_OK) {
            if (jinja_render(pt, e, &probe, &n) == TL_OK) {
                has_messages = !strcmp(probe, "True");
                free(probe);
            }
            jinja_template_free(pt);
        }
    }
    if (!has_messages) st = jinja_env_set_json(e, "messages", json, len);
    else st = TL_OK;
    if (st == TL_OK) st = jinja_env_set_bool(e, "add_generation_prompt", data[0] & 0x80);
    if (st == TL_OK) st = jinja_env_set_str(e, "bos_token", "<s>");
    if (st == TL_OK) st = jinja_env_set_str(e, "eos_token", "</s>");
    char *out;
    size_t n;
    if (st == TL_OK && jinja_render(t, e, &out, &n) == TL_OK) {
        fuzz_sink += (unsigned)n;
        free(out);
    }
    jinja_env_free(e);
    return 0;
}
