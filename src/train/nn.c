/* train/nn: the parameter registry and the two language models the framework
 * trains: GPT-2 style (learned positions, layernorm, fused QKV with biases,
 * GELU-tanh MLP, tied LM head) and Llama style (RMSNorm, GQA with
 * interleaved RoPE so GGUF export needs no Q/K permutation, SwiGLU, untied
 * head). Forward passes are plain sequences of recorded ops.
 * Owns: the model's parameters. Calls: train ops. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/tt_internal.h"

tt_tensor *tt_params_find(const tt_params *ps, const char *name) {
    for (int i = 0; i < ps->n; i++)
        if (!strcmp(ps->p[i].name, name)) return ps->p[i].t;
    return NULL;
}

int64_t tt_params_count(const tt_params *ps) {
    int64_t n = 0;
    for (int i = 0; i < ps->n; i++) n += tt_numel(ps->p[i].t);
    return n;
}

void tt_params_zero_grad(tt_params *ps) {
    for (int i = 0; i < ps->n; i++) tt_zero_grad(ps->p[i].t);
}

static tt_tensor *param_add(tt_params *ps, const char *name, int ndim, int64_t d0, int64_t d1) {
    if (ps->n == ps->cap) {
        int cap = ps->cap ? ps->cap * 2 : 32;
        tt_param *p = realloc(ps->p, (size_t)cap * sizeof *p);
        if (!p) return NULL;
        ps->p = p;
        ps->cap = cap;
    }
    int64_t sh[2] = {d0, d1};
    tt_tensor *t = tt_new(TT_F32, ndim, sh);
    if (!t) return NULL;
    t->requires_grad = true;
    tt_param *p = &ps->p[ps->n++];
    snprintf(p->name, sizeof p->name, "%s", name);
    p->t = t;
    t->name = p->name;
    p->decay = ndim >= 2;
    return t;
}

tt_model_config tt_model_config_default(tt_arch arch, int64_t vocab, int64_t ctx, int64_t dim, int64_t layers,
                                        int64_t heads) {
    tt_model_config c = {0};
    c.arch = arch;
    c.vocab = vocab;
    c.ctx = ctx;
    c.dim = dim;
    c.layers = layers;
    c.heads = heads;
    c.kv_heads = heads;
    c.norm_eps = 1e-5;
    c.rope_theta = 10000.0;
    if (arch == TT_ARCH_GPT2) {
        c.ffn = 4 * dim;
    } else {
        int64_t f = (8 * dim / 3 + 31) / 32 * 32;
        c.ffn = f;
    }
    return c;
}

void tt_model_free(tt_model *m) {
    if (!m) return;
    for (int i = 0; i < m->params.n; i++) tt_free(m->params.p[i].t);
    free(m->params.p);
    free(m->blocks);
    memset(m, 0, sizeof *m);
}

tl_status tt_model_to(tt_model *m, tt_device dev) {
    for (int i = 0; i < m->params.n; i++) {
        tl_status s = tt_tensor_move(m->params.p[i].t, dev);
        if (s != TL_OK) return tl_err_prefix(s, "model to %s: '%s': ", tt_device_name(dev), m->params.p[i].name);
    }
    return TL_OK;
}

tl_status tt_model_init(tt_model *m, const tt_model_config *cfg, uint64_t seed) {
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    const tt_model_config *k = cfg;
    if (k->vocab < 1 || k->ctx < 1 || k->dim < 1 || k->layers < 0 || k->heads < 1 || k->kv_heads < 1 ||
        k->dim % k->heads || k->heads % k->kv_heads || k->ffn < 1 ||
        (k->arch == TT_ARCH_LLAMA && (k->dim / k->heads) % 2))
        return tl_err(TL_ERR_INVALID,
                      "train: model config: dim %lld must divide by heads %lld, heads by kv_heads %lld "
                      "(llama: even head dim)",
                      (long long)k->dim, (long long)k->heads, (long long)k->kv_heads);
    m->blocks = calloc((size_t)(k->layers ? k->layers : 1), sizeof *m->blocks);
    if (!m->blocks) return tl_err(TL_ERR_NOMEM, "train: out of memory");
    tt_params *ps = &m->params;
    int64_t C = k->dim, hd = C / k->heads, F = k->ffn;
    char nm[96];
    bool ok = true;
#define P2(field, name, a, b) ok = ok && ((field) = param_add(ps, name, 2, a, b)) != NULL
#define P1(field, name, a) ok = ok && ((field) = param_add(ps, name, 1, a, 0)) != NULL
    if (k->arch == TT_ARCH_GPT2) {
        P2(m->tok_emb, "wte.weight", k->vocab, C);
        P2(m->pos_emb, "wpe.weight", k->ctx, C);
        for (int64_t l = 0; l < k->layers; l++) {
            tt_block *b = &m->blocks[l];
#define NM(s) (snprintf(nm, sizeof nm, "h.%lld." s, (long long)l), nm)
            P1(b->ln1_w, NM("ln_1.weight"), C);
            P1(b->ln1_b, NM("ln_1.bias"), C);
            P2(b->qkv_w, NM("attn.c_attn.weight"), 3 * C, C);
            P1(b->qkv_b, NM("attn.c_attn.bias"), 3 * C);
            P2(b->wo, NM("attn.c_proj.weight"), C, C);
            P1(b->wo_b, NM("attn.c_proj.bias"), C);
            P1(b->ln2_w, NM("ln_2.weight"), C);
            P1(b->ln2_b, NM("ln_2.bias"), C);
            P2(b->fc_w, NM("mlp.c_fc.weight"), F, C);
            P1(b->fc_b, NM("mlp.c_fc.bias"), F);
            P2(b->proj_w, NM("mlp.c_proj.weight"), C, F);
            P1(b->proj_b, NM("mlp.c_proj.bias"), C);
#undef NM
        }
        P1(m->lnf_w, "ln_f.weight", C);
        P1(m->lnf_b, "ln_f.bias", C);
    } else {
        P2(m->tok_emb, "embed_tokens.weight", k->vocab, C);
        for (int64_t l = 0; l < k->layers; l++) {
            tt_block *b = &m->blocks[l];
#define NM(s) (snprintf(nm, sizeof nm, "layers.%lld." s, (long long)l), nm)
            P1(b->ln1_w, NM("input_layernorm.weight"), C);
            P2(b->wq, NM("self_attn.q_proj.weight"), k->heads * hd, C);
            P2(b->wk, NM("self_attn.k_proj.weight"), k->kv_heads * hd, C);
            P2(b->wv, NM("self_attn.v_proj.weight"), k->kv_heads * hd, C);
            P2(b->wo, NM("self_attn.o_proj.weight"), C, k->heads * hd);
            P1(b->ln2_w, NM("post_attention_layernorm.weight"), C);
            P2(b->fc_w, NM("mlp.gate_proj.weight"), F, C);
            P2(b->up_w, NM("mlp.up_proj.weight"), F, C);
            P2(b->proj_w, NM("mlp.down_proj.weight"), C, F);
#undef NM
        }
        P1(m->lnf_w, "norm.weight", C);
        P2(m->lm_head, "lm_head.weight", k->vocab, C);
    }
#undef P1
#undef P2
    if (!ok) {
        tt_model_free(m);
        return tl_err(TL_ERR_NOMEM, "train: out of memory for parameters");
    }
    tt_rng r;
    tt_rng_seed(&r, seed);
    double resid = 0.02 / sqrt(2.0 * (double)(k->layers ? k->layers : 1));
    for (int i = 0; i < ps->n; i++) {
        tt_param *p = &ps->p[i];
        if (p->t->ndim == 1) {
            bool is_norm = strstr(p->name, "ln_") || strstr(p->name, "norm") || strstr(p->name, "layernorm");
            bool is_bias = strstr(p->name, ".bias") != NULL;
            tt_fill(p->t, is_norm && !is_bias ? 1.0 : 0.0);
        } else if (k->init.kind != TT_INIT_DEFAULT) { /* a chosen scheme, same for every weight */
            tl_status st = tt_init_apply(&k->init, p->t, NULL, &r);
            if (st != TL_OK) {
                tt_model_free(m);
                return st;
            }
        } else {
            bool is_resid = strstr(p->name, "c_proj.weight") || strstr(p->name, "o_proj") || strstr(p->name, "down_proj");
            tt_init_normal(p->t, &r, 0.0, is_resid ? resid : 0.02);
        }
    }
    m->dropout_seed = seed ^ 0x5eedull;
    m->training = true;
    return TL_OK;
}

