/* train/ops_conv: 2-d convolution (NCHW; stride, padding, dilation, groups)
 * with backward, as im2col + the framework's gemm.
 * Per sample n and group g (Kg = Cin/groups * kH * kW, P = OH * OW):
 *   col   [Kg, P]        gathered input patches (zeros in the padding)
 *   out_g [Coutg, P]   = W_g [Coutg, Kg] @ col            (+ bias)
 *   dW_g  [Coutg, Kg] += gout_g [Coutg, P] @ col^T
 *   dcol  [Kg, P]      = W_g^T @ gout_g, scattered back (col2im) into dx
 * Samples run in parallel on the ctx's pool (each thread its own col
 * buffer, allocated before the threads start); dW is summed per fixed chunk of samples and the chunks added in
 * order, so the result does not depend on the thread count (resume relies on
 * bit-identical steps). A 1x1 / stride 1 / no padding conv skips im2col.
 * Owns: nothing (scratch buffers per call). Calls: train/gemm, internals. */
#include <stdlib.h>
#include <string.h>

#include "train/tt_internal.h"

#define DW_CHUNK 4 /* samples per dW partial sum */

tt_conv2d_opt tt_conv2d_opt_make(int64_t stride, int64_t padding, int64_t dilation, int64_t groups) {
    tt_conv2d_opt o = {{stride, stride}, {padding, padding}, {dilation, dilation}, groups};
    return o;
}

typedef struct conv_geom {
    int64_t N, Cin, H, W, Cout, kH, kW, OH, OW, G, Cg, Coutg, Kg, P;
    int64_t sh, sw, ph, pw, dh, dw;
    bool direct; /* 1x1, stride 1, no padding: col is the input itself */
} conv_geom;

/* Output columns [lo, hi) whose input column ow*sw - pw + j*dw is inside [0, W). */
static void valid_cols(const conv_geom *g, int64_t j, int64_t *lo, int64_t *hi) {
    int64_t a = g->pw - j * g->dw; /* iw = ow*sw - a */
    *lo = a <= 0 ? 0 : (a + g->sw - 1) / g->sw;
    int64_t b = g->W - 1 + a; /* last ow with iw <= W-1 is floor(b / sw) */
    *hi = b < 0 ? 0 : b / g->sw + 1;
    if (*hi > g->OW) *hi = g->OW;
    if (*lo > *hi) *lo = *hi;
}

#define DEF_IM2COL(T, SFX)                                                                        \
    /* col[(ci*kH + i)*kW + j][oh*OW + ow] = x[ci][oh*sh - ph + i*dh][ow*sw - pw + j*dw] */      \
    static void im2col_##SFX(const conv_geom *g, const T *restrict x, T *restrict col) {         \
        for (int64_t ci = 0; ci < g->Cg; ci++)                                                    \
            for (int64_t i = 0; i < g->kH; i++)                                                   \
                for (int64_t j = 0; j < g->kW; j++) {                                             \
                    T *row = col + ((ci * g->kH + i) * g->kW + j) * g->P;                         \
                    const T *xc = x + ci * g->H * g->W;                                           \
                    int64_t lo, hi, off = j * g->dw - g->pw;                                      \
                    valid_cols(g, j, &lo, &hi);                                                   \
                    for (int64_t oh = 0; oh < g->OH; oh++) {                                      \
                        int64_t ih = oh * g->sh - g->ph + i * g->dh;                              \
                        T *r = row + oh * g->OW;                                                  \
                        if (ih < 0 || ih >= g->H) {                                               \
                            memset(r, 0, (size_t)g->OW * sizeof(T));                              \
                            continue;                                                             \
                        }                                                                         \
                        const T *xr = xc + ih * g->W; /* iw = ow*sw + off >= 0 on [lo, hi) */    \
                        for (int64_t ow = 0; ow < lo; ow++) r[ow] = 0;                            \
                        if (g->sw == 1 && hi > lo)                                                \
                            memcpy(r + lo, xr + lo + off, (size_t)(hi - lo) * sizeof(T));         \
                        else if (g->sw != 1)                                                      \
                            for (int64_t ow = lo; ow < hi; ow++) r[ow] = xr[ow * g->sw + off];    \
                        for (int64_t ow = hi; ow < g->OW; ow++) r[ow] = 0;                        \
                    }                                                                             \
                }                                                                                 \
    }                                                                                             \
    /* the transpose of im2col: dx[...] += dcol[...] */                                          \
    static void col2im_##SFX(const conv_geom *g, const T *restrict col, T *restrict x) {         \
        for (int64_t ci = 0; ci < g->Cg; ci++)                                                    \
            for (int64_t i = 0; i < g->kH; i++)                                                   \
                for (int64_t j = 0; j < g->kW; j++) {                                             \
                    const T *row = col + ((ci * g->kH + i) * g->kW + j) * g->P;                   \
                    T *xc = x + ci * g->H * g->W;                                                 \
                    int64_t lo, hi, off = j * g->dw - g->pw;                                      \
                    valid_cols(g, j, &lo, &hi);                                                   \
                    for (int64_t oh = 0; oh < g->OH; oh++) {                                      \
                        int64_t ih = oh * g->sh - g->ph + i * g->dh;                              \
                        if (ih < 0 || ih >= g->H) continue;                                       \
                        const T *r = row + oh * g->OW;                                            \
                        T *xr = xc + ih * g->W;                                                   \
                        if (g->sw == 1)                                                           \
                            for (int64_t ow = lo; ow < hi; ow++) xr[ow + off] += r[ow];           \
                        else                                                                      \
                            for (int64_t ow = lo; ow < hi; ow++) xr[ow * g->sw + off] += r[ow];   \
                    }                                                                             \
                }                                                                                 \
    }
