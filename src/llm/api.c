/* llm/api: the public token functions, thin wrappers over text/tokenizer
 * bound to a model's vocabulary. */
#include <stdlib.h>
#include <string.h>

#include "llm/model.h"

tl_status tl_tokenize(const tl_model *m, const char *text, size_t len, bool add_special, bool parse_special,
                      int32_t *out, int32_t cap, int32_t *n_out) {
    if (!m || (!text && len) || !n_out) return tl_err(TL_ERR_INVALID, "tl_tokenize: NULL argument");
    return tok_encode(m->vocab, text ? text : "", len, add_special, parse_special, out, cap, n_out);
}

int32_t tl_token_bos(const tl_model *m) { return tok_bos(m->vocab); }
int32_t tl_token_eos(const tl_model *m) { return tok_eos(m->vocab); }
bool tl_token_is_eog(const tl_model *m, int32_t tok) { return tok_is_eog(m->vocab, tok); }
bool tl_token_is_control(const tl_model *m, int32_t tok) { return tok_is_control(m->vocab, tok); }
const char *tl_token_text(const tl_model *m, int32_t tok, size_t *len) { return tok_piece(m->vocab, tok, len); }

const char *tl_model_chat_template(const tl_model *m) { return m->chat_template; }

tl_status tl_model_meta_int(const tl_model *m, const char *key, int64_t *out) {
    if (!m || !key || !out) return tl_err(TL_ERR_INVALID, "tl_model_meta_int: NULL argument");
    return gguf_get_int(m->gguf, key, out);
}

struct tl_detok {
    tok_detok *d;
};

tl_status tl_detok_init(const tl_model *m, tl_detok **out) {
    *out = NULL;
    tl_detok *d = calloc(1, sizeof *d);
    if (!d) return tl_err(TL_ERR_NOMEM, "detok: out of memory");
    tl_status s = tok_detok_init(m->vocab, &d->d);
    if (s) {
        free(d);
        return s;
    }
    *out = d;
    return TL_OK;
}

void tl_detok_free(tl_detok *d) {
    if (!d) return;
    tok_detok_free(d->d);
    free(d);
}

tl_status tl_detok_push(tl_detok *d, int32_t tok, char *buf, size_t cap, size_t *n) {
    return tok_detok_push(d->d, tok, buf, cap, n);
}

tl_status tl_detok_flush(tl_detok *d, char *buf, size_t cap, size_t *n) {
    return tok_detok_flush(d->d, buf, cap, n);
}
