/* train/cuda/tcu_gemm: the matmuls of training through cuBLASLt: linear
 * forward (bias in the epilogue) and backward, and attention as batched
 * matmuls around a row softmax (the probabilities are kept for the
 * backward). Row-major operands are handed to the column-major library as
 * their transposes: C = A B (row-major) is C^T = B^T A^T.
 * Modes: F32 (CUBLAS_COMPUTE_32F), TF32 (tensor cores, fp32 accumulation),
 * BF16 (operands rounded to bf16 into scratch, fp32 accumulation and fp32
 * outputs; the softmax in between stays fp32).
 * Owns: nothing. Calls: cuBLASLt, tcu_core, tcu_ops (softmax rows). */
#include <string.h>

#include "train/cuda/tcu_common.cuh"

struct mm_args {
    bool ta, tb;
    int64_t m, n, k;
    const void *A;
    int64_t lda, sA;
    const void *B;
    int64_t ldb, sB;
    float *C;
    int64_t ldc, sC;
    int batch;
    float alpha, beta;
    const float *bias;
    bool bf16; /* A and B are bf16 */
    bool tf32;
};

#define LT_TRY(x, what)                                                                     \
    do {                                                                                    \
        cublasStatus_t e_ = (x);                                                            \
        if (e_ != CUBLAS_STATUS_SUCCESS) {                                                  \
            st = tl_err(TL_ERR_BACKEND, "train cuda: cublasLt %s: status %d", what, (int)e_); \
            goto done;                                                                      \
        }                                                                                   \
    } while (0)

static tl_status lt_mm(tcu_state *s, const mm_args &a) {
    tl_status st = TL_OK;
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t res;
    int got = 0;
    cudaDataType_t ab = a.bf16 ? CUDA_R_16BF : CUDA_R_32F;
    cublasComputeType_t ct = a.tf32 && !a.bf16 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cublasOperation_t ta = a.ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb = a.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    LT_TRY(cublasLtMatmulDescCreate(&op, ct, CUDA_R_32F), "desc");
    LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "transa");
    LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "transb");
    if (a.bias) {
        cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_BIAS; /* bias in D's type (f32) */
        LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep), "epilogue");
        LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &a.bias, sizeof a.bias), "bias");
    }
    /* column-major layouts: A is (ta ? k x m : m x k), B is (tb ? n x k : k x n) */
    LT_TRY(cublasLtMatrixLayoutCreate(&la, ab, a.ta ? a.k : a.m, a.ta ? a.m : a.k, a.lda), "layout a");
    LT_TRY(cublasLtMatrixLayoutCreate(&lb, ab, a.tb ? a.n : a.k, a.tb ? a.k : a.n, a.ldb), "layout b");
    LT_TRY(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, a.m, a.n, a.ldc), "layout c");
    if (a.batch > 1) {
        int32_t bc = a.batch;
        LT_TRY(cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc), "batch");
        LT_TRY(cublasLtMatrixLayoutSetAttribute(lb, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc), "batch");
        LT_TRY(cublasLtMatrixLayoutSetAttribute(lc, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc), "batch");
        LT_TRY(cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &a.sA, sizeof a.sA),
               "stride");
        LT_TRY(cublasLtMatrixLayoutSetAttribute(lb, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &a.sB, sizeof a.sB),
               "stride");
        LT_TRY(cublasLtMatrixLayoutSetAttribute(lc, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &a.sC, sizeof a.sC),
               "stride");
    }
    LT_TRY(cublasLtMatmulPreferenceCreate(&pref), "preference");
    LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &s->lt_ws_bytes,
                                                sizeof s->lt_ws_bytes), "workspace");
    LT_TRY(cublasLtMatmulAlgoGetHeuristic(s->lt, op, la, lb, lc, lc, pref, 1, &res, &got), "heuristic");
    if (got < 1) {
        st = tl_err(TL_ERR_BACKEND, "train cuda: cublasLt has no algorithm for %lld x %lld x %lld", (long long)a.m,
                    (long long)a.n, (long long)a.k);
        goto done;
    }
    LT_TRY(cublasLtMatmul(s->lt, op, &a.alpha, a.A, la, a.B, lb, &a.beta, a.C, lc, a.C, lc, &res.algo, s->lt_ws,
                          s->lt_ws_bytes, s->stream), "matmul");
done:
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (op) cublasLtMatmulDescDestroy(op);
    return st;
}

__global__ void k_to_bf16(__nv_bfloat16 *d, const float *s, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        d[i] = __float2bfloat16_rn(s[i]);
}

