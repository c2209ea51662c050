/* train/ops_elem: element-wise ops with NumPy broadcasting (add, sub, mul,
 * div), unary maps (exp, log, sqrt, pow, relu, gelu tanh/erf, silu, sigmoid,
 * tanh, neg, scale) and sum/mean reductions, each with its backward.
 * Kernels are written once per compute type through the DEF_* macros
 * (float for training, double for gradient checks).
 * Owns: nothing. Calls: train internals. */
#include <math.h>
#include <string.h>

#include "base/cpu.h"
#include "train/tt_internal.h"

enum { B_ADD, B_SUB, B_MUL, B_DIV };

#define BIN_LOOP(T, EXPR)                                                                   \
    for (int64_t i0 = 0; i0 < sh[0]; i0++)                                                  \
        for (int64_t i1 = 0; i1 < sh[1]; i1++)                                              \
            for (int64_t i2 = 0; i2 < sh[2]; i2++) {                                        \
                const T *pa = A + i0 * sa[0] + i1 * sa[1] + i2 * sa[2];                     \
                const T *pb = B + i0 * sb[0] + i1 * sb[1] + i2 * sb[2];                     \
                if (sa[3] == 1 && sb[3] == 1)                                               \
                    for (int64_t i3 = 0; i3 < sh[3]; i3++) {                                \
                        T x = pa[i3], y = pb[i3];                                           \
                        O[i3] = EXPR;                                                       \
                    }                                                                       \
                else if (sa[3] == 1 && sb[3] == 0)                                          \
                    for (int64_t i3 = 0; i3 < sh[3]; i3++) {                                \
                        T x = pa[i3], y = pb[0];                                            \
                        O[i3] = EXPR;                                                       \
                    }                                                                       \
                else                                                                        \
                    for (int64_t i3 = 0; i3 < sh[3]; i3++) {                                \
                        T x = pa[i3 * sa[3]], y = pb[i3 * sb[3]];                           \
                        O[i3] = EXPR;                                                       \
                    }                                                                       \
                O += sh[3];                                                                 \
            }

#define DEF_BIN(T, SFX)                                                                     \
    static void bin_##SFX(int op, const T *A, const int64_t *sa, const T *B, const int64_t *sb, \
                          T *O, const int64_t *sh) {                                        \
        switch (op) {                                                                       \
        case B_ADD: BIN_LOOP(T, x + y) break;                                               \
        case B_SUB: BIN_LOOP(T, x - y) break;                                               \
        case B_MUL: BIN_LOOP(T, x * y) break;                                               \
        default: BIN_LOOP(T, x / y) break;                                                  \
        }                                                                                   \
    }
DEF_BIN(float, f32)
DEF_BIN(double, f64)

/* Caller-owned result of a op b over the broadcast shape (no recording). */
static tt_tensor *bin_raw(int op, const tt_tensor *a, const tt_tensor *b, int ondim, const int64_t *oshape) {
    tt_tensor *o = tt_new(a->dtype, ondim, oshape);
    if (!o) return NULL;
    int64_t sh[4], sa[4], sb[4];
    tt__shape4(ondim, oshape, sh);
    tt__bstrides4(a, ondim, oshape, sa);
    tt__bstrides4(b, ondim, oshape, sb);
    if (a->dtype == TT_F32)
        bin_f32(op, tt_data(a), sa, tt_data(b), sb, tt_data(o), sh);
    else
        bin_f64(op, tt_data(a), sa, tt_data(b), sb, tt_data(o), sh);
    return o;
}

static tl_status acc_reduced(tt_tensor *t, tt_tensor *g /* caller-owned, consumed */) {
    if (!g) return TL_ERR_NOMEM;
    tl_status s;
    bool same = g->ndim == t->ndim;
    for (int i = 0; same && i < t->ndim; i++) same = g->shape[i] == t->shape[i];
    if (same) {
        s = tt__acc_grad(t, g);
    } else {
        tt_tensor *r = tt__reduce_to(g, t->ndim, t->shape);
        s = tt__acc_grad(t, r);
        tt_free(r);
    }
    tt_free(g);
    return s;
}

