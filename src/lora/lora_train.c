/* lora/lora_train: see lora_train.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/gguf.h"
#include "llm/model.h"
#include "lora/lora_train.h"
#include "quant/quant.h"

bool lora_parse_targets(const char *s, uint32_t *mask) {
    static const char *const names[LORA_W_COUNT] = {"q", "k", "v", "o", "gate", "up", "down"};
    *mask = 0;
    if (!strcmp(s, "all")) {
        *mask = (1u << LORA_W_COUNT) - 1;
        return true;
    }
    while (*s) {
        const char *e = strchr(s, ',');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        bool hit = false;
        for (int i = 0; i < LORA_W_COUNT; i++)
            if (strlen(names[i]) == n && !strncmp(s, names[i], n)) {
                *mask |= 1u << i;
                hit = true;
            }
        if (!hit) return false;
        s += n + (e ? 1 : 0);
    }
    return *mask != 0;
}

static tl_status check_model(const tl_model *m) {
    const llm_hparams *hp = &m->hp;
    const char *why = NULL;
    if (m->arch != LLM_ARCH_LLAMA) why = "its architecture is not llama (only llama's interleaved RoPE is trained)";
    else if (hp->qkv_bias || hp->qk_norm || hp->post_norms || hp->ffn_gelu || hp->n_swa || hp->embd_scale > 0)
        why = "it has biases, QK-norm, post-norms, GELU or a sliding window";
    else if (m->rope_freqs.data || hp->rope_scale != 1.0f || hp->n_rot != hp->head_dim)
        why = "it scales RoPE (rope_freqs, linear scaling) or rotates part of a head";
    if (why) return tl_err(TL_ERR_UNSUPPORTED, "lora train: cannot fine-tune this model: %s", why);
    return TL_OK;
}

static const tl_tensor *base_w(const tl_model *m, int l, lora_wid w) {
    const llm_layer *L = &m->layers[l];
    const tl_tensor *ws[LORA_W_COUNT] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
    return ws[w];
}

/* (Re)make every frozen projection, and the output head, on dev; on an
 * error the ones in place stay. */
static tl_status frozen_all(lora_trainee *t, tt_device dev) {
    const size_t n = (size_t)t->m->hp.n_layer * LORA_W_COUNT;
    tt_frozen **w = calloc(n + 1, sizeof *w);
    tl_status s = w ? TL_OK : tl_err(TL_ERR_NOMEM, "lora train: out of memory");
    for (size_t i = 0; i <= n && !s; i++) {
        const tl_tensor *W = i == n ? &t->m->output : base_w(t->m, (int)(i / LORA_W_COUNT), (lora_wid)(i % LORA_W_COUNT));
        s = tt_frozen_init(&w[i], dev, W->data, W->type, W->ne[0], W->ne[1]);
        if (s && i == n) s = tl_err_prefix(s, "lora train: output.weight: ");
        else if (s) s = tl_err_prefix(s, "lora train: blk.%d.%s.weight: ", (int)(i / LORA_W_COUNT),
                                      lora_wid_gguf((lora_wid)(i % LORA_W_COUNT)));
    }
    tt_frozen **drop = s ? w : t->w;
    for (size_t i = 0; drop && i <= n; i++) tt_frozen_free(drop[i]);
    free(drop);
    if (!s) t->w = w;
    return s;
}

static tl_status trainee_alloc(lora_trainee *t, const tl_model *m) {
    memset(t, 0, sizeof *t);
    tl_status s = check_model(m);
    if (s) return s;
    t->m = m;
    const llm_hparams *hp = &m->hp;
    size_t n = (size_t)hp->n_layer * LORA_W_COUNT;
    t->a = calloc(n, sizeof *t->a);
    t->b = calloc(n, sizeof *t->b);
    t->scale = calloc(n, sizeof *t->scale);
    t->norm = calloc((size_t)(2 * hp->n_layer + 1), sizeof *t->norm);
    if (!t->a || !t->b || !t->scale || !t->norm) return tl_err(TL_ERR_NOMEM, "lora train: out of memory");
    t->dev = TT_CPU;
    if ((s = frozen_all(t, TT_CPU))) return s;
    tt_model_config *k = &t->reg.cfg;
    *k = tt_model_config_default(TT_ARCH_LLAMA, hp->n_vocab, hp->n_ctx_train, hp->n_embd, hp->n_layer, hp->n_head);
    k->kv_heads = hp->n_head_kv;
    k->ffn = hp->n_ff;
    k->norm_eps = hp->norm_eps;
    k->rope_theta = hp->rope_base;
    int64_t e = hp->n_embd;
    for (int i = 0; i <= 2 * hp->n_layer; i++) {
        const tl_tensor *src = i == 2 * hp->n_layer ? &m->output_norm
                               : i % 2                ? &m->layers[i / 2].ffn_norm
                                                      : &m->layers[i / 2].attn_norm;
        if (!(t->norm[i] = tt_new(TT_F32, 1, &e))) return tl_err(TL_ERR_NOMEM, "lora train: out of memory");
        memcpy(tt_data(t->norm[i]), src->data, (size_t)e * sizeof(float));
    }
    return TL_OK;
}