static const void *as_bf16(tcu_state *s, void **scratch, const float *x, int64_t n) {
    __nv_bfloat16 *d = (__nv_bfloat16 *)*scratch;
    if (n) k_to_bf16<<<tcu_blocks(n, 256), 256, 0, s->stream>>>(d, x, n);
    *scratch = d + ((n + 63) / 64) * 64;
    return d;
}

static mm_args mm0(int mode) {
    mm_args a;
    memset(&a, 0, sizeof a);
    a.batch = 1;
    a.alpha = 1.f;
    a.bf16 = mode == TCU_MM_BF16;
    a.tf32 = mode == TCU_MM_TF32;
    return a;
}

/* An output width N that is not a multiple of 8 (an odd vocabulary:
 * GPT-2's 50257) is padded to P = tcu_pad_ld(N) for the matmuls: W and the
 * bias get P - N zero rows, the product and g rows of P values (g's padding
 * zeroed), and the results' first N rows or columns are copied out.
 * cuBLASLt's kernels for an odd dimension or leading dimension run at a
 * fraction of the aligned ones' rate. */
static int64_t tcu_pad_ld(int64_t N) { return N % 8 ? (N + 63) / 64 * 64 : N; }

extern "C" size_t tcu_linear_pad_bytes(int64_t M, int64_t N, int64_t K) {
    const int64_t P = tcu_pad_ld(N);
    if (P == N) return 0;
    /* forward: product, W, bias; backward: g, its bf16 copy, W, the W gradient */
    return ((size_t)M * (size_t)P * 6 + (size_t)P * (size_t)K * 8 + (size_t)P * 4) + 1024;
}

/* rows of n floats, ld_s apart, into rows ld_d apart */
static tl_status copy_rows(tcu_state *s, float *d, int64_t ld_d, const float *src, int64_t ld_s, int64_t n, int64_t rows) {
    return tcu_err(cudaMemcpy2DAsync(d, (size_t)ld_d * 4, src, (size_t)ld_s * 4, (size_t)n * 4, (size_t)rows,
                                     cudaMemcpyDeviceToDevice, s->stream),
                   "row copy");
}

/* a scratch array of n floats (64-float aligned steps) */
static float *take(void **scratch, int64_t n) {
    float *p = (float *)*scratch;
    *scratch = p + (n + 63) / 64 * 64;
    return p;
}

/* W [N, K] f32 as the matmul's operand with P rows (rows past N zero): f32
 * or bf16 by mode */
static const void *w_padded(tcu_state *s, void **scratch, const float *w, int64_t N, int64_t P, int64_t K, bool bf16) {
    if (bf16) {
        __nv_bfloat16 *d = (__nv_bfloat16 *)*scratch;
        as_bf16(s, scratch, w, N * K);
        cudaMemsetAsync(d + N * K, 0, (size_t)(P - N) * (size_t)K * 2, s->stream);
        *scratch = d + ((P * K + 63) / 64) * 64;
        return d;
    }
    float *d = take(scratch, P * K);
    cudaMemcpyAsync(d, w, (size_t)N * (size_t)K * 4, cudaMemcpyDeviceToDevice, s->stream);
    cudaMemsetAsync(d + N * K, 0, (size_t)(P - N) * (size_t)K * 4, s->stream);
    return d;
}

extern "C" tl_status tcu_linear_fwd(float *y, const float *x, const float *w, const float *bias, int64_t M, int64_t N,
                                    int64_t K, int mode, void *scratch) {
    TCU_STATE_D(s, N);
    mm_args a = mm0(mode);
    const int64_t P = tcu_pad_ld(N);
    const void *xa = x, *wa = w;
    const float *ba = bias;
    float *yp = y;
    if (P != N) {
        yp = take(&scratch, M * P);
        wa = w_padded(s, &scratch, w, N, P, K, a.bf16);
        if (bias) {
            float *bp = take(&scratch, P);
            cudaMemcpyAsync(bp, bias, (size_t)N * 4, cudaMemcpyDeviceToDevice, s->stream);
            cudaMemsetAsync(bp + N, 0, (size_t)(P - N) * 4, s->stream);
            ba = bp;
        }
    } else if (a.bf16) {
        wa = as_bf16(s, &scratch, w, N * K);
    }
    if (a.bf16) xa = as_bf16(s, &scratch, x, M * K);
    /* y^T [P, M] = w [P, K] . x^T */
    a.ta = true;
    a.m = P, a.n = M, a.k = K;
    a.A = wa, a.lda = K;
    a.B = xa, a.ldb = K;
    a.C = yp, a.ldc = P;
    a.bias = ba;
    tl_status st = lt_mm(s, a);
    if (!st && yp != y) st = copy_rows(s, y, N, yp, P, N, M);
    return st;
}

