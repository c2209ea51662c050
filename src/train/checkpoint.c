/* train/checkpoint: save and restore training state as safetensors: model
 * parameters ("model.<name>"), optimizer moments ("optim.m.<name>",
 * "optim.v.<name>"), and in the metadata the model config, step counters,
 * the data RNG and the dropout seed, so that a resumed run continues
 * bit-identically. Floats in metadata are printed with %.17g (round-trip).
 * Owns: nothing beyond the call. Calls: io/safetensors, train. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "train/tt_internal.h"

#define CKPT_FORMAT "tallow-train-1"

/* safetensors dtype names of the framework's dtypes, both ways. */
static const char *st_name(tt_dtype dt) {
    switch (dt) {
    case TT_F32: return "F32";
    case TT_F64: return "F64";
    case TT_BF16: return "BF16";
    case TT_F16: return "F16";
    case TT_I32: return "I32";
    }
    return "?";
}

static bool st_parse(const char *name, tt_dtype *dt) {
    static const tt_dtype all[] = {TT_F32, TT_F64, TT_BF16, TT_F16, TT_I32};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (!strcmp(name, st_name(all[i]))) {
            *dt = all[i];
            return true;
        }
    return false;
}

static size_t tbytes(const tt_tensor *t) { return (size_t)tt_numel(t) * tt__esize(t->dtype); }

static tl_status meta_i(st_writer *w, const char *k, int64_t v) {
    char b[32];
    snprintf(b, sizeof b, "%lld", (long long)v);
    return st_writer_meta(w, k, b);
}

static tl_status meta_f(st_writer *w, const char *k, double v) {
    char b[40];
    snprintf(b, sizeof b, "%.17g", v);
    return st_writer_meta(w, k, b);
}

static tl_status meta_u(st_writer *w, const char *k, uint64_t v) {
    char b[32];
    snprintf(b, sizeof b, "%" PRIu64, v);
    return st_writer_meta(w, k, b);
}

/* tokenizer NULL: a byte-level run (no tokenizer record). */
/* Host bytes of t: its own, or (on a device) a download kept in *keep
 * (freed by the caller after the write). */
typedef struct host_keep {
    void **p;
    int n, cap;
} host_keep;

static const void *host_data(const tt_tensor *t, host_keep *k, tl_status *s) {
    if (tt__dev(t) == TT_CPU) return tt_data(t);
    if (k->n == k->cap) {
        int cap = k->cap ? 2 * k->cap : 64;
        void **p = realloc(k->p, (size_t)cap * sizeof *p);
        if (!p) {
            *s = tl_err(TL_ERR_NOMEM, "checkpoint: out of memory");
            return NULL;
        }
        k->p = p;
        k->cap = cap;
    }
    size_t nb = tbytes(t);
    void *h = malloc(nb ? nb : 1);
    if (!h) {
        *s = tl_err(TL_ERR_NOMEM, "checkpoint: out of memory for %zu bytes", nb);
        return NULL;
    }
    k->p[k->n++] = h;
    *s = tt__dev_d2h(tt__dev(t), h, tt_data(t), nb);
    return *s ? NULL : h;
}

