/* convert/hf_config: config.json -> cvt_hparams, and the JSON/path helpers
 * the convert files share.
 *
 * Hyper-parameter names follow transformers' configs as llama.cpp's converter
 * reads them: hidden_size, num_hidden_layers, intermediate_size,
 * num_attention_heads, num_key_value_heads (default: heads), head_dim
 * (optional), max_position_embeddings, rms_norm_eps, tie_word_embeddings,
 * vocab_size. RoPE settings are read from both layouts in use: the older
 * top-level rope_theta + rope_scaling, and transformers 5's rope_parameters
 * (for Gemma 3 possibly one entry per layer type, of which the
 * full-attention one is what the GGUF keys describe).
 * Owns: nothing. Calls: cJSON, base/status, text/tokenizer (TOK_MAX_VOCAB). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "convert/cvt_internal.h"
#include "text/tokenizer.h" /* TOK_MAX_VOCAB */

bool cvt_file_exists(const char *path) {
    struct stat sb;
    return path && stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

char *cvt_path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    size_t k = a;
    if (a && dir[a - 1] != '/') p[k++] = '/';
    memcpy(p + k, name, b + 1);
    return p;
}

tl_status cvt_read_json(const char *path, cJSON **out) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return tl_err(TL_ERR_NOT_FOUND, "convert: cannot open '%s'", path);
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
    if (n > CVT_MAX_JSON_BYTES) {
        fclose(f);
        return tl_err(TL_ERR_FORMAT, "convert: '%s' is larger than CVT_MAX_JSON_BYTES (%ld)", path, CVT_MAX_JSON_BYTES);
    }
    if (n < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return tl_err(TL_ERR_IO, "convert: cannot size '%s'", path);
    }
    char *buf = malloc((size_t)n + 1);
    if (!buf) {
        fclose(f);
        return tl_err(TL_ERR_NOMEM, "convert: out of memory reading '%s'", path);
    }
    size_t r = fread(buf, 1, (size_t)n, f);
    fclose(f);
    if (r != (size_t)n) {
        free(buf);
        return tl_err(TL_ERR_IO, "convert: short read on '%s'", path);
    }
    buf[n] = 0;
    cJSON *j = cJSON_ParseWithLength(buf, (size_t)n);
    if (!j) {
        const char *e = cJSON_GetErrorPtr();
        long at = e && e >= buf && e <= buf + n ? (long)(e - buf) : -1L;
        free(buf);
        return tl_err(TL_ERR_FORMAT, "convert: '%s' is not valid JSON (near byte %ld)", path, at);
    }
    free(buf);
    *out = j;
    return TL_OK;
}

static const cJSON *cfg_get(const cJSON *o, const char *k) {
    return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
}

/* Integer key: absent -> def (TL_OK), or an error if def < 0 (required). */
static tl_status cfg_int(const cJSON *o, const char *path, const char *k, int64_t def, int64_t lo, int64_t hi,
                         int64_t *out) {
    const cJSON *x = cfg_get(o, k);
    if (!x || cJSON_IsNull(x)) {
        if (def < 0) return tl_err(TL_ERR_FORMAT, "convert: %s: required key '%s' is missing", path, k);
        *out = def;
        return TL_OK;
    }
    if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || x->valuedouble < (double)lo ||
        x->valuedouble > (double)hi)
        return tl_err(TL_ERR_FORMAT, "convert: %s: '%s' must be an integer in [%lld, %lld]", path, k, (long long)lo,
                      (long long)hi);
    *out = (int64_t)x->valuedouble;
    return TL_OK;
}

static tl_status cfg_num(const cJSON *o, const char *path, const char *k, double *out, bool *present) {
    const cJSON *x = cfg_get(o, k);
    *present = false;
    if (!x || cJSON_IsNull(x)) return TL_OK;
    if (!cJSON_IsNumber(x)) return tl_err(TL_ERR_FORMAT, "convert: %s: '%s' must be a number", path, k);
    *out = x->valuedouble;
    *present = true;
    return TL_OK;
}

