/* backend/cuda/cuda_llm: the llama-family forward pass (llama, qwen2,
 * qwen3) on the GPU, as a plain sequence of backend/cuda calls.
 *
 * Weights: uploaded once into one device allocation; Q|K|V and gate|up are
 * concatenated into one matrix each when their types agree (a V of
 * another type, the Q4_K_M mix's Q6_K attn_v: Q|K stacked over it in one
 * launch, tlc_matvec2_fused), so a decode
 * layer is six launches (llama): QKV matvec (RMSNorm folded in, RoPE and
 * the KV store in its epilogue; qwen, whose NeoX pairs the epilogue does not
 * rotate: the bias, the per-head q/k RMSNorm, RoPE and the KV store made by
 * the attention itself, tlc_attn_decode_pro, or in one launch before it,
 * tlc_qk_rope_kv), split-K attention in one launch (its merge writes the q8_1 of the
 * output; opt-in, TALLOW_CUDA_ATT_WO=1: with the Wo product folded in,
 * measured slower), Wo matvec accumulating into the residual whose epilogue writes
 * q8_1(x o ffn_norm) and per-32 sums of x^2, gate/up matvec (norm folded)
 * with SiLU fused, a quantize of the GLU output (a separate launch measured
 * faster than any fused variant: cuda_matvec.cu; none for float down
 * weights, and for Q8_0 each down block quantizes it itself, in_q8), down
 * matvec accumulating into the residual with the same epilogue for the next
 * layer's (or the output) norm.
 * Decode (one token) is captured as a CUDA graph whose first node copies
 * (position, token, a zeroed argmax key) from pinned host memory, so a
 * token costs one graph launch (two graphs: short contexts, whose attention
 * merges inside a cluster up to tlc_attn_cluster_len, and longer ones);
 * greedy argmax runs in the output head's epilogue and only the key (or,
 * when asked, the logits) comes back.
 * Prompts (m > 1) run eagerly through cuBLAS GEMMs (quantized weights
 * dequantized to f16 per matrix into scratch).
 * KV cache: f16 [layer][k|v][n_kv_head][n_ctx][head_dim].
 * Owns: cl_model (model->backend_ctx), cl_session (session->backend_ctx).
 * Calls: backend/cuda, llm/session.h, base. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_llm.h"

typedef struct cl_layer {
    tlc_weight qkv, wq, wk, wv; /* qkv [e -> qd+2kvd] when fused, else wq/wk/wv */
    bool fused_qkv;
    tlc_weight qk;              /* [e -> qd+kvd] with wv of another type (stacked_qkv) */
    bool stacked_qkv;           /* one tlc_matvec2 launch over qk and wv */
    tlc_weight wo;
    tlc_weight gu, wg, wu;      /* gu [e -> 2 n_ff] (gate rows, then up rows) when fused */
    bool fused_gu;
    tlc_weight wd;
    float *attn_norm, *ffn_norm, *q_norm, *k_norm; /* device f32 */
    float *bqkv;                /* [qd+2kvd] (qwen2) or NULL */
} cl_layer;

typedef struct cl_model {
    tlc_ctx *c;
    void *mem;
    size_t mem_bytes;
    cl_layer *layers;
    tlc_weight emb, out;
    float *out_norm;
    float *rope_freqs;
    size_t max_raw;             /* largest raw tensor (staging for repack) */
    size_t file_bytes;          /* the uploaded weights in the GGUF's encoding (the
                                 * device layout of some types is larger: Q4_K) */
} cl_model;

enum { CL_STEP_INTS = 4 }; /* a decode step's inputs in d_io (cl_session) */

typedef struct cl_session {
    cl_model *cm;
    void *kv;
    size_t kv_bytes;
    tlc_arena arena;
    float *x, *xn, *qkv, *att, *gu, *g, *logits;
    void *xq;                   /* q8_1 of the normed residual (QKV, gate/up input) */
    void *xqb;                  /* q8_1 of attention / GLU output (Wo, down input) */
    float *ssp;                 /* per-32 sums of x^2 of the residual (folded norms) */
    float *attn_scr;
    void *gemm_scr;
    int32_t *d_io;              /* [0] position, [1..] tokens; a decode step: [0] position,
                                 * [1] token, [2..3] the head's argmax key (tlc_mv_fuse.argmax),
                                 * all four written by the copy that starts the step */
    int32_t *d_next;            /* greedy token of a prompt (tlc_argmax) */
    bool next_in_key;           /* the last eval was a decode step: its greedy token is the key */
    int32_t *h_io;              /* pinned [pos, tok, 0, 0] read by the decode graph */
    tlc_graph *graph[2];        /* decode: [0] short contexts (attention merges in a
                                 * cluster), [1] longer ones (no clusters: their launch
                                 * cost 13% of decode at depth 4096) */
    /* TALLOW_CUDA_PROF=1: decode eagerly with an event after every op and
     * print the per-op time (gaps included) when the session is freed;
     * prompt batches likewise, tallied apart ([0] decode, [1] prompt) */
    bool prof;
    int prof_n;                 /* marks recorded this step */
    const char *prof_name[1024];
    struct cl_prof_tally {
        double ms[64];
        const char *key[64];
        int keys, steps;
        bool warm;              /* the first step was seen (not counted) */
    } tally[2];
    /* TALLOW_CUDA_SKIP=word,word,...: profiling ablation, the ops whose
     * names contain a word are not launched (wrong output; the speed
     * without them bounds what making them free could gain) */
    const char *skip;
    int32_t lg_tok;             /* tokens per logits chunk for eval_all */
    bool dev_logits_valid;      /* device logits hold the last token's */
} cl_session;

static void cl_prof_print(cl_session *cs);

/* ---- load ------------------------------------------------------------------- */

typedef struct cl_loader {
    cl_model *cm;
    uint8_t *base;
    size_t off, total;
    void *staging;
    size_t done_bytes, all_bytes;
    int last_pct;
    bool progress;
} cl_loader;

static size_t cl_align(size_t x) { return (x + 255) & ~(size_t)255; }