static tl_status save(const char *path, const tt_model *m, const tt_optim *o, int64_t step, const tt_rng *rng,
                      const char *tokenizer, int64_t tok_vocab) {
    st_writer *w;
    tl_status s = st_writer_init(&w);
    if (s != TL_OK) return s;
    host_keep keep = {0};
    const tt_model_config *k = &m->cfg;
    char name[128];
    s = st_writer_meta(w, "format", CKPT_FORMAT);
    if (!s) s = st_writer_meta(w, "arch", k->arch == TT_ARCH_GPT2 ? "gpt2" : "llama");
    if (!s) s = meta_i(w, "vocab", k->vocab);
    if (!s) s = meta_i(w, "ctx", k->ctx);
    if (!s) s = meta_i(w, "dim", k->dim);
    if (!s) s = meta_i(w, "layers", k->layers);
    if (!s) s = meta_i(w, "heads", k->heads);
    if (!s) s = meta_i(w, "kv_heads", k->kv_heads);
    if (!s) s = meta_i(w, "ffn", k->ffn);
    if (!s) s = meta_f(w, "norm_eps", k->norm_eps);
    if (!s) s = meta_f(w, "rope_theta", k->rope_theta);
    if (!s) s = meta_f(w, "dropout", k->dropout);
    if (!s) s = meta_i(w, "step", step);
    if (!s) s = meta_u(w, "dropout_seed", m->dropout_seed);
    for (int i = 0; !s && rng && i < 4; i++) {
        snprintf(name, sizeof name, "rng%d", i);
        s = meta_u(w, name, rng->s[i]);
    }
    if (!s && o) s = meta_i(w, "optim_step", o->step);
    if (!s && tokenizer) s = st_writer_meta(w, "tokenizer", tokenizer);
    if (!s && tokenizer) s = meta_i(w, "tokenizer_vocab", tok_vocab);
    for (int i = 0; !s && i < m->params.n; i++) {
        const tt_param *p = &m->params.p[i];
        snprintf(name, sizeof name, "model.%s", p->name);
        const void *hd = host_data(p->t, &keep, &s);
        if (!s) s = st_writer_add(w, name, st_name(p->t->dtype), p->t->ndim, p->t->shape, hd, tbytes(p->t));
        if (!s && o && o->m[i]) {
            snprintf(name, sizeof name, "optim.m.%s", p->name);
            hd = host_data(o->m[i], &keep, &s);
            if (!s) s = st_writer_add(w, name, "F32", p->t->ndim, p->t->shape, hd, (size_t)tt_numel(p->t) * 4);
        }
        if (!s && o && o->v[i]) {
            snprintf(name, sizeof name, "optim.v.%s", p->name);
            hd = host_data(o->v[i], &keep, &s);
            if (!s) s = st_writer_add(w, name, "F32", p->t->ndim, p->t->shape, hd, (size_t)tt_numel(p->t) * 4);
        }
    }
    if (!s) s = st_writer_write(w, path);
    st_writer_free(w);
    for (int i = 0; i < keep.n; i++) free(keep.p[i]);
    free(keep.p);
    return s;
}

tl_status tt_checkpoint_save(const char *path, const tt_model *m, const tt_optim *o, int64_t step,
                             const tt_rng *rng) {
    return save(path, m, o, step, rng, NULL, 0);
}

tl_status tt_checkpoint_save_tokenizer(const char *path, const tt_model *m, const tt_optim *o, int64_t step,
                                       const tt_rng *rng, const char *tokenizer, int64_t tok_vocab) {
    return save(path, m, o, step, rng, tokenizer, tok_vocab);
}

tl_status tt_checkpoint_read_tokenizer(const char *path, char *tokenizer, size_t cap, int64_t *tok_vocab) {
    st_file *f;
    tl_status s = st_open(path, &f);
    if (s) return s;
    const char *t = st_meta(f, "tokenizer"), *v = st_meta(f, "tokenizer_vocab");
    if (cap) tokenizer[0] = 0;
    *tok_vocab = 256;
    if (t && v) {
        if (strlen(t) >= cap) s = tl_err(TL_ERR_INVALID, "checkpoint '%s': tokenizer path is too long", path);
        else snprintf(tokenizer, cap, "%s", t);
        *tok_vocab = strtoll(v, NULL, 10);
    }
    st_close(f);
    return s;
}

static tl_status need_meta(const st_file *f, const char *path, const char *key, const char **out) {
    *out = st_meta(f, key);
    if (!*out) return tl_err(TL_ERR_FORMAT, "checkpoint '%s': metadata '%s' missing", path, key);
    return TL_OK;
}

