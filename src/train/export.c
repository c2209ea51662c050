/* train/export: a trained model -> GGUF the engine runs. Llama-style ->
 * "llama"; GPT-2-style -> "gpt2" in llama.cpp's layout (the framework's
 * parameter names map one to one: c_attn -> attn_qkv, c_fc -> ffn_up,
 * mlp.c_proj -> ffn_down, wpe -> position_embd; the head is tied, so no
 * output.weight). Parameter layout [out, in] row-major is exactly GGUF's
 * ne = [in, out], so f32 weights are referenced, not copied; f16/bf16 ones
 * are converted while the file is written.
 * Owns: nothing past the call. Calls: io/gguf writer, base/fp16, train. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fp16.h"
#include "io/gguf.h"
#include "text/tokenizer.h"
#include "train/tt_internal.h"

typedef struct exp_ctx {
    gguf_writer *w;
    tl_type wtype; /* of 2-d weights */
} exp_ctx;

static tl_status fill_f16(void *ctx, void *dst, size_t size) {
    const tt_tensor *t = ctx;
    const float *x = tt_data(t);
    uint16_t *y = dst;
    for (size_t i = 0; i < size / 2; i++) y[i] = tl_fp32_to_fp16(x[i]);
    return TL_OK;
}

static tl_status fill_bf16(void *ctx, void *dst, size_t size) {
    const tt_tensor *t = ctx;
    const float *x = tt_data(t);
    uint16_t *y = dst;
    for (size_t i = 0; i < size / 2; i++) y[i] = tl_fp32_to_bf16(x[i]);
    return TL_OK;
}

/* A parameter [out, in] (or [n]) as GGUF ne = [in, out]; 1-d ones stay f32. */
static tl_status add_w(exp_ctx *e, const char *name, const tt_tensor *t) {
    int64_t ne[2] = {t->shape[t->ndim - 1], t->ndim == 2 ? t->shape[0] : 1};
    if (t->dtype != TT_F32 || !tt_is_contiguous(t))
        return tl_err(TL_ERR_UNSUPPORTED, "export: parameter for '%s' is not contiguous f32", name);
    size_t n = (size_t)tt_numel(t);
    if (t->ndim == 1 || e->wtype == TL_TYPE_F32)
        return gguf_writer_add_tensor(e->w, name, TL_TYPE_F32, (uint32_t)t->ndim, ne, tt_data(t), n * 4);
    return gguf_writer_add_tensor_fill(e->w, name, e->wtype, 2, ne, n * 2,
                                       e->wtype == TL_TYPE_F16 ? fill_f16 : fill_bf16, (void *)t);
}

/* The 256-token byte-level vocabulary (token b = byte b). */
static tl_status byte_tokenizer(gguf_writer *w) {
    char tokbuf[256][4];
    const char *toks[256];
    int32_t types[256];
    for (int b = 0; b < 256; b++) {
        tok_byte_level_text((uint8_t)b, tokbuf[b]);
        toks[b] = tokbuf[b];
        types[b] = 1; /* normal */
    }
    tl_status s = gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    if (!s) s = gguf_writer_set_str(w, "tokenizer.ggml.pre", "gpt2");
    if (!s) s = gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 256);
    if (!s) s = gguf_writer_set_arr_i32(w, "tokenizer.ggml.token_type", types, 256);
    if (!s) s = gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", toks, 0);
    if (!s) s = gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", false);
    return s;
}

/* Copy src's tokenizer.ggml.* keys into the (still empty) writer: copy all,
 * then drop the others, so values are carried byte for byte. */