static void cl_progress(cl_loader *L, size_t add) {
    L->done_bytes += add;
    if (!L->progress || !L->all_bytes) return;
    int pct = (int)(100.0 * L->done_bytes / L->all_bytes);
    if (pct / 5 != L->last_pct / 5 || L->done_bytes == L->all_bytes) {
        fprintf(stderr, "\rcuda: uploading weights %3d%% (%.2f / %.2f GiB)", pct, L->done_bytes / 1073741824.0,
                L->all_bytes / 1073741824.0);
        if (L->done_bytes == L->all_bytes) fputc('\n', stderr);
        L->last_pct = pct;
    }
}

static void *cl_take(cl_loader *L, size_t bytes) {
    void *p = L->base ? L->base + L->off : NULL;
    L->off += cl_align(bytes);
    return p;
}

/* one weight matrix from 1..3 host tensors stacked by rows (same type) */
static tl_status cl_weight(cl_loader *L, tlc_weight *w, const tl_tensor *const *ts, int n) {
    int64_t rows = 0;
    for (int i = 0; i < n; i++) rows += ts[i]->ne[1];
    tl_type t = ts[0]->type;
    int64_t n_in = ts[0]->ne[0];
    size_t bytes = tlc_weight_bytes(t, n_in, rows);
    if (!bytes)
        return tl_err(TL_ERR_UNSUPPORTED, "cuda: weight '%s' of type %s (row %lld) is not supported on CUDA",
                      ts[0]->name ? ts[0]->name : "?", tl_type_name(t), (long long)n_in);
    void *dst = cl_take(L, bytes);
    for (int i = 0; i < n; i++) {
        size_t raw = tl_row_bytes(t, n_in) * (size_t)ts[i]->ne[1];
        if (raw > L->cm->max_raw) L->cm->max_raw = raw;
        if (!L->base) L->cm->file_bytes += raw;
    }
    if (!L->base) return TL_OK; /* sizing pass */
    tl_status s = tlc_weight_describe(w, t, n_in, rows, dst);
    if (s) return s;
    int64_t r0 = 0;
    for (int i = 0; i < n; i++) {
        if ((s = tlc_weight_upload_rows(L->cm->c, w, r0, ts[i]->ne[1], ts[i]->data, L->staging))) return s;
        /* the staging buffer is reused by the next upload: wait for the repack */
        if ((s = tlc_sync(L->cm->c))) return s;
        r0 += ts[i]->ne[1];
        cl_progress(L, tl_row_bytes(t, n_in) * (size_t)ts[i]->ne[1]);
    }
    return TL_OK;
}

static tl_status cl_vec(cl_loader *L, float **out, const tl_tensor *const *ts, int n) {
    size_t total = 0;
    for (int i = 0; i < n; i++) total += (size_t)ts[i]->ne[0] * 4;
    void *dst = cl_take(L, total);
    *out = dst;
    if (!L->base) return TL_OK;
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        if (ts[i]->type != TL_TYPE_F32)
            return tl_err(TL_ERR_UNSUPPORTED, "cuda: vector '%s' must be f32", ts[i]->name ? ts[i]->name : "?");
        tl_status s = tlc_upload_async(L->cm->c, (uint8_t *)dst + off, ts[i]->data, (size_t)ts[i]->ne[0] * 4);
        if (s) return s;
        off += (size_t)ts[i]->ne[0] * 4;
    }
    return TL_OK;
}

static tl_status cl_load_all(cl_loader *L, const tl_model *m) {
    cl_model *cm = L->cm;
    const llm_hparams *hp = &m->hp;
    tl_status s;
    const tl_tensor *one[3];
    one[0] = &m->tok_embd;
    if ((s = cl_weight(L, &cm->emb, one, 1))) return s;
    if (m->output.data && m->output.data != m->tok_embd.data) {
        one[0] = &m->output;
        if ((s = cl_weight(L, &cm->out, one, 1))) return s;
    } else if (L->base) {
        cm->out = cm->emb;
    }
    one[0] = &m->output_norm;
    if ((s = cl_vec(L, &cm->out_norm, one, 1))) return s;
    cm->rope_freqs = NULL;
    if (m->rope_freqs.data) {
        one[0] = &m->rope_freqs;
        if ((s = cl_vec(L, &cm->rope_freqs, one, 1))) return s;
    }
    for (int il = 0; il < hp->n_layer; il++) {
        const llm_layer *ly = &m->layers[il];
        cl_layer *cl = &cm->layers[il];
        cl->fused_qkv = ly->wq.type == ly->wk.type && ly->wk.type == ly->wv.type;
        /* Q|K stacked over a V of another type, where a kernel has the pair */
        const tlc_weight tq = {.type = ly->wq.type, .n_in = ly->wq.ne[0]},
                         tv = {.type = ly->wv.type, .n_in = ly->wv.ne[0]};
        cl->stacked_qkv = !cl->fused_qkv && ly->wq.type == ly->wk.type && tlc_matvec2_ok(cm->c, &tq, &tv);
        if (cl->fused_qkv) {
            const tl_tensor *q3[3] = {&ly->wq, &ly->wk, &ly->wv};
            if ((s = cl_weight(L, &cl->qkv, q3, 3))) return s;
        } else if (cl->stacked_qkv) {
            const tl_tensor *q2[2] = {&ly->wq, &ly->wk};
            if ((s = cl_weight(L, &cl->qk, q2, 2))) return s;
            one[0] = &ly->wv;
            if ((s = cl_weight(L, &cl->wv, one, 1))) return s;
        } else {
            one[0] = &ly->wq;
            if ((s = cl_weight(L, &cl->wq, one, 1))) return s;
            one[0] = &ly->wk;
            if ((s = cl_weight(L, &cl->wk, one, 1))) return s;
            one[0] = &ly->wv;
            if ((s = cl_weight(L, &cl->wv, one, 1))) return s;
        }
        one[0] = &ly->wo;
        if ((s = cl_weight(L, &cl->wo, one, 1))) return s;
        cl->fused_gu = ly->w_gate.type == ly->w_up.type;
        if (cl->fused_gu) {
            const tl_tensor *g2[2] = {&ly->w_gate, &ly->w_up};
            if ((s = cl_weight(L, &cl->gu, g2, 2))) return s;
        } else {
            one[0] = &ly->w_gate;
            if ((s = cl_weight(L, &cl->wg, one, 1))) return s;
            one[0] = &ly->w_up;
            if ((s = cl_weight(L, &cl->wu, one, 1))) return s;
        }
        one[0] = &ly->w_down;
        if ((s = cl_weight(L, &cl->wd, one, 1))) return s;
        one[0] = &ly->attn_norm;
        if ((s = cl_vec(L, &cl->attn_norm, one, 1))) return s;
        one[0] = &ly->ffn_norm;
        if ((s = cl_vec(L, &cl->ffn_norm, one, 1))) return s;
        cl->q_norm = cl->k_norm = cl->bqkv = NULL;
        if (hp->qk_norm) {
            one[0] = &ly->q_norm;
            if ((s = cl_vec(L, &cl->q_norm, one, 1))) return s;
            one[0] = &ly->k_norm;
            if ((s = cl_vec(L, &cl->k_norm, one, 1))) return s;
        }
        if (hp->qkv_bias) {
            const tl_tensor *b3[3] = {&ly->bq, &ly->bk, &ly->bv};
            if ((s = cl_vec(L, &cl->bqkv, b3, 3))) return s;
        }
    }
    return TL_OK;
}