static const struct {
    const char *hf; /* architectures[0] */
    const char *model_type;
    cvt_arch arch;
    const char *gguf;
} cvt_archs[] = {
    {"LlamaForCausalLM", "llama", CVT_ARCH_LLAMA, "llama"},
    {"Qwen2ForCausalLM", "qwen2", CVT_ARCH_QWEN2, "qwen2"},
    {"Qwen3ForCausalLM", "qwen3", CVT_ARCH_QWEN3, "qwen3"},
    {"Gemma3ForCausalLM", "gemma3_text", CVT_ARCH_GEMMA3, "gemma3"},
};

/* rope settings from one rope dict (rope_scaling or rope_parameters) */
static tl_status cfg_rope_dict(const cJSON *r, const char *path, cvt_hparams *hp) {
    bool has;
    double v;
    tl_status s;
    if ((s = cfg_num(r, path, "rope_theta", &v, &has))) return s;
    if (has) hp->rope_theta = v;
    const cJSON *t = cfg_get(r, "rope_type");
    if (!cJSON_IsString(t)) t = cfg_get(r, "type");
    const char *type = cJSON_IsString(t) ? t->valuestring : "default";
    if (!strcmp(type, "default")) return TL_OK;
    if (!strcmp(type, "llama3")) {
        bool h1, h2, h3, h4;
        if ((s = cfg_num(r, path, "factor", &hp->rs_factor, &h1)) ||
            (s = cfg_num(r, path, "low_freq_factor", &hp->rs_low, &h2)) ||
            (s = cfg_num(r, path, "high_freq_factor", &hp->rs_high, &h3)) ||
            (s = cfg_num(r, path, "original_max_position_embeddings", &hp->rs_orig_ctx, &h4)))
            return s;
        if (!h1 || !h2 || !h3 || !h4 || hp->rs_factor <= 0 || hp->rs_high <= hp->rs_low || hp->rs_orig_ctx <= 0)
            return tl_err(TL_ERR_FORMAT, "convert: %s: llama3 rope scaling needs factor, low_freq_factor < "
                                         "high_freq_factor and original_max_position_embeddings", path);
        hp->rope_llama3 = true;
        return TL_OK;
    }
    if (!strcmp(type, "linear")) {
        if ((s = cfg_num(r, path, "factor", &hp->rs_linear_factor, &has))) return s;
        if (!has || hp->rs_linear_factor <= 0)
            return tl_err(TL_ERR_FORMAT, "convert: %s: linear rope scaling without a positive factor", path);
        hp->rope_linear = true;
        return TL_OK;
    }
    return tl_err(TL_ERR_UNSUPPORTED, "convert: %s: rope scaling type '%s' is not supported (llama3, linear)", path,
                  type);
}

