/* backend/cuda/cuda_be_ops: the ops of the CUDA backend (see cuda_be.h):
 * one-token linears through the fused matvecs (the input's RMSNorm folded
 * in, RoPE and the KV store or the next norm's q8_1 in the epilogue, the
 * head's argmax), linears of more tokens through cuBLAS GEMMs with their
 * epilogues as separate launches, and attention through the tuned decode
 * kernel (one sequence), the tensor-core flash kernel (one sequence's
 * prompt) or the paged kernel (everything else).
 * Owns nothing. Calls: backend/cuda (C ABI). */
#include <string.h>

#include "backend/cuda/cuda_be.h"

#define CB_TRY(x)                   \
    do {                            \
        tl_status s_ = (x);         \
        if (s_) return s_;          \
    } while (0)

void cb_touch(be_ctx *bc, const void *p) {
    if (p && p == bc->prep_x) bc->prep_x = bc->prep_g = NULL;
    if (p && p == bc->q8_src) bc->q8_src = NULL;
}

static tlc_rope_params cb_rope(const be_rope *r) {
    tlc_rope_params p = {r->n_rot, r->neox, r->base, r->scale > 0 ? r->scale : 1.0f, r->freq_div};
    return p;
}

/* the Qwen decode prologue left by the QKV linear, as its own launch */
static tl_status cb_flush(be_ctx *bc) {
    if (!bc->pend) return TL_OK;
    bc->pend = false;
    const be_qkv_epi *e = &bc->pend_e;
    const tlc_rope_params rp = cb_rope(&bc->pend_rope);
    return tlc_qk_rope_kv(bc->c, bc->pend_qkv, e->n_head, e->n_head_kv, e->head_dim, cb_kc(bc, e->layer),
                          cb_vc(bc, e->layer), bc->n_plane, bc->d_pos, &rp, bc->pend_bias, e->q_norm, e->k_norm,
                          e->eps);
}

tl_status cb_get_rows(be_ctx *bc, const be_weight *w, const int32_t *ids, int64_t m, float *out) {
    CB_TRY(cb_flush(bc));
    cb_touch(bc, out);
    return tlc_get_rows(bc->c, &w->part[0], ids, m, out);
}

tl_status cb_gather(be_ctx *bc, const float *x, int64_t n, const int32_t *rows, int64_t m, float *out) {
    CB_TRY(cb_flush(bc));
    cb_touch(bc, out);
    return tlc_gather_rows(bc->c, x, n, rows, m, out);
}

tl_status cb_add(be_ctx *bc, float *x, const float *y, int64_t n) {
    CB_TRY(cb_flush(bc));
    cb_touch(bc, x);
    return tlc_add(bc->c, x, y, x, n);
}

tl_status cb_scale(be_ctx *bc, float *x, float s, int64_t n) {
    CB_TRY(cb_flush(bc));
    cb_touch(bc, x);
    return tlc_scale(bc->c, x, s, n);
}

tl_status cb_norm(be_ctx *bc, const float *x, const be_norm *nm, int64_t n, int64_t m, float *y) {
    CB_TRY(cb_flush(bc));
    cb_touch(bc, y);
    if (nm->kind == BE_NORM_RMS) return tlc_rmsnorm(bc->c, x, nm->w, nm->eps, n, m, y);
    if (nm->kind == BE_NORM_LAYER) return tlc_layernorm(bc->c, x, nm->w, nm->b, nm->eps, n, m, y);
    return x == y ? TL_OK : tlc_copy(bc->c, y, x, (size_t)(n * m) * sizeof(float));
}

/* ---- one token ----------------------------------------------------------------- */

/* y = W x (store) over every part of w, the fusion f on each launch */
static tl_status cb_mv(be_ctx *bc, const be_weight *w, const float *xf, const void *xq, float *y, int mode,
                       const tlc_mv_fuse *f) {
    if (w->one) return tlc_matvec_fused(bc->c, &w->all, xf, xq, y, mode, f);
    if (w->pair && mode == TLC_MV_STORE && !f->argmax && !f->out_q)
        return tlc_matvec2_fused(bc->c, &w->qk, &w->v, xf, xq, y, f);
    int64_t r0 = 0;
    for (int i = 0; i < w->n; i++) {
        CB_TRY(tlc_matvec_fused(bc->c, &w->part[i], xf, xq, y + r0, mode, f));
        r0 += w->rows[i];
    }
    return TL_OK;
}

