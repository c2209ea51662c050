/* lora/lora_gguf: read a GGUF LoRA adapter as llama.cpp writes it
 * (convert_lora_to_gguf.py): general.type = "adapter", adapter.type =
 * "lora", general.architecture = the base's, adapter.lora.alpha (float,
 * optional), and for each adapted weight "<name>.lora_a" with ne = [n_in,
 * rank] and "<name>.lora_b" with ne = [rank, n_out], where <name> is the
 * base tensor (blk.N.attn_q.weight ...). B's rows are already in the GGUF
 * model's order (the converter permuted llama's Q/K). s = alpha / rank
 * (llama.cpp's rule; alpha 0 or absent: s = 1).
 * Owns: nothing past the call (the file is closed). Calls: io/gguf, quant. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/gguf.h"
#include "llm/model.h"
#include "lora/lora.h"
#include "quant/quant.h"

static bool kv_str_is(const gguf_file *f, const char *key, const char *want, gguf_str *got) {
    if (gguf_get_str(f, key, got)) return false;
    return got->len == strlen(want) && !memcmp(got->ptr, want, got->len);
}

/* The tensor's values as a malloc'd f32 array (rows of ne[0]). */
static tl_status gguf_floats(const gguf_tensor *t, const char *name, float **out) {
    *out = NULL;
    if (t->type != TL_TYPE_F32 && t->type != TL_TYPE_F16 && t->type != TL_TYPE_BF16 && t->type != TL_TYPE_Q8_0)
        return tl_err(TL_ERR_UNSUPPORTED, "lora: tensor '%s' has type %s (f32, f16, bf16 or q8_0 expected)", name,
                      tl_type_name(t->type));
    size_t n = (size_t)t->ne[0] * (size_t)t->ne[1];
    float *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return tl_err(TL_ERR_NOMEM, "lora: out of memory reading '%s'", name);
    size_t row = tl_row_bytes(t->type, t->ne[0]);
    for (int64_t r = 0; r < t->ne[1]; r++) {
        tl_status s = quant_dequantize(t->type, (const uint8_t *)t->data + (size_t)r * row, v + (size_t)r * t->ne[0],
                                       t->ne[0]);
        if (s) {
            free(v);
            return tl_err_prefix(s, "lora: tensor '%s': ", name);
        }
    }
    *out = v;
    return TL_OK;
}

static tl_status check_header(const gguf_file *f, const tl_model *m, const char *path, float *alpha) {
    gguf_str v = {0};
    if (!kv_str_is(f, "general.type", "adapter", &v))
        return tl_err(TL_ERR_FORMAT, "lora: '%s' is not an adapter (general.type is %s%.*s%s)", path,
                      v.ptr ? "'" : "", v.ptr ? (int)v.len : 6, v.ptr ? v.ptr : "absent", v.ptr ? "'" : "");
    memset(&v, 0, sizeof v);
    if (!kv_str_is(f, "adapter.type", "lora", &v))
        return tl_err(TL_ERR_UNSUPPORTED, "lora: '%s': adapter.type is %s%.*s%s, not 'lora'", path,
                      v.ptr ? "'" : "", v.ptr ? (int)v.len : 6, v.ptr ? v.ptr : "absent", v.ptr ? "'" : "");
    memset(&v, 0, sizeof v);
    const char *arch = llm_arch_name(m->arch);
    if (!kv_str_is(f, "general.architecture", arch, &v))
        return tl_err(TL_ERR_FORMAT, "lora: '%s' is an adapter for architecture '%.*s', the model is '%s'", path,
                      v.ptr ? (int)v.len : 6, v.ptr ? v.ptr : "absent", arch);
    double a = 0;
    tl_status s = gguf_get_float(f, "adapter.lora.alpha", &a);
    if (s == TL_ERR_NOT_FOUND) a = 0;
    else if (s) return tl_err_prefix(s, "lora: '%s': ", path);
    if (!(a >= 0 && a < 1e9)) return tl_err(TL_ERR_FORMAT, "lora: '%s': adapter.lora.alpha %g is out of range", path, a);
    *alpha = (float)a;
    return TL_OK;
}