static tt_tensor *to_heads(tt_ctx *c, tt_tensor *x, int64_t B, int64_t T, int64_t H, int64_t D) {
    int64_t sh[4] = {B, T, H, D};
    return tt_reshape(c, x, 4, sh);
}

static tt_tensor *from_heads(tt_ctx *c, tt_tensor *y, int64_t B, int64_t T, int64_t C) {
    int perm[4] = {0, 2, 1, 3};
    int64_t sh[3] = {B, T, C};
    return tt_reshape(c, tt_permute(c, y, perm), 3, sh);
}

static tt_tensor *drop(tt_ctx *c, tt_model *m, tt_tensor *x) {
    if (!m->training || m->cfg.dropout <= 0) return x;
    return tt_dropout(c, x, m->cfg.dropout, m->dropout_seed++, true);
}

static tt_tensor *gpt2_forward(tt_ctx *c, tt_model *m, const int32_t *ids, int64_t B, int64_t T) {
    const tt_model_config *k = &m->cfg;
    int64_t H = k->heads;
    int32_t pos[4096];
    for (int64_t t = 0; t < T; t++) pos[t] = (int32_t)t;
    int64_t bt[2] = {B, T};
    tt_tensor *x = tt_add(c, tt_embedding(c, m->tok_emb, ids, 2, bt), tt_embedding(c, m->pos_emb, pos, 1, &T));
    x = drop(c, m, x);
    for (int64_t l = 0; l < k->layers; l++) {
        tt_block *b = &m->blocks[l];
        tt_tensor *h = tt_layernorm(c, x, b->ln1_w, b->ln1_b, k->norm_eps);
        tt_tensor *qkv = tt_linear(c, h, b->qkv_w, b->qkv_b);
        tt_tensor *y = tt_attention_qkv(c, qkv, H, H, true, 0);
        x = tt_add(c, x, drop(c, m, tt_linear(c, y, b->wo, b->wo_b)));
        h = tt_layernorm(c, x, b->ln2_w, b->ln2_b, k->norm_eps);
        h = tt_linear(c, tt_gelu_tanh(c, tt_linear(c, h, b->fc_w, b->fc_b)), b->proj_w, b->proj_b);
        x = tt_add(c, x, drop(c, m, h));
    }
    x = tt_layernorm(c, x, m->lnf_w, m->lnf_b, k->norm_eps);
    return tt_linear(c, x, m->tok_emb, NULL);
}