DEF_IM2COL(float, f32)
DEF_IM2COL(double, f64)

static void gemm_any(tl_threadpool *tp, tt_dtype dt, int64_t M, int64_t N, int64_t K, const void *A, int64_t rsa,
                     int64_t csa, const void *B, int64_t rsb, int64_t csb, void *C, int64_t ldc, bool acc) {
    if (dt == TT_F32)
        tt_gemm_f32(tp, M, N, K, A, rsa, csa, B, rsb, csb, C, ldc, acc);
    else
        tt_gemm_f64(M, N, K, A, rsa, csa, B, rsb, csb, C, ldc, acc);
}

static void im2col(const conv_geom *g, tt_dtype dt, const void *x, void *col) {
    if (dt == TT_F32) im2col_f32(g, x, col);
    else im2col_f64(g, x, col);
}

static void col2im(const conv_geom *g, tt_dtype dt, const void *col, void *x) {
    if (dt == TT_F32) col2im_f32(g, col, x);
    else col2im_f64(g, col, x);
}

/* One job for the forward and the three backward products. */
typedef struct conv_job {
    const conv_geom *g;
    tt_dtype dt;
    size_t es;
    const char *x, *w, *b, *gout; /* contiguous inputs */
    char *out, *dx, *dwp;         /* out / dx: [N, ...]; dwp: [n_chunks][Cout * Kg] partial dW */
    int64_t n_chunks;
    char *cols;                   /* [threads][Kg * P] im2col buffers (NULL when direct) */
    tl_threadpool *gemm_tp;       /* pool for the gemm when samples run serially */
    bool fwd, want_dx, want_dw;
} conv_job;

/* The [Kg, P] columns of sample n, group gi: the input itself when direct. */
static const char *sample_col(const conv_job *j, int64_t n, int64_t gi, char *col) {
    const conv_geom *g = j->g;
    const char *xs = j->x + (size_t)((n * g->Cin + gi * g->Cg) * g->H * g->W) * j->es;
    if (g->direct) return xs;
    im2col(g, j->dt, xs, col);
    return col;
}

