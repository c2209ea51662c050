/* text/chat_template: HF-compatible chat template rendering on top of the
 * Jinja interpreter. Messages given as C structs are turned into JSON (one
 * loading path for both forms) and loaded as the `messages` variable. The
 * BOS/EOS text comes in the arguments: this file knows no model (the public
 * tl_chat_apply_template that binds a model's tokens is llm/chat.c).
 * Owns: the parsed template. Calls: jinja/jinja, base/status, libc. */
#include "text/chat_template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja/jinja.h"

struct chat_template {
    jinja_template *t;
};

tl_status chat_template_init(const char *src, size_t len, chat_template **out) {
    *out = NULL;
    chat_template *ct = calloc(1, sizeof *ct);
    if (!ct) return tl_err(TL_ERR_NOMEM, "chat template: out of memory");
    jinja_options opt = jinja_hf_options();
    tl_status st = jinja_parse(src, len, &opt, &ct->t);
    if (st != TL_OK) {
        free(ct);
        return tl_err_prefix(st, "chat template: ");
    }
    *out = ct;
    return TL_OK;
}

void chat_template_free(chat_template *t) {
    if (!t) return;
    jinja_template_free(t->t);
    free(t);
}

/* growable string for building JSON */
typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + n + 1) nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_json_str(sbuf *b, const char *s) {
    sb_put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p;
            sb_put(b, esc, 2);
        } else if (*p < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", *p);
            sb_put(b, esc, 6);
        } else
            sb_put(b, (const char *)p, 1);
    }
    sb_put(b, "\"", 1);
}

static tl_status msgs_to_json(const chat_message *m, int32_t n, char **out) {
    sbuf b = {0};
    sb_put(&b, "[", 1);
    for (int32_t i = 0; i < n; i++) {
        if (i) sb_put(&b, ",", 1);
        sb_put(&b, "{\"role\":", 8);
        sb_json_str(&b, m[i].role ? m[i].role : "");
        sb_put(&b, ",\"content\":", 11);
        sb_json_str(&b, m[i].content ? m[i].content : "");
        sb_put(&b, "}", 1);
    }
    sb_put(&b, "]", 1);
    if (b.oom) {
        free(b.p);
        return tl_err(TL_ERR_NOMEM, "chat template: out of memory");
    }
    *out = b.p;
    return TL_OK;
}

tl_status chat_template_apply(const chat_template *t, const chat_template_args *a, char **out,
                              size_t *out_len) {
    *out = NULL;
    if (out_len) *out_len = 0;
    if (!t || !a) return tl_err(TL_ERR_INVALID, "chat template: NULL argument");
    jinja_env *e;
    tl_status st = jinja_env_init(NULL, &e);
    if (st != TL_OK) return st;
    char *mj = NULL;
    if (a->messages_json) {
        st = jinja_env_set_json(e, "messages", a->messages_json, strlen(a->messages_json));
    } else {
        st = msgs_to_json(a->msgs, a->n_msgs, &mj);
        if (st == TL_OK) st = jinja_env_set_json(e, "messages", mj, strlen(mj));
        free(mj);
    }
    if (st == TL_OK) {
        if (a->tools_json) st = jinja_env_set_json(e, "tools", a->tools_json, strlen(a->tools_json));
        else st = jinja_env_set_str(e, "tools", NULL);
    }
    if (st == TL_OK) st = jinja_env_set_str(e, "documents", NULL);
    if (st == TL_OK) st = jinja_env_set_bool(e, "add_generation_prompt", a->add_generation_prompt);
    /* an absent special token stays undefined (renders as nothing), as in HF, whose
     * special_tokens_map leaves out the tokens a tokenizer does not set */
    if (st == TL_OK && a->bos_token) st = jinja_env_set_str(e, "bos_token", a->bos_token);
    if (st == TL_OK && a->eos_token) st = jinja_env_set_str(e, "eos_token", a->eos_token);
    if (st == TL_OK && a->extra_json) st = jinja_env_set_json_object(e, a->extra_json, strlen(a->extra_json));
    if (st == TL_OK) st = jinja_render(t->t, e, out, out_len);
    jinja_env_free(e);
    if (st != TL_OK) return tl_err_prefix(st, "chat template: ");
    return TL_OK;
}

tl_status chat_template_render(const char *src, size_t len, const chat_template_args *a, char **out,
                               size_t *out_len) {
    chat_template *t;
    tl_status st = chat_template_init(src, len, &t);
    if (st != TL_OK) return st;
    st = chat_template_apply(t, a, out, out_len);
    chat_template_free(t);
    return st;
}
