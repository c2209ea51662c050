/* convert/convert: the HF -> GGUF conversion itself: which HF tensor becomes
 * which GGUF tensor, in which type and layout, and the metadata keys.
 *
 * Layout facts (llama.cpp's convert_hf_to_gguf.py is the reference):
 *  - a PyTorch [rows, cols] weight is GGUF ne = [cols, rows] with the same
 *    bytes (GGUF lists the fastest dimension first);
 *  - llama: the rows of q_proj / k_proj (and their biases) are permuted per
 *    head so the pairs HF's half-split RoPE rotates, (i, i + d/2), become
 *    rows (2i, 2i + 1): llama.cpp runs llama with interleaved RoPE. qwen2,
 *    qwen3 and gemma3 use NeoX RoPE and are written unpermuted;
 *  - llama3 rope scaling becomes rope_freqs.weight [head_dim/2]: the divisor
 *    of each base frequency (1, factor, or the smoothed value between);
 *  - gemma3: every *norm.weight is stored as 1 + w (HF's Gemma RMSNorm
 *    multiplies by 1 + w; llama.cpp's files and tallow's forward multiply by
 *    the stored value), post_attention_layernorm is post_attention_norm and
 *    pre_feedforward_layernorm is ffn_norm, the output is tied to
 *    token_embd, and embeddings are stored unscaled;
 *  - types: 1-d tensors, *_norm.weight and anything not named *.weight
 *    stay F32; the other weights take the requested type, falling back when
 *    the row length is not a multiple of the type's block (llama.cpp's
 *    converter: Q8_0 -> F16; K-quants as `tallow quantize` falls back).
 * Each output tensor is produced by a fill callback while the writer
 * streams the file: source rows (F32/F16/BF16, mmapped) are converted to
 * float, adjusted, and quantized, rows split across the thread pool.
 * Owns: nothing past the call. Calls: convert (config, weights, tokenizer), io, quant, base. */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/threadpool.h"
#include "convert/convert.h"
#include "convert/cvt_internal.h"
#include "quant/quant.h"

static const struct {
    const char *name;
    tl_type type;
    uint32_t ftype;
} cvt_types[] = {
    {"f32", TL_TYPE_F32, 0},     {"f16", TL_TYPE_F16, 1},     {"bf16", TL_TYPE_BF16, 32},
    {"q8_0", TL_TYPE_Q8_0, 7},   {"q4_0", TL_TYPE_Q4_0, 2},   {"q4_1", TL_TYPE_Q4_1, 3},
    {"q5_0", TL_TYPE_Q5_0, 8},   {"q5_1", TL_TYPE_Q5_1, 9},   {"q2_k", TL_TYPE_Q2_K, 10},
    {"q3_k", TL_TYPE_Q3_K, 11},  {"q4_k", TL_TYPE_Q4_K, 14},  {"q5_k", TL_TYPE_Q5_K, 16},
    {"q6_k", TL_TYPE_Q6_K, 18},  {"iq4_nl", TL_TYPE_IQ4_NL, 25}, {"iq4_xs", TL_TYPE_IQ4_XS, 30},
};
#define CVT_N_TYPES (sizeof cvt_types / sizeof cvt_types[0])

bool cvt_type_from_name(const char *name, tl_type *type, uint32_t *file_type) {
    char low[16];
    size_t n = strlen(name);
    if (n >= sizeof low) return false;
    for (size_t i = 0; i <= n; i++) low[i] = (char)tolower((unsigned char)name[i]);
    for (size_t i = 0; i < CVT_N_TYPES; i++)
        if (!strcmp(low, cvt_types[i].name)) {
            *type = cvt_types[i].type;
            *file_type = cvt_types[i].ftype;
            return true;
        }
    return false;
}

const char *cvt_type_names(void) {
    return "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs";
}

/* ---- the plan --------------------------------------------------------------- */
typedef struct cvt_run cvt_run;