static tl_status read_cfg(const st_file *f, const char *path, tt_model_config *cfg) {
    const char *v;
    tl_status s = need_meta(f, path, "format", &v);
    if (s) return s;
    if (strcmp(v, CKPT_FORMAT))
        return tl_err(TL_ERR_FORMAT, "checkpoint '%s': format '%s' (want %s)", path, v, CKPT_FORMAT);
    memset(cfg, 0, sizeof *cfg);
    if ((s = need_meta(f, path, "arch", &v))) return s;
    cfg->arch = strcmp(v, "gpt2") ? TT_ARCH_LLAMA : TT_ARCH_GPT2;
    struct {
        const char *k;
        int64_t *dst;
    } ints[] = {{"vocab", &cfg->vocab}, {"ctx", &cfg->ctx},           {"dim", &cfg->dim}, {"layers", &cfg->layers},
                {"heads", &cfg->heads}, {"kv_heads", &cfg->kv_heads}, {"ffn", &cfg->ffn}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        if ((s = need_meta(f, path, ints[i].k, &v))) return s;
        *ints[i].dst = strtoll(v, NULL, 10);
    }
    struct {
        const char *k;
        double *dst;
    } fl[] = {{"norm_eps", &cfg->norm_eps}, {"rope_theta", &cfg->rope_theta}, {"dropout", &cfg->dropout}};
    for (size_t i = 0; i < sizeof fl / sizeof fl[0]; i++) {
        if ((s = need_meta(f, path, fl[i].k, &v))) return s;
        *fl[i].dst = strtod(v, NULL);
    }
    return TL_OK;
}

tl_status tt_checkpoint_read_config(const char *path, tt_model_config *cfg) {
    st_file *f;
    tl_status s = st_open(path, &f);
    if (s) return s;
    s = read_cfg(f, path, cfg);
    st_close(f);
    return s;
}

/* A caller-owned contiguous copy of entry e (any supported dtype). */
static tt_tensor *entry_tensor(const st_tensor *e, const char *path) {
    tt_dtype dt;
    if (!st_parse(e->dtype, &dt) || e->ndim > TT_MAX_DIMS || e->ndim < 1) {
        tl_err(TL_ERR_FORMAT, "'%s': tensor '%s' is %s with %d dims (supported: F32, F64, BF16, F16, I32; 1..%d dims)",
               path, e->name, e->dtype, e->ndim, TT_MAX_DIMS);
        return NULL;
    }
    tt_tensor *t = tt_new(dt, e->ndim, e->shape);
    if (!t) return NULL;
    if (tbytes(t) != e->nbytes) { /* the reader checked this; defensive */
        tt_free(t);
        tl_err(TL_ERR_FORMAT, "'%s': tensor '%s' has %zu bytes for its shape", path, e->name, e->nbytes);
        return NULL;
    }
    memcpy(tt_data(t), e->data, e->nbytes);
    return t;
}

/* Load entry name into t: a byte copy when the dtypes match (bit-identical
 * resume), else converted (e.g. a BF16 checkpoint into an f32 model). */
static tl_status load_into(const st_file *f, const char *path, const char *name, tt_tensor *t) {
    const st_tensor *e = st_find(f, name);
    if (!e) return tl_err(TL_ERR_NOT_FOUND, "checkpoint '%s': tensor '%s' missing", path, name);
    bool shape_ok = e->ndim == t->ndim;
    for (int d = 0; shape_ok && d < t->ndim; d++) shape_ok = e->shape[d] == t->shape[d];
    if (!shape_ok)
        return tl_err(TL_ERR_FORMAT, "checkpoint '%s': tensor '%s' has %d dims (first %lld), model has %d (first %lld)",
                      path, name, e->ndim, (long long)(e->ndim ? e->shape[0] : 0), t->ndim,
                      (long long)(t->ndim ? t->shape[0] : 0));
    if (!strcmp(e->dtype, st_name(t->dtype)) && e->nbytes == tbytes(t) && tt_is_contiguous(t)) {
        if (tt__dev(t) != TT_CPU) return tt__dev_h2d(tt__dev(t), tt_data(t), e->data, e->nbytes);
        memcpy(tt_data(t), e->data, e->nbytes);
        return TL_OK;
    }
    if (tt__dev(t) != TT_CPU)
        return tl_err(TL_ERR_UNSUPPORTED, "checkpoint '%s': tensor '%s' is %s: a %s model loads its own dtype only",
                      path, name, e->dtype, tt_device_name(tt__dev(t)));
    tt_tensor *src = entry_tensor(e, path);
    if (!src) return tl_err_prefix(TL_ERR_FORMAT, "checkpoint: ");
    tt_copy_(t, src);
    tt_free(src);
    return TL_OK;
}