/* the input of a one-token linear: f32 in *xf, q8_1 in *xq (quantized
 * weights), and the folded-norm fields of fin */
static tl_status cb_input1(be_ctx *bc, const be_linear *l, const float **xf, const void **xq, tlc_mv_fuse *fin) {
    const be_weight *w = l->w;
    const bool fl = tlc_weight_is_float(&w->part[0]) && (w->n == 1 || tlc_weight_is_float(&w->part[w->n - 1]));
    if (l->in_norm.kind == BE_NORM_RMS) {
        if (!(bc->prep_x == l->x && bc->prep_g == l->in_norm.w)) {
            CB_TRY(tlc_act_prep_ss(bc->c, l->x, l->in_norm.w, w->n_in, 1, bc->xn, bc->xq, bc->ssp));
            bc->prep_x = l->x, bc->prep_g = l->in_norm.w;
        }
        *xf = bc->xn, *xq = bc->xq;
        fin->in_ss = bc->ssp;
        fin->eps = l->in_norm.eps;
        return TL_OK;
    }
    if (l->in_norm.kind == BE_NORM_LAYER) {
        CB_TRY(tlc_layernorm(bc->c, l->x, l->in_norm.w, l->in_norm.b, l->in_norm.eps, w->n_in, 1, bc->xn));
        bc->prep_x = bc->prep_g = NULL;
        *xf = bc->xn, *xq = NULL;
        if (!fl) {
            CB_TRY(tlc_act_prep(bc->c, bc->xn, NULL, 0, w->n_in, 1, NULL, bc->xq));
            *xq = bc->xq;
        }
        return TL_OK;
    }
    *xf = l->x, *xq = NULL;
    if (fl) return TL_OK;
    if (bc->q8_src == l->x) {
        *xq = bc->xqb; /* the producer's epilogue made it */
    } else if (w->one && tlc_mv_in_q8_use(bc->c, &w->all)) {
        fin->in_q8 = true; /* each block quantizes the f32 input itself */
    } else {
        CB_TRY(tlc_act_prep(bc->c, l->x, NULL, 0, w->n_in, 1, NULL, bc->xqb));
        bc->q8_src = l->x;
        *xq = bc->xqb;
    }
    return TL_OK;
}

/* the QKV epilogue of one token after a plain matvec into y */
static tl_status cb_qkv1(be_ctx *bc, const be_linear *l, float *y) {
    const be_qkv_epi *e = l->qkv;
    const int64_t hd = e->head_dim, qd = (int64_t)e->n_head * hd, kvd = (int64_t)e->n_head_kv * hd, ld = qd + 2 * kvd;
    tlc_ctx *c = bc->c;
    tlc_rope_params rp = {0};
    if (e->rope) rp = cb_rope(e->rope);
    /* one sequence, Qwen-style: bias, head norms, RoPE and the KV store in one
     * launch, or left for the attention to do itself */
    if (bc->contig && e->rope && (l->bias || e->q_norm) && !e->q_norm == !e->k_norm &&
        tlc_qk_rope_kv_ok(c, (int)hd, &rp)) {
        bc->pend = true;
        bc->pend_e = *e;
        bc->pend_rope = *e->rope;
        bc->pend_bias = l->bias;
        bc->pend_qkv = y;
        return TL_OK;
    }
    if (l->bias) CB_TRY(tlc_add_bias(c, y, 1, ld, l->bias, ld));
    if (e->q_norm) {
        CB_TRY(tlc_head_rmsnorm(c, y, 1, ld, e->n_head, (int)hd, e->q_norm, e->eps));
        CB_TRY(tlc_head_rmsnorm(c, y + qd, 1, ld, e->n_head_kv, (int)hd, e->k_norm, e->eps));
    }
    if (e->rope) CB_TRY(tlc_rope_rows(c, y, 1, ld, e->n_head + e->n_head_kv, (int)hd, bc->d_pos, &rp));
    return tlc_kv_store_slots(c, y + qd, y + qd + kvd, 1, ld, e->n_head_kv, (int)hd, cb_kc(bc, e->layer),
                              cb_vc(bc, e->layer), bc->n_plane, bc->d_slot);
}