extern "C" tl_status tcu_sum_rows_into(float *gb, const float *g, int64_t R, int64_t Rb, int64_t N, float *scratch);

extern "C" tl_status tcu_linear_bwd(float *gx, bool gx_add, float *gw, bool gw_add, float *gb, const float *g, const float *x,
                                    const float *w, int64_t M, int64_t N, int64_t K, int mode, void *scratch) {
    TCU_STATE_D(s, N);
    tl_status st = TL_OK;
    mm_args a = mm0(mode);
    const int64_t P = tcu_pad_ld(N);
    const void *ga = g, *xa = x, *wa = w;
    float *gwp = gw;
    if (P != N) {
        float *gp = take(&scratch, M * P);
        if ((st = copy_rows(s, gp, P, g, N, N, M))) return st;
        if ((st = tcu_err(cudaMemset2DAsync(gp + N, (size_t)P * 4, 0, (size_t)(P - N) * 4, (size_t)M, s->stream),
                          "pad zero")))
            return st;
        ga = gp;
        if (gx) wa = w_padded(s, &scratch, w, N, P, K, a.bf16);
        if (gw) gwp = take(&scratch, P * K);
    } else if (a.bf16 && gx) {
        wa = as_bf16(s, &scratch, w, N * K);
    }
    if (a.bf16) {
        ga = as_bf16(s, &scratch, (const float *)ga, M * P);
        if (gw) xa = as_bf16(s, &scratch, x, M * K);
    }
    float *colsum_scratch = (float *)scratch;
    if (gx) { /* gx^T [K, M] = w^T . g^T */
        mm_args b = a;
        b.m = K, b.n = M, b.k = P;
        b.A = wa, b.lda = K;
        b.B = ga, b.ldb = P;
        b.C = gx, b.ldc = K;
        b.beta = gx_add ? 1.f : 0.f;
        if ((st = lt_mm(s, b)) != TL_OK) return st;
    }
    if (gw) { /* gw^T [K, P] (=|+=) x^T . g; padded: into scratch, then its first N rows */
        mm_args b = a;
        b.tb = true;
        b.m = K, b.n = P, b.k = M;
        b.A = xa, b.lda = K;
        b.B = ga, b.ldb = P;
        b.C = gwp, b.ldc = K;
        b.beta = gw_add && gwp == gw ? 1.f : 0.f;
        if ((st = lt_mm(s, b)) != TL_OK) return st;
        if (gwp != gw) {
            const int64_t sh[4] = {1, 1, 1, N * K}, st1[4] = {0, 0, 0, 1};
            st = gw_add ? tcu_copy4(gw, TCU_F32, st1, gwp, TCU_F32, st1, sh, true)
                        : tcu_err(cudaMemcpyAsync(gw, gwp, (size_t)N * (size_t)K * 4, cudaMemcpyDeviceToDevice,
                                                  s->stream),
                                  "gradient copy");
            if (st) return st;
        }
    }
    if (gb) st = tcu_sum_rows_into(gb, g, M, 1, N, colsum_scratch);
    return st;
}

/* element n of a matmul operand (f32, or bf16 in BF16 mode) */
static const void *at(const void *p, int64_t n, const mm_args &a) {
    return (const char *)p + n * (a.bf16 ? 2 : 4);
}

/* Grouped-query heads: query head h of batch b reads kv head h / rep, so
 * with G = BH / rep kv heads (base.batch), query head g * rep + r pairs
 * with kv head g: one strided batch of G matmuls per r, query-side ([T, D]
 * per head) and score-side ([T, T]) strides rep times the kv ones. These
 * three are the shapes attention's matmuls take for the r-th head of each
 * group; BF16 mode: the operands are bf16 copies in scratch (f32 results). */

/* S_r^T [T, T] = alpha KV . X_r^T (scores, dP) */
static tl_status mm_scores(tcu_state *s, mm_args a, const void *kv, const void *x, float *out, int64_t r, int64_t rep,
                           int64_t T, int64_t D, float alpha) {
    a.ta = true;
    a.m = T, a.n = T, a.k = D;
    a.A = kv, a.lda = D, a.sA = T * D;
    a.B = at(x, r * T * D, a), a.ldb = D, a.sB = rep * T * D;
    a.C = out + r * T * T, a.ldc = T, a.sC = rep * T * T;
    a.alpha = alpha;
    return lt_mm(s, a);
}