static size_t cl_tensor_bytes(const tl_tensor *t) {
    return t->data ? tl_row_bytes(t->type, t->ne[0]) * (size_t)t->ne[1] : 0;
}

tl_status llm_cuda_attach(tl_model *m) {
    cl_model *cm = calloc(1, sizeof *cm);
    if (!cm) return tl_err(TL_ERR_NOMEM, "cuda: model state");
    cm->layers = calloc((size_t)m->hp.n_layer, sizeof *cm->layers);
    tl_status s = cm->layers ? tlc_init(0, &cm->c) : tl_err(TL_ERR_NOMEM, "cuda: layers");
    if (s) goto fail;
    cl_loader L = {.cm = cm};
    if ((s = cl_load_all(&L, m))) goto fail; /* sizing pass */
    cm->mem_bytes = L.off;
    if ((s = tlc_alloc(cm->c, cm->mem_bytes, "model weights", &cm->mem))) goto fail;
    L.base = cm->mem;
    L.off = 0;
    if ((s = tlc_alloc(cm->c, cm->max_raw, "weight upload staging", &L.staging))) goto fail;
    L.all_bytes = cl_tensor_bytes(&m->tok_embd) +
                  (m->output.data != m->tok_embd.data ? cl_tensor_bytes(&m->output) : 0);
    for (int il = 0; il < m->hp.n_layer; il++) {
        const llm_layer *ly = &m->layers[il];
        L.all_bytes += cl_tensor_bytes(&ly->wq) + cl_tensor_bytes(&ly->wk) + cl_tensor_bytes(&ly->wv) +
                       cl_tensor_bytes(&ly->wo) + cl_tensor_bytes(&ly->w_gate) + cl_tensor_bytes(&ly->w_up) +
                       cl_tensor_bytes(&ly->w_down);
    }
    L.progress = m->params.verbose || L.all_bytes > ((size_t)1 << 30);
    L.last_pct = -5;
    s = cl_load_all(&L, m);
    tl_status s2 = tlc_sync(cm->c);
    tlc_dfree(cm->c, L.staging, cm->max_raw);
    if (s || (s = s2)) goto fail;
    m->backend_ctx = cm;
    return TL_OK;
fail:
    tl_err_prefix(s, "cuda backend: ");
    if (cm->c) {
        tlc_dfree(cm->c, cm->mem, cm->mem_bytes);
        tlc_free(cm->c);
    }
    free(cm->layers);
    free(cm);
    return s;
}

void llm_cuda_detach(tl_model *m) {
    cl_model *cm = m->backend_ctx;
    if (!cm) return;
    tlc_dfree(cm->c, cm->mem, cm->mem_bytes);
    tlc_free(cm->c);
    free(cm->layers);
    free(cm);
    m->backend_ctx = NULL;
}

size_t llm_cuda_weight_bytes(const tl_model *m) {
    const cl_model *cm = m->backend_ctx;
    return cm ? cm->mem_bytes : 0;
}

tl_status llm_cuda_device_stats(const tl_model *m, bool measure, tl_device_stats *o) {
    const cl_model *cm = m->backend_ctx;
    if (!cm) return tl_err(TL_ERR_INVALID, "cuda: model has no device state");
    tlc_device_info di;
    tl_status s = tlc_get_device_info(cm->c, &di);
    if (s) return s;
    snprintf(o->name, sizeof o->name, "%s", di.name);
    o->mem_free = di.mem_free;
    o->mem_total = di.mem_total;
    o->weight_bytes = cm->mem_bytes;
    /* decode reads one embedding row; the table itself only when it is
     * also the output head (tied) */
    const bool tied = cm->out.q == cm->emb.q;
    const size_t emb = tl_row_bytes(cm->emb.type, cm->emb.n_in) * (size_t)cm->emb.n_out;
    o->decode_bytes = cm->file_bytes - (tied || emb > cm->file_bytes ? 0 : emb);
    o->copy_gbs = o->gemm_tflops = 0;
    if (!measure) return TL_OK;
    /* the copy probe: 2 GiB each way (well past the L2), less if memory is short */
    size_t probe = (size_t)2 << 30;
    while (probe > ((size_t)64 << 20) && 2 * probe + ((size_t)512 << 20) > di.mem_free) probe /= 2;
    if ((s = tlc_measure_copy_bw(cm->c, probe, 20, &o->copy_gbs))) return tl_err_prefix(s, "copy ceiling: ");
    if ((s = tlc_measure_gemm(cm->c, 8192, 10, &o->gemm_tflops))) return tl_err_prefix(s, "GEMM ceiling: ");
    return TL_OK;
}

/* ---- session ------------------------------------------------------------------ */

static size_t cl_gemm_halves(const tlc_weight *w, int64_t nb) {
    return w->n_out ? tlc_gemm_scratch_halves(w, nb) : 0;
}