/* Register pair (layer, w) of rank r; A and B zeroed. */
static tl_status add_pair(lora_trainee *t, int layer, lora_wid w, int32_t r, float scale) {
    int64_t n_in, n_out;
    if (!lora_base_shape(t->m, layer, w, &n_in, &n_out))
        return tl_err(TL_ERR_FORMAT, "lora train: the model has no blk.%d.%s.weight", layer, lora_wid_gguf(w));
    char nm[96];
    int64_t sa[2] = {r, n_in}, sb[2] = {n_out, r};
    size_t i = (size_t)layer * LORA_W_COUNT + w;
    snprintf(nm, sizeof nm, "blk.%d.%s.weight.lora_a", layer, lora_wid_gguf(w));
    t->a[i] = tt_registry_add(&t->reg.params, nm, 2, sa, true, true);
    snprintf(nm, sizeof nm, "blk.%d.%s.weight.lora_b", layer, lora_wid_gguf(w));
    t->b[i] = tt_registry_add(&t->reg.params, nm, 2, sb, true, true);
    if (!t->a[i] || !t->b[i]) return tl_err(TL_ERR_NOMEM, "lora train: out of memory");
    t->scale[i] = scale;
    return TL_OK;
}

tl_status lora_train_init(lora_trainee *t, const tl_model *m, const lora_train_config *cfg) {
    tl_status s = trainee_alloc(t, m);
    if (s) {
        lora_train_free(t);
        return s;
    }
    t->cfg = *cfg;
    if (cfg->rank < 1 || cfg->rank > 65536 || !(cfg->alpha > 0) || !cfg->targets)
        s = tl_err(TL_ERR_INVALID, "lora train: rank %d, alpha %g, targets 0x%x (rank 1..65536, alpha > 0)",
                   cfg->rank, cfg->alpha, cfg->targets);
    float scale = cfg->rslora ? cfg->alpha / sqrtf((float)cfg->rank) : cfg->alpha / (float)cfg->rank;
    tt_rng rng;
    tt_rng_seed(&rng, cfg->seed);
    for (int l = 0; l < m->hp.n_layer && !s; l++)
        for (int w = 0; w < LORA_W_COUNT && !s; w++) {
            if (!(cfg->targets & (1u << w))) continue;
            if (!(s = add_pair(t, l, (lora_wid)w, cfg->rank, scale)))
                s = tt_init_torch_default(t->a[(size_t)l * LORA_W_COUNT + w], NULL, &rng);
        }
    if (s) lora_train_free(t);
    return s;
}

tl_status lora_train_init_from(lora_trainee *t, const tl_model *m, const tl_lora *l) {
    tl_status s = trainee_alloc(t, m);
    if (!s && !lora_fits(l, m)) s = tl_err_prefix(TL_ERR_INVALID, "lora train: ");
    t->cfg = (lora_train_config){.rank = l->rank_max, .alpha = l->alpha, .rslora = l->rslora};
    for (int layer = 0; layer < m->hp.n_layer && !s; layer++)
        for (int w = 0; w < LORA_W_COUNT && !s; w++) {
            const lora_weight *lw = lora_get(l, layer, (lora_wid)w);
            if (!lw->rank) continue;
            t->cfg.targets |= 1u << w;
            size_t i = (size_t)layer * LORA_W_COUNT + w;
            if (!(s = add_pair(t, layer, (lora_wid)w, lw->rank, lw->scale))) {
                memcpy(tt_data(t->a[i]), lw->a, (size_t)lw->rank * (size_t)lw->n_in * sizeof(float));
                memcpy(tt_data(t->b[i]), lw->b, (size_t)lw->rank * (size_t)lw->n_out * sizeof(float));
            }
        }
    if (s) lora_train_free(t);
    return s;
}

void lora_train_free(lora_trainee *t) {
    if (t->norm && t->m)
        for (int i = 0; i <= 2 * t->m->hp.n_layer; i++) tt_free(t->norm[i]);
    if (t->w && t->m)
        for (size_t i = 0; i <= (size_t)t->m->hp.n_layer * LORA_W_COUNT; i++) tt_frozen_free(t->w[i]);
    free(t->w);
    tt_registry_free(&t->reg.params);
    free(t->a);
    free(t->b);
    free(t->scale);
    free(t->norm);
    memset(t, 0, sizeof *t);
}