static tl_status cb_linear1(be_ctx *bc, const be_linear *l) {
    tlc_ctx *c = bc->c;
    const be_weight *w = l->w;
    const float *xf;
    const void *xq;
    tlc_mv_fuse fin = {0};
    CB_TRY(cb_input1(bc, l, &xf, &xq, &fin));
    const bool glu = l->act == BE_ACT_SILU_GLU || l->act == BE_ACT_GELU_GLU;
    const int64_t n_out = glu ? w->n_out / 2 : w->n_out;
    cb_touch(bc, l->y);
    if (l->qkv) {
        const be_qkv_epi *e = l->qkv;
        const tlc_rope_params rp = e->rope ? cb_rope(e->rope) : (tlc_rope_params){0};
        /* llama, one sequence: RoPE and the KV store in the matvec's epilogue */
        if (bc->contig && e->rope && !l->bias && !e->q_norm && rp.n_rot == e->head_dim && !rp.neox &&
            (w->one || w->pair)) {
            const tlc_rope_kv_args ra = {rp, e->n_head, e->n_head_kv, e->head_dim, cb_kc(bc, e->layer),
                                         cb_vc(bc, e->layer), bc->n_plane, bc->d_pos};
            tlc_mv_fuse fr = fin;
            fr.rope = &ra;
            return w->one ? tlc_matvec_fused(c, &w->all, xf, xq, l->y, TLC_MV_STORE, &fr)
                          : tlc_matvec2_fused(c, &w->qk, &w->v, xf, xq, l->y, &fr);
        }
        CB_TRY(cb_mv(bc, w, xf, xq, l->y, TLC_MV_STORE, &fin));
        return cb_qkv1(bc, l, l->y);
    }
    if (glu) {
        /* the output in the form the next weight reads: f32 for float weights
         * and those that quantize their input themselves, else q8_1 from
         * the GLU's epilogue */
        const tlc_weight *nx = l->next_w ? &l->next_w->part[0] : NULL;
        void *glu_q = nx && !tlc_weight_is_float(nx) && !tlc_mv_in_q8_use(c, nx) ? bc->xqb : NULL;
        if (w->one && l->act == BE_ACT_SILU_GLU) {
            tlc_mv_fuse f = fin;
            f.out_q = glu_q;
            CB_TRY(tlc_matvec_fused(c, &w->all, xf, xq, l->y, TLC_MV_GLU, &f));
        } else {
            CB_TRY(cb_mv(bc, w, xf, xq, bc->gu, TLC_MV_STORE, &fin));
            CB_TRY(l->act == BE_ACT_SILU_GLU ? tlc_glu_rows(c, bc->gu, l->y, 1, n_out)
                                             : tlc_glu_gelu_rows(c, bc->gu, l->y, 1, n_out));
            if (glu_q) CB_TRY(tlc_act_prep(c, l->y, NULL, 0, n_out, 1, NULL, glu_q));
        }
        bc->q8_src = glu_q ? l->y : NULL;
        return TL_OK;
    }
    if (l->mode == BE_ACCUM) {
        if (!l->post_norm && !l->bias && w->one && l->next_norm && !l->in_norm.kind) {
            /* the residual add, and the next norm's input prepared in the epilogue */
            const tlc_mv_fuse f = {.in_ss = fin.in_ss, .eps = fin.eps, .out_norm = l->next_norm, .out_f = bc->xn,
                                   .out_q = bc->xq, .out_ss = bc->ssp, .in_q8 = fin.in_q8};
            CB_TRY(tlc_matvec_fused(c, &w->all, xf, xq, l->y, TLC_MV_ACCUM, &f));
            bc->prep_x = l->y, bc->prep_g = l->next_norm;
            return TL_OK;
        }
        CB_TRY(cb_mv(bc, w, xf, xq, bc->prod, TLC_MV_STORE, &fin));
        if (l->bias) CB_TRY(tlc_add_bias(c, bc->prod, 1, n_out, l->bias, n_out));
        if (l->post_norm) CB_TRY(tlc_rmsnorm(c, bc->prod, l->post_norm, l->post_eps, n_out, 1, bc->prod));
        return tlc_add(c, l->y, bc->prod, l->y, n_out);
    }
    tlc_mv_fuse f = fin;
    const bool key = l->argmax && w->one && !l->bias && !l->act && !l->post_norm;
    if (key) {
        f.argmax = (unsigned long long *)bc->d_in; /* zeroed by the step's input copy */
        bc->key_argmax = true;
        bc->key_dst = l->argmax;
    }
    CB_TRY(cb_mv(bc, w, xf, xq, l->y, TLC_MV_STORE, &f));
    if (l->bias) CB_TRY(tlc_add_bias(c, l->y, 1, n_out, l->bias, n_out));
    if (l->act == BE_ACT_GELU) CB_TRY(tlc_gelu_rows(c, l->y, 1, n_out, n_out));
    if (l->post_norm) CB_TRY(tlc_rmsnorm(c, l->y, l->post_norm, l->post_eps, n_out, 1, l->y));
    if (l->argmax && !key) CB_TRY(tlc_argmax_rows(c, l->y, n_out, n_out, 1, l->argmax));
    return TL_OK;
}