static size_t cl_max(size_t a, size_t b) { return a > b ? a : b; }

/* output-head rows per GEMM in eval_all (bounds the dequantization scratch) */
#define CL_HEAD_ROWS 16384

tl_status llm_cuda_session_init(tl_session *s) {
    const tl_model *m = s->model;
    cl_model *cm = m->backend_ctx;
    const llm_hparams *hp = &m->hp;
    cl_session *cs = calloc(1, sizeof *cs);
    if (!cs) return tl_err(TL_ERR_NOMEM, "cuda: session state");
    cs->cm = cm;
    tlc_ctx *c = cm->c;
    const size_t e = (size_t)hp->n_embd, hd = (size_t)hp->head_dim;
    const size_t qd = (size_t)hp->n_head * hd, kvd = (size_t)hp->n_head_kv * hd, qkvd = qd + 2 * kvd;
    const size_t nb = (size_t)s->n_batch, nff = (size_t)hp->n_ff, nv = (size_t)hp->n_vocab;
    tl_status st;
    cs->kv_bytes = (size_t)hp->n_layer * 2 * kvd * (size_t)s->n_ctx * 2;
    if ((st = tlc_alloc(c, cs->kv_bytes, "KV cache", &cs->kv))) goto fail;
    if ((st = tlc_memset(c, cs->kv, 0, cs->kv_bytes))) goto fail;

    /* gemm scratch: the largest weight's f16 copy + the f16 activations */
    const int64_t head_rows = hp->n_vocab < CL_HEAD_ROWS ? hp->n_vocab : CL_HEAD_ROWS;
    tlc_weight head_view = tlc_weight_rows(&cm->out, 0, head_rows);
    size_t gh = cl_gemm_halves(&head_view, 32);
    for (int il = 0; il < hp->n_layer; il++) {
        const cl_layer *cl = &cm->layers[il];
        const tlc_weight *ws[8] = {&cl->qkv, &cl->wq, &cl->wk, &cl->wv, &cl->wo, &cl->gu, &cl->wg, &cl->wd};
        for (int i = 0; i < 8; i++) gh = cl_max(gh, cl_gemm_halves(ws[i], (int64_t)nb));
        gh = cl_max(gh, cl_gemm_halves(&cl->wu, (int64_t)nb));
        gh = cl_max(gh, cl_gemm_halves(&cl->qk, (int64_t)nb));
    }
    /* the output head in row chunks that fit that scratch (eval_all) */
    cs->lg_tok = 32;
    size_t maxk = cl_max(cl_max(e, qd), nff);
    enum { NBUF = 14 };
    size_t sizes[NBUF] = {
        nb * e * 4, nb * cl_max(e, qd) * 4, nb * qkvd * 4, nb * qd * 4, nb * 2 * nff * 4, nb * nff * 4,
        (size_t)cs->lg_tok * nv * 4, tlc_q8_bytes((int64_t)maxk), tlc_attn_decode_scratch(hp->n_head, hp->head_dim) * 4,
        gh * 2, (nb + CL_STEP_INTS) * 4, 16, tlc_q8_bytes((int64_t)maxk), (e / 32 + 1) * 4};
    size_t total = 0;
    for (int i = 0; i < NBUF; i++) total += cl_align(sizes[i]) + 256;
    if ((st = tlc_arena_init(c, &cs->arena, total, "session activations"))) goto fail;
    void **ptrs[NBUF] = {(void **)&cs->x, (void **)&cs->xn, (void **)&cs->qkv, (void **)&cs->att, (void **)&cs->gu,
                         (void **)&cs->g, (void **)&cs->logits, &cs->xq, (void **)&cs->attn_scr, &cs->gemm_scr,
                         (void **)&cs->d_io, (void **)&cs->d_next, &cs->xqb, (void **)&cs->ssp};
    for (int i = 0; i < NBUF; i++)
        if ((st = tlc_arena_push(&cs->arena, sizes[i], "activation", ptrs[i]))) goto fail;
    if ((st = tlc_host_alloc(16, (void **)&cs->h_io))) goto fail;
    const char *pe = getenv("TALLOW_CUDA_PROF");
    cs->prof = pe && pe[0] == '1';
    cs->skip = getenv("TALLOW_CUDA_SKIP");
    if ((st = tlc_sync(c))) goto fail;
    s->backend_ctx = cs;
    return TL_OK;
fail:
    s->backend_ctx = cs;
    llm_cuda_session_free(s);
    return tl_err_prefix(st, "cuda session: ");
}

void llm_cuda_session_free(tl_session *s) {
    cl_session *cs = s->backend_ctx;
    if (!cs) return;
    tlc_ctx *c = cs->cm->c;
    tlc_sync(c);
    cl_prof_print(cs);
    tlc_graph_free(cs->graph[0]);
    tlc_graph_free(cs->graph[1]);
    tlc_host_free(cs->h_io);
    tlc_arena_free(c, &cs->arena);
    tlc_dfree(c, cs->kv, cs->kv_bytes);
    free(cs);
    s->backend_ctx = NULL;
}

size_t llm_cuda_session_bytes(const tl_session *s) {
    const cl_session *cs = s->backend_ctx;
    return cs ? cs->kv_bytes + cs->arena.size : 0;
}

/* ---- forward -------------------------------------------------------------------- */

#define CL_TRY(x)                                                                                  \
    do {                                                                                           \
        tl_status st_ = (x);                                                                       \
        if (st_) return st_;                                                                       \
    } while (0)

/* does op `name` contain one of the words of the comma-separated ablation
 * list ("qkv", "attention", "wo", "gate", "down", "output"; a prompt's
 * "argmax")? */
static bool cl_skip(const char *list, const char *name) {
    char word[32];
    for (const char *p = list; p && *p;) {
        const char *q = strchr(p, ',');
        size_t len = q ? (size_t)(q - p) : strlen(p);
        if (len > 0 && len < sizeof word) {
            memcpy(word, p, len);
            word[len] = 0;
            if (strstr(name, word)) return true;
        }
        p = q ? q + 1 : NULL;
    }
    return false;
}

