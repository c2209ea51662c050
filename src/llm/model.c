/* llm/model: load a llama-family, gemma3 or gpt2 (llm/arch_gpt2.c) GGUF: architecture and hyper-parameters from
 * metadata, weight tensors as views into the mapping (checked for presence,
 * shape and a CPU kernel before anything runs), and the tokenizer.
 * Anything unsupported is refused here with a message naming it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/model.h"
#include "quant/quant.h"

typedef struct { const char *name; llm_arch arch; } arch_name;
static const arch_name llm_arch_names[] = {
    {"llama", LLM_ARCH_LLAMA},
    {"qwen2", LLM_ARCH_QWEN2},
    {"qwen3", LLM_ARCH_QWEN3},
    {"gemma3", LLM_ARCH_GEMMA3},
    {"gpt2", LLM_ARCH_GPT2},
};

const char *llm_arch_name(llm_arch a) {
    for (size_t i = 0; i < sizeof llm_arch_names / sizeof llm_arch_names[0]; i++)
        if (llm_arch_names[i].arch == a) return llm_arch_names[i].name;
    return "?";
}

/* Integer hyper-parameter "<arch>.<key>"; def < 0 means required. */
static tl_status hp_int(const tl_model *m, const char *arch, const char *key, int64_t def,
                        int64_t lo, int64_t hi, int32_t *out) {
    char full[128];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    int64_t v;
    tl_status s = gguf_get_int(m->gguf, full, &v);
    if (s == TL_ERR_NOT_FOUND && def >= 0) {
        v = def;
    } else if (s) {
        return s;
    }
    if (v < lo || v > hi)
        return tl_err(TL_ERR_FORMAT, "model: %s = %lld is out of range [%lld, %lld]", full, (long long)v,
                      (long long)lo, (long long)hi);
    *out = (int32_t)v;
    return TL_OK;
}

static tl_status hp_float(const tl_model *m, const char *arch, const char *key, double def, float *out) {
    char full[128];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    double v;
    tl_status s = gguf_get_float(m->gguf, full, &v);
    if (s == TL_ERR_NOT_FOUND) {
        v = def;
    } else if (s) {
        return s;
    }
    *out = (float)v;
    return TL_OK;
}

/* Bind tensor `name` with expected dims (ne[i] == 0: any). required = false
 * leaves t->data NULL when absent. */
static tl_status bind(tl_model *m, tl_tensor *t, const char *name, int n_dims, int64_t ne0, int64_t ne1,
                      bool required, bool need_dot) {
    const gguf_tensor *gt = gguf_find_tensor(m->gguf, name);
    memset(t, 0, sizeof *t);
    if (!gt) {
        if (required) return tl_err(TL_ERR_FORMAT, "model: required tensor '%s' is missing", name);
        return TL_OK;
    }
    int64_t want[2] = {ne0, ne1};
    for (int i = 0; i < GGUF_MAX_DIMS; i++) {
        int64_t w = i < 2 ? want[i] : 1;
        if (i >= n_dims) w = 1;
        if (w != 0 && gt->ne[i] != w)
            return tl_err(TL_ERR_FORMAT,
                          "model: tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]", name,
                          (long long)gt->ne[0], (long long)gt->ne[1], (long long)gt->ne[2],
                          (long long)gt->ne[3], (long long)ne0, (long long)(n_dims > 1 ? ne1 : 1));
    }
    const quant_kernels *qk = quant_kernels_get(gt->type);
    if (!qk || !qk->to_float || (need_dot && !qk->vec_dot))
        return tl_err(TL_ERR_UNSUPPORTED, "model: tensor '%s' has type %s, which the CPU backend does not support",
                      name, tl_type_name(gt->type));
    if (!need_dot && gt->type != TL_TYPE_F32)
        return tl_err(TL_ERR_UNSUPPORTED, "model: tensor '%s' has type %s; norms and biases must be f32", name,
                      tl_type_name(gt->type));
    tl_status s = tl_tensor_view(t, gt->type, (int32_t)gt->n_dims, gt->ne, (void *)gt->data);
    if (s) return tl_err_prefix(s, "model: tensor '%s': ", name);
    t->name = NULL; /* names point into the mapping without NUL; keep the key we looked up out */
    m->n_bytes += gt->size;
    m->n_params += (uint64_t)(gt->ne[0] * gt->ne[1] * gt->ne[2] * gt->ne[3]);
    return TL_OK;
}