/* ---- many tokens ------------------------------------------------------------- */

/* every part of w takes the few-token matvec for m tokens */
static bool cb_mvm_all(const be_ctx *bc, const be_weight *w, int np, int64_t m) {
    if (m < 2 || m > TLC_MVM_MAX) return false;
    for (int i = 0; i < np; i++)
        if (!tlc_mvm_use(bc->c, w->one ? &w->all : &w->part[i], m)) return false;
    return true;
}

/* y [m][ldy] (=, or += in ACCUM) x W^T over the parts, in row chunks that
 * fit the dequantization scratch; one token (a linear with adapters, which
 * skips the fused one-token path) through the matvec kernels, its input
 * quantized for them */
static tl_status cb_gemm(be_ctx *bc, const be_weight *w, const float *x, int64_t m, float *y, int64_t ldy, int mode) {
    if (m == 1 && w->n_in % 32 == 0) {
        bool fl = true;
        for (int i = 0; i < w->n; i++) fl = fl && tlc_weight_is_float(&w->part[i]);
        if (!fl) CB_TRY(tlc_act_prep(bc->c, x, NULL, 0.0f, w->n_in, 1, NULL, bc->xq));
        const tlc_mv_fuse none = {0};
        return cb_mv(bc, w, x, fl ? NULL : bc->xq, y, mode, &none);
    }
    const int np = w->one ? 1 : w->n;
    if (cb_mvm_all(bc, w, np, m)) {
        /* a few tokens: the matvec's loads, every unit dotted with each token */
        bool q = false;
        for (int i = 0; i < np; i++) q = q || !tlc_weight_is_float(w->one ? &w->all : &w->part[i]);
        if (q) CB_TRY(tlc_act_prep(bc->c, x, NULL, 0.0f, w->n_in, m, NULL, bc->xqm));
        for (int i = 0, off = 0; i < np; i++) {
            const tlc_weight *p = w->one ? &w->all : &w->part[i];
            CB_TRY(tlc_mvm(bc->c, p, x, bc->xqm, m, y + off, ldy, mode));
            off += (int)p->n_out;
        }
        cb_mark(bc, "matmul: few-token matvec", (int)m);
        return TL_OK;
    }
    int64_t off = 0;
    for (int i = 0; i < np; i++) {
        const tlc_weight *p = w->one ? &w->all : &w->part[i];
        if (tlc_mm_small_ok(p, m)) {
            /* up to a few tens of tokens: each weight read once, dequantized on the fly */
            CB_TRY(tlc_mm_small(bc->c, p, x, m, y + off, ldy, mode, bc->gemm_scr));
            cb_mark(bc, "matmul: small-batch mma", (int)m);
            off += p->n_out;
            continue;
        }
        for (int64_t r0 = 0; r0 < p->n_out; r0 += CB_GEMM_ROWS) {
            const int64_t nr = p->n_out - r0 < CB_GEMM_ROWS ? p->n_out - r0 : CB_GEMM_ROWS;
            const tlc_weight v = tlc_weight_rows(p, r0, nr);
            CB_TRY(tlc_gemm_ex(bc->c, &v, x, m, y + off + r0, ldy, mode, bc->gemm_scr));
        }
        cb_mark(bc, "matmul: dequantize+cuBLAS", (int)m);
        off += p->n_out;
    }
    return TL_OK;
}

