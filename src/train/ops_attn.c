/* train/ops_attn: causal scaled-dot-product attention with GQA, forward and
 * backward, one (batch, head) at a time on the thread pool. The forward keeps
 * the probabilities P [B, H, T, S] for the backward (memory like PyTorch's
 * unfused attention); backward runs per (batch, kv-head) group so the heads
 * sharing a K/V accumulate their gradients without races. The f32 softmax
 * rows and their backward have an AVX2 twin (ops_attn_avx2.c).
 * Owns: nothing. Calls: train/gemm, train internals. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "train/tt_internal.h"

void tt__attn_softmax_avx2(float *p, int64_t Tn, int64_t S, float scale, int causal);
void tt__attn_dsoftmax_avx2(const float *p, float *dp, int64_t Tn, int64_t S, float scale);

typedef struct attn_job {
    tt_dtype dt;
    int64_t B, H, Hkv, T, S, D;
    double scale;
    bool causal;
    const void *q, *k, *v, *g; /* q/k/v: element [b,h,0,0] at b*xs[0] + h*xs[1]; rows xs[2], cols xs[3] */
    int64_t qs[4], ks[4], vs[4];
    void *o, *p;               /* o: [B, T, H, D] memory order (returned as a [B,H,T,D] view) */
    void *gq, *gk, *gv; /* NULL when not needed */
    int err;
} attn_job;

static void gemm1(tt_dtype dt, int64_t M, int64_t N, int64_t K, const void *A, int64_t rsa, int64_t csa,
                  const void *B, int64_t rsb, int64_t csb, void *C, int64_t ldc, bool acc) {
    if (dt == TT_F32)
        tt_gemm_f32(NULL, M, N, K, A, rsa, csa, B, rsb, csb, C, ldc, acc);
    else
        tt_gemm_f64(M, N, K, A, rsa, csa, B, rsb, csb, C, ldc, acc);
}

#define DEF_ATTN_ROWS(T, SFX, EXP)                                                          \
    /* scale, mask and softmax the score rows in place */                                  \
    static void attn_softmax_##SFX(T *p, int64_t Tn, int64_t S, double scale, bool causal) { \
        for (int64_t i = 0; i < Tn; i++) {                                                  \
            T *r = p + i * S;                                                               \
            int64_t lim = causal ? i + (S - Tn) + 1 : S;                                    \
            if (lim > S) lim = S;                                                           \
            T mx = -(T)INFINITY;                                                            \
            for (int64_t j = 0; j < lim; j++) {                                             \
                r[j] *= (T)scale;                                                           \
                mx = r[j] > mx ? r[j] : mx;                                                 \
            }                                                                               \
            T s = 0;                                                                        \
            for (int64_t j = 0; j < lim; j++) {                                             \
                r[j] = EXP(r[j] - mx);                                                      \
                s += r[j];                                                                  \
            }                                                                               \
            T inv = s > 0 ? 1 / s : 0;                                                      \
            for (int64_t j = 0; j < lim; j++) r[j] *= inv;                                  \
            for (int64_t j = lim; j < S; j++) r[j] = 0;                                     \
        }                                                                                   \
    }                                                                                       \
    /* dS = scale * P * (dP - rowsum(P * dP)), in place over dP */                          \
    static void attn_dsoftmax_##SFX(const T *p, T *dp, int64_t Tn, int64_t S, double scale) { \
        for (int64_t i = 0; i < Tn; i++) {                                                  \
            const T *pr = p + i * S;                                                        \
            T *d = dp + i * S;                                                              \
            T s = 0;                                                                        \
            for (int64_t j = 0; j < S; j++) s += pr[j] * d[j];                              \
            for (int64_t j = 0; j < S; j++) d[j] = (T)scale * pr[j] * (d[j] - s);           \
        }                                                                                   \
    }
DEF_ATTN_ROWS(float, f32, expf)
DEF_ATTN_ROWS(double, f64, exp)

static void attn_fwd_task(void *arg, int ith, int nth) {
    attn_job *j = arg;
    size_t es = tt__esize(j->dt);
    int64_t rep = j->H / j->Hkv, TS = j->T * j->S;
    for (int64_t bh = ith; bh < j->B * j->H; bh += nth) {
        int64_t b = bh / j->H, h = bh % j->H, kh = h / rep;
        const char *q = (const char *)j->q + (size_t)(b * j->qs[0] + h * j->qs[1]) * es;
        const char *k = (const char *)j->k + (size_t)(b * j->ks[0] + kh * j->ks[1]) * es;
        const char *v = (const char *)j->v + (size_t)(b * j->vs[0] + kh * j->vs[1]) * es;
        char *p = (char *)j->p + (size_t)(bh * TS) * es;
        char *o = (char *)j->o + (size_t)((b * j->T * j->H + h) * j->D) * es;
        gemm1(j->dt, j->T, j->S, j->D, q, j->qs[2], j->qs[3], k, j->ks[3], j->ks[2], p, j->S, false);
        if (j->dt == TT_F32 && tl_cpu_use_avx2())
            tt__attn_softmax_avx2((float *)p, j->T, j->S, (float)j->scale, j->causal);
        else if (j->dt == TT_F32)
            attn_softmax_f32((float *)p, j->T, j->S, j->scale, j->causal);
        else
            attn_softmax_f64((double *)p, j->T, j->S, j->scale, j->causal);
        gemm1(j->dt, j->T, j->D, j->S, p, j->S, 1, v, j->vs[2], j->vs[3], o, j->H * j->D, false);
    }
}