tl_status llm_bind_tensor(tl_model *m, tl_tensor *t, const char *name, int n_dims, int64_t ne0, int64_t ne1,
                          bool required, bool need_dot) {
    return bind(m, t, name, n_dims, ne0, ne1, required, need_dot);
}

/* gemma3 on top of the common keys: QK-norm, NeoX RoPE, embeddings scaled
 * by sqrt(n_embd), post-norms, GELU FFN, and sliding-window layers (5 of
 * every 6) with their own RoPE base 10000 and no RoPE scaling. The softmax
 * scale is 1/sqrt(query_pre_attn_scalar): head_dim for every size except
 * the 62-layer 27B, whose scalar is n_embd/n_head. */
static tl_status load_hparams_gemma3(tl_model *m, const char *a) {
    llm_hparams *hp = &m->hp;
    tl_status s;
    hp->rope_type = LLM_ROPE_NEOX;
    hp->qk_norm = true;
    hp->embd_scale = sqrtf((float)hp->n_embd);
    hp->post_norms = true;
    hp->ffn_gelu = true;
    if ((s = hp_int(m, a, "attention.sliding_window", -1, 1, 1 << 24, &hp->n_swa))) return s;
    hp->swa_period = 6;
    hp->rope_base_swa = 10000.0f;
    if (hp->n_layer == 62) hp->att_scale = 1.0f / sqrtf((float)(hp->n_embd / hp->n_head));
    return TL_OK;
}

static tl_status load_hparams(tl_model *m, const char *a) {
    llm_hparams *hp = &m->hp;
    tl_status s;
    if ((s = hp_int(m, a, "embedding_length", -1, 1, 1 << 17, &hp->n_embd))) return s;
    if ((s = hp_int(m, a, "block_count", -1, 1, 4096, &hp->n_layer))) return s;
    if ((s = hp_int(m, a, "feed_forward_length", -1, 1, 1 << 20, &hp->n_ff))) return s;
    if ((s = hp_int(m, a, "attention.head_count", -1, 1, 4096, &hp->n_head))) return s;
    if ((s = hp_int(m, a, "attention.head_count_kv", hp->n_head, 1, hp->n_head, &hp->n_head_kv))) return s;
    if (hp->n_head % hp->n_head_kv)
        return tl_err(TL_ERR_FORMAT, "model: %d heads is not a multiple of %d KV heads", hp->n_head, hp->n_head_kv);
    if ((s = hp_int(m, a, "attention.key_length", hp->n_embd / hp->n_head, 1, 1024, &hp->head_dim))) return s;
    int32_t vlen;
    if ((s = hp_int(m, a, "attention.value_length", hp->head_dim, 1, 1024, &vlen))) return s;
    if (vlen != hp->head_dim)
        return tl_err(TL_ERR_UNSUPPORTED, "model: value_length %d != key_length %d", vlen, hp->head_dim);
    if ((s = hp_int(m, a, "context_length", 4096, 1, 1 << 24, &hp->n_ctx_train))) return s;
    if ((s = hp_int(m, a, "rope.dimension_count", hp->head_dim, 2, hp->head_dim, &hp->n_rot))) return s;
    if (hp->n_rot % 2) return tl_err(TL_ERR_FORMAT, "model: rope.dimension_count %d is odd", hp->n_rot);
    if ((s = hp_float(m, a, "attention.layer_norm_rms_epsilon", 1e-5, &hp->norm_eps))) return s;
    if ((s = hp_float(m, a, "rope.freq_base", 10000.0, &hp->rope_base))) return s;
    hp->rope_scale = 1.0f;
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    gguf_str st;
    if (gguf_get_str(m->gguf, key, &st) == TL_OK) {
        if (st.len == 6 && !memcmp(st.ptr, "linear", 6)) {
            if ((s = hp_float(m, a, "rope.scaling.factor", 1.0, &hp->rope_scale))) return s;
            if (!(hp->rope_scale > 0.0f))
                return tl_err(TL_ERR_FORMAT, "model: rope.scaling.factor %g must be positive", hp->rope_scale);
        } else if (!(st.len == 4 && !memcmp(st.ptr, "none", 4)) && !(st.len == 6 && !memcmp(st.ptr, "llama3", 6))) {
            return tl_err(TL_ERR_UNSUPPORTED, "model: rope scaling type '%.*s' is not supported", (int)st.len, st.ptr);
        }
    } else {
        /* older files: a bare scale_linear */
        if ((s = hp_float(m, a, "rope.scale_linear", 1.0, &hp->rope_scale))) return s;
    }
    hp->rope_type = m->arch == LLM_ARCH_LLAMA ? LLM_ROPE_NORM : LLM_ROPE_NEOX;
    hp->qkv_bias = m->arch == LLM_ARCH_QWEN2;
    hp->qk_norm = m->arch == LLM_ARCH_QWEN3;
    hp->att_scale = 1.0f / sqrtf((float)hp->head_dim);
    if (m->arch == LLM_ARCH_GEMMA3) return load_hparams_gemma3(m, a);
    if (m->arch == LLM_ARCH_GPT2) return llm_gpt2_load_hparams(m, a);
    return TL_OK;
}

