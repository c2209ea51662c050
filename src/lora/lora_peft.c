/* lora/lora_peft: read a Hugging Face PEFT LoRA directory:
 * adapter_config.json (peft_type LORA, r, lora_alpha, use_rslora,
 * target_modules, rank_pattern, alpha_pattern; DoRA, fan_in_fan_out and
 * trained biases are refused) and adapter_model.safetensors, whose tensors
 * are named "base_model.model.<module>.lora_A.weight" ([r, n_in]) and
 * ".lora_B.weight" ([n_out, r]) in F32/F16/BF16.
 * Mapping: <...>layers.N.self_attn.{q,k,v,o}_proj -> blk.N.attn_{q,k,v,output},
 * <...>layers.N.mlp.{gate,up,down}_proj -> blk.N.ffn_{gate,up,down}; for a
 * llama base the rows of B for q_proj / k_proj are permuted per head as the
 * model's converter permuted the base weights' rows (HF half-split RoPE
 * pairs (i, i + d/2) -> rows (2i, 2i + 1)), so B A lands on the GGUF rows.
 * Scale as PEFT computes it: alpha / r, or alpha / sqrt(r) with use_rslora,
 * where alpha and r may come from the patterns for that module.
 * Owns: nothing past the call. Calls: io/safetensors, cJSON (through
 * convert's JSON reader), base/fp16, llm/model (shapes). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fp16.h"
#include "convert/cvt_internal.h"
#include "io/safetensors.h"
#include "llm/model.h"
#include "lora/lora.h"

typedef struct peft_cfg {
    double r, alpha;
    bool rslora;
    const cJSON *targets;       /* array of names, or a string (a regex: not checked) */
    const cJSON *rank_pattern;  /* object: module key -> r */
    const cJSON *alpha_pattern; /* object: module key -> alpha */
} peft_cfg;