/* an op, followed by a profiling mark when profiling; skipped when the
 * ablation list names it */
#define CL_OP(name, x)                                                                             \
    do {                                                                                           \
        if (cs->skip && cl_skip(cs->skip, name)) break;                                            \
        CL_TRY(x);                                                                                 \
        if (cs->prof && cs->prof_n < 1023) {                                                       \
            cs->prof_name[cs->prof_n] = name;                                                      \
            CL_TRY(tlc_prof_mark(cm->c, ++cs->prof_n));                                             \
        }                                                                                          \
    } while (0)

/* A profiled step: mark 0 before its ops (each CL_OP then marks after
 * itself), and after them sync and add the intervals to the tally of its
 * mode (0: a decode step, 1: a prompt batch). No-ops unless profiling. */
static tl_status cl_prof_begin(cl_session *cs) {
    if (!cs->prof) return TL_OK;
    cs->prof_n = 0;
    return tlc_prof_mark(cs->cm->c, 0);
}

static tl_status cl_prof_end(cl_session *cs, int mode) {
    if (!cs->prof) return TL_OK;
    tl_status st = tlc_sync(cs->cm->c);
    if (st) return st;
    struct cl_prof_tally *t = &cs->tally[mode];
    /* the first of each kind is warm-up (module loads, cuBLAS heuristics: the
     * first QKV GEMM of a session took ~60 ms): not counted */
    if (!t->warm) {
        t->warm = true;
        return TL_OK;
    }
    for (int i = 1; i <= cs->prof_n; i++) {
        double ms = 0;
        if (tlc_prof_elapsed(cs->cm->c, i - 1, i, &ms)) return TL_OK;
        const char *nm = cs->prof_name[i - 1];
        int k = 0;
        while (k < t->keys && strcmp(t->key[k], nm)) k++;
        if (k == t->keys) {
            if (k == 64) continue;
            t->key[t->keys++] = nm;
            t->ms[k] = 0;
        }
        t->ms[k] += ms;
    }
    t->steps++;
    return TL_OK;
}

static void cl_prof_print(cl_session *cs) {
    if (!cs->prof) return;
    for (int mode = 0; mode < 2; mode++) {
        const struct cl_prof_tally *t = &cs->tally[mode];
        if (!t->steps) continue;
        double tot = 0;
        for (int k = 0; k < t->keys; k++) tot += t->ms[k];
        fprintf(stderr, "cuda profile: %d eager %s, %.3f ms each (events after each op, gaps included)\n",
                t->steps, mode ? "prompt batches" : "decode steps", tot / t->steps);
        for (int k = 0; k < t->keys; k++)
            fprintf(stderr, "cuda profile: %-16s %9.1f us %5.1f%%\n", t->key[k], 1000.0 * t->ms[k] / t->steps,
                    100.0 * t->ms[k] / tot);
    }
}

/* m tokens already in d_io[1..], position in d_io[0]; leaves the residual
 * stream in cs->x. Enqueue only (graph-capturable when m == 1). */
