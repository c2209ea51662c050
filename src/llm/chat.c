/* llm/chat: the public tl_chat_apply_template (and its JSON form
 * tl_chat_apply_template_json, for tool calls and results), which binds a chat template
 * to a model: the model's own template when none is given, and its BOS/EOS
 * token text as bos_token/eos_token (text/chat_template takes them as
 * arguments and knows no model).
 * Owns: nothing past the call. Calls: text/chat_template, the public model
 * API (tallow.h: template text, special tokens), base/status, libc. */
#include <stdlib.h>
#include <string.h>

#include "tallow.h"
#include "text/chat_template.h"

/* A special token's text as a NUL-terminated copy; NULL for no token. */
static char *chat_token_str(const tl_model *m, int32_t tok) {
    if (tok < 0) return NULL;
    size_t len;
    const char *t = tl_token_text(m, tok, &len);
    if (!t) return NULL;
    char *r = malloc(len + 1);
    if (!r) return NULL;
    memcpy(r, t, len);
    r[len] = 0;
    return r;
}

tl_status tl_chat_apply_template(const tl_model *m, const char *tmpl, const tl_chat_message *msgs,
                                 int32_t n_msgs, bool add_generation_prompt, char **out, size_t *out_len) {
    if (out) *out = NULL;
    if (out_len) *out_len = 0;
    if (!m || !out || (n_msgs > 0 && !msgs) || n_msgs < 0)
        return tl_err(TL_ERR_INVALID, "chat template: bad argument");
    const char *src = tmpl ? tmpl : tl_model_chat_template(m);
    if (!src) return tl_err(TL_ERR_NOT_FOUND, "chat template: the model has no tokenizer.chat_template");
    chat_message *cm = malloc((size_t)(n_msgs ? n_msgs : 1) * sizeof *cm);
    if (!cm) return tl_err(TL_ERR_NOMEM, "chat template: out of memory");
    for (int32_t i = 0; i < n_msgs; i++) {
        cm[i].role = msgs[i].role;
        cm[i].content = msgs[i].content;
    }
    char *bos = chat_token_str(m, tl_token_bos(m));
    char *eos = chat_token_str(m, tl_token_eos(m));
    chat_template_args a = {.msgs = cm, .n_msgs = n_msgs, .add_generation_prompt = add_generation_prompt,
                            .bos_token = bos, .eos_token = eos};
    tl_status st = chat_template_render(src, strlen(src), &a, out, out_len);
    free(bos);
    free(eos);
    free(cm);
    return st;
}

tl_status tl_chat_apply_template_json(const tl_model *m, const char *tmpl, const char *messages_json,
                                      const char *tools_json, bool add_generation_prompt, char **out,
                                      size_t *out_len) {
    if (out) *out = NULL;
    if (out_len) *out_len = 0;
    if (!m || !out || !messages_json) return tl_err(TL_ERR_INVALID, "chat template: bad argument");
    const char *src = tmpl ? tmpl : tl_model_chat_template(m);
    if (!src) return tl_err(TL_ERR_NOT_FOUND, "chat template: the model has no tokenizer.chat_template");
    char *bos = chat_token_str(m, tl_token_bos(m));
    char *eos = chat_token_str(m, tl_token_eos(m));
    chat_template_args a = {.messages_json = messages_json, .tools_json = tools_json,
                            .add_generation_prompt = add_generation_prompt, .bos_token = bos, .eos_token = eos};
    tl_status st = chat_template_render(src, strlen(src), &a, out, out_len);
    free(bos);
    free(eos);
    return st;
}