static void attn_bwd_task(void *arg, int ith, int nth) {
    attn_job *j = arg;
    size_t es = tt__esize(j->dt);
    int64_t rep = j->H / j->Hkv, TD = j->T * j->D, SD = j->S * j->D, TS = j->T * j->S;
    void *dp = malloc((size_t)TS * es);
    if (!dp) {
        j->err = 1;
        return;
    }
    for (int64_t grp = ith; grp < j->B * j->Hkv; grp += nth) {
        int64_t b = grp / j->Hkv, kh = grp % j->Hkv;
        const char *k = (const char *)j->k + (size_t)(b * j->ks[0] + kh * j->ks[1]) * es;
        const char *v = (const char *)j->v + (size_t)(b * j->vs[0] + kh * j->vs[1]) * es;
        for (int64_t r = 0; r < rep; r++) {
            int64_t h = kh * rep + r, bh = b * j->H + h;
            const char *q = (const char *)j->q + (size_t)(b * j->qs[0] + h * j->qs[1]) * es;
            const char *g = (const char *)j->g + (size_t)(bh * TD) * es;
            const char *p = (const char *)j->p + (size_t)(bh * TS) * es;
            if (j->gv) /* dV += P^T dO */
                gemm1(j->dt, j->S, j->D, j->T, p, 1, j->S, g, j->D, 1, (char *)j->gv + (size_t)(grp * SD) * es,
                      j->D, true);
            if (!j->gq && !j->gk) continue;
            /* dP = dO V^T */
            gemm1(j->dt, j->T, j->S, j->D, g, j->D, 1, v, j->vs[3], j->vs[2], dp, j->S, false);
            if (j->dt == TT_F32 && tl_cpu_use_avx2())
                tt__attn_dsoftmax_avx2((const float *)p, dp, j->T, j->S, (float)j->scale);
            else if (j->dt == TT_F32)
                attn_dsoftmax_f32((const float *)p, dp, j->T, j->S, j->scale);
            else
                attn_dsoftmax_f64((const double *)p, dp, j->T, j->S, j->scale);
            if (j->gq) /* dQ += dS K */
                gemm1(j->dt, j->T, j->D, j->S, dp, j->S, 1, k, j->ks[2], j->ks[3],
                      (char *)j->gq + (size_t)(bh * TD) * es, j->D, true);
            if (j->gk) /* dK += dS^T Q */
                gemm1(j->dt, j->S, j->D, j->T, dp, 1, j->S, q, j->qs[2], j->qs[3],
                      (char *)j->gk + (size_t)(grp * SD) * es, j->D, true);
        }
    }
    free(dp);
}

static void set_strides(int64_t *dst, const tt_tensor *x) {
    for (int i = 0; i < 4; i++) dst[i] = x->stride[i];
}

static void attn_fill(attn_job *j, const tt_tensor *q, const tt_tensor *k, double scale, bool causal) {
    memset(j, 0, sizeof *j);
    j->dt = q->dtype;
    j->B = q->shape[0];
    j->H = q->shape[1];
    j->T = q->shape[2];
    j->D = q->shape[3];
    j->Hkv = k->shape[1];
    j->S = k->shape[2];
    j->scale = scale;
    j->causal = causal;
}

static tl_status bw_attention(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    tt_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2];
    attn_job j;
    attn_fill(&j, q, k, n->f[0], n->i[0]);
    j.q = tt_data(q);
    j.k = tt_data(k);
    j.v = tt_data(v);
    set_strides(j.qs, q);
    set_strides(j.ks, k);
    set_strides(j.vs, v);
    j.g = tt_data(g);
    j.p = tt_data(n->saved[0]);
    if (tt__need(n, 0)) j.gq = tt_data(tt__grad_buf(q));
    if (tt__need(n, 1)) j.gk = tt_data(tt__grad_buf(k));
    if (tt__need(n, 2)) j.gv = tt_data(tt__grad_buf(v));
    if (j.B * j.Hkv > 1)
        tl_threadpool_run(c->tp, attn_bwd_task, &j);
    else
        attn_bwd_task(&j, 0, 1);
    return j.err ? tl_err(TL_ERR_NOMEM, "train: attention backward: out of memory") : TL_OK;
}