static tl_status cb_linear_n(be_ctx *bc, const be_linear *l) {
    tlc_ctx *c = bc->c;
    const be_weight *w = l->w;
    const int64_t m = l->m;
    const float *x = l->x;
    if (l->in_norm.kind == BE_NORM_RMS) {
        CB_TRY(tlc_act_prep(c, x, l->in_norm.w, l->in_norm.eps, w->n_in, m, bc->xn, NULL));
        x = bc->xn;
    } else if (l->in_norm.kind == BE_NORM_LAYER) {
        CB_TRY(tlc_layernorm(c, x, l->in_norm.w, l->in_norm.b, l->in_norm.eps, w->n_in, m, bc->xn));
        x = bc->xn;
    }
    bc->prep_x = bc->prep_g = bc->q8_src = NULL;
    const bool glu = l->act == BE_ACT_SILU_GLU || l->act == BE_ACT_GELU_GLU;
    const int64_t n_out = glu ? w->n_out / 2 : w->n_out;
    if (glu) {
        CB_TRY(cb_gemm(bc, w, x, m, bc->gu, w->n_out, TLC_MV_STORE));
        CB_TRY(cb_lowrank(bc, l->lowrank, x, w->n_in, m, bc->gu, w->n_out));
        return l->act == BE_ACT_SILU_GLU ? tlc_glu_rows(c, bc->gu, l->y, m, n_out)
                                         : tlc_glu_gelu_rows(c, bc->gu, l->y, m, n_out);
    }
    const int64_t ldy = l->ldy ? l->ldy : n_out;
    if (l->mode == BE_ACCUM && !l->post_norm && !l->bias && !l->act) {
        CB_TRY(cb_gemm(bc, w, x, m, l->y, ldy, TLC_MV_ACCUM));
        return cb_lowrank(bc, l->lowrank, x, w->n_in, m, l->y, ldy);
    }
    const bool via = l->mode == BE_ACCUM;
    float *out = via ? bc->prod : l->y;
    const int64_t ld = via ? n_out : ldy;
    CB_TRY(cb_gemm(bc, w, x, m, out, ld, TLC_MV_STORE));
    CB_TRY(cb_lowrank(bc, l->lowrank, x, w->n_in, m, out, ld));
    if (l->bias) CB_TRY(tlc_add_bias(c, out, m, ld, l->bias, n_out));
    if (l->act == BE_ACT_GELU) CB_TRY(tlc_gelu_rows(c, out, m, n_out, ld));
    if (l->post_norm) CB_TRY(tlc_rmsnorm(c, out, l->post_norm, l->post_eps, n_out, m, out));
    if (via) CB_TRY(tlc_add(c, l->y, out, l->y, m * n_out));
    if (l->qkv) {
        const be_qkv_epi *e = l->qkv;
        const int64_t hd = e->head_dim, qd = (int64_t)e->n_head * hd, kvd = (int64_t)e->n_head_kv * hd;
        if (e->q_norm) {
            CB_TRY(tlc_head_rmsnorm(c, out, m, ld, e->n_head, (int)hd, e->q_norm, e->eps));
            CB_TRY(tlc_head_rmsnorm(c, out + qd, m, ld, e->n_head_kv, (int)hd, e->k_norm, e->eps));
        }
        if (e->rope) {
            const tlc_rope_params rp = cb_rope(e->rope);
            CB_TRY(tlc_rope_rows(c, out, m, ld, e->n_head + e->n_head_kv, (int)hd, bc->d_pos, &rp));
        }
        CB_TRY(tlc_kv_store_slots(c, out + qd, out + qd + kvd, m, ld, e->n_head_kv, (int)hd, cb_kc(bc, e->layer),
                                  cb_vc(bc, e->layer), bc->n_plane, bc->d_slot));
    }
    if (l->argmax) CB_TRY(tlc_argmax_rows(c, out, n_out, ld, m, l->argmax));
    return TL_OK;
}