tl_status tt_checkpoint_load(const char *path, tt_model *m, tt_optim *o, int64_t *step, tt_rng *rng) {
    st_file *f;
    tl_status s = st_open(path, &f);
    if (s) return s;
    tt_model_config cfg;
    s = read_cfg(f, path, &cfg);
    if (!s && (cfg.arch != m->cfg.arch || cfg.dim != m->cfg.dim || cfg.layers != m->cfg.layers ||
               cfg.vocab != m->cfg.vocab || cfg.heads != m->cfg.heads || cfg.kv_heads != m->cfg.kv_heads ||
               cfg.ffn != m->cfg.ffn || cfg.ctx != m->cfg.ctx))
        s = tl_err(TL_ERR_INVALID, "checkpoint '%s': model config differs from the model being loaded", path);
    char name[128];
    for (int i = 0; !s && i < m->params.n; i++) {
        const tt_param *p = &m->params.p[i];
        snprintf(name, sizeof name, "model.%s", p->name);
        s = load_into(f, path, name, p->t);
        if (!s && o && o->m[i]) {
            snprintf(name, sizeof name, "optim.m.%s", p->name);
            s = load_into(f, path, name, o->m[i]);
        }
        if (!s && o && o->v[i]) {
            snprintf(name, sizeof name, "optim.v.%s", p->name);
            s = load_into(f, path, name, o->v[i]);
        }
    }
    const char *v;
    if (!s && o) {
        if (!(s = need_meta(f, path, "optim_step", &v))) o->step = strtoll(v, NULL, 10);
    }
    if (!s && step) {
        if (!(s = need_meta(f, path, "step", &v))) *step = strtoll(v, NULL, 10);
    }
    if (!s && (v = st_meta(f, "dropout_seed"))) m->dropout_seed = strtoull(v, NULL, 10);
    for (int i = 0; !s && rng && i < 4; i++) {
        snprintf(name, sizeof name, "rng%d", i);
        if (!(s = need_meta(f, path, name, &v))) rng->s[i] = strtoull(v, NULL, 10);
    }
    st_close(f);
    return s;
}

tl_status tt_tensors_save(const char *path, int n, const char *const *names, const tt_tensor *const *ts) {
    st_writer *w;
    tl_status s = st_writer_init(&w);
    if (s != TL_OK) return s;
    tt_tensor **tmp = calloc((size_t)(n > 0 ? n : 1), sizeof *tmp); /* contiguous copies of strided inputs */
    if (!tmp) s = tl_err(TL_ERR_NOMEM, "train: out of memory");
    for (int i = 0; !s && i < n; i++) {
        const tt_tensor *t = ts[i];
        if (!t || !names[i]) {
            s = tl_err(TL_ERR_INVALID, "save '%s': tensor %d is NULL", path, i);
            break;
        }
        if (!tt_is_contiguous(t)) {
            if (!(tmp[i] = tt__clone(t))) s = TL_ERR_NOMEM;
            t = tmp[i];
        }
        if (!s) s = st_writer_add(w, names[i], st_name(t->dtype), t->ndim, t->shape, tt_data(t), tbytes(t));
    }
    if (!s) s = st_writer_write(w, path);
    for (int i = 0; tmp && i < n; i++) tt_free(tmp[i]);
    free(tmp);
    st_writer_free(w);
    return s;
}

tt_tensor *tt_tensor_load(const char *path, const char *name) {
    st_file *f;
    if (st_open(path, &f) != TL_OK) return NULL;
    const st_tensor *e = st_find(f, name);
    tt_tensor *t = NULL;
    if (!e)
        tl_err(TL_ERR_NOT_FOUND, "'%s': tensor '%s' missing", path, name);
    else
        t = entry_tensor(e, path);
    st_close(f);
    return t;
}