static tl_status load_tensors(tl_model *m) {
    if (m->arch == LLM_ARCH_GPT2) return llm_gpt2_load_tensors(m);
    const llm_hparams *hp = &m->hp;
    const int64_t e = hp->n_embd, qd = (int64_t)hp->n_head * hp->head_dim, kvd = (int64_t)hp->n_head_kv * hp->head_dim;
    tl_status s;
    if ((s = bind(m, &m->tok_embd, "token_embd.weight", 2, e, 0, true, true))) return s;
    m->hp.n_vocab = (int32_t)m->tok_embd.ne[1];
    if ((s = bind(m, &m->output_norm, "output_norm.weight", 1, e, 0, true, false))) return s;
    if ((s = bind(m, &m->output, "output.weight", 2, e, hp->n_vocab, false, true))) return s;
    if (!m->output.data) m->output = m->tok_embd; /* tied embeddings */
    if ((s = bind(m, &m->rope_freqs, "rope_freqs.weight", 1, hp->n_rot / 2, 0, false, false))) return s;
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return tl_err(TL_ERR_NOMEM, "model: out of memory");
    for (int il = 0; il < hp->n_layer; il++) {
        llm_layer *L = &m->layers[il];
        char n[96];
#define BIND(field, suffix, nd, a, b, req, dot)                                   \
    do {                                                                          \
        snprintf(n, sizeof n, "blk.%d.%s", il, suffix);                           \
        if ((s = bind(m, &L->field, n, nd, a, b, req, dot))) return s;            \
    } while (0)
        BIND(attn_norm, "attn_norm.weight", 1, e, 0, true, false);
        BIND(wq, "attn_q.weight", 2, e, qd, true, true);
        BIND(wk, "attn_k.weight", 2, e, kvd, true, true);
        BIND(wv, "attn_v.weight", 2, e, kvd, true, true);
        BIND(wo, "attn_output.weight", 2, qd, e, true, true);
        BIND(bq, "attn_q.bias", 1, qd, 0, hp->qkv_bias, false);
        BIND(bk, "attn_k.bias", 1, kvd, 0, hp->qkv_bias, false);
        BIND(bv, "attn_v.bias", 1, kvd, 0, hp->qkv_bias, false);
        BIND(q_norm, "attn_q_norm.weight", 1, hp->head_dim, 0, hp->qk_norm, false);
        BIND(k_norm, "attn_k_norm.weight", 1, hp->head_dim, 0, hp->qk_norm, false);
        BIND(ffn_norm, "ffn_norm.weight", 1, e, 0, true, false);
        BIND(w_gate, "ffn_gate.weight", 2, e, hp->n_ff, true, true);
        BIND(w_up, "ffn_up.weight", 2, e, hp->n_ff, true, true);
        BIND(w_down, "ffn_down.weight", 2, hp->n_ff, e, true, true);
        BIND(attn_post_norm, "post_attention_norm.weight", 1, e, 0, hp->post_norms, false);
        BIND(ffn_post_norm, "post_ffw_norm.weight", 1, e, 0, hp->post_norms, false);
#undef BIND
    }
    return TL_OK;
}

/* The most common weight type by bytes, for display ("q4_1"). */
static void model_ftype(tl_model *m) {
    uint64_t bytes[TL_TYPE_COUNT] = {0};
    for (int64_t i = 0; i < gguf_n_tensors(m->gguf); i++) {
        const gguf_tensor *t = gguf_tensor_at(m->gguf, i);
        if (t->n_dims >= 2) bytes[t->type] += t->size;
    }
    int best = 0;
    for (int t = 0; t < TL_TYPE_COUNT; t++)
        if (bytes[t] > bytes[best]) best = t;
    snprintf(m->ftype, sizeof m->ftype, "%s", tl_type_name((uint32_t)best));
}