typedef struct cvt_job {
    cvt_run *run;
    char name[96];            /* GGUF name */
    char src_name[160];       /* HF name */
    const char *src_file;
    const st_tensor *src;     /* NULL for generated tensors (data set) */
    tl_type src_type, dst;
    int64_t ne[2];            /* GGUF order: ne[0] row length, ne[1] rows */
    uint32_t n_dims;
    int64_t perm_heads;       /* > 0: llama Q/K row permutation with this many heads */
    bool plus_one;            /* gemma norms: store 1 + w */
    const float *data;        /* generated tensor (F32) */
    uint8_t *out;
    size_t dst_row, src_row;
    atomic_int failed;
} cvt_job;

struct cvt_run {
    const cvt_params *p;
    tl_threadpool *tp;
    float **scratch; /* [n_threads][max_ne0] */
    int n_jobs, done;
    double mb_out;
};

static void cvt_log(const cvt_params *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void cvt_log(const cvt_params *p, const char *fmt, ...) {
    if (!p->log) return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    p->log(p->log_ctx, buf);
}

static void cvt_rows(void *arg, int ith, int nth) {
    cvt_job *j = arg;
    int64_t nrows = j->ne[1], r0 = nrows * ith / nth, r1 = nrows * (ith + 1) / nth, ne0 = j->ne[0];
    float *buf = j->run->scratch[ith];
    const uint8_t *src = j->src->data;
    int64_t d = j->perm_heads > 0 ? nrows / j->perm_heads : 0;
    for (int64_t r = r0; r < r1; r++) {
        int64_t sr = r;
        if (d) { /* output row 2k+h of a head comes from input row h*d/2 + k */
            int64_t head = r / d, i = r % d;
            sr = head * d + (i % 2) * (d / 2) + i / 2;
        }
        if (quant_dequantize(j->src_type, src + (size_t)sr * j->src_row, buf, ne0) != TL_OK) {
            atomic_store(&j->failed, 1);
            return;
        }
        if (j->plus_one)
            for (int64_t k = 0; k < ne0; k++) buf[k] += 1.0f;
        if (quant_quantize(j->dst, buf, j->out + (size_t)r * j->dst_row, ne0) != TL_OK) {
            atomic_store(&j->failed, 1);
            return;
        }
    }
}

static tl_status cvt_fill(void *ctx, void *dst, size_t size) {
    cvt_job *j = ctx;
    if (j->data) {
        memcpy(dst, j->data, size);
    } else if (j->n_dims == 1 && j->perm_heads) { /* a permuted bias: elements move, one F32 row */
        int64_t n = j->ne[0], d = n / j->perm_heads;
        float *o = dst;
        for (int64_t r = 0; r < n; r++) {
            int64_t head = r / d, i = r % d, sr = head * d + (i % 2) * (d / 2) + i / 2;
            if (quant_dequantize(j->src_type, (const uint8_t *)j->src->data + (size_t)sr * tl_row_bytes(j->src_type, 1),
                                 &o[r], 1) != TL_OK)
                return tl_err(TL_ERR_INVALID, "convert: tensor '%s': cannot read %s", j->name, tl_type_name(j->src_type));
        }
    } else if (j->src_type == j->dst && !j->perm_heads && !j->plus_one) {
        memcpy(dst, j->src->data, size); /* same type, same layout */
    } else {
        j->out = dst;
        atomic_store(&j->failed, 0);
        tl_threadpool_run(j->run->tp, cvt_rows, j);
        if (atomic_load(&j->failed))
            return tl_err(TL_ERR_INVALID, "convert: tensor '%s' (%s): %s -> %s failed", j->name, j->src_name,
                          tl_type_name(j->src_type), tl_type_name(j->dst));
    }
    cvt_run *run = j->run;
    run->done++;
    run->mb_out += (double)size / 1e6;
    cvt_log(run->p, "[%4d/%d] %-32s %6lld x %-6lld %-5s -> %-6s %9.2f MB", run->done, run->n_jobs, j->name,
            (long long)j->ne[0], (long long)j->ne[1], j->data ? "f32" : tl_type_name(j->src_type),
            tl_type_name(j->dst), (double)size / 1e6);
    return TL_OK;
}

static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

typedef struct cvt_plan {
    cvt_job *jobs;
    int n, cap;
    float *rope_freqs; /* [head_dim/2] */
} cvt_plan;

static tl_status plan_add(cvt_plan *pl, cvt_weights *ws, const cvt_params *p, const char *gname, const char *hname,
                          int64_t ne0, int64_t ne1, bool optional, int64_t perm_heads, bool plus_one) {
    const char *file;
    const st_tensor *t = cvt_weights_find(ws, hname, &file);
    if (!t) {
        if (optional) return TL_OK;
        return tl_err(TL_ERR_NOT_FOUND, "convert: tensor '%s' (for %s) is missing from the checkpoint", hname, gname);
    }
    cvt_weights_use(ws, hname);
    /* HF shape [ne1, ne0] (2-d) or [ne0] (1-d) */
    bool ok = ne1 ? (t->ndim == 2 && t->shape[0] == ne1 && t->shape[1] == ne0) : (t->ndim == 1 && t->shape[0] == ne0);
    if (!ok) {
        char got[96] = "";
        int o = 0;
        for (int i = 0; i < t->ndim && o < 80; i++) o += snprintf(got + o, sizeof got - (size_t)o, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
        if (ne1)
            return tl_err(TL_ERR_FORMAT, "convert: tensor '%s' in %s has shape [%s], config.json implies [%lld, %lld]",
                          hname, file, got, (long long)ne1, (long long)ne0);
        return tl_err(TL_ERR_FORMAT, "convert: tensor '%s' in %s has shape [%s], config.json implies [%lld]", hname,
                      file, got, (long long)ne0);
    }
    tl_type st;
    if (!strcmp(t->dtype, "F32")) st = TL_TYPE_F32;
    else if (!strcmp(t->dtype, "F16")) st = TL_TYPE_F16;
    else if (!strcmp(t->dtype, "BF16")) st = TL_TYPE_BF16;
    else
        return tl_err(TL_ERR_UNSUPPORTED, "convert: tensor '%s' in %s has dtype %s (F32, F16, BF16 supported)", hname,
                      file, t->dtype);
    if (pl->n == pl->cap) {
        int cap = pl->cap ? pl->cap * 2 : 64;
        cvt_job *nj = realloc(pl->jobs, (size_t)cap * sizeof *nj);
        if (!nj) return tl_err(TL_ERR_NOMEM, "convert: out of memory");
        pl->jobs = nj;
        pl->cap = cap;
    }
    cvt_job *j = &pl->jobs[pl->n++];
    memset(j, 0, sizeof *j);
    snprintf(j->name, sizeof j->name, "%s", gname);
    snprintf(j->src_name, sizeof j->src_name, "%s", hname);
    j->src_file = file;
    j->src = t;
    j->src_type = st;
    j->ne[0] = ne0;
    j->ne[1] = ne1 ? ne1 : 1;
    j->n_dims = ne1 ? 2 : 1;
    j->perm_heads = perm_heads;
    j->plus_one = plus_one;
    /* type rule (llama.cpp): 1-d, norms, non-weights stay F32 */
    tl_type dst = p->type;
    if (j->n_dims <= 1 || ends_with(gname, "_norm.weight") || !ends_with(gname, ".weight")) dst = TL_TYPE_F32;
    else dst = quant_row_fallback(dst, ne0); /* as `tallow quantize` falls back */
    j->dst = dst;
    j->src_row = tl_row_bytes(st, ne0);
    j->dst_row = tl_row_bytes(dst, ne0);
    return TL_OK;
}

/* Llama-3 rope scaling divisors, as llama.cpp's converter computes them. */
static float *llama3_rope_freqs(const cvt_hparams *hp) {
    int64_t d = hp->head_dim, n = d / 2;
    float *f = malloc((size_t)n * sizeof *f);
    if (!f) return NULL;
    double base = hp->rope_theta > 0 ? hp->rope_theta : 10000.0;
    double lo_wl = hp->rs_orig_ctx / hp->rs_low, hi_wl = hp->rs_orig_ctx / hp->rs_high;
    for (int64_t i = 0; i < n; i++) {
        double freq = 1.0 / pow(base, (double)(2 * i) / (double)d);
        double wl = 2.0 * M_PI / freq;
        if (wl < hi_wl) f[i] = 1.0f;
        else if (wl > lo_wl) f[i] = (float)hp->rs_factor;
        else {
            double smooth = (hp->rs_orig_ctx / wl - hp->rs_low) / (hp->rs_high - hp->rs_low);
            f[i] = (float)(1.0 / ((1.0 - smooth) / hp->rs_factor + smooth));
        }
    }
    return f;
}

static tl_status build_plan(cvt_plan *pl, cvt_weights *ws, const cvt_params *p, const cvt_hparams *hp,
                            int64_t n_vocab) {
    tl_status s;
    int64_t E = hp->n_embd, D = hp->head_dim, F = hp->n_ff, H = hp->n_head, KV = hp->n_head_kv;
    bool gemma = hp->arch == CVT_ARCH_GEMMA3, llama = hp->arch == CVT_ARCH_LLAMA;
    /* gemma3 checkpoints may carry more embedding rows than tokens: llama.cpp
     * keeps the first n_vocab */
    const st_tensor *emb = cvt_weights_find(ws, "model.embed_tokens.weight", NULL);
    int64_t emb_rows = n_vocab;
    if (gemma && emb && emb->ndim == 2 && emb->shape[0] > n_vocab) emb_rows = emb->shape[0];
    if ((s = plan_add(pl, ws, p, "token_embd.weight", "model.embed_tokens.weight", E, emb_rows, false, 0, false)))
        return s;
    if (emb_rows != n_vocab) pl->jobs[pl->n - 1].ne[1] = n_vocab; /* rows are contiguous: keep the first n_vocab */
    if (hp->rope_llama3) {
        if (!(pl->rope_freqs = llama3_rope_freqs(hp))) return tl_err(TL_ERR_NOMEM, "convert: out of memory");
        if (pl->n == pl->cap) {
            cvt_job *nj = realloc(pl->jobs, (size_t)(pl->cap + 16) * sizeof *nj);
            if (!nj) return tl_err(TL_ERR_NOMEM, "convert: out of memory");
            pl->jobs = nj;
            pl->cap += 16;
        }
        cvt_job *j = &pl->jobs[pl->n++];
        memset(j, 0, sizeof *j);
        snprintf(j->name, sizeof j->name, "rope_freqs.weight");
        snprintf(j->src_name, sizeof j->src_name, "(rope_scaling)");
        j->data = pl->rope_freqs;
        j->src_type = j->dst = TL_TYPE_F32;
        j->ne[0] = D / 2;
        j->ne[1] = 1;
        j->n_dims = 1;
        j->dst_row = (size_t)(D / 2) * sizeof(float);
    }
    for (int64_t L = 0; L < hp->n_layer; L++) {
        char g[96], h[160];
#define ADD(gn, hn, ne0, ne1, opt, perm, p1)                                                                       \
    do {                                                                                                           \
        snprintf(g, sizeof g, "blk.%lld.%s", (long long)L, gn);                                                    \
        snprintf(h, sizeof h, "model.layers.%lld.%s", (long long)L, hn);                                           \
        if ((s = plan_add(pl, ws, p, g, h, ne0, ne1, opt, perm, p1))) return s;                                    \
    } while (0)
        ADD("attn_norm.weight", "input_layernorm.weight", E, 0, false, 0, gemma);
        ADD("attn_q.weight", "self_attn.q_proj.weight", E, H * D, false, llama ? H : 0, false);
        ADD("attn_k.weight", "self_attn.k_proj.weight", E, KV * D, false, llama ? KV : 0, false);
        ADD("attn_v.weight", "self_attn.v_proj.weight", E, KV * D, false, 0, false);
        bool need_bias = hp->arch == CVT_ARCH_QWEN2;
        ADD("attn_q.bias", "self_attn.q_proj.bias", H * D, 0, !need_bias, llama ? H : 0, false);
        ADD("attn_k.bias", "self_attn.k_proj.bias", KV * D, 0, !need_bias, llama ? KV : 0, false);
        ADD("attn_v.bias", "self_attn.v_proj.bias", KV * D, 0, !need_bias, 0, false);
        if (hp->arch == CVT_ARCH_QWEN3 || gemma) {
            ADD("attn_q_norm.weight", "self_attn.q_norm.weight", D, 0, false, 0, gemma);
            ADD("attn_k_norm.weight", "self_attn.k_norm.weight", D, 0, false, 0, gemma);
        }
        ADD("attn_output.weight", "self_attn.o_proj.weight", H * D, E, false, 0, false);
        ADD("attn_output.bias", "self_attn.o_proj.bias", E, 0, true, 0, false);
        if (gemma) {
            ADD("post_attention_norm.weight", "post_attention_layernorm.weight", E, 0, false, 0, true);
            ADD("ffn_norm.weight", "pre_feedforward_layernorm.weight", E, 0, false, 0, true);
        } else {
            ADD("ffn_norm.weight", "post_attention_layernorm.weight", E, 0, false, 0, false);
        }
        ADD("ffn_gate.weight", "mlp.gate_proj.weight", E, F, false, 0, false);
        ADD("ffn_up.weight", "mlp.up_proj.weight", E, F, false, 0, false);
        ADD("ffn_down.weight", "mlp.down_proj.weight", F, E, false, 0, false);
        if (gemma) ADD("post_ffw_norm.weight", "post_feedforward_layernorm.weight", E, 0, false, 0, true);
#undef ADD
    }
    if ((s = plan_add(pl, ws, p, "output_norm.weight", "model.norm.weight", E, 0, false, 0, gemma))) return s;
    bool tied = hp->tied_known ? hp->tied : !cvt_weights_find(ws, "lm_head.weight", NULL);
    if (!tied) {
        if ((s = plan_add(pl, ws, p, "output.weight", "lm_head.weight", E, n_vocab, false, 0, false))) return s;
    } else {
        cvt_weights_use(ws, "lm_head.weight"); /* a saved copy of the tied matrix */
    }
    static const char *const ignore[] = {"rotary_emb.inv_freq", NULL};
    const char *stray = cvt_weights_unused(ws, ignore);
    if (stray)
        return tl_err(TL_ERR_UNSUPPORTED, "convert: checkpoint tensor '%s' has no place in a %s GGUF", stray,
                      hp->arch_name);
    return TL_OK;
}

/* llama.cpp's size label: 2 significant digits, K/M/B/T */
static void size_label(double n, char *out, size_t cap) {
    const char *suf = "K";
    double v = n * 1e-3;
    if (n > 1e12) v = n * 1e-12, suf = "T";
    else if (n > 1e9) v = n * 1e-9, suf = "B";
    else if (n > 1e6) v = n * 1e-6, suf = "M";
    char r[32];
    snprintf(r, sizeof r, "%.0f", round(v));
    const char *q = r;
    while (*q == '0') q++;
    int fix = 2 - (int)strlen(q);
    if (fix < 0) fix = 0;
    snprintf(out, cap, "%.*f%s", fix, v, suf);
}

static tl_status write_hparams(gguf_writer *w, const cvt_hparams *hp) {
    char k[128];
    const char *a = hp->arch_name;
    tl_status s = TL_OK;
#define U32(key, v)                                                                                                \
    do {                                                                                                           \
        snprintf(k, sizeof k, "%s." key, a);                                                                       \
        if (!s) s = gguf_writer_set_u32(w, k, (uint32_t)(v));                                                      \
    } while (0)
#define F32(key, v)                                                                                                \
    do {                                                                                                           \
        snprintf(k, sizeof k, "%s." key, a);                                                                       \
        if (!s) s = gguf_writer_set_f32(w, k, (float)(v));                                                         \
    } while (0)
    if (hp->arch == CVT_ARCH_GEMMA3) { /* llama.cpp's Gemma3 order and defaults */
        U32("context_length", hp->n_ctx ? hp->n_ctx : 131072);
        U32("embedding_length", hp->n_embd);
        U32("block_count", hp->n_layer);
        U32("feed_forward_length", hp->n_ff);
        U32("attention.head_count", hp->n_head);
        F32("attention.layer_norm_rms_epsilon", hp->norm_eps >= 0 ? hp->norm_eps : 1e-6);
        U32("attention.key_length", hp->head_dim);
        U32("attention.value_length", hp->head_dim);
        F32("rope.freq_base", hp->rope_theta > 0 ? hp->rope_theta : 1e6);
        U32("attention.sliding_window", hp->sliding_window);
        U32("attention.head_count_kv", hp->n_head_kv);
    } else {
        U32("block_count", hp->n_layer);
        if (hp->n_ctx) U32("context_length", hp->n_ctx);
        U32("embedding_length", hp->n_embd);
        U32("feed_forward_length", hp->n_ff);
        U32("attention.head_count", hp->n_head);
        U32("attention.head_count_kv", hp->n_head_kv);
        if (hp->rope_theta > 0) F32("rope.freq_base", hp->rope_theta);
        if (hp->norm_eps >= 0) F32("attention.layer_norm_rms_epsilon", hp->norm_eps);
        if (hp->has_head_dim) {
            U32("attention.key_length", hp->head_dim);
            U32("attention.value_length", hp->head_dim);
        }
        if (hp->arch == CVT_ARCH_LLAMA) {
            U32("vocab_size", hp->n_vocab);
            U32("rope.dimension_count", hp->head_dim);
        }
    }
    if (hp->rope_linear) {
        snprintf(k, sizeof k, "%s.rope.scaling.type", a);
        if (!s) s = gguf_writer_set_str(w, k, "linear");
        F32("rope.scaling.factor", hp->rs_linear_factor);
    }
#undef U32
#undef F32
    return s;
}

static const char *base_name(const char *path, char *buf, size_t cap) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    size_t st = n;
    while (st > 0 && path[st - 1] != '/') st--;
    snprintf(buf, cap, "%.*s", (int)(n - st), path + st);
    return buf;
}

tl_status cvt_convert(const cvt_params *p) {
    if (!p || !p->hf_dir || !p->out_path) return tl_err(TL_ERR_INVALID, "convert: NULL argument");
    if (!tl_type_get(p->type) || !quant_kernels_ref(p->type))
        return tl_err(TL_ERR_INVALID, "convert: output type %s has no quantizer", tl_type_name(p->type));
    const char *tok_dir = p->tokenizer_dir ? p->tokenizer_dir : p->hf_dir;
    char *cfg_path = cvt_path_join(p->hf_dir, "config.json");
    char *tmp = malloc(strlen(p->out_path) + 5);
    cJSON *cfg = NULL;
    cvt_weights *ws = NULL;
    gguf_writer *w = NULL;
    cvt_plan pl = {0};
    cvt_run run = {.p = p};
    cvt_hparams hp = {0};
    bool have_cfg = false, wrote = false;
    tl_status s = TL_OK;
    if (!cfg_path || !tmp) {
        s = tl_err(TL_ERR_NOMEM, "convert: out of memory");
        goto done;
    }
    sprintf(tmp, "%s.tmp", p->out_path);
    if (cvt_file_exists(cfg_path)) {
        if ((s = cvt_read_json(cfg_path, &cfg)) || (s = cvt_config_parse(cfg, cfg_path, &hp))) goto done;
        have_cfg = true;
    } else if (!p->vocab_only) {
        s = tl_err(TL_ERR_NOT_FOUND, "convert: '%s' is missing (needed for the architecture and sizes)", cfg_path);
        goto done;
    }
    if ((s = gguf_writer_init(&w))) goto done;
    /* general.* */
    char nm[256];
    if ((s = gguf_writer_set_str(w, "general.architecture", have_cfg ? hp.arch_name : "llama")) ||
        (s = gguf_writer_set_str(w, "general.type", "model")) ||
        (s = gguf_writer_set_str(w, "general.name", base_name(p->hf_dir, nm, sizeof nm))))
        goto done;
    int64_t n_tokens = 0;
    if (p->vocab_only) {
        if (have_cfg && (s = write_hparams(w, &hp))) goto done;
        if ((s = cvt_tokenizer_write(w, tok_dir, cfg, have_cfg ? hp.n_vocab : 0, &n_tokens))) goto done;
        if ((s = gguf_writer_set_u32(w, "general.quantization_version", 2))) goto done;
    } else {
        if ((s = cvt_weights_open(p->hf_dir, &ws))) goto done;
        /* tokenizer keys go into a scratch writer first: the token count
         * (config vocab_size, padded) decides the embedding shape */
        gguf_writer *tw = NULL;
        if ((s = gguf_writer_init(&tw))) goto done;
        s = cvt_tokenizer_write(tw, tok_dir, cfg, hp.n_vocab, &n_tokens);
        gguf_writer_free(tw);
        if (s) goto done;
        if ((s = build_plan(&pl, ws, p, &hp, n_tokens))) goto done;
        double n_params = 0;
        for (int i = 0; i < pl.n; i++) n_params += (double)pl.jobs[i].ne[0] * (double)pl.jobs[i].ne[1];
        char lbl[32];
        size_label(n_params, lbl, sizeof lbl);
        if ((s = gguf_writer_set_str(w, "general.size_label", lbl))) goto done;
        if ((s = write_hparams(w, &hp))) goto done;
        if ((s = gguf_writer_set_u32(w, "general.file_type", p->file_type))) goto done;
        if ((s = gguf_writer_set_u32(w, "general.quantization_version", 2))) goto done;
        if ((s = cvt_tokenizer_write(w, tok_dir, cfg, hp.n_vocab, &n_tokens))) goto done;
        /* threads and scratch rows */
        if ((s = tl_threadpool_init(p->n_threads > 0 ? p->n_threads : 1, &run.tp))) goto done;
        int nth = tl_threadpool_size(run.tp);
        int64_t max_ne0 = 1;
        for (int i = 0; i < pl.n; i++)
            if (pl.jobs[i].ne[0] > max_ne0) max_ne0 = pl.jobs[i].ne[0];
        if (!(run.scratch = calloc((size_t)nth, sizeof *run.scratch))) {
            s = tl_err(TL_ERR_NOMEM, "convert: out of memory");
            goto done;
        }
        for (int k = 0; k < nth; k++)
            if (!(run.scratch[k] = malloc((size_t)max_ne0 * sizeof(float)))) {
                s = tl_err(TL_ERR_NOMEM, "convert: out of memory");
                goto done;
            }
        run.n_jobs = pl.n;
        for (int i = 0; i < pl.n && !s; i++) {
            cvt_job *j = &pl.jobs[i];
            j->run = &run;
            int64_t ne[2] = {j->ne[0], j->ne[1]};
            s = gguf_writer_add_tensor_fill(w, j->name, j->dst, j->n_dims, ne, j->dst_row * (size_t)j->ne[1],
                                            cvt_fill, j);
        }
        if (s) goto done;
        cvt_log(p, "convert: %s (%s, %lld layers, %lld tokens, %.0f parameters) -> %s as %s, %d threads, %d tensors",
                p->hf_dir, hp.arch_name, (long long)hp.n_layer, (long long)n_tokens, n_params, p->out_path,
                tl_type_name(p->type), nth, pl.n);
    }
    wrote = true;
    if ((s = gguf_writer_write(w, tmp))) goto done;
    if (rename(tmp, p->out_path) != 0) {
        s = tl_err(TL_ERR_IO, "convert: cannot rename '%s' to '%s'", tmp, p->out_path);
        goto done;
    }
    wrote = false;
    cvt_log(p, "convert: wrote %s (%.2f MB of tensor data)", p->out_path, run.mb_out);
done:
    if (wrote && tmp) remove(tmp);
    if (run.scratch && run.tp)
        for (int k = 0; k < tl_threadpool_size(run.tp); k++) free(run.scratch[k]);
    free(run.scratch);
    if (run.tp) tl_threadpool_free(run.tp);
    free(pl.jobs);
    free(pl.rope_freqs);
    gguf_writer_free(w);
    cvt_weights_free(ws);
    cJSON_Delete(cfg);
    free(cfg_path);
    free(tmp);
    return s;
}