tl_status cvt_config_parse(const cJSON *cfg, const char *path, cvt_hparams *hp) {
    memset(hp, 0, sizeof *hp);
    hp->norm_eps = -1;
    if (!cJSON_IsObject(cfg)) return tl_err(TL_ERR_FORMAT, "convert: %s is not a JSON object", path);
    const cJSON *archs = cfg_get(cfg, "architectures"), *mt = cfg_get(cfg, "model_type");
    const char *a0 = cJSON_IsArray(archs) && cJSON_IsString(cJSON_GetArrayItem(archs, 0))
                         ? cJSON_GetArrayItem(archs, 0)->valuestring
                         : NULL;
    const char *m = cJSON_IsString(mt) ? mt->valuestring : NULL;
    int found = -1;
    for (size_t i = 0; i < sizeof cvt_archs / sizeof cvt_archs[0] && found < 0; i++)
        if ((a0 && !strcmp(a0, cvt_archs[i].hf)) || (!a0 && m && !strcmp(m, cvt_archs[i].model_type)))
            found = (int)i;
    if (found < 0)
        return tl_err(TL_ERR_UNSUPPORTED,
                      "convert: %s: architecture '%s' is not supported (LlamaForCausalLM, Qwen2ForCausalLM, "
                      "Qwen3ForCausalLM, Gemma3ForCausalLM)",
                      path, a0 ? a0 : m ? m : "(no architectures or model_type)");
    hp->arch = cvt_archs[found].arch;
    hp->arch_name = cvt_archs[found].gguf;
    tl_status s;
    int64_t big = (int64_t)1 << 40;
    if ((s = cfg_int(cfg, path, "hidden_size", -1, 1, 1 << 20, &hp->n_embd)) ||
        (s = cfg_int(cfg, path, "num_hidden_layers", -1, 1, 1 << 16, &hp->n_layer)) ||
        (s = cfg_int(cfg, path, "intermediate_size", -1, 1, 1 << 24, &hp->n_ff)) ||
        (s = cfg_int(cfg, path, "num_attention_heads", -1, 1, 1 << 16, &hp->n_head)) ||
        (s = cfg_int(cfg, path, "num_key_value_heads", hp->n_head, 1, 1 << 16, &hp->n_head_kv)) ||
        (s = cfg_int(cfg, path, "vocab_size", -1, 1, TOK_MAX_VOCAB, &hp->n_vocab)) ||
        (s = cfg_int(cfg, path, "max_position_embeddings", 0, 0, big, &hp->n_ctx)) ||
        (s = cfg_int(cfg, path, "sliding_window", 0, 0, big, &hp->sliding_window)))
        return s;
    if (hp->n_head % hp->n_head_kv)
        return tl_err(TL_ERR_FORMAT, "convert: %s: %lld attention heads is not a multiple of %lld KV heads", path,
                      (long long)hp->n_head, (long long)hp->n_head_kv);
    hp->has_head_dim = cfg_get(cfg, "head_dim") && !cJSON_IsNull(cfg_get(cfg, "head_dim"));
    if ((s = cfg_int(cfg, path, "head_dim", hp->n_embd / hp->n_head, 1, 1 << 16, &hp->head_dim))) return s;
    if (hp->head_dim < 1 || hp->head_dim % 2)
        return tl_err(TL_ERR_FORMAT, "convert: %s: head dimension %lld must be even and positive", path,
                      (long long)hp->head_dim);
    bool has;
    if ((s = cfg_num(cfg, path, "rms_norm_eps", &hp->norm_eps, &has))) return s;
    if (!has) hp->norm_eps = -1;
    const cJSON *tie = cfg_get(cfg, "tie_word_embeddings");
    /* absent: the architectures' defaults differ (llama/qwen untied, gemma tied), so the
     * checkpoint decides (cvt_convert: tied iff it has no lm_head.weight) */
    hp->tied_known = cJSON_IsBool(tie) || hp->arch == CVT_ARCH_GEMMA3;
    hp->tied = hp->arch == CVT_ARCH_GEMMA3 || cJSON_IsTrue(tie);
    if ((s = cfg_num(cfg, path, "rope_theta", &hp->rope_theta, &has))) return s;
    const cJSON *rs = cfg_get(cfg, "rope_scaling");
    if (cJSON_IsObject(rs) && (s = cfg_rope_dict(rs, path, hp))) return s;
    const cJSON *rp = cfg_get(cfg, "rope_parameters");
    if (cJSON_IsObject(rp)) {
        const cJSON *full = cfg_get(rp, "full_attention");
        if ((s = cfg_rope_dict(cJSON_IsObject(full) ? full : rp, path, hp))) return s;
    }
    if (hp->arch == CVT_ARCH_GEMMA3) {
        if (hp->rope_llama3) return tl_err(TL_ERR_UNSUPPORTED, "convert: %s: gemma3 with llama3 rope scaling", path);
        if (!hp->sliding_window)
            return tl_err(TL_ERR_FORMAT, "convert: %s: gemma3 config without sliding_window", path);
        const cJSON *sc = cfg_get(cfg, "attn_logit_softcapping");
        if (sc && !cJSON_IsNull(sc))
            return tl_err(TL_ERR_UNSUPPORTED, "convert: %s: gemma3 with attn_logit_softcapping", path);
    } else if (hp->rope_linear && hp->arch != CVT_ARCH_LLAMA) {
        return tl_err(TL_ERR_UNSUPPORTED, "convert: %s: linear rope scaling for %s", path, hp->arch_name);
    }
    return TL_OK;
}