static tt_tensor *llama_forward(tt_ctx *c, tt_model *m, const int32_t *ids, int64_t B, int64_t T) {
    const tt_model_config *k = &m->cfg;
    int64_t C = k->dim, H = k->heads, Hkv = k->kv_heads, D = C / H;
    int perm[4] = {0, 2, 1, 3};
    int64_t bt[2] = {B, T};
    tt_tensor *x = tt_embedding(c, m->tok_emb, ids, 2, bt);
    for (int64_t l = 0; l < k->layers; l++) {
        tt_block *b = &m->blocks[l];
        tt_tensor *h = tt_rmsnorm(c, x, b->ln1_w, k->norm_eps);
        tt_tensor *q = tt_rope(c, to_heads(c, tt_linear(c, h, b->wq, NULL), B, T, H, D), 0, k->rope_theta);
        tt_tensor *kk = tt_rope(c, to_heads(c, tt_linear(c, h, b->wk, NULL), B, T, Hkv, D), 0, k->rope_theta);
        tt_tensor *v = to_heads(c, tt_linear(c, h, b->wv, NULL), B, T, Hkv, D);
        tt_tensor *y = tt_attention(c, tt_permute(c, q, perm), tt_permute(c, kk, perm), tt_permute(c, v, perm), true, 0);
        x = tt_add(c, x, tt_linear(c, from_heads(c, y, B, T, C), b->wo, NULL));
        h = tt_rmsnorm(c, x, b->ln2_w, k->norm_eps);
        tt_tensor *g = tt_mul(c, tt_silu(c, tt_linear(c, h, b->fc_w, NULL)), tt_linear(c, h, b->up_w, NULL));
        x = tt_add(c, x, tt_linear(c, g, b->proj_w, NULL));
    }
    x = tt_rmsnorm(c, x, m->lnf_w, k->norm_eps);
    return tt_linear(c, x, m->lm_head, NULL);
}

tt_tensor *tt_model_forward(tt_ctx *c, tt_model *m, const int32_t *ids, int64_t B, int64_t T) {
    if (T < 1 || T > m->cfg.ctx || T > 4096 || B < 1) {
        tl_err(TL_ERR_INVALID, "train: forward of %lld x %lld tokens (context %lld)", (long long)B, (long long)T,
               (long long)m->cfg.ctx);
        return NULL;
    }
    return m->cfg.arch == TT_ARCH_GPT2 ? gpt2_forward(c, m, ids, B, T) : llama_forward(c, m, ids, B, T);
}

tt_tensor *tt_model_loss(tt_ctx *c, tt_model *m, const int32_t *ids, const int32_t *targets, int64_t B, int64_t T,
                         tt_tensor **logits) {
    tt_tensor *lg = tt_model_forward(c, m, ids, B, T);
    if (logits) *logits = lg;
    int64_t sh[2] = {B * T, m->cfg.vocab};
    return tt_cross_entropy(c, tt_reshape(c, lg, 2, sh), targets, -100);
}