static tl_status bw_bin(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    int op = (int)n->i[0];
    tt_tensor *a = n->in[0], *b = n->in[1];
    const tt_tensor *gv = g;
    tl_status s = TL_OK;
    bool a_full = a->ndim == g->ndim, b_full = b->ndim == g->ndim;
    for (int i = 0; i < g->ndim; i++) {
        if (a_full && a->shape[i] != g->shape[i]) a_full = false;
        if (b_full && b->shape[i] != g->shape[i]) b_full = false;
    }
    if (tt__need(n, 0) && a_full && (op == B_ADD || op == B_SUB)) { /* the residual path: no copy */
        s = tt__acc_grad(a, g);
        if (s != TL_OK) return s;
    } else if (tt__need(n, 0)) {
        tt_tensor *ga;
        if (op == B_ADD || op == B_SUB) ga = tt__clone(gv);
        else ga = bin_raw(op == B_MUL ? B_MUL : B_DIV, gv, b, g->ndim, g->shape);
        s = acc_reduced(a, ga);
        if (s != TL_OK) return s;
    }
    if (tt__need(n, 1) && b_full && op == B_ADD) {
        s = tt__acc_grad(b, g);
    } else if (tt__need(n, 1)) {
        tt_tensor *gb;
        if (op == B_ADD) {
            gb = tt__clone(gv);
        } else if (op == B_SUB) {
            gb = tt__clone(gv);
            if (gb) {
                int64_t m = tt_numel(gb);
                for (int64_t i = 0; i < m; i++) tt_set(gb, i, -tt_get(gb, i));
            }
        } else if (op == B_MUL) {
            gb = bin_raw(B_MUL, gv, a, g->ndim, g->shape);
        } else { /* d(a/b)/db = -out / b */
            tt_tensor *t = bin_raw(B_MUL, gv, n->out, g->ndim, g->shape);
            gb = t ? bin_raw(B_DIV, t, b, g->ndim, g->shape) : NULL;
            tt_free(t);
            if (gb) {
                int64_t m = tt_numel(gb);
                for (int64_t i = 0; i < m; i++) tt_set(gb, i, -tt_get(gb, i));
            }
        }
        s = acc_reduced(b, gb);
    }
    return s;
}

static const char *bin_names[] = {"add", "sub", "mul", "div"};

static tt_tensor *binary(tt_ctx *c, int op, tt_tensor *a, tt_tensor *b) {
#ifdef TALLOW_CUDA
    if (op == B_ADD && a && tt__dev(a) == TT_CUDA) return tt__cu_add(c, a, b);
    if (op == B_MUL && a && tt__dev(a) == TT_CUDA) return tt__cu_mul(c, a, b);
#endif
    tt_tensor *in[2] = {a, b};
    if (!tt__check(in, 2, bin_names[op]) || !tt__check_compute(a, bin_names[op])) return NULL;
    int ondim;
    int64_t oshape[TT_MAX_DIMS];
    if (!tt__bcast_shape(a, b, &ondim, oshape)) {
        tl_err(TL_ERR_INVALID, "train: %s: shapes do not broadcast (%d-d vs %d-d, last dims %lld vs %lld)",
               bin_names[op], a->ndim, b->ndim, (long long)a->shape[a->ndim - 1],
               (long long)b->shape[b->ndim - 1]);
        return NULL;
    }
    tt_tensor *o = tt__temp(c, a->dtype, ondim, oshape);
    if (!o) return NULL;
    int64_t sh[4], sa[4], sb[4];
    tt__shape4(ondim, oshape, sh);
    tt__bstrides4(a, ondim, oshape, sa);
    tt__bstrides4(b, ondim, oshape, sb);
    if (a->dtype == TT_F32)
        bin_f32(op, tt_data(a), sa, tt_data(b), sb, tt_data(o), sh);
    else
        bin_f64(op, tt_data(a), sa, tt_data(b), sb, tt_data(o), sh);
    if (tt__needs_grad(c, in, 2)) {
        tt_node *n = tt__record(c, bin_names[op], bw_bin, o, in, 2);
        if (!n) return NULL;
        n->i[0] = op;
    }
    return o;
}

tt_tensor *tt_add(tt_ctx *c, tt_tensor *a, tt_tensor *b) { return binary(c, B_ADD, a, b); }
tt_tensor *tt_sub(tt_ctx *c, tt_tensor *a, tt_tensor *b) { return binary(c, B_SUB, a, b); }
tt_tensor *tt_mul(tt_ctx *c, tt_tensor *a, tt_tensor *b) { return binary(c, B_MUL, a, b); }
tt_tensor *tt_div(tt_ctx *c, tt_tensor *a, tt_tensor *b) { return binary(c, B_DIV, a, b); }