tt_tensor *tt_attention(tt_ctx *c, tt_tensor *q, tt_tensor *k, tt_tensor *v, bool causal, double scale) {
#ifdef TALLOW_CUDA
    if (q && tt__dev(q) == TT_CUDA) return tt__cu_attention(c, q, k, v, causal, scale);
#endif
    tt_tensor *in0[3] = {q, k, v};
    if (!tt__check(in0, 3, "attention")) return NULL;
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4 || k->shape[0] != q->shape[0] || v->shape[0] != q->shape[0] ||
        k->shape[3] != q->shape[3] || v->shape[3] != q->shape[3] || k->shape[1] != v->shape[1] ||
        k->shape[2] != v->shape[2] || k->shape[1] == 0 || q->shape[1] % k->shape[1] ||
        (causal && k->shape[2] < q->shape[2])) {
        tl_err(TL_ERR_INVALID, "train: attention: q [B,H,T,D] and k/v [B,Hkv,S,D] with H %% Hkv == 0 "
                               "(and S >= T when causal) expected");
        return NULL;
    }
    if (scale <= 0) scale = 1.0 / sqrt((double)q->shape[3]);
    /* q/k/v are read through their strides (views of fused QKV or permuted
     * heads cost no copy); the last dim must be unit-stride for the gemm. */
    tt_tensor *qc = q->stride[3] == 1 ? q : tt_contiguous(c, q);
    tt_tensor *kc = k->stride[3] == 1 ? k : tt_contiguous(c, k);
    tt_tensor *vc = v->stride[3] == 1 ? v : tt_contiguous(c, v);
    if (!qc || !kc || !vc) return NULL;
    /* output stored [B, T, H, D] so merging heads back is a free reshape */
    int64_t osh[4] = {q->shape[0], q->shape[2], q->shape[1], q->shape[3]};
    tt_tensor *ob = tt__temp(c, q->dtype, 4, osh);
    if (!ob) return NULL;
    int64_t vsh[4] = {q->shape[0], q->shape[1], q->shape[2], q->shape[3]};
    int64_t vst[4] = {ob->stride[0], ob->stride[2], ob->stride[1], 1};
    tt_tensor *o = tt__view(c, ob, 4, vsh, vst, 0);
    int64_t psh[4] = {q->shape[0], q->shape[1], q->shape[2], k->shape[2]};
    tt_tensor *p = o ? tt_new(q->dtype, 4, psh) : NULL;
    if (!o || !p) {
        tt_free(p);
        return NULL;
    }
    attn_job j;
    attn_fill(&j, q, k, scale, causal);
    j.q = tt_data(qc);
    j.k = tt_data(kc);
    j.v = tt_data(vc);
    set_strides(j.qs, qc);
    set_strides(j.ks, kc);
    set_strides(j.vs, vc);
    j.o = tt_data(ob);
    j.p = tt_data(p);
    if (j.B * j.H > 1)
        tl_threadpool_run(c->tp, attn_fwd_task, &j);
    else
        attn_fwd_task(&j, 0, 1);
    tt_tensor *in[3] = {qc, kc, vc};
    if (tt__needs_grad(c, in, 3)) {
        tt_node *n = tt__record(c, "attention", bw_attention, o, in, 3);
        if (!n) {
            tt_free(p);
            return NULL;
        }
        n->saved[0] = p;
        n->f[0] = scale;
        n->i[0] = causal;
        c->live_bytes += (size_t)tt_numel(p) * tt__esize(q->dtype);
    } else {
        tt_free(p);
    }
    return o;
}

tt_tensor *tt_attention_qkv(tt_ctx *c, tt_tensor *qkv, int64_t heads, int64_t kv_heads, bool causal, double scale) {
    if (!qkv) return NULL; /* message already set by whoever failed */
    const int64_t parts = heads + 2 * kv_heads;
    if (qkv->ndim != 3 || heads <= 0 || kv_heads <= 0 || heads % kv_heads || qkv->shape[2] % parts) {
        char s1[64];
        tl_err(TL_ERR_INVALID, "train: attention_qkv: qkv [B, T, (H + 2 Hkv) D] with H %% Hkv == 0 expected "
                               "(got %s for H %lld, Hkv %lld)", tt__shape_str(qkv, s1, sizeof s1), (long long)heads,
               (long long)kv_heads);
        return NULL;
    }
    const int64_t B = qkv->shape[0], T = qkv->shape[1], D = qkv->shape[2] / parts;
#ifdef TALLOW_CUDA
    if (tt__dev(qkv) == TT_CUDA && tt__cu_attention_qkv_ok(c, D))
        return tt__cu_attention_qkv(c, qkv, heads, kv_heads, causal, scale);
#endif
    /* the views and tt_attention below run on every device */
    /* views of the three parts as [B, H, T, D]: no copy on either device */
    const int perm[4] = {0, 2, 1, 3};
    const int64_t hs[3] = {heads, kv_heads, kv_heads}, start[3] = {0, heads * D, (heads + kv_heads) * D};
    tt_tensor *x[3];
    for (int i = 0; i < 3; i++) {
        const int64_t sh[4] = {B, T, hs[i], D};
        x[i] = tt_permute(c, tt_reshape(c, tt_narrow(c, qkv, 2, start[i], hs[i] * D), 4, sh), perm);
    }
    const int64_t osh[3] = {B, T, heads * D};
    return tt_reshape(c, tt_permute(c, tt_attention(c, x[0], x[1], x[2], causal, scale), perm), 3, osh);
}