tl_model_params tl_model_default_params(void) {
    tl_model_params p;
    memset(&p, 0, sizeof p);
    p.backend = TL_BACKEND_CPU;
    p.n_gpu_layers = -1;
    return p;
}

tl_status tl_model_load(const char *path, const tl_model_params *params, tl_model **out) {
    if (!out || !path) return tl_err(TL_ERR_INVALID, "tl_model_load: NULL argument");
    *out = NULL;
    tl_model *m = calloc(1, sizeof *m);
    if (!m) return tl_err(TL_ERR_NOMEM, "model: out of memory");
    m->params = params ? *params : tl_model_default_params();
    tl_status s = gguf_open(path, &m->gguf);
    if (s) goto fail;
    gguf_str arch;
    if ((s = gguf_get_str(m->gguf, "general.architecture", &arch))) goto fail;
    char a[32];
    snprintf(a, sizeof a, "%.*s", (int)(arch.len < 31 ? arch.len : 31), arch.ptr);
    bool found = false;
    for (size_t i = 0; i < sizeof llm_arch_names / sizeof llm_arch_names[0]; i++)
        if (!strcmp(a, llm_arch_names[i].name) && strlen(a) == arch.len) {
            m->arch = llm_arch_names[i].arch;
            found = true;
        }
    if (!found) {
        s = tl_err(TL_ERR_UNSUPPORTED, "model: architecture '%.*s' is not supported (supported: llama, qwen2, qwen3, gemma3, gpt2)",
                   (int)(arch.len < 64 ? arch.len : 64), arch.ptr);
        goto fail;
    }
    if ((s = load_hparams(m, a))) goto fail;
    if ((s = load_tensors(m))) goto fail;
    if ((s = tok_load_gguf(m->gguf, &m->vocab))) goto fail;
    if (tok_n_vocab(m->vocab) > m->hp.n_vocab) {
        s = tl_err(TL_ERR_FORMAT, "model: tokenizer has %d tokens but token_embd has %d rows",
                   tok_n_vocab(m->vocab), m->hp.n_vocab);
        goto fail;
    }
    gguf_str nm;
    if (gguf_get_str(m->gguf, "general.name", &nm) == TL_OK)
        snprintf(m->name, sizeof m->name, "%.*s", (int)(nm.len < 127 ? nm.len : 127), nm.ptr);
    else
        snprintf(m->name, sizeof m->name, "%s", a);
    model_ftype(m);
    gguf_str tmpl;
    if (gguf_get_str(m->gguf, "tokenizer.chat_template", &tmpl) == TL_OK) {
        m->chat_template = malloc(tmpl.len + 1);
        if (!m->chat_template) {
            s = tl_err(TL_ERR_NOMEM, "model: out of memory");
            goto fail;
        }
        memcpy(m->chat_template, tmpl.ptr, tmpl.len);
        m->chat_template[tmpl.len] = 0;
    }
    if ((s = llm_place(m))) goto fail;
    *out = m;
    return TL_OK;
fail:
    tl_err_prefix(s, "loading '%s': ", path);
    tl_model_free(m);
    return s;
}

void tl_model_free(tl_model *m) {
    if (!m) return;
    llm_unplace(m);
    if (m->vocab) tok_free(m->vocab);
    free(m->layers);
    free(m->chat_template);
    if (m->gguf) gguf_close(m->gguf);
    free(m);
}

void tl_model_get_info(const tl_model *m, tl_model_info *o) {
    memset(o, 0, sizeof *o);
    o->arch = llm_arch_name(m->arch);
    o->name = m->name;
    o->ftype = m->ftype;
    o->n_params = m->n_params;
    o->n_bytes = m->n_bytes;
    o->n_vocab = m->hp.n_vocab;
    o->n_ctx_train = m->hp.n_ctx_train;
    o->n_embd = m->hp.n_embd;
    o->n_layer = m->hp.n_layer;
    o->n_head = m->hp.n_head;
    o->n_head_kv = m->hp.n_head_kv;
    o->head_dim = m->hp.head_dim;
    o->n_ff = m->hp.n_ff;
}