/* Y_r^T [D, T] = KV^T . P_r^T (the output, dQ) */
static tl_status mm_apply(tcu_state *s, mm_args a, const void *kv, const void *pr, float *out, int64_t r, int64_t rep,
                          int64_t T, int64_t D) {
    a.m = D, a.n = T, a.k = T;
    a.A = kv, a.lda = D, a.sA = T * D;
    a.B = at(pr, r * T * T, a), a.ldb = T, a.sB = rep * T * T;
    a.C = out + r * T * D, a.ldc = D, a.sC = rep * T * D;
    return lt_mm(s, a);
}

/* dKV^T [D, T] (r ? += : =) X_r^T . P_r (dV, dK: the group's heads add in order) */
static tl_status mm_kv_grad(tcu_state *s, mm_args a, const void *x, const void *pr, float *out, int64_t r,
                            int64_t rep, int64_t T, int64_t D) {
    a.tb = true;
    a.m = D, a.n = T, a.k = T;
    a.A = at(x, r * T * D, a), a.lda = D, a.sA = rep * T * D;
    a.B = at(pr, r * T * T, a), a.ldb = T, a.sB = rep * T * T;
    a.C = out, a.ldc = D, a.sC = T * D;
    a.beta = r ? 1.f : 0.f;
    return lt_mm(s, a);
}

extern "C" tl_status tcu_attn_fwd(float *o, float *p, const float *q, const float *k, const float *v, int64_t BH,
                                  int64_t rep, int64_t T, int64_t D, float scale, bool causal, int mode,
                                  void *scratch) {
    TCU_STATE(s);
    tl_status st = TL_OK;
    const int64_t nq = BH * T * D, nkv = nq / rep, np = BH * T * T;
    const void *qa = q, *ka = k, *va = v;
    if (mode == TCU_MM_BF16) {
        qa = as_bf16(s, &scratch, q, nq);
        ka = as_bf16(s, &scratch, k, nkv);
        va = as_bf16(s, &scratch, v, nkv);
    }
    mm_args base = mm0(mode);
    base.batch = (int)(BH / rep);
    for (int64_t r = 0; r < rep && !st; r++) st = mm_scores(s, base, ka, qa, p, r, rep, T, D, scale);
    if (!st) st = tcu_softmax_rows(p, BH * T, T, causal);
    const void *pa = p;
    if (!st && mode == TCU_MM_BF16) pa = as_bf16(s, &scratch, p, np);
    for (int64_t r = 0; r < rep && !st; r++) st = mm_apply(s, base, va, pa, o, r, rep, T, D);
    return st;
}

extern "C" tl_status tcu_attn_bwd(float *dq, float *dk, float *dv, float *dp, const float *go, const float *p,
                                  const float *q, const float *k, const float *v, int64_t BH, int64_t rep, int64_t T,
                                  int64_t D, float scale, int mode, void *scratch) {
    TCU_STATE(s);
    tl_status st = TL_OK;
    const int64_t nq = BH * T * D, nkv = nq / rep, np = BH * T * T;
    const void *qa = q, *ka = k, *va = v, *ga = go, *pa = p;
    void *pscr = NULL;
    if (mode == TCU_MM_BF16) {
        qa = as_bf16(s, &scratch, q, nq);
        ka = as_bf16(s, &scratch, k, nkv);
        va = as_bf16(s, &scratch, v, nkv);
        ga = as_bf16(s, &scratch, go, nq);
        pscr = scratch;
        pa = as_bf16(s, &scratch, p, np);
    }
    mm_args base = mm0(mode);
    base.batch = (int)(BH / rep);
    for (int64_t r = 0; r < rep && !st; r++) { /* dP = dO . V^T; dV += P^T . dO */
        st = mm_scores(s, base, va, ga, dp, r, rep, T, D, 1.f);
        if (!st) st = mm_kv_grad(s, base, ga, pa, dv, r, rep, T, D);
    }
    if (!st) st = tcu_softmax_rows_bwd(dp, p, BH * T, T, scale);
    const void *dsa = dp;
    if (!st && mode == TCU_MM_BF16) { /* dS in bf16 over P's bf16 copy (dV, its reader, is queued before) */
        void *sc = pscr;
        dsa = as_bf16(s, &sc, dp, np);
    }
    for (int64_t r = 0; r < rep && !st; r++) { /* dQ = dS . K; dK += dS^T . Q */
        st = mm_apply(s, base, ka, dsa, dq, r, rep, T, D);
        if (!st) st = mm_kv_grad(s, base, qa, dsa, dk, r, rep, T, D);
    }
    return st;
}