/* ---- unary maps ---------------------------------------------------------- */
enum { U_NEG, U_SCALE, U_EXP, U_LOG, U_SQRT, U_POW, U_RELU, U_GELU_TANH, U_GELU_ERF, U_SILU, U_SIGMOID, U_TANH };
static const char *un_names[] = {"neg", "scale", "exp", "log", "sqrt", "pow", "relu",
                                 "gelu_tanh", "gelu_erf", "silu", "sigmoid", "tanh"};

#define GELU_K 0.7978845608028654 /* sqrt(2/pi) */
#define GELU_C 0.044715
#define INV_SQRT2 0.7071067811865476
#define INV_SQRT2PI 0.3989422804014327

/* ReLU as a bit mask (all ones where x > 0, else zero: NaN and -0 give +0,
 * as the select did) in blocks of 8 so the compiler vectorizes it: the
 * plain `x > 0 ? x : 0` loop compiled to a data-dependent branch that
 * mispredicted on half the elements (a quarter of a CNN training step). */
#define DEF_RELU(T, U, SFX)                                                                 \
    static inline T relu_sel_##SFX(T x, T v) { /* x > 0 ? v : 0 */                         \
        U b;                                                                                \
        memcpy(&b, &v, sizeof b);                                                           \
        b &= (U)0 - (U)(x > 0);                                                             \
        memcpy(&v, &b, sizeof b);                                                           \
        return v;                                                                           \
    }                                                                                       \
    static void relu_fwd_##SFX(const T *x, T *y, int64_t n) {                               \
        int64_t i = 0;                                                                      \
        for (; i + 8 <= n; i += 8)                                                          \
            for (int k = 0; k < 8; k++) y[i + k] = relu_sel_##SFX(x[i + k], x[i + k]);      \
        for (; i < n; i++) y[i] = relu_sel_##SFX(x[i], x[i]);                               \
    }                                                                                       \
    static void relu_bwd_##SFX(const T *x, const T *g, T *gx, int64_t n) {                  \
        int64_t i = 0;                                                                      \
        for (; i + 8 <= n; i += 8)                                                          \
            for (int k = 0; k < 8; k++) gx[i + k] = relu_sel_##SFX(x[i + k], g[i + k]);     \
        for (; i < n; i++) gx[i] = relu_sel_##SFX(x[i], g[i]);                              \
    }
DEF_RELU(float, uint32_t, f32)
DEF_RELU(double, uint64_t, f64)