static void fwd_sample(conv_job *j, int64_t n, char *col) {
    const conv_geom *g = j->g;
    size_t es = j->es;
    for (int64_t gi = 0; gi < g->G; gi++) {
        const char *cb = sample_col(j, n, gi, col);
        char *o = j->out + (size_t)((n * g->Cout + gi * g->Coutg) * g->P) * es;
        gemm_any(j->gemm_tp, j->dt, g->Coutg, g->P, g->Kg, j->w + (size_t)(gi * g->Coutg * g->Kg) * es, g->Kg, 1,
                 cb, g->P, 1, o, g->P, false);
    }
    if (j->b) {
        for (int64_t co = 0; co < g->Cout; co++) {
            char *o = j->out + (size_t)((n * g->Cout + co) * g->P) * es;
            if (j->dt == TT_F32) {
                float bv = ((const float *)j->b)[co], *p = (float *)o;
                for (int64_t q = 0; q < g->P; q++) p[q] += bv;
            } else {
                double bv = ((const double *)j->b)[co], *p = (double *)o;
                for (int64_t q = 0; q < g->P; q++) p[q] += bv;
            }
        }
    }
}

/* dx of one sample: dcol = W_g^T @ gout_g, then col2im (direct: straight into dx). */
static void dx_sample(conv_job *j, int64_t n, char *col) {
    const conv_geom *g = j->g;
    size_t es = j->es;
    for (int64_t gi = 0; gi < g->G; gi++) {
        const char *go = j->gout + (size_t)((n * g->Cout + gi * g->Coutg) * g->P) * es;
        char *dxs = j->dx + (size_t)((n * g->Cin + gi * g->Cg) * g->H * g->W) * es;
        const char *wg = j->w + (size_t)(gi * g->Coutg * g->Kg) * es;
        if (g->direct) {
            gemm_any(j->gemm_tp, j->dt, g->Kg, g->P, g->Coutg, wg, 1, g->Kg, go, g->P, 1, dxs, g->P, true);
        } else {
            gemm_any(j->gemm_tp, j->dt, g->Kg, g->P, g->Coutg, wg, 1, g->Kg, go, g->P, 1, col, g->P, false);
            col2im(g, j->dt, col, dxs);
        }
    }
}

/* Partial dW of chunk k (samples [k*DW_CHUNK, ...)) into dwp[k]. */
static void dw_chunk(conv_job *j, int64_t k, char *col) {
    const conv_geom *g = j->g;
    size_t es = j->es;
    char *dst = j->dwp + (size_t)(k * g->Cout * g->Kg) * es;
    int64_t n1 = (k + 1) * DW_CHUNK < g->N ? (k + 1) * DW_CHUNK : g->N;
    for (int64_t n = k * DW_CHUNK; n < n1; n++)
        for (int64_t gi = 0; gi < g->G; gi++) {
            const char *cb = sample_col(j, n, gi, col);
            const char *go = j->gout + (size_t)((n * g->Cout + gi * g->Coutg) * g->P) * es;
            gemm_any(j->gemm_tp, j->dt, g->Coutg, g->Kg, g->P, go, g->P, 1, cb, 1, g->P,
                     dst + (size_t)(gi * g->Coutg * g->Kg) * es, g->Kg, n > k * DW_CHUNK);
        }
}

static void conv_task(void *arg, int ith, int nth) {
    conv_job *j = arg;
    const conv_geom *g = j->g;
    char *col = j->cols ? j->cols + (size_t)ith * (size_t)(g->Kg * g->P) * j->es : NULL;
    if (j->fwd)
        for (int64_t n = ith; n < g->N; n += nth) fwd_sample(j, n, col);
    if (j->want_dx)
        for (int64_t n = ith; n < g->N; n += nth) dx_sample(j, n, col);
    if (j->want_dw)
        for (int64_t k = ith; k < j->n_chunks; k += nth) dw_chunk(j, k, col);
}

/* Samples across the pool when there are enough of them (one column buffer
 * per thread), else one at a time with the pool inside the gemm. */
static tl_status conv_run(tt_ctx *c, conv_job *j) {
    const conv_geom *g = j->g;
    int nth = c->tp ? tl_threadpool_size(c->tp) : 1;
    bool par = nth > 1 && g->N >= nth;
    if (!g->direct) {
        j->cols = malloc((size_t)(par ? nth : 1) * (size_t)(g->Kg * g->P) * j->es);
        if (!j->cols) return tl_err(TL_ERR_NOMEM, "train: conv2d: out of memory for the im2col buffer");
    }
    if (par) {
        j->gemm_tp = NULL;
        tl_threadpool_run(c->tp, conv_task, j);
    } else {
        j->gemm_tp = c->tp;
        conv_task(j, 0, 1);
    }
    free(j->cols);
    j->cols = NULL;
    return TL_OK;
}

