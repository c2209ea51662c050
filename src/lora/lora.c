/* lora/lora: what both adapter readers share: the weight-id names, the check
 * of each pair against the base model, the adapter's lifetime, and the
 * public load/free/info entry points (a directory is read as PEFT, a file
 * as GGUF).
 * Owns: tl_lora and its A/B copies. Calls: llm/model (shapes), lora readers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "llm/model.h"
#include "lora/lora.h"

static const char *const wid_gguf[LORA_W_COUNT] = {"attn_q",      "attn_k",   "attn_v",  "attn_output",
                                                    "ffn_gate",    "ffn_up",   "ffn_down"};
static const char *const wid_hf[LORA_W_COUNT] = {"q_proj", "k_proj", "v_proj", "o_proj",
                                                  "gate_proj", "up_proj", "down_proj"};

const char *lora_wid_gguf(lora_wid w) { return (unsigned)w < LORA_W_COUNT ? wid_gguf[w] : "?"; }
const char *lora_wid_hf(lora_wid w) { return (unsigned)w < LORA_W_COUNT ? wid_hf[w] : "?"; }

static const tl_tensor *base_tensor(const tl_model *m, int layer, lora_wid w) {
    if (layer < 0 || layer >= m->hp.n_layer) return NULL;
    const llm_layer *L = &m->layers[layer];
    const tl_tensor *t[LORA_W_COUNT] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
    return (unsigned)w < LORA_W_COUNT && t[w]->data ? t[w] : NULL;
}

bool lora_base_shape(const tl_model *m, int layer, lora_wid w, int64_t *n_in, int64_t *n_out) {
    const tl_tensor *t = base_tensor(m, layer, w);
    if (!t) return false;
    *n_in = t->ne[0];
    *n_out = t->ne[1];
    return true;
}

bool lora_parse_gguf_name(const char *name, size_t len, int *layer, lora_wid *w) {
    char buf[96];
    if (len >= sizeof buf || len < 4 || memcmp(name, "blk.", 4)) return false;
    memcpy(buf, name, len);
    buf[len] = 0;
    const char *p = buf + 4;
    if (*p < '0' || *p > '9') return false;
    long il = 0;
    while (*p >= '0' && *p <= '9' && il < 1000000) il = il * 10 + (*p++ - '0');
    if (*p++ != '.') return false;
    for (int i = 0; i < LORA_W_COUNT; i++) {
        size_t n = strlen(wid_gguf[i]);
        if (!strncmp(p, wid_gguf[i], n) && !strcmp(p + n, ".weight")) {
            *layer = (int)il;
            *w = (lora_wid)i;
            return true;
        }
    }
    return false;
}

tl_status lora_alloc(const tl_model *m, tl_lora **out) {
    *out = NULL;
    if (m->arch == LLM_ARCH_GPT2)
        return tl_err(TL_ERR_UNSUPPORTED, "lora: adapters for gpt2 (fused attn_qkv) are not supported");
    tl_lora *l = calloc(1, sizeof *l);
    if (!l) return tl_err(TL_ERR_NOMEM, "lora: out of memory");
    l->n_layer = m->hp.n_layer;
    l->w = calloc((size_t)l->n_layer * LORA_W_COUNT, sizeof *l->w);
    if (!l->w) {
        free(l);
        return tl_err(TL_ERR_NOMEM, "lora: out of memory");
    }
    snprintf(l->arch, sizeof l->arch, "%s", llm_arch_name(m->arch));
    *out = l;
    return TL_OK;
}

tl_status lora_set_weight(tl_lora *l, const tl_model *m, int layer, lora_wid w, int32_t rank, int64_t n_in,
                          int64_t n_out, float *a, float *b, float scale, const char *what) {
    tl_status s = TL_OK;
    int64_t bi, bo;
    if (!lora_base_shape(m, layer, w, &bi, &bo)) {
        s = tl_err(TL_ERR_FORMAT, "lora: %s: the model has no weight blk.%d.%s.weight", what, layer,
                   lora_wid_gguf(w));
    } else if (n_in != bi || n_out != bo) {
        s = tl_err(TL_ERR_FORMAT,
                   "lora: %s: adapts a [%lld in, %lld out] weight, but blk.%d.%s.weight is [%lld in, %lld out]",
                   what, (long long)n_in, (long long)n_out, layer, lora_wid_gguf(w), (long long)bi, (long long)bo);
    } else if (rank < 1 || rank > 65536) {
        s = tl_err(TL_ERR_FORMAT, "lora: %s: rank %d outside 1..65536", what, rank);
    } else if (!isfinite(scale)) {
        s = tl_err(TL_ERR_FORMAT, "lora: %s: scale is not finite", what);
    } else if (l->w[(int64_t)layer * LORA_W_COUNT + w].rank) {
        s = tl_err(TL_ERR_FORMAT, "lora: %s: blk.%d.%s.weight is adapted twice", what, layer, lora_wid_gguf(w));
    }
    if (s) {
        free(a);
        free(b);
        return s;
    }
    for (int64_t i = 0; i < (int64_t)rank * n_in; i++)
        if (!isfinite(a[i])) s = tl_err(TL_ERR_FORMAT, "lora: %s: lora_a holds a non-finite value", what);
    for (int64_t i = 0; !s && i < (int64_t)rank * n_out; i++)
        if (!isfinite(b[i])) s = tl_err(TL_ERR_FORMAT, "lora: %s: lora_b holds a non-finite value", what);
    if (s) {
        free(a);
        free(b);
        return s;
    }
    lora_weight *lw = &l->w[(int64_t)layer * LORA_W_COUNT + w];
    *lw = (lora_weight){.rank = rank, .n_in = n_in, .n_out = n_out, .a = a, .b = b, .scale = scale};
    if (!l->n_weights || rank < l->rank_min) l->rank_min = rank;
    if (rank > l->rank_max) l->rank_max = rank;
    l->n_weights++;
    return TL_OK;
}

bool lora_fits(const tl_lora *l, const tl_model *m) {
    if (l->n_layer != m->hp.n_layer || strcmp(l->arch, llm_arch_name(m->arch))) {
        tl_err(TL_ERR_INVALID, "lora: adapter '%s' is for a %d-layer %s model, this one is a %d-layer %s", l->name,
               l->n_layer, l->arch, m->hp.n_layer, llm_arch_name(m->arch));
        return false;
    }
    for (int64_t i = 0; i < (int64_t)l->n_layer * LORA_W_COUNT; i++) {
        const lora_weight *lw = &l->w[i];
        int64_t n_in, n_out;
        int layer = (int)(i / LORA_W_COUNT);
        lora_wid w = (lora_wid)(i % LORA_W_COUNT);
        if (lw->rank && (!lora_base_shape(m, layer, w, &n_in, &n_out) || n_in != lw->n_in || n_out != lw->n_out)) {
            tl_err(TL_ERR_INVALID, "lora: adapter '%s' does not fit this model: blk.%d.%s.weight differs", l->name,
                   layer, lora_wid_gguf(w));
            return false;
        }
    }
    return true;
}

void tl_lora_free(tl_lora *l) {
    if (!l) return;
    for (int64_t i = 0; l->w && i < (int64_t)l->n_layer * LORA_W_COUNT; i++) {
        free(l->w[i].a);
        free(l->w[i].b);
    }
    free(l->w);
    free(l);
}

tl_status tl_lora_load(const tl_model *m, const char *path, tl_lora **out) {
    if (!out) return tl_err(TL_ERR_INVALID, "lora: out is NULL");
    *out = NULL;
    if (!m || !path) return tl_err(TL_ERR_INVALID, "lora: model or path is NULL");
    struct stat sb;
    if (stat(path, &sb)) return tl_err(TL_ERR_IO, "lora: cannot open '%s'", path);
    tl_lora *l;
    tl_status s = lora_alloc(m, &l);
    if (s) return s;
    bool dir = S_ISDIR(sb.st_mode);
    s = dir ? lora_load_peft(m, path, l) : lora_load_gguf(m, path, l);
    if (!s && !l->n_weights) s = tl_err(TL_ERR_FORMAT, "lora: '%s' adapts no weight", path);
    if (s) {
        tl_lora_free(l);
        return s;
    }
    snprintf(l->format, sizeof l->format, "%s", dir ? "peft" : "gguf");
    const char *base = strrchr(path, '/');
    size_t n = strlen(path);
    while (base && base[1] == 0 && base > path) { /* "dir/" names dir */
        n = (size_t)(base - path);
        const char *p = base - 1;
        while (p > path && *p != '/') p--;
        base = *p == '/' ? p : NULL;
    }
    const char *start = base ? base + 1 : path;
    snprintf(l->name, sizeof l->name, "%.*s", (int)(path + n - start), start);
    *out = l;
    return TL_OK;
}

void tl_lora_get_info(const tl_lora *l, tl_lora_info *out) {
    memset(out, 0, sizeof *out);
    if (!l) return;
    out->name = l->name;
    out->format = l->format;
    out->n_weights = l->n_weights;
    out->rank_min = l->rank_min;
    out->rank_max = l->rank_max;
    out->alpha = l->alpha;
    out->rslora = l->rslora;
}

tl_status tl_lora_merge(const tl_model *m, const tl_lora_use *u, int32_t n, const char *out_path, const char *type,
                        int32_t n_threads) {
    if (!m || !out_path || (n && !u)) return tl_err(TL_ERR_INVALID, "lora merge: NULL argument");
    return lora_merge(m, u, n, out_path, type, n_threads);
}