#define DEF_UNARY(T, SFX, EXP, LOG, SQRT, POW, TANH, ERF)                                   \
    static void un_fwd_##SFX(int op, const T *x, T *y, int64_t n, T p) {                   \
        switch (op) {                                                                       \
        case U_NEG: for (int64_t i = 0; i < n; i++) y[i] = -x[i]; break;                    \
        case U_SCALE: for (int64_t i = 0; i < n; i++) y[i] = p * x[i]; break;               \
        case U_EXP: for (int64_t i = 0; i < n; i++) y[i] = EXP(x[i]); break;                \
        case U_LOG: for (int64_t i = 0; i < n; i++) y[i] = LOG(x[i]); break;                \
        case U_SQRT: for (int64_t i = 0; i < n; i++) y[i] = SQRT(x[i]); break;              \
        case U_POW: for (int64_t i = 0; i < n; i++) y[i] = POW(x[i], p); break;             \
        case U_RELU: relu_fwd_##SFX(x, y, n); break;                                        \
        case U_GELU_TANH:                                                                   \
            for (int64_t i = 0; i < n; i++) {                                               \
                T v = x[i];                                                                 \
                y[i] = (T)0.5 * v * (1 + TANH((T)GELU_K * (v + (T)GELU_C * v * v * v)));    \
            }                                                                               \
            break;                                                                          \
        case U_GELU_ERF:                                                                    \
            for (int64_t i = 0; i < n; i++) y[i] = (T)0.5 * x[i] * (1 + ERF(x[i] * (T)INV_SQRT2)); \
            break;                                                                          \
        case U_SILU: for (int64_t i = 0; i < n; i++) y[i] = x[i] / (1 + EXP(-x[i])); break; \
        case U_SIGMOID: for (int64_t i = 0; i < n; i++) y[i] = 1 / (1 + EXP(-x[i])); break; \
        default: for (int64_t i = 0; i < n; i++) y[i] = TANH(x[i]); break;                  \
        }                                                                                   \
    }                                                                                       \
    static void un_bwd_##SFX(int op, const T *x, const T *y, const T *g, T *gx, int64_t n, T p) { \
        switch (op) {                                                                       \
        case U_NEG: for (int64_t i = 0; i < n; i++) gx[i] = -g[i]; break;                   \
        case U_SCALE: for (int64_t i = 0; i < n; i++) gx[i] = p * g[i]; break;              \
        case U_EXP: for (int64_t i = 0; i < n; i++) gx[i] = g[i] * y[i]; break;             \
        case U_LOG: for (int64_t i = 0; i < n; i++) gx[i] = g[i] / x[i]; break;             \
        case U_SQRT: for (int64_t i = 0; i < n; i++) gx[i] = g[i] * (T)0.5 / y[i]; break;   \
        case U_POW: for (int64_t i = 0; i < n; i++) gx[i] = g[i] * p * POW(x[i], p - 1); break; \
        case U_RELU: relu_bwd_##SFX(x, g, gx, n); break;                                    \
        case U_GELU_TANH:                                                                   \
            for (int64_t i = 0; i < n; i++) {                                               \
                T v = x[i], t = TANH((T)GELU_K * (v + (T)GELU_C * v * v * v));              \
                T d = (T)0.5 * (1 + t) +                                                    \
                      (T)0.5 * v * (1 - t * t) * (T)GELU_K * (1 + 3 * (T)GELU_C * v * v);   \
                gx[i] = g[i] * d;                                                           \
            }                                                                               \
            break;                                                                          \
        case U_GELU_ERF:                                                                    \
            for (int64_t i = 0; i < n; i++) {                                               \
                T v = x[i];                                                                 \
                T d = (T)0.5 * (1 + ERF(v * (T)INV_SQRT2)) + v * EXP((T)-0.5 * v * v) * (T)INV_SQRT2PI; \
                gx[i] = g[i] * d;                                                           \
            }                                                                               \
            break;                                                                          \
        case U_SILU:                                                                        \
            for (int64_t i = 0; i < n; i++) {                                               \
                T s = 1 / (1 + EXP(-x[i]));                                                 \
                gx[i] = g[i] * s * (1 + x[i] * (1 - s));                                    \
            }                                                                               \
            break;                                                                          \
        case U_SIGMOID: for (int64_t i = 0; i < n; i++) gx[i] = g[i] * y[i] * (1 - y[i]); break; \
        default: for (int64_t i = 0; i < n; i++) gx[i] = g[i] * (1 - y[i] * y[i]); break;   \
        }                                                                                   \
    }
/* f32 exp/tanh without libm calls (tanhf/expm1f were a fifth of a GPT-2
 * step): Cody-Waite range reduction by ln 2, a degree-6 polynomial for e^r
 * (Cephes' expf coefficients), 2^n built in the exponent bits. Relative
 * error ~2e-7, branch-free so the loops vectorize. */
static inline float fast_expf(float x) {
    x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
    float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round to nearest */
    float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    union {
        int32_t i;
        float f;
    } u = {((int32_t)n + 127) << 23};
    return p * u.f;
}
static inline float fast_tanhf(float x) { return 1.0f - 2.0f / (fast_expf(2.0f * x) + 1.0f); }

DEF_UNARY(float, f32, fast_expf, logf, sqrtf, powf, fast_tanhf, erff)
DEF_UNARY(double, f64, exp, log, sqrt, pow, tanh, erf)

/* f32 unary maps split over the pool in contiguous chunks (elementwise work
 * was single-threaded while the other core idled). */
typedef struct un_job {
    int op, bw;
    const float *x, *y, *g;
    float *o;
    int64_t n;
    float p;
} un_job;

int64_t tt__gelu_tanh_fwd_avx2(const float *x, float *y, int64_t n);
int64_t tt__gelu_tanh_bwd_avx2(const float *x, const float *g, float *gx, int64_t n);