static void geom_from(conv_geom *g, const tt_tensor *x, const tt_tensor *w, const int64_t *iv) {
    g->N = x->shape[0];
    g->Cin = x->shape[1];
    g->H = x->shape[2];
    g->W = x->shape[3];
    g->Cout = w->shape[0];
    g->kH = w->shape[2];
    g->kW = w->shape[3];
    g->sh = iv[0];
    g->sw = iv[1];
    g->ph = iv[2];
    g->pw = iv[3];
    g->dh = iv[4];
    g->dw = iv[5];
    g->G = iv[6];
    g->Cg = g->Cin / g->G;
    g->Coutg = g->Cout / g->G;
    g->Kg = g->Cg * g->kH * g->kW;
    g->OH = (g->H + 2 * g->ph - g->dh * (g->kH - 1) - 1) / g->sh + 1;
    g->OW = (g->W + 2 * g->pw - g->dw * (g->kW - 1) - 1) / g->sw + 1;
    g->P = g->OH * g->OW;
    g->direct = g->kH == 1 && g->kW == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0;
}

static tl_status bw_conv(tt_ctx *c, tt_node *n, const tt_tensor *gout) {
    tt_tensor *x = n->in[0], *w = n->in[1], *b = n->n_in > 2 ? n->in[2] : NULL;
    conv_geom g;
    geom_from(&g, x, w, n->i);
    conv_job j = {0};
    j.g = &g;
    j.dt = x->dtype;
    j.es = tt__esize(x->dtype);
    j.x = tt_data(x);
    j.w = tt_data(w);
    j.gout = tt_data(gout);
    j.n_chunks = (g.N + DW_CHUNK - 1) / DW_CHUNK;
    j.want_dx = tt__need(n, 0);
    j.want_dw = tt__need(n, 1);
    if (j.want_dx) {
        tt_tensor *gx = tt__grad_buf(x);
        if (!gx) return TL_ERR_NOMEM;
        j.dx = tt_data(gx);
    }
    if (j.want_dw) {
        j.dwp = calloc((size_t)(j.n_chunks * g.Cout * g.Kg), j.es);
        if (!j.dwp) return tl_err(TL_ERR_NOMEM, "train: conv2d backward: out of memory");
    }
    tl_status s = TL_OK;
    if (j.want_dx || j.want_dw) s = conv_run(c, &j);
    if (s == TL_OK && j.want_dw) {
        tt_tensor *gw = tt__grad_buf(w);
        if (!gw) {
            free(j.dwp);
            return TL_ERR_NOMEM;
        }
        int64_t m = g.Cout * g.Kg;
        for (int64_t k = 0; k < j.n_chunks; k++) { /* chunks added in a fixed order */
            if (j.dt == TT_F32) {
                float *d = tt_data(gw);
                const float *p = (const float *)j.dwp + k * m;
                for (int64_t i = 0; i < m; i++) d[i] += p[i];
            } else {
                double *d = tt_data(gw);
                const double *p = (const double *)j.dwp + k * m;
                for (int64_t i = 0; i < m; i++) d[i] += p[i];
            }
        }
    }
    free(j.dwp);
    if (s == TL_OK && b && tt__need(n, 2)) { /* db[co] += sum over n, p of gout */
        tt_tensor *gb = tt__grad_buf(b);
        if (!gb) return TL_ERR_NOMEM;
        for (int64_t nn = 0; nn < g.N; nn++)
            for (int64_t co = 0; co < g.Cout; co++) {
                size_t off = (size_t)((nn * g.Cout + co) * g.P);
                if (j.dt == TT_F32) {
                    const float *p = (const float *)j.gout + off;
                    float s32 = 0;
                    for (int64_t q = 0; q < g.P; q++) s32 += p[q];
                    ((float *)tt_data(gb))[co] += s32;
                } else {
                    const double *p = (const double *)j.gout + off;
                    double s64 = 0;
                    for (int64_t q = 0; q < g.P; q++) s64 += p[q];
                    ((double *)tt_data(gb))[co] += s64;
                }
            }
    }
    return s;
}