static tl_status cl_layers(tl_session *s, int32_t m) {
    cl_session *cs = s->backend_ctx;
    cl_model *cm = cs->cm;
    tlc_ctx *c = cm->c;
    const llm_hparams *hp = &s->model->hp;
    const int64_t e = hp->n_embd, hd = hp->head_dim, nh = hp->n_head, nkv = hp->n_head_kv;
    const int64_t qd = nh * hd, kvd = nkv * hd, qkvd = qd + 2 * kvd, nff = hp->n_ff;
    const int32_t *d_pos = cs->d_io;
    const float eps = hp->norm_eps, scale = 1.0f / sqrtf((float)hd);
    const tlc_rope_params rp = {hp->n_rot, hp->rope_type == LLM_ROPE_NEOX, hp->rope_base,
                                hp->rope_scale > 0 ? hp->rope_scale : 1.0f, cm->rope_freqs};
    const size_t kv_layer = (size_t)kvd * (size_t)s->n_ctx; /* elements per K (or V) per layer */

    CL_OP("get_rows", tlc_get_rows(c, &cm->emb, cs->d_io + 1, m, cs->x));
    for (int il = 0; il < hp->n_layer; il++) {
        const cl_layer *L = &cm->layers[il];
        uint16_t *kc = (uint16_t *)cs->kv + (size_t)il * 2 * kv_layer, *vc = kc + kv_layer;
        bool rope_done = false;
        if (m == 1) {
            /* the residual's q8_1(x o attn_norm) and sums of x^2 come from the
             * previous down matvec's epilogue (layer 0: from the embedding) */
            if (il == 0)
                CL_OP("prep", tlc_act_prep_ss(c, cs->x, L->attn_norm, e, 1, cs->xn, cs->xq, cs->ssp));
            const tlc_mv_fuse fin = {.in_ss = cs->ssp, .eps = eps};
            if (L->fused_qkv || L->stacked_qkv) {
                /* llama: RoPE and the KV store in the QKV matvec's epilogue */
                rope_done = !L->bqkv && !L->q_norm && hp->n_rot == hp->head_dim && !rp.neox;
                const tlc_rope_kv_args ra = {rp, (int)nh, (int)nkv, (int)hd, kc, vc, s->n_ctx, d_pos};
                const tlc_mv_fuse fr = {.in_ss = cs->ssp, .eps = eps, .rope = &ra};
                const tlc_mv_fuse *fq = rope_done ? &fr : &fin;
                const char *op = rope_done ? "mv qkv+rope" : "mv qkv";
                if (L->fused_qkv)
                    CL_OP(op, tlc_matvec_fused(c, &L->qkv, cs->xn, cs->xq, cs->qkv, TLC_MV_STORE, fq));
                else
                    CL_OP(op, tlc_matvec2_fused(c, &L->qk, &L->wv, cs->xn, cs->xq, cs->qkv, fq));
            } else {
                CL_OP("mv q", tlc_matvec_fused(c, &L->wq, cs->xn, cs->xq, cs->qkv, TLC_MV_STORE, &fin));
                CL_OP("mv k", tlc_matvec_fused(c, &L->wk, cs->xn, cs->xq, cs->qkv + qd, TLC_MV_STORE, &fin));
                CL_OP("mv v", tlc_matvec_fused(c, &L->wv, cs->xn, cs->xq, cs->qkv + qd + kvd, TLC_MV_STORE, &fin));
            }
        } else {
            CL_OP("pp norm", tlc_act_prep(c, cs->x, L->attn_norm, eps, e, m, cs->xn, NULL));
            if (L->fused_qkv) {
                CL_OP("pp gemm qkv", tlc_gemm(c, &L->qkv, cs->xn, m, cs->qkv, TLC_MV_STORE, cs->gemm_scr));
            } else if (L->stacked_qkv) {
                CL_OP("pp gemm qk", tlc_gemm_ex(c, &L->qk, cs->xn, m, cs->qkv, qkvd, TLC_MV_STORE, cs->gemm_scr));
                CL_OP("pp gemm v",
                      tlc_gemm_ex(c, &L->wv, cs->xn, m, cs->qkv + qd + kvd, qkvd, TLC_MV_STORE, cs->gemm_scr));
            } else {
                CL_OP("pp gemm q", tlc_gemm_ex(c, &L->wq, cs->xn, m, cs->qkv, qkvd, TLC_MV_STORE, cs->gemm_scr));
                CL_OP("pp gemm k", tlc_gemm_ex(c, &L->wk, cs->xn, m, cs->qkv + qd, qkvd, TLC_MV_STORE, cs->gemm_scr));
                CL_OP("pp gemm v",
                      tlc_gemm_ex(c, &L->wv, cs->xn, m, cs->qkv + qd + kvd, qkvd, TLC_MV_STORE, cs->gemm_scr));
            }
        }
        /* qwen decode: the bias, the per-head q/k norms, RoPE and the KV store in one launch */
        const bool qk_fused = m == 1 && !rope_done && (L->bqkv || L->q_norm) && !L->q_norm == !L->k_norm &&
                              tlc_qk_rope_kv_ok(c, (int)hd, &rp);
        if (!qk_fused && L->bqkv) CL_OP("qkv bias", tlc_add_bias(c, cs->qkv, m, qkvd, L->bqkv, qkvd));
        if (!qk_fused && L->q_norm) {
            CL_OP("q/k norm", tlc_head_rmsnorm(c, cs->qkv, m, qkvd, (int)nh, (int)hd, L->q_norm, eps));
            CL_OP("q/k norm", tlc_head_rmsnorm(c, cs->qkv + qd, m, qkvd, (int)nkv, (int)hd, L->k_norm, eps));
        }
        /* short contexts, opt-in: the Wo product folded into the attention */
        const bool att_wo = m == 1 && tlc_attn_wo_ok(c, &L->wo, TL_TYPE_F16, (int)nh, (int)nkv, (int)hd);
        /* and that launch folded into the attention's start */
        const bool att_pro = qk_fused && !att_wo && tlc_attn_pro_ok(c, (int)hd, &rp);
        if (rope_done || att_pro) {
            /* done in the QKV epilogue (llama) or by the attention (qwen) */
        } else if (qk_fused) {
            CL_OP("qk+rope+kv", tlc_qk_rope_kv(c, cs->qkv, (int)nh, (int)nkv, (int)hd, kc, vc, s->n_ctx, d_pos, &rp,
                                                L->bqkv, L->q_norm, L->k_norm, eps));
        } else if (m == 1 && hp->n_rot == hp->head_dim) {
            /* decode: rotate q and k and store k, v into the cache in one launch */
            CL_OP("rope+kv", tlc_rope_kv(c, cs->qkv, (int)nh, (int)nkv, (int)hd, kc, vc, s->n_ctx, d_pos, &rp));
        } else {
            /* q and k are adjacent in each token's row: one launch rotates both */
            CL_OP("rope", tlc_rope(c, cs->qkv, m, qkvd, (int)(nh + nkv), (int)hd, d_pos, &rp));
            CL_OP("kv store", tlc_kv_store(c, cs->qkv + qd, cs->qkv + qd + kvd, m, qkvd, (int)nkv, (int)hd, kc, vc,
                                TL_TYPE_F16, s->n_ctx, d_pos));
        }
        if (m == 1) {
            const tlc_mv_fuse fwo = {.out_norm = L->ffn_norm, .out_f = cs->xn, .out_q = cs->xq, .out_ss = cs->ssp};
            if (att_wo) {
                /* short contexts: Wo folded into the attention (one launch) */
                CL_OP("attention+wo", tlc_attn_wo_decode(c, cs->qkv, kc, vc, TL_TYPE_F16, (int)nh, (int)nkv, (int)hd,
                                                         s->n_ctx, d_pos, scale, cs->attn_scr, &L->wo, cs->x, &fwo));
            } else {
                /* the split merge also writes the q8_1 input of the Wo matvec */
                if (att_pro)
                    CL_OP("attention", tlc_attn_decode_pro(c, cs->qkv, kc, vc, TL_TYPE_F16, (int)nh, (int)nkv, (int)hd,
                                                           s->n_ctx, d_pos, scale, cs->attn_scr, cs->att, cs->xqb, &rp,
                                                           L->bqkv, L->q_norm, L->k_norm, eps));
                else
                    CL_OP("attention", tlc_attn_decode(c, cs->qkv, kc, vc, TL_TYPE_F16, (int)nh, (int)nkv, (int)hd,
                                                       s->n_ctx, d_pos, scale, cs->attn_scr, cs->att, cs->xqb));
                CL_OP("mv wo", tlc_matvec_fused(c, &L->wo, cs->att, cs->xqb, cs->x, TLC_MV_ACCUM, &fwo));
            }
            const tlc_mv_fuse fin = {.in_ss = cs->ssp, .eps = eps};
            /* the down projection's input: f32 for float weights; q8_1 made
             * by each down block itself (in_q8) where that measured faster
             * (Q8_0); else the GLU's q8_1 epilogue (a separate launch) */
            const bool dn_inq = tlc_mv_in_q8_use(c, &L->wd), dn_f = tlc_weight_is_float(&L->wd);
            void *glu_q = dn_inq || dn_f ? NULL : cs->xqb;
            if (L->fused_gu) {
                const tlc_mv_fuse fgu = {.in_ss = cs->ssp, .eps = eps, .out_q = glu_q};
                CL_OP("mv gate+up", tlc_matvec_fused(c, &L->gu, cs->xn, cs->xq, cs->g, TLC_MV_GLU, &fgu));
            } else {
                CL_OP("mv gate", tlc_matvec_fused(c, &L->wg, cs->xn, cs->xq, cs->gu, TLC_MV_STORE, &fin));
                CL_OP("mv up", tlc_matvec_fused(c, &L->wu, cs->xn, cs->xq, cs->gu + nff, TLC_MV_STORE, &fin));
                CL_OP("glu+quantize", tlc_glu_rows(c, cs->gu, cs->g, 1, nff));
                if (glu_q) CL_OP("glu+quantize", tlc_act_prep(c, cs->g, NULL, 0, nff, 1, NULL, glu_q));
            }
            /* the epilogue prepares the next norm: layer il+1's or the output's */
            const float *next_norm = il + 1 < hp->n_layer ? cm->layers[il + 1].attn_norm : cm->out_norm;
            const tlc_mv_fuse fdn = {
                .out_norm = next_norm, .out_f = cs->xn, .out_q = cs->xq, .out_ss = cs->ssp, .in_q8 = dn_inq};
            CL_OP("mv down", tlc_matvec_fused(c, &L->wd, cs->g, glu_q, cs->x, TLC_MV_ACCUM, &fdn));
        } else {
            CL_OP("pp attention", tlc_attn_prefill(c, cs->qkv, qkvd, kc, vc, TL_TYPE_F16, (int)nh, (int)nkv, (int)hd,
                                                   s->n_ctx, m, d_pos, scale, cs->att));
            CL_OP("pp gemm wo", tlc_gemm(c, &L->wo, cs->att, m, cs->x, TLC_MV_ACCUM, cs->gemm_scr));
            CL_OP("pp norm", tlc_act_prep(c, cs->x, L->ffn_norm, eps, e, m, cs->xn, NULL));
            if (L->fused_gu) {
                CL_OP("pp gemm gate+up", tlc_gemm(c, &L->gu, cs->xn, m, cs->gu, TLC_MV_STORE, cs->gemm_scr));
            } else {
                CL_OP("pp gemm gate", tlc_gemm_ex(c, &L->wg, cs->xn, m, cs->gu, 2 * nff, TLC_MV_STORE, cs->gemm_scr));
                CL_OP("pp gemm up",
                      tlc_gemm_ex(c, &L->wu, cs->xn, m, cs->gu + nff, 2 * nff, TLC_MV_STORE, cs->gemm_scr));
            }
            CL_OP("pp glu", tlc_glu_rows(c, cs->gu, cs->g, m, nff));
            CL_OP("pp gemm down", tlc_gemm(c, &L->wd, cs->g, m, cs->x, TLC_MV_ACCUM, cs->gemm_scr));
        }
    }
    return TL_OK;
}

