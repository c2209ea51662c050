/* train/export: a trained Llama-style model -> llama-architecture GGUF.
 * Parameter layout [out, in] row-major is exactly GGUF's ne = [in, out], so
 * weights are written as they are (f32), referenced not copied.
 * Owns: the token strings while writing. Calls: io/gguf writer, train. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/gguf.h"
#include "text/tokenizer.h"
#include "train/tt_internal.h"


static tl_status add_w(gguf_writer *w, const char *name, const tt_tensor *t) {
    int64_t ne[2] = {t->shape[t->ndim - 1], t->ndim == 2 ? t->shape[0] : 1};
    return gguf_writer_add_tensor(w, name, TL_TYPE_F32, (uint32_t)t->ndim, ne, tt_data(t), (size_t)tt_numel(t) * 4);
}

tl_status tt_export_gguf(const tt_model *m, const char *path) {
    const tt_model_config *k = &m->cfg;
    if (k->arch != TT_ARCH_LLAMA)
        return tl_err(TL_ERR_UNSUPPORTED, "export: only Llama-style models export to GGUF (train with --arch llama)");
    if (k->vocab != 256)
        return tl_err(TL_ERR_UNSUPPORTED, "export: vocab %lld: only the 256-token byte-level vocab is supported",
                      (long long)k->vocab);
    gguf_writer *w;
    tl_status s = gguf_writer_init(&w);
    if (s) return s;
    char tokbuf[256][4];
    const char *toks[256];
    int32_t types[256];
    for (int b = 0; b < 256; b++) {
        tok_byte_level_text((uint8_t)b, tokbuf[b]);
        toks[b] = tokbuf[b];
        types[b] = 1; /* normal */
    }
    int64_t hd = k->dim / k->heads;
    s = gguf_writer_set_str(w, "general.architecture", "llama");
    if (!s) s = gguf_writer_set_str(w, "general.name", "tallow-train");
    if (!s) s = gguf_writer_set_u32(w, "general.file_type", 0);
    if (!s) s = gguf_writer_set_u32(w, "llama.context_length", (uint32_t)k->ctx);
    if (!s) s = gguf_writer_set_u32(w, "llama.embedding_length", (uint32_t)k->dim);
    if (!s) s = gguf_writer_set_u32(w, "llama.block_count", (uint32_t)k->layers);
    if (!s) s = gguf_writer_set_u32(w, "llama.feed_forward_length", (uint32_t)k->ffn);
    if (!s) s = gguf_writer_set_u32(w, "llama.attention.head_count", (uint32_t)k->heads);
    if (!s) s = gguf_writer_set_u32(w, "llama.attention.head_count_kv", (uint32_t)k->kv_heads);
    if (!s) s = gguf_writer_set_u32(w, "llama.rope.dimension_count", (uint32_t)hd);
    if (!s) s = gguf_writer_set_f32(w, "llama.rope.freq_base", (float)k->rope_theta);
    if (!s) s = gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", (float)k->norm_eps);
    if (!s) s = gguf_writer_set_u32(w, "llama.vocab_size", (uint32_t)k->vocab);
    if (!s) s = gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    if (!s) s = gguf_writer_set_str(w, "tokenizer.ggml.pre", "gpt2");
    if (!s) s = gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 256);
    if (!s) s = gguf_writer_set_arr_i32(w, "tokenizer.ggml.token_type", types, 256);
    if (!s) s = gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", toks, 0);
    if (!s) s = gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", false);
    if (!s) s = add_w(w, "token_embd.weight", m->tok_emb);
    char name[64];
    for (int64_t l = 0; !s && l < k->layers; l++) {
        const tt_block *b = &m->blocks[l];
        struct {
            const char *n;
            const tt_tensor *t;
        } tab[] = {{"attn_norm", b->ln1_w}, {"attn_q", b->wq},   {"attn_k", b->wk},     {"attn_v", b->wv},
                   {"attn_output", b->wo},  {"ffn_norm", b->ln2_w}, {"ffn_gate", b->fc_w}, {"ffn_up", b->up_w},
                   {"ffn_down", b->proj_w}};
        for (size_t i = 0; !s && i < sizeof tab / sizeof tab[0]; i++) {
            snprintf(name, sizeof name, "blk.%lld.%s.weight", (long long)l, tab[i].n);
            s = add_w(w, name, tab[i].t);
        }
    }
    if (!s) s = add_w(w, "output_norm.weight", m->lnf_w);
    if (!s) s = add_w(w, "output.weight", m->lm_head);
    if (!s) s = gguf_writer_write(w, path);
    gguf_writer_free(w);
    return s;
}