static const cJSON *jget(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

static bool jtrue(const cJSON *o, const char *k) { return cJSON_IsTrue(jget(o, k)); }

static tl_status parse_config(const cJSON *j, const char *path, peft_cfg *c) {
    const cJSON *t = jget(j, "peft_type");
    if (t && (!cJSON_IsString(t) || strcmp(t->valuestring, "LORA")))
        return tl_err(TL_ERR_UNSUPPORTED, "lora: %s: peft_type is %s, not LORA", path,
                      cJSON_IsString(t) ? t->valuestring : "not a string");
    const cJSON *r = jget(j, "r"), *a = jget(j, "lora_alpha");
    if (!cJSON_IsNumber(r) || r->valuedouble < 1 || r->valuedouble > 65536)
        return tl_err(TL_ERR_FORMAT, "lora: %s: \"r\" is missing or not a rank in 1..65536", path);
    if (!cJSON_IsNumber(a) || !(a->valuedouble >= 0 && a->valuedouble < 1e9))
        return tl_err(TL_ERR_FORMAT, "lora: %s: \"lora_alpha\" is missing or out of range", path);
    if (jtrue(j, "use_dora")) return tl_err(TL_ERR_UNSUPPORTED, "lora: %s: DoRA adapters (use_dora) are not supported", path);
    if (jtrue(j, "fan_in_fan_out"))
        return tl_err(TL_ERR_UNSUPPORTED, "lora: %s: fan_in_fan_out (Conv1D bases) is not supported", path);
    const cJSON *bias = jget(j, "bias");
    if (bias && !cJSON_IsNull(bias) && (!cJSON_IsString(bias) || strcmp(bias->valuestring, "none")))
        return tl_err(TL_ERR_UNSUPPORTED, "lora: %s: trained biases (bias = %s) are not supported", path,
                      cJSON_IsString(bias) ? bias->valuestring : "?");
    c->r = r->valuedouble;
    c->alpha = a->valuedouble;
    c->rslora = jtrue(j, "use_rslora");
    c->targets = jget(j, "target_modules");
    c->rank_pattern = jget(j, "rank_pattern");
    c->alpha_pattern = jget(j, "alpha_pattern");
    return TL_OK;
}

/* PEFT's pattern rule: key matches module if module == key or ends in "." key. */
static bool key_matches(const char *module, const char *key) {
    size_t a = strlen(module), b = strlen(key);
    if (b > a || strcmp(module + a - b, key)) return false;
    return a == b || module[a - b - 1] == '.';
}

static double pattern_value(const cJSON *pat, const char *module, double def) {
    const cJSON *e;
    if (!cJSON_IsObject(pat)) return def;
    cJSON_ArrayForEach(e, pat) if (cJSON_IsNumber(e) && key_matches(module, e->string)) return e->valuedouble;
    return def;
}

/* Module path "<...>layers.N.{self_attn,mlp}.<proj>" -> (layer, wid). */
static bool parse_module(const char *mod, int *layer, lora_wid *w) {
    const char *p = strstr(mod, "layers.");
    if (!p || (p != mod && p[-1] != '.')) return false;
    p += 7;
    if (*p < '0' || *p > '9') return false;
    long il = 0;
    while (*p >= '0' && *p <= '9' && il < 1000000) il = il * 10 + (*p++ - '0');
    if (*p++ != '.') return false;
    const char *proj = NULL;
    if (!strncmp(p, "self_attn.", 10)) proj = p + 10;
    else if (!strncmp(p, "mlp.", 4)) proj = p + 4;
    if (!proj) return false;
    for (int i = 0; i < LORA_W_COUNT; i++) {
        bool attn = i <= LORA_W_O;
        if ((proj == p + 10) == attn && !strcmp(proj, lora_wid_hf((lora_wid)i))) {
            *layer = (int)il;
            *w = (lora_wid)i;
            return true;
        }
    }
    return false;
}

static bool target_listed(const cJSON *targets, const char *module) {
    if (!cJSON_IsArray(targets)) return true; /* a regex string, or absent: not checked */
    const cJSON *e;
    cJSON_ArrayForEach(e, targets) if (cJSON_IsString(e) && key_matches(module, e->valuestring)) return true;
    return false;
}

/* A 2-d tensor of `rows` x `cols` as malloc'd f32. */
static tl_status st_floats(const st_tensor *t, int64_t rows, int64_t cols, float **out) {
    *out = NULL;
    bool f32 = !strcmp(t->dtype, "F32"), f16 = !strcmp(t->dtype, "F16"), bf16 = !strcmp(t->dtype, "BF16");
    if (!f32 && !f16 && !bf16)
        return tl_err(TL_ERR_UNSUPPORTED, "lora: tensor '%s' has dtype %s (F32, F16 or BF16 expected)", t->name,
                      t->dtype);
    size_t n = (size_t)rows * (size_t)cols;
    float *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return tl_err(TL_ERR_NOMEM, "lora: out of memory reading '%s'", t->name);
    const uint8_t *d = t->data;
    for (size_t i = 0; i < n; i++) {
        if (f32) memcpy(&v[i], d + 4 * i, 4);
        else {
            uint16_t h;
            memcpy(&h, d + 2 * i, 2);
            v[i] = f16 ? tl_fp16_to_fp32(h) : tl_bf16_to_fp32(h);
        }
    }
    *out = v;
    return TL_OK;
}

/* llama's Q/K rows: output row 2k + h of a head takes input row h * d/2 + k. */
static tl_status permute_rows(float **b, int64_t n_out, int32_t rank, int64_t heads) {
    int64_t d = heads > 0 ? n_out / heads : 0;
    if (d < 2 || d * heads != n_out || d % 2)
        return tl_err(TL_ERR_FORMAT, "lora: %lld rows do not split into %lld heads of even size", (long long)n_out,
                      (long long)heads);
    float *o = malloc((size_t)n_out * (size_t)rank * sizeof *o);
    if (!o) return tl_err(TL_ERR_NOMEM, "lora: out of memory");
    for (int64_t r = 0; r < n_out; r++) {
        int64_t head = r / d, i = r % d, sr = head * d + (i % 2) * (d / 2) + i / 2;
        memcpy(o + r * rank, *b + sr * rank, (size_t)rank * sizeof *o);
    }
    free(*b);
    *b = o;
    return TL_OK;
}

/* Tensor t is module's lora_A; find its B, check both and store the pair. */
static tl_status load_module(const tl_model *m, tl_lora *l, st_file *f, const peft_cfg *c, const st_tensor *ta,
                             const char *module) {
    int layer;
    lora_wid w;
    if (!parse_module(module, &layer, &w))
        return tl_err(TL_ERR_UNSUPPORTED,
                      "lora: tensor '%s' adapts module '%s', which is not a layer's q/k/v/o_proj or "
                      "gate/up/down_proj", ta->name, module);
    if (!target_listed(c->targets, module))
        return tl_err(TL_ERR_FORMAT, "lora: tensor '%s': module '%s' is not in target_modules", ta->name, module);
    char bname[400];
    size_t ml = strlen(ta->name) - strlen(".lora_A.weight");
    snprintf(bname, sizeof bname, "%.*s.lora_B.weight", (int)ml, ta->name);
    const st_tensor *tb = st_find(f, bname);
    if (!tb) return tl_err(TL_ERR_FORMAT, "lora: tensor '%s' has no '%s'", ta->name, bname);
    if (ta->ndim != 2 || tb->ndim != 2)
        return tl_err(TL_ERR_FORMAT, "lora: '%s' / '%s' must be 2-d", ta->name, bname);
    int64_t rank = ta->shape[0], n_in = ta->shape[1], n_out = tb->shape[0];
    if (tb->shape[1] != rank)
        return tl_err(TL_ERR_FORMAT, "lora: rank of '%s' (%lld) differs from '%s' (%lld)", ta->name,
                      (long long)rank, bname, (long long)tb->shape[1]);
    double r_cfg = pattern_value(c->rank_pattern, module, c->r);
    if ((double)rank != r_cfg)
        return tl_err(TL_ERR_FORMAT, "lora: tensor '%s' has rank %lld, adapter_config.json says %g", ta->name,
                      (long long)rank, r_cfg);
    int64_t bi, bo;
    if (!lora_base_shape(m, layer, w, &bi, &bo) || bi != n_in || bo != n_out || rank < 1 || rank > 65536)
        return lora_set_weight(l, m, layer, w, (int32_t)(rank > 0 && rank <= 65536 ? rank : 0), n_in, n_out, NULL,
                               NULL, 1.0f, ta->name); /* names the mismatch */
    float *a, *b;
    tl_status s = st_floats(ta, rank, n_in, &a);
    if (s) return s;
    if ((s = st_floats(tb, n_out, rank, &b))) {
        free(a);
        return s;
    }
    if (m->arch == LLM_ARCH_LLAMA && (w == LORA_W_Q || w == LORA_W_K) &&
        (s = permute_rows(&b, n_out, (int32_t)rank, w == LORA_W_Q ? m->hp.n_head : m->hp.n_head_kv))) {
        free(a);
        free(b);
        return tl_err_prefix(s, "lora: tensor '%s': ", bname);
    }
    double alpha = pattern_value(c->alpha_pattern, module, c->alpha);
    float scale = (float)(c->rslora ? alpha / sqrt((double)rank) : alpha / (double)rank);
    return lora_set_weight(l, m, layer, w, (int32_t)rank, n_in, n_out, a, b, scale, ta->name);
}

static tl_status load_tensors(const tl_model *m, tl_lora *l, st_file *f, const peft_cfg *c, const char *path) {
    static const char pre[] = "base_model.model.";
    for (int i = 0; i < st_n_tensors(f); i++) {
        const st_tensor *t = st_tensor_at(f, i);
        size_t n = strlen(t->name);
        bool is_a = n > 14 && !strcmp(t->name + n - 14, ".lora_A.weight");
        bool is_b = n > 14 && !strcmp(t->name + n - 14, ".lora_B.weight");
        if (!is_a && !is_b)
            return tl_err(TL_ERR_UNSUPPORTED, "lora: tensor '%s' in %s is not a lora_A/lora_B weight", t->name, path);
        if (n >= 380) return tl_err(TL_ERR_FORMAT, "lora: tensor name '%.40s...' is too long", t->name);
        char module[400];
        const char *s0 = strncmp(t->name, pre, sizeof pre - 1) ? t->name : t->name + sizeof pre - 1;
        snprintf(module, sizeof module, "%.*s", (int)(t->name + n - 14 - s0), s0);
        if (is_b) {
            char an[400];
            snprintf(an, sizeof an, "%.*s.lora_A.weight", (int)(n - 14), t->name);
            if (!st_find(f, an)) return tl_err(TL_ERR_FORMAT, "lora: tensor '%s' has no '%s'", t->name, an);
            continue;
        }
        tl_status s = load_module(m, l, f, c, t, module);
        if (s) return s;
    }
    return TL_OK;
}

tl_status lora_load_peft(const tl_model *m, const char *dir, tl_lora *l) {
    char *cpath = cvt_path_join(dir, "adapter_config.json");
    char *wpath = cvt_path_join(dir, "adapter_model.safetensors");
    cJSON *j = NULL;
    st_file *f = NULL;
    peft_cfg c = {0};
    tl_status s = TL_OK;
    if (!cpath || !wpath) {
        s = tl_err(TL_ERR_NOMEM, "lora: out of memory");
        goto done;
    }
    if ((s = cvt_read_json(cpath, &j))) {
        s = tl_err_prefix(s, "lora: ");
        goto done;
    }
    if ((s = parse_config(j, cpath, &c))) goto done;
    if (!cvt_file_exists(wpath)) {
        s = tl_err(TL_ERR_NOT_FOUND, "lora: '%s' is missing (only safetensors adapters are read)", wpath);
        goto done;
    }
    if ((s = st_open_mmap(wpath, &f))) {
        s = tl_err_prefix(s, "lora: ");
        goto done;
    }
    l->alpha = (float)c.alpha;
    l->rslora = c.rslora;
    s = load_tensors(m, l, f, &c, wpath);
done:
    st_close(f);
    cJSON_Delete(j);
    free(cpath);
    free(wpath);
    return s;
}