/* last token's logits into cs->logits and its argmax into d_next (a
 * decode step: as the head's argmax key in d_io[2..3]) */
static tl_status cl_head_last(tl_session *s, int32_t m) {
    cl_session *cs = s->backend_ctx;
    cl_model *cm = cs->cm;
    const llm_hparams *hp = &s->model->hp;
    const int64_t e = hp->n_embd;
    if (m == 1) {
        /* the last down matvec left q8_1(x o out_norm) and the sums of x^2;
         * the greedy token as the head's argmax key, zeroed by the step's copy */
        const tlc_mv_fuse fin = {.in_ss = cs->ssp, .eps = hp->norm_eps,
                                 .argmax = (unsigned long long *)(cs->d_io + 2)};
        CL_OP("mv output", tlc_matvec_fused(cm->c, &cm->out, cs->xn, cs->xq, cs->logits, TLC_MV_STORE, &fin));
    } else {
        CL_OP("pp head", tlc_act_prep(cm->c, cs->x + (int64_t)(m - 1) * e, cm->out_norm, hp->norm_eps, e, 1, cs->xn,
                                      cs->xq));
        CL_OP("pp head", tlc_matvec(cm->c, &cm->out, cs->xn, cs->xq, cs->logits, TLC_MV_STORE));
        CL_OP("argmax", tlc_argmax(cm->c, cs->logits, hp->n_vocab, cs->d_next));
    }
    return TL_OK;
}

/* the decode step's pinned inputs, which its first copy (CL_STEP_INTS
 * ints) takes to d_io: position, token and the zeroed argmax key */
static void cl_step_inputs(cl_session *cs, int32_t pos, int32_t tok) {
    cs->h_io[0] = pos;
    cs->h_io[1] = tok;
    cs->h_io[2] = cs->h_io[3] = 0;
}

/* one decode step through a captured graph (each captured on first use):
 * the short-context one while the attention's cluster merge serves the
 * context, then the long-context one */
static tl_status cl_decode(tl_session *s, int32_t tok) {
    cl_session *cs = s->backend_ctx;
    cl_model *cm = cs->cm;
    tlc_ctx *c = cm->c;
    const bool short_ctx = (int64_t)s->n_past + 1 <= tlc_attn_cluster_len(c);
    /* the longest context the attention launches of this step serve */
    const int64_t plan_len = short_ctx ? tlc_attn_cluster_len(c) : s->n_ctx;
    if (cs->prof) {
        cl_step_inputs(cs, s->n_past, tok);
        CL_TRY(tlc_upload(c, cs->d_io, cs->h_io, CL_STEP_INTS * sizeof(int32_t)));
        CL_TRY(cl_prof_begin(cs));
        tlc_attn_plan(c, plan_len);
        tl_status st = cl_layers(s, 1);
        if (!st) st = cl_head_last(s, 1);
        tlc_attn_plan(c, 0);
        CL_TRY(st);
        return cl_prof_end(cs, 0);
    }
    const int gi = short_ctx ? 0 : 1;
    if (!cs->graph[gi]) {
        CL_TRY(tlc_sync(c));
        CL_TRY(tlc_graph_begin(c));
        /* the attention launches captured now */
        tlc_attn_plan(c, plan_len);
        tl_status st = tlc_upload_async(c, cs->d_io, cs->h_io, CL_STEP_INTS * sizeof(int32_t));
        if (!st) st = cl_layers(s, 1);
        if (!st) st = cl_head_last(s, 1);
        tlc_graph *g = NULL;
        tl_status st2 = tlc_graph_end(c, &g);
        tlc_attn_plan(c, 0);
        if (st) {
            tlc_graph_free(g);
            return st;
        }
        if (st2) return st2;
        cs->graph[gi] = g;
    }
    /* the previous step has finished (every eval ends synchronized), so the
     * pinned inputs can be rewritten */
    cl_step_inputs(cs, s->n_past, tok);
    return tlc_graph_launch(c, cs->graph[gi]);
}