tl_status cb_linear(be_ctx *bc, const be_linear *l) {
    CB_TRY(cb_flush(bc));
    if (l->m < 1 || l->m > bc->n_tokens)
        return tl_err(TL_ERR_INVALID, "cuda backend: linear of %lld rows", (long long)l->m);
    /* adapters' terms go between the product and its epilogues, which the
     * one-token kernels fuse: such linears take the unfused path */
    const bool lr = l->lowrank && l->lowrank->n;
    return l->m == 1 && !lr ? cb_linear1(bc, l) : cb_linear_n(bc, l);
}

/* ---- attention ------------------------------------------------------------------ */

/* the step is one sequence's consecutive positions (host view; eager steps only) */
static bool cb_one_run(const be_ctx *bc, int32_t *seq) {
    const be_step *st = bc->st;
    for (int32_t j = 1; j < st->n_tokens; j++)
        if (st->seq[j] != st->seq[0] || st->pos[j] != st->pos[0] + j) return false;
    *seq = st->seq[0];
    return true;
}

tl_status cb_attention(be_ctx *bc, const be_attn *a) {
    tlc_ctx *c = bc->c;
    void *kc = cb_kc(bc, a->layer), *vc = cb_vc(bc, a->layer);
    cb_touch(bc, a->out);
    const tlc_rope_params rp = bc->pend ? cb_rope(&bc->pend_rope) : (tlc_rope_params){0};
    if (bc->contig && a->m == 1 && a->window <= 0) {
        /* one sequence, one token: the tuned split-K decode (its merge writes
         * the q8_1 of the output for the Wo matvec) */
        if (bc->pend && bc->pend_e.layer == a->layer && tlc_attn_pro_ok(c, a->head_dim, &rp)) {
            const be_qkv_epi *e = &bc->pend_e;
            bc->pend = false;
            CB_TRY(tlc_attn_decode_pro(c, bc->pend_qkv, kc, vc, TL_TYPE_F16, a->n_head, a->n_head_kv, a->head_dim,
                                       bc->n_plane, bc->d_pos, a->scale, bc->attn_scr, a->out, bc->xqb, &rp,
                                       bc->pend_bias, e->q_norm, e->k_norm, e->eps));
        } else {
            CB_TRY(cb_flush(bc));
            CB_TRY(tlc_attn_decode(c, a->q, kc, vc, TL_TYPE_F16, a->n_head, a->n_head_kv, a->head_dim, bc->n_plane,
                                   bc->d_pos, a->scale, bc->attn_scr, a->out, bc->xqb));
        }
        bc->q8_src = a->out;
        return TL_OK;
    }
    CB_TRY(cb_flush(bc));
    int32_t seq = 0;
    if (a->m > 1 && a->window <= 0 && !bc->graph_mode && tlc_flash_prefill_supported(c, TL_TYPE_F16, a->head_dim) &&
        cb_one_run(bc, &seq))
        return tlc_flash_prefill_paged(c, a->q, a->q_stride, kc, vc, a->n_head, a->n_head_kv, a->head_dim,
                                       bc->n_plane, a->m, bc->d_pos, a->scale, a->out,
                                       bc->contig ? NULL : bc->d_table + (size_t)seq * (size_t)bc->table_stride,
                                       bc->block_shift);
    const int64_t len = bc->graph_mode ? bc->max_len : bc->st->max_len;
    const int splits = tlc_attn_paged_splits(a->m, a->n_head_kv, len);
    return tlc_attn_paged(c, a->q, a->q_stride, a->m, kc, vc, bc->n_plane, a->n_head, a->n_head_kv, a->head_dim,
                          bc->d_pos, bc->d_seq, bc->d_table, bc->table_stride, bc->block_shift, a->window, a->scale,
                          splits, bc->attn_scr, a->out);
}