tt_tensor *tt_conv2d(tt_ctx *c, tt_tensor *x, tt_tensor *w, tt_tensor *bias, const tt_conv2d_opt *o) {
    TT__HOST_ONLY("conv2d", NULL, x, w, bias);
    tt_tensor *in3[3] = {x, w, bias};
    if (!tt__check(in3, bias ? 3 : 2, "conv2d")) return NULL;
    tt_conv2d_opt d = o ? *o : tt_conv2d_opt_make(1, 0, 1, 1);
    if (x->ndim != 4 || w->ndim != 4) {
        tl_err(TL_ERR_INVALID, "train: conv2d needs x [N, C, H, W] and w [Cout, Cin/groups, kH, kW] (got %d-d, %d-d)",
               x->ndim, w->ndim);
        return NULL;
    }
    for (int a = 0; a < 2; a++)
        if (d.stride[a] < 1 || d.dilation[a] < 1 || d.padding[a] < 0) {
            tl_err(TL_ERR_INVALID, "train: conv2d: stride %lld and dilation %lld must be >= 1, padding %lld >= 0",
                   (long long)d.stride[a], (long long)d.dilation[a], (long long)d.padding[a]);
            return NULL;
        }
    int64_t G = d.groups;
    if (G < 1 || x->shape[1] % G || w->shape[0] % G || w->shape[1] * G != x->shape[1]) {
        tl_err(TL_ERR_INVALID,
               "train: conv2d: input has %lld channels, weight [%lld, %lld, ...] with groups %lld "
               "(need Cin = groups * w.shape[1] and Cout divisible by groups)",
               (long long)x->shape[1], (long long)w->shape[0], (long long)w->shape[1], (long long)G);
        return NULL;
    }
    if (bias && (bias->ndim != 1 || bias->shape[0] != w->shape[0])) {
        tl_err(TL_ERR_INVALID, "train: conv2d: bias must be [%lld]", (long long)w->shape[0]);
        return NULL;
    }
    int64_t iv[7] = {d.stride[0], d.stride[1], d.padding[0], d.padding[1], d.dilation[0], d.dilation[1], G};
    conv_geom g;
    geom_from(&g, x, w, iv);
    int64_t effh = g.dh * (g.kH - 1) + 1, effw = g.dw * (g.kW - 1) + 1;
    if (g.H + 2 * g.ph < effh || g.W + 2 * g.pw < effw || g.N < 1) {
        tl_err(TL_ERR_INVALID,
               "train: conv2d: kernel %lldx%lld (dilated %lldx%lld) larger than the padded input %lldx%lld",
               (long long)g.kH, (long long)g.kW, (long long)effh, (long long)effw, (long long)(g.H + 2 * g.ph),
               (long long)(g.W + 2 * g.pw));
        return NULL;
    }
    tt_tensor *xc = tt_contiguous(c, x), *wc = tt_contiguous(c, w), *bc = bias ? tt_contiguous(c, bias) : NULL;
    if (!xc || !wc || (bias && !bc)) return NULL;
    int64_t osh[4] = {g.N, g.Cout, g.OH, g.OW};
    tt_tensor *out = tt__temp(c, x->dtype, 4, osh);
    if (!out) return NULL;
    conv_job j = {0};
    j.g = &g;
    j.dt = x->dtype;
    j.es = tt__esize(x->dtype);
    j.x = tt_data(xc);
    j.w = tt_data(wc);
    j.b = bc ? tt_data(bc) : NULL;
    j.out = tt_data(out);
    j.fwd = true;
    if (conv_run(c, &j) != TL_OK) return NULL;
    tt_tensor *ins[3] = {xc, wc, bc};
    if (tt__needs_grad(c, ins, 3)) {
        tt_node *n = tt__record(c, "conv2d", bw_conv, out, ins, bc ? 3 : 2);
        if (!n) return NULL;
        memcpy(n->i, iv, sizeof iv);
    }
    return out;
}