/* One pair: name is "<base>.lora_a" (len bytes). */
static tl_status load_pair(const gguf_file *f, const tl_model *m, tl_lora *l, const gguf_tensor *ta, float alpha) {
    char an[160], bn[160];
    if (ta->name.len > 150)
        return tl_err(TL_ERR_FORMAT, "lora: tensor name '%.40s...' is too long", ta->name.ptr);
    size_t blen = ta->name.len - 7; /* without ".lora_a" */
    snprintf(an, sizeof an, "%.*s", (int)ta->name.len, ta->name.ptr);
    snprintf(bn, sizeof bn, "%.*s.lora_b", (int)blen, ta->name.ptr);
    int layer;
    lora_wid w;
    if (!lora_parse_gguf_name(ta->name.ptr, blen, &layer, &w))
        return tl_err(TL_ERR_UNSUPPORTED,
                      "lora: tensor '%s' adapts '%.*s', which is not one of a layer's attn_q/k/v/output or "
                      "ffn_gate/up/down weights", an, (int)blen, ta->name.ptr);
    const gguf_tensor *tb = gguf_find_tensor(f, bn);
    if (!tb) return tl_err(TL_ERR_FORMAT, "lora: tensor '%s' has no '%s'", an, bn);
    if (ta->n_dims != 2 || tb->n_dims != 2)
        return tl_err(TL_ERR_FORMAT, "lora: '%s' / '%s' must be 2-d (have %u and %u dims)", an, bn, ta->n_dims,
                      tb->n_dims);
    if (ta->ne[1] != tb->ne[0])
        return tl_err(TL_ERR_FORMAT, "lora: rank of '%s' (ne[1] = %lld) differs from '%s' (ne[0] = %lld)", an,
                      (long long)ta->ne[1], bn, (long long)tb->ne[0]);
    int64_t rank = ta->ne[1];
    if (rank < 1 || rank > 65536) return tl_err(TL_ERR_FORMAT, "lora: '%s': rank %lld is out of range", an, (long long)rank);
    float *a, *b;
    tl_status s = gguf_floats(ta, an, &a);
    if (s) return s;
    if ((s = gguf_floats(tb, bn, &b))) {
        free(a);
        return s;
    }
    float scale = alpha > 0 ? alpha / (float)rank : 1.0f;
    char what[200];
    snprintf(what, sizeof what, "tensor '%s'", an);
    return lora_set_weight(l, m, layer, w, (int32_t)rank, ta->ne[0], tb->ne[1], a, b, scale, what);
}

tl_status lora_load_gguf(const tl_model *m, const char *path, tl_lora *l) {
    gguf_file *f;
    tl_status s = gguf_open(path, &f);
    if (s) return tl_err_prefix(s, "lora: ");
    float alpha = 0;
    if ((s = check_header(f, m, path, &alpha))) goto done;
    l->alpha = alpha;
    for (int64_t i = 0; i < gguf_n_tensors(f) && !s; i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        const gguf_str *nm = &t->name;
        bool is_a = nm->len > 7 && !memcmp(nm->ptr + nm->len - 7, ".lora_a", 7);
        bool is_b = nm->len > 7 && !memcmp(nm->ptr + nm->len - 7, ".lora_b", 7);
        if (is_a) {
            s = load_pair(f, m, l, t, alpha);
        } else if (is_b) { /* its lora_a must exist (pairs are loaded from the a side) */
            char an[160];
            snprintf(an, sizeof an, "%.*s.lora_a", (int)nm->len - 7, nm->ptr);
            if (!gguf_find_tensor(f, an))
                s = tl_err(TL_ERR_FORMAT, "lora: tensor '%.*s' has no '%s'", (int)nm->len, nm->ptr, an);
        } else {
            s = tl_err(TL_ERR_UNSUPPORTED, "lora: tensor '%.*s' in '%s' is not a lora_a/lora_b tensor", (int)nm->len,
                       nm->ptr, path);
        }
    }
done:
    gguf_close(f);
    return s;
}
