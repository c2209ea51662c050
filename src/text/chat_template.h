/* text/chat_template: render a model's chat template (a Jinja program from
 * GGUF tokenizer.chat_template or tokenizer_config.json) for a conversation,
 * with the variables HF's apply_chat_template passes: messages, tools (none
 * when absent), documents (none), add_generation_prompt, bos_token,
 * eos_token, plus any extra variables (e.g. enable_thinking).
 * Owns: a parsed template. Calls: jinja/jinja, base/status. */
#ifndef TL_TEXT_CHAT_TEMPLATE_H
#define TL_TEXT_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct chat_message {
    const char *role;    /* "system", "user", "assistant", "tool" */
    const char *content; /* UTF-8 */
} chat_message;

typedef struct chat_template_args {
    const char *messages_json;  /* JSON array of message objects, or NULL to use msgs */
    const chat_message *msgs;   /* used when messages_json is NULL */
    int32_t n_msgs;
    const char *tools_json;     /* JSON array of tool schemas, or NULL (tools = none) */
    bool add_generation_prompt;
    const char *bos_token;      /* NULL: left undefined */
    const char *eos_token;      /* NULL: left undefined */
    const char *extra_json;     /* JSON object of extra variables, or NULL */
} chat_template_args;

typedef struct chat_template chat_template;

/* Parse with HF's settings (trim_blocks, lstrip_blocks). */
tl_status chat_template_init(const char *src, size_t len, chat_template **out);
void chat_template_free(chat_template *t);
/* Render; *out is malloc'd and NUL-terminated (free()). */
tl_status chat_template_apply(const chat_template *t, const chat_template_args *a, char **out,
                              size_t *out_len);
/* Parse + apply in one call. */
tl_status chat_template_render(const char *src, size_t len, const chat_template_args *a, char **out,
                               size_t *out_len);

#endif