tl_status lora_train_to(lora_trainee *t, tt_device dev) {
    if (dev == t->dev) return TL_OK;
    tl_status s = frozen_all(t, dev);
    if (s) return s;
    for (int i = 0; i <= 2 * t->m->hp.n_layer && !s; i++) s = tt_tensor_move(t->norm[i], dev);
    if (!s) s = tt_model_to(&t->reg, dev);
    if (s) { /* back where it was, whole (the error stays the move's) */
        s = tl_err_prefix(s, "lora train: to %s: ", tt_device_name(dev));
        frozen_all(t, t->dev);
        for (int i = 0; i <= 2 * t->m->hp.n_layer; i++) tt_tensor_move(t->norm[i], t->dev);
        tt_model_to(&t->reg, t->dev);
        return s;
    }
    t->dev = dev;
    return TL_OK;
}

/* h [..., n_in] -> W h + s * B (A h) */
static tt_tensor *proj(tt_ctx *c, const lora_trainee *t, int l, lora_wid w, tt_tensor *h) {
    size_t i = (size_t)l * LORA_W_COUNT + w;
    tt_tensor *y = tt_linear_frozen(c, h, t->w[i]);
    if (!t->a[i]) return y;
    tt_tensor *d = tt_linear(c, tt_linear(c, h, t->a[i], NULL), t->b[i], NULL);
    return tt_add(c, y, tt_scale(c, d, t->scale[i]));
}

/* The rows of ids, gathered on the host from the model's table, on dev. */
static tt_tensor *embed(tt_ctx *c, const tl_model *m, tt_device dev, const int32_t *ids, int64_t B, int64_t T) {
    int64_t e = m->hp.n_embd, sh[3] = {B, T, e};
    tt_tensor *x = tt_zeros(c, TT_F32, 3, sh);
    if (!x) return NULL;
    size_t row = tl_row_bytes(m->tok_embd.type, e);
    for (int64_t i = 0; i < B * T; i++) {
        if (ids[i] < 0 || ids[i] >= m->hp.n_vocab) {
            tl_err(TL_ERR_INVALID, "lora train: token %d at %lld is outside the vocabulary (%d)", ids[i], (long long)i,
                   m->hp.n_vocab);
            return NULL;
        }
        if (quant_dequantize(m->tok_embd.type, (const uint8_t *)m->tok_embd.data + (size_t)ids[i] * row,
                             (float *)tt_data(x) + i * e, e))
            return NULL;
    }
    return tt_to_device(c, x, dev);
}

tt_tensor *lora_train_forward(tt_ctx *c, lora_trainee *t, const int32_t *ids, int64_t B, int64_t T) {
    const llm_hparams *hp = &t->m->hp;
    if (B < 1 || T < 1 || T > hp->n_ctx_train) {
        tl_err(TL_ERR_INVALID, "lora train: forward of %lld x %lld tokens (context %d)", (long long)B, (long long)T,
               hp->n_ctx_train);
        return NULL;
    }
    const int64_t H = hp->n_head, Hkv = hp->n_head_kv, D = hp->head_dim;
    int perm[4] = {0, 2, 1, 3};
    int64_t sq[4] = {B, T, H, D}, skv[4] = {B, T, Hkv, D}, sy[3] = {B, T, H * D};
    tt_tensor *x = embed(c, t->m, t->dev, ids, B, T);
    for (int l = 0; l < hp->n_layer; l++) {
        tt_tensor *h = tt_rmsnorm(c, x, t->norm[2 * l], hp->norm_eps);
        tt_tensor *q = tt_rope(c, tt_reshape(c, proj(c, t, l, LORA_W_Q, h), 4, sq), 0, hp->rope_base);
        tt_tensor *k = tt_rope(c, tt_reshape(c, proj(c, t, l, LORA_W_K, h), 4, skv), 0, hp->rope_base);
        tt_tensor *v = tt_reshape(c, proj(c, t, l, LORA_W_V, h), 4, skv);
        tt_tensor *y = tt_attention(c, tt_permute(c, q, perm), tt_permute(c, k, perm), tt_permute(c, v, perm), true,
                                    hp->att_scale);
        y = tt_reshape(c, tt_permute(c, y, perm), 3, sy);
        x = tt_add(c, x, proj(c, t, l, LORA_W_O, y));
        h = tt_rmsnorm(c, x, t->norm[2 * l + 1], hp->norm_eps);
        tt_tensor *g = tt_mul(c, tt_silu(c, proj(c, t, l, LORA_W_GATE, h)), proj(c, t, l, LORA_W_UP, h));
        x = tt_add(c, x, proj(c, t, l, LORA_W_DOWN, g));
    }
    x = tt_rmsnorm(c, x, t->norm[2 * hp->n_layer], hp->norm_eps);
    return tt_linear_frozen(c, x, t->w[(size_t)hp->n_layer * LORA_W_COUNT]);
}