static tl_status copy_tokenizer(gguf_writer *w, const gguf_file *g, const char *path, int64_t vocab) {
    const gguf_kv *toks;
    if (gguf_get_arr(g, "tokenizer.ggml.tokens", &toks) != TL_OK)
        return tl_err(TL_ERR_FORMAT, "export: '%s' has no tokenizer.ggml.tokens", path);
    if ((int64_t)toks->arr_n != vocab)
        return tl_err(TL_ERR_INVALID, "export: tokenizer '%s' has %llu tokens but the model's vocab is %lld", path,
                      (unsigned long long)toks->arr_n, (long long)vocab);
    tl_status s = gguf_writer_copy_kvs(w, g);
    const char *pre = "tokenizer.ggml.";
    for (int64_t i = 0; !s && i < gguf_n_kv(g); i++) {
        const gguf_kv *kv = gguf_kv_at(g, i);
        char key[256];
        if (kv->key.len >= sizeof key) {
            s = tl_err(TL_ERR_FORMAT, "export: '%s': a metadata key is %llu bytes long", path,
                       (unsigned long long)kv->key.len);
            break;
        }
        memcpy(key, kv->key.ptr, kv->key.len);
        key[kv->key.len] = 0;
        if (strncmp(key, pre, strlen(pre))) gguf_writer_remove_kv(w, key);
    }
    return s;
}

static tl_status llama_meta(gguf_writer *w, const tt_model_config *k) {
    int64_t hd = k->dim / k->heads;
    tl_status s = gguf_writer_set_u32(w, "llama.context_length", (uint32_t)k->ctx);
    if (!s) s = gguf_writer_set_u32(w, "llama.embedding_length", (uint32_t)k->dim);
    if (!s) s = gguf_writer_set_u32(w, "llama.block_count", (uint32_t)k->layers);
    if (!s) s = gguf_writer_set_u32(w, "llama.feed_forward_length", (uint32_t)k->ffn);
    if (!s) s = gguf_writer_set_u32(w, "llama.attention.head_count", (uint32_t)k->heads);
    if (!s) s = gguf_writer_set_u32(w, "llama.attention.head_count_kv", (uint32_t)k->kv_heads);
    if (!s) s = gguf_writer_set_u32(w, "llama.rope.dimension_count", (uint32_t)hd);
    if (!s) s = gguf_writer_set_f32(w, "llama.rope.freq_base", (float)k->rope_theta);
    if (!s) s = gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", (float)k->norm_eps);
    if (!s) s = gguf_writer_set_u32(w, "llama.vocab_size", (uint32_t)k->vocab);
    return s;
}

static tl_status gpt2_meta(gguf_writer *w, const tt_model_config *k) {
    tl_status s = gguf_writer_set_u32(w, "gpt2.context_length", (uint32_t)k->ctx);
    if (!s) s = gguf_writer_set_u32(w, "gpt2.embedding_length", (uint32_t)k->dim);
    if (!s) s = gguf_writer_set_u32(w, "gpt2.block_count", (uint32_t)k->layers);
    if (!s) s = gguf_writer_set_u32(w, "gpt2.feed_forward_length", (uint32_t)k->ffn);
    if (!s) s = gguf_writer_set_u32(w, "gpt2.attention.head_count", (uint32_t)k->heads);
    if (!s) s = gguf_writer_set_f32(w, "gpt2.attention.layer_norm_epsilon", (float)k->norm_eps);
    return s;
}

typedef struct named {
    const char *n;
    const tt_tensor *t;
} named;

static tl_status add_block(exp_ctx *e, int64_t l, const named *tab, size_t n) {
    char name[64];
    tl_status s = TL_OK;
    for (size_t i = 0; !s && i < n; i++) {
        snprintf(name, sizeof name, "blk.%lld.%s", (long long)l, tab[i].n);
        s = add_w(e, name, tab[i].t);
    }
    return s;
}