/* eval n tokens; afterwards the last token's logits are on the device and
 * its argmax in d_next, or after a decode step as the key in d_io[2..3]
 * (stream not yet synchronized) */
static tl_status cl_eval(tl_session *s, const int32_t *tokens, int32_t n) {
    cl_session *cs = s->backend_ctx;
    tlc_ctx *c = cs->cm->c;
    CL_TRY(llm_session_check(s, tokens, n));
    for (int32_t i = 0; i < n; i += s->n_batch) {
        int32_t m = n - i < s->n_batch ? n - i : s->n_batch;
        cs->next_in_key = m == 1; /* the last chunk's head left the greedy token */
        if (m == 1) {
            CL_TRY(cl_decode(s, tokens[i]));
        } else {
            /* pageable copies complete before returning, so reuse of the host
             * buffer is safe; the stream orders them before the kernels */
            int32_t pos = s->n_past;
            CL_TRY(tlc_upload(c, cs->d_io, &pos, sizeof pos));
            CL_TRY(tlc_upload(c, cs->d_io + 1, tokens + i, (size_t)m * sizeof(int32_t)));
            CL_TRY(cl_prof_begin(cs));
            CL_TRY(cl_layers(s, m));
            if (i + m == n) CL_TRY(cl_head_last(s, m));
            CL_TRY(cl_prof_end(cs, 1));
        }
        s->n_past += m;
    }
    return TL_OK;
}

tl_status llm_cuda_eval(tl_session *s, const int32_t *tokens, int32_t n, const float **logits) {
    cl_session *cs = s->backend_ctx;
    tl_status st = cl_eval(s, tokens, n);
    if (st) return st;
    if (logits) {
        CL_TRY(tlc_download(cs->cm->c, s->a.logits, cs->logits, (size_t)s->model->hp.n_vocab * sizeof(float)));
        *logits = s->a.logits;
        return TL_OK;
    }
    return tlc_sync(cs->cm->c);
}

tl_status llm_cuda_eval_greedy(tl_session *s, const int32_t *tokens, int32_t n, int32_t *next) {
    cl_session *cs = s->backend_ctx;
    tl_status st = cl_eval(s, tokens, n);
    if (st) return st;
    if (!cs->next_in_key) return tlc_download(cs->cm->c, next, cs->d_next, sizeof(int32_t));
    unsigned long long key = 0;
    st = tlc_download(cs->cm->c, &key, cs->d_io + 2, sizeof key);
    if (st) return st;
    /* zero: the head did not run (only under the TALLOW_CUDA_SKIP ablation) */
    if (!key) return tl_err(TL_ERR_BACKEND, "cuda: decode step left no greedy token");
    *next = tlc_argmax_key_row(key);
    return TL_OK;
}

tl_status llm_cuda_eval_all(tl_session *s, const int32_t *tokens, int32_t n, float *out) {
    cl_session *cs = s->backend_ctx;
    cl_model *cm = cs->cm;
    tlc_ctx *c = cm->c;
    const llm_hparams *hp = &s->model->hp;
    const int64_t e = hp->n_embd, nv = hp->n_vocab;
    CL_TRY(llm_session_check(s, tokens, n));
    if (!out) return tl_err(TL_ERR_INVALID, "session: NULL logits buffer");
    for (int32_t i = 0; i < n; i += s->n_batch) {
        int32_t m = n - i < s->n_batch ? n - i : s->n_batch;
        int32_t pos = s->n_past;
        CL_TRY(tlc_upload(c, cs->d_io, &pos, sizeof pos));
        CL_TRY(tlc_upload(c, cs->d_io + 1, tokens + i, (size_t)m * sizeof(int32_t)));
        CL_TRY(cl_prof_begin(cs));
        CL_TRY(cl_layers(s, m));
        CL_TRY(cl_prof_end(cs, 1));
        CL_TRY(tlc_act_prep(c, cs->x, cm->out_norm, hp->norm_eps, e, m, cs->xn, NULL));
        /* logits of lg_tok tokens at a time, the head in row chunks that fit
         * the GEMM scratch (sized for CL_HEAD_ROWS rows at init) */
        for (int32_t t0 = 0; t0 < m; t0 += cs->lg_tok) {
            int32_t nt = m - t0 < cs->lg_tok ? m - t0 : cs->lg_tok;
            const int64_t rows = CL_HEAD_ROWS;
            for (int64_t r0 = 0; r0 < nv; r0 += rows) {
                int64_t nr = nv - r0 < rows ? nv - r0 : rows;
                tlc_weight v = tlc_weight_rows(&cm->out, r0, nr);
                CL_TRY(tlc_gemm_ex(c, &v, cs->xn + (int64_t)t0 * e, nt, cs->logits + r0, nv, TLC_MV_STORE,
                                   cs->gemm_scr));
            }
            CL_TRY(tlc_download(c, out + ((size_t)i + (size_t)t0) * (size_t)nv, cs->logits,
                                (size_t)nt * (size_t)nv * sizeof(float)));
        }
        s->n_past += m;
    }
    memcpy(s->a.logits, out + (size_t)(n - 1) * (size_t)nv, (size_t)nv * sizeof(float));
    return TL_OK;
}