static void un_task(void *arg, int ith, int nth) {
    un_job *j = arg;
    int64_t a, b;
    tt__split(j->n, ith, nth, &a, &b);
    if (a >= b) return;
    if (j->op == U_GELU_TANH && tl_cpu_use_avx2()) {
        if (j->bw)
            a += tt__gelu_tanh_bwd_avx2(j->x + a, j->g + a, j->o + a, b - a);
        else
            a += tt__gelu_tanh_fwd_avx2(j->x + a, j->o + a, b - a);
        if (a >= b) return;
    }
    if (j->bw)
        un_bwd_f32(j->op, j->x + a, j->y + a, j->g + a, j->o + a, b - a, j->p);
    else
        un_fwd_f32(j->op, j->x + a, j->o + a, b - a, j->p);
}

static void un_run(tt_ctx *c, un_job *j) {
    if (j->n >= TT_PAR_MIN) tl_threadpool_run(c->tp, un_task, j);
    else un_task(j, 0, 1);
}

static tl_status bw_unary(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    if (!tt__need(n, 0)) return TL_OK;
    tt_tensor *x = n->in[0]; /* contiguous (the op made it so) */
    bool fresh = !x->grad && tt_is_contiguous(g); /* then write x's first gradient in place */
    tt_tensor *gx = fresh ? tt__grad_buf_for_write(x, &fresh) : tt_new(x->dtype, x->ndim, x->shape);
    if (!gx) return TL_ERR_NOMEM;
    int64_t m = tt_numel(x);
    if (x->dtype == TT_F32)
        un_run(c, &(un_job){(int)n->i[0], 1, tt_data(x), tt_data(n->out), tt_data(g), tt_data(gx), m, (float)n->f[0]});
    else
        un_bwd_f64((int)n->i[0], tt_data(x), tt_data(n->out), tt_data(g), tt_data(gx), m, n->f[0]);
    if (fresh) return TL_OK;
    tl_status s = tt__acc_grad(x, gx);
    tt_free(gx);
    return s;
}

static tt_tensor *unary(tt_ctx *c, int op, tt_tensor *x, double p) {
#ifdef TALLOW_CUDA
    if (op == U_GELU_TANH && x && tt__dev(x) == TT_CUDA) return tt__cu_gelu_tanh(c, x);
    if (op == U_SILU && x && tt__dev(x) == TT_CUDA) return tt__cu_silu(c, x);
    if (op == U_SCALE && x && tt__dev(x) == TT_CUDA) return tt__cu_scale(c, x, p);
#endif
    if (!tt__check_compute(x, un_names[op])) return NULL;
    tt_tensor *xc = tt_contiguous(c, x); /* recorded, so grads reach a strided x */
    if (!xc) return NULL;
    tt_tensor *o = tt__temp(c, x->dtype, x->ndim, x->shape);
    if (!o) return NULL;
    int64_t m = tt_numel(x);
    if (x->dtype == TT_F32)
        un_run(c, &(un_job){op, 0, tt_data(xc), NULL, NULL, tt_data(o), m, (float)p});
    else
        un_fwd_f64(op, tt_data(xc), tt_data(o), m, p);
    if (tt__needs_grad(c, &xc, 1)) {
        tt_node *n = tt__record(c, un_names[op], bw_unary, o, &xc, 1);
        if (!n) return NULL;
        n->i[0] = op;
        n->f[0] = p;
    }
    return o;
}

tt_tensor *tt_neg(tt_ctx *c, tt_tensor *x) { return unary(c, U_NEG, x, 0); }
tt_tensor *tt_scale(tt_ctx *c, tt_tensor *x, double s) { return unary(c, U_SCALE, x, s); }
tt_tensor *tt_exp(tt_ctx *c, tt_tensor *x) { return unary(c, U_EXP, x, 0); }
tt_tensor *tt_log(tt_ctx *c, tt_tensor *x) { return unary(c, U_LOG, x, 0); }
tt_tensor *tt_sqrt(tt_ctx *c, tt_tensor *x) { return unary(c, U_SQRT, x, 0); }
tt_tensor *tt_pow(tt_ctx *c, tt_tensor *x, double p) { return unary(c, U_POW, x, p); }
tt_tensor *tt_relu(tt_ctx *c, tt_tensor *x) { return unary(c, U_RELU, x, 0); }
tt_tensor *tt_gelu_tanh(tt_ctx *c, tt_tensor *x) { return unary(c, U_GELU_TANH, x, 0); }
tt_tensor *tt_gelu_erf(tt_ctx *c, tt_tensor *x) { return unary(c, U_GELU_ERF, x, 0); }
tt_tensor *tt_silu(tt_ctx *c, tt_tensor *x) { return unary(c, U_SILU, x, 0); }
tt_tensor *tt_sigmoid(tt_ctx *c, tt_tensor *x) { return unary(c, U_SIGMOID, x, 0); }
tt_tensor *tt_tanh(tt_ctx *c, tt_tensor *x) { return unary(c, U_TANH, x, 0); }