tt_tensor *lora_train_loss(tt_ctx *c, lora_trainee *t, const int32_t *ids, const int32_t *targets, int64_t B,
                           int64_t T) {
    int64_t sh[2] = {B * T, t->m->hp.n_vocab};
    return tt_cross_entropy(c, tt_reshape(c, lora_train_forward(c, t, ids, B, T), 2, sh), targets, -100);
}

/* One alpha for the file when every pair's s * r agrees; else 0 (llama.cpp:
 * s = the user's scale) with s folded into B. */
static float export_alpha(const lora_trainee *t) {
    float alpha = -1;
    for (size_t i = 0; i < (size_t)t->m->hp.n_layer * LORA_W_COUNT; i++) {
        if (!t->a[i]) continue;
        float al = t->scale[i] * (float)t->a[i]->shape[0];
        if (alpha < 0) alpha = al;
        else if (fabsf(al - alpha) > 1e-6f * fabsf(alpha)) return 0;
    }
    return alpha > 0 ? alpha : 0;
}

/* x's values on the host: its own, or a copy made into *keep (freed by the
 * caller after the write). */
static const float *host_values(const tt_tensor *x, tt_tensor **keep) {
    if (tt_device_of(x) == TT_CPU) return tt_data(x);
    if (!(*keep = tt_new(TT_F32, x->ndim, x->shape))) {
        tl_err(TL_ERR_NOMEM, "lora train: out of memory");
        return NULL;
    }
    return tt_copy_across(*keep, x) ? NULL : tt_data(*keep);
}

tl_status lora_train_export(const lora_trainee *t, const char *path, const char *name) {
    gguf_writer *w;
    tl_status s = gguf_writer_init(&w);
    if (s) return s;
    const float alpha = export_alpha(t);
    const size_t n = (size_t)t->m->hp.n_layer * LORA_W_COUNT;
    float **folded = calloc(n, sizeof *folded);
    tt_tensor **host = calloc(2 * n, sizeof *host);
    if (!folded || !host) s = tl_err(TL_ERR_NOMEM, "lora train: out of memory");
    if (!s) s = gguf_writer_set_str(w, "general.architecture", llm_arch_name(t->m->arch));
    if (!s) s = gguf_writer_set_str(w, "general.type", "adapter");
    if (!s) s = gguf_writer_set_str(w, "general.name", name ? name : "tallow finetune");
    if (!s) s = gguf_writer_set_str(w, "adapter.type", "lora");
    if (!s) s = gguf_writer_set_f32(w, "adapter.lora.alpha", alpha);
    for (size_t i = 0; i < n && !s; i++) {
        if (!t->a[i]) continue;
        const tt_tensor *A = t->a[i], *B = t->b[i];
        char nm[96];
        int64_t nea[2] = {A->shape[1], A->shape[0]}, neb[2] = {B->shape[1], B->shape[0]};
        const float *ad = host_values(A, &host[2 * i]), *bd = host_values(B, &host[2 * i + 1]);
        if (!ad || !bd) {
            s = tl_err_prefix(TL_ERR_IO, "lora train: export: ");
            break;
        }
        if (alpha == 0) { /* fold s into B */
            size_t nb = (size_t)tt_numel(B);
            if (!(folded[i] = malloc(nb * sizeof(float)))) {
                s = tl_err(TL_ERR_NOMEM, "lora train: out of memory");
                break;
            }
            for (size_t k = 0; k < nb; k++) folded[i][k] = bd[k] * t->scale[i];
            bd = folded[i];
        }
        snprintf(nm, sizeof nm, "blk.%d.%s.weight.lora_a", (int)(i / LORA_W_COUNT), lora_wid_gguf((lora_wid)(i % LORA_W_COUNT)));
        s = gguf_writer_add_tensor(w, nm, TL_TYPE_F32, 2, nea, ad, (size_t)tt_numel(A) * sizeof(float));
        snprintf(nm, sizeof nm, "blk.%d.%s.weight.lora_b", (int)(i / LORA_W_COUNT), lora_wid_gguf((lora_wid)(i % LORA_W_COUNT)));
        if (!s) s = gguf_writer_add_tensor(w, nm, TL_TYPE_F32, 2, neb, bd, (size_t)tt_numel(B) * sizeof(float));
    }
    if (!s) s = gguf_writer_write(w, path);
    gguf_writer_free(w);
    for (size_t i = 0; folded && i < n; i++) free(folded[i]);
    for (size_t i = 0; host && i < 2 * n; i++) tt_free(host[i]);
    free(folded);
    free(host);
    return s;
}