static tl_status tensors(exp_ctx *e, const tt_model *m) {
    const tt_model_config *k = &m->cfg;
    tl_status s = add_w(e, "token_embd.weight", m->tok_emb);
    if (k->arch == TT_ARCH_GPT2) {
        if (!s) s = add_w(e, "position_embd.weight", m->pos_emb);
        for (int64_t l = 0; !s && l < k->layers; l++) {
            const tt_block *b = &m->blocks[l];
            const named tab[] = {{"attn_norm.weight", b->ln1_w},   {"attn_norm.bias", b->ln1_b},
                                 {"attn_qkv.weight", b->qkv_w},    {"attn_qkv.bias", b->qkv_b},
                                 {"attn_output.weight", b->wo},    {"attn_output.bias", b->wo_b},
                                 {"ffn_norm.weight", b->ln2_w},    {"ffn_norm.bias", b->ln2_b},
                                 {"ffn_up.weight", b->fc_w},       {"ffn_up.bias", b->fc_b},
                                 {"ffn_down.weight", b->proj_w},   {"ffn_down.bias", b->proj_b}};
            s = add_block(e, l, tab, sizeof tab / sizeof tab[0]);
        }
        if (!s) s = add_w(e, "output_norm.weight", m->lnf_w);
        if (!s) s = add_w(e, "output_norm.bias", m->lnf_b);
        return s; /* output tied to token_embd */
    }
    for (int64_t l = 0; !s && l < k->layers; l++) {
        const tt_block *b = &m->blocks[l];
        const named tab[] = {{"attn_norm.weight", b->ln1_w}, {"attn_q.weight", b->wq},       {"attn_k.weight", b->wk},
                             {"attn_v.weight", b->wv},       {"attn_output.weight", b->wo},  {"ffn_norm.weight", b->ln2_w},
                             {"ffn_gate.weight", b->fc_w},   {"ffn_up.weight", b->up_w},     {"ffn_down.weight", b->proj_w}};
        s = add_block(e, l, tab, sizeof tab / sizeof tab[0]);
    }
    if (!s) s = add_w(e, "output_norm.weight", m->lnf_w);
    if (!s) s = add_w(e, "output.weight", m->lm_head);
    return s;
}

tl_status tt_export_gguf(const tt_model *m, const char *path, const tt_export_opts *opts) {
    const tt_model_config *k = &m->cfg;
    const char *type = opts && opts->type ? opts->type : "f32";
    const char *tokp = opts ? opts->tokenizer : NULL;
    exp_ctx e = {0};
    uint32_t ftype; /* general.file_type: llama.cpp's ALL_F32 / MOSTLY_F16 / MOSTLY_BF16 */
    if (!strcmp(type, "f32")) e.wtype = TL_TYPE_F32, ftype = 0;
    else if (!strcmp(type, "f16")) e.wtype = TL_TYPE_F16, ftype = 1;
    else if (!strcmp(type, "bf16")) e.wtype = TL_TYPE_BF16, ftype = 32;
    else return tl_err(TL_ERR_INVALID, "export: type '%s' (want f32, f16 or bf16)", type);
    if (!tokp && k->vocab != 256)
        return tl_err(TL_ERR_INVALID,
                      "export: vocab %lld needs the tokenizer it was trained with (a .gguf); only the 256-token "
                      "byte-level vocab is built in",
                      (long long)k->vocab);
    gguf_file *g = NULL;
    if (tokp) {
        size_t len = strlen(tokp);
        if (len < 5 || strcmp(tokp + len - 5, ".gguf"))
            return tl_err(TL_ERR_UNSUPPORTED,
                          "export: tokenizer '%s': only a GGUF's tokenizer.ggml.* metadata can be exported "
                          "(pass --tokenizer MODEL.gguf with the same vocabulary)",
                          tokp);
        tl_status s = gguf_open(tokp, &g);
        if (s) return tl_err_prefix(s, "export: tokenizer: ");
    }
    tl_status s = gguf_writer_init(&e.w);
    if (s) {
        gguf_close(g);
        return s;
    }
    /* the tokenizer first: copying a GGUF's keys needs an empty writer */
    s = g ? copy_tokenizer(e.w, g, tokp, k->vocab) : byte_tokenizer(e.w);
    bool gpt2 = k->arch == TT_ARCH_GPT2;
    if (!s) s = gguf_writer_set_str(e.w, "general.architecture", gpt2 ? "gpt2" : "llama");
    if (!s) s = gguf_writer_set_str(e.w, "general.name", "tallow-train");
    if (!s) s = gguf_writer_set_u32(e.w, "general.file_type", ftype);
    if (!s) s = gpt2 ? gpt2_meta(e.w, k) : llama_meta(e.w, k);
    if (!s) s = tensors(&e, m);
    if (!s) s = gguf_writer_write(e.w, path);
    gguf_writer_free(e.w);
    gguf_close(g); /* after the write: copied values may point into the mapping */
    return s;
}