/* ---- reductions ---------------------------------------------------------- */
/* Backward of every reduction: broadcast g (keepdim shape) back, times scale. */
static tl_status bw_reduce(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    if (!tt__need(n, 0)) return TL_OK;
    tt_tensor *x = n->in[0];
    tt_tensor *gs = tt__clone(g);
    if (!gs) return TL_ERR_NOMEM;
    int64_t m = tt_numel(gs);
    for (int64_t i = 0; i < m; i++) tt_set(gs, i, tt_get(gs, i) * n->f[0]);
    /* view gs with x's ndim and size 1 on reduced dims */
    tt_tensor v = *gs;
    v.ndim = x->ndim;
    int64_t s = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        bool red = n->i[0] < 0 || n->i[0] == d;
        v.shape[d] = red ? 1 : x->shape[d];
        v.stride[d] = s;
        s *= v.shape[d];
    }
    tl_status st = tt__acc_grad(x, &v);
    tt_free(gs);
    return st;
}

static tt_tensor *reduce(tt_ctx *c, tt_tensor *x, int dim, bool keepdim, bool mean) {
    if (!tt__check_compute(x, mean ? "mean" : "sum")) return NULL;
    if (dim >= 0 && dim >= x->ndim) {
        tl_err(TL_ERR_INVALID, "train: reduction over dim %d of a %d-d tensor", dim, x->ndim);
        return NULL;
    }
    int64_t kshape[TT_MAX_DIMS], oshape[TT_MAX_DIMS];
    int ondim = 0;
    for (int d = 0; d < x->ndim; d++) {
        bool red = dim < 0 || d == dim;
        kshape[d] = red ? 1 : x->shape[d];
        if (!red || keepdim) oshape[ondim++] = kshape[d];
    }
    if (ondim == 0) oshape[ondim++] = 1;
    tt_tensor *xc = tt__contig(c, x);
    if (!xc) return NULL;
    tt_tensor *r = tt__reduce_to(xc, x->ndim, kshape);
    if (!r) return NULL;
    tt_tensor *o = tt__temp(c, x->dtype, ondim, oshape);
    if (!o) {
        tt_free(r);
        return NULL;
    }
    int64_t cnt = dim < 0 ? tt_numel(x) : x->shape[dim];
    double sc = mean ? 1.0 / (double)(cnt ? cnt : 1) : 1.0;
    int64_t m = tt_numel(o);
    for (int64_t i = 0; i < m; i++) tt_set(o, i, tt_get(r, i) * sc);
    tt_free(r);
    if (tt__needs_grad(c, &x, 1)) {
        tt_node *n = tt__record(c, mean ? "mean" : "sum", bw_reduce, o, &x, 1);
        if (!n) return NULL;
        n->i[0] = dim;
        n->f[0] = sc;
    }
    return o;
}

tt_tensor *tt_sum(tt_ctx *c, tt_tensor *x) { return reduce(c, x, -1, false, false); }
tt_tensor *tt_mean(tt_ctx *c, tt_tensor *x) { return reduce(c, x, -1, false, true); }
tt_tensor *tt_sum_dim(tt_ctx *c, tt_tensor *x, int dim, bool keepdim) {
    TT__HOST_ONLY("sum_dim", NULL, x);
    if (x && dim < 0) dim += x->ndim;
    return reduce(c, x, dim, keepdim, false);
}
tt_tensor *tt_mean_dim(tt_ctx *c, tt_tensor *x, int dim, bool keepdim) {
    TT__HOST_ONLY("mean_dim", NULL, x);
    if (x && dim < 0) dim += x->ndim;
    return reduce(c, x, dim, keepdim, true);
}
