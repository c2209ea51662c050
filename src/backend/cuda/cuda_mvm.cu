/* backend/cuda/cuda_mvm: matrix times a few vectors (2..TLC_MVM_MAX = 4
 * tokens), for batched decode of a few sequences (from 5 tokens the
 * small-batch mma kernel is faster: docs/PERFORMANCE.md).
 *
 * Design: the decode matvec's layout (cuda_mv.cuh): a warp owns R rows and
 * its lanes walk them in 16-byte units of the repacked layout with a stride
 * of 32 units (512 contiguous bytes per warp-wide load), U units per row in
 * flight, and every unit is dotted with all m tokens' activations before
 * the next is used, so each weight byte is read once per step as in batch-1
 * decode. The R rows share each activation load: per unit a lane reads m
 * activation chunks (q8_1 for quantized weights, f32 for float ones) from
 * L1 for R weight units, which keeps L1 traffic under its bandwidth (R = 4
 * at 3 and 4 tokens). Weights are loaded before griddepcontrol.wait,
 * activations after it (cuda_common.cuh).
 * Calls: CUDA. */
#include "backend/cuda/cuda_mv.cuh"

#define MVM_WARPS 4

/* y[t][row] (=, or += accumulating) for t < m <= MT over the warp's R rows
 * (rows past the matrix load its last row and store nothing) */
template <int T, int MT, int R, int U>
__global__ void __launch_bounds__(MVM_WARPS * 32)
mvm_k(const tlc_weight w, const float *xf, const int8_t *xq, int64_t q8_row, int m, float *y, int64_t ldy, int mode) {
    typedef mv<T> M;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    pdl_trigger();
    const int64_t row0 = ((int64_t)blockIdx.x * MVM_WARPS + warp) * R;
    if (row0 >= w.n_out) {
        pdl_wait();
        return;
    }
    int64_t rows[R];
#pragma unroll
    for (int r = 0; r < R; r++) rows[r] = min(row0 + r, w.n_out - 1);
    const int64_t nu = M::units(w.n_in);
    float acc[MT][R];
#pragma unroll
    for (int t = 0; t < MT; t++)
#pragma unroll
        for (int r = 0; r < R; r++) acc[t][r] = 0.0f;
    for (int64_t base = 0; base == 0 || base < nu; base += 32 * U) {
        typename M::W v[U][R];
#pragma unroll
        for (int k = 0; k < U; k++) {
            const int64_t u = base + k * 32 + lane;
#pragma unroll
            for (int r = 0; r < R; r++)
                if (u < nu) v[k][r] = M::load(w, rows[r], u);
        }
        if (base == 0) pdl_wait(); /* the first weights are in flight */
#pragma unroll
        for (int k = 0; k < U; k++) {
            const int64_t u = base + k * 32 + lane;
            if (u >= nu) continue;
#pragma unroll
            for (int t = 0; t < MT; t++) {
                if (t >= m) break;
                const int8_t *q = xq ? xq + t * q8_row : nullptr;
                const float2 *ds = xq ? (const float2 *)(q + w.n_in) : nullptr;
                const float *x = xf ? xf + t * w.n_in : nullptr;
#pragma unroll
                for (int r = 0; r < R; r++) acc[t][r] += M::dot(v[k][r], w, rows[r], u, x, q, ds);
            }
        }
    }
#pragma unroll
    for (int t = 0; t < MT; t++) {
        if (t >= m) break;
#pragma unroll
        for (int r = 0; r < R; r++) {
            const float s = warp_sum(acc[t][r]);
            if (lane == 0 && row0 + r < w.n_out) {
                float *o = y + t * ldy + row0 + r;
                *o = mode == TLC_MV_ACCUM ? *o + s : s;
            }
        }
    }
}

template <int T, int MT, int R, int U>
static cudaError_t mvm_go(tlc_ctx *c, const tlc_weight *w, const float *xf, const int8_t *xq, int m, float *y,
                          int64_t ldy, int mode) {
    const dim3 g((unsigned)tlc_div_up(tlc_div_up(w->n_out, R), MVM_WARPS)), b(MVM_WARPS * 32);
    return tlc_launch(c, mvm_k<T, MT, R, U>, g, b, 0, *w, xf, xq, (int64_t)tlc_q8_bytes(w->n_in), m, y, ldy, mode);
}

template <int T>
static cudaError_t mvm_launch(tlc_ctx *c, const tlc_weight *w, const float *xf, const int8_t *xq, int m, float *y,
                              int64_t ldy, int mode) {
    if (m <= 2) return mvm_go<T, 2, 2, 4>(c, w, xf, xq, m, y, ldy, mode);
    return mvm_go<T, 4, 4, 2>(c, w, xf, xq, m, y, ldy, mode);
}

bool tlc_mvm_ok(const tlc_weight *w, int64_t m) {
    if (m < 2 || m > TLC_MVM_MAX) return false;
    switch (w->type) {
    case TL_TYPE_F16:
    case TL_TYPE_BF16: return w->n_in % 8 == 0;
    case TL_TYPE_F32: return w->n_in % 4 == 0;
    /* q8_1 rows tlc_q8_bytes(n_in) apart stay 16-byte aligned for n_in % 64 == 0 */
    case TL_TYPE_Q4_0:
    case TL_TYPE_Q4_1:
    case TL_TYPE_Q8_0: return w->n_in % 64 == 0;
    case TL_TYPE_Q4_K:
    case TL_TYPE_Q6_K: return w->n_in % 256 == 0;
    default: return false;
    }
}

bool tlc_mvm_use(const tlc_ctx *c, const tlc_weight *w, int64_t m) { return m <= c->mvm_max && tlc_mvm_ok(w, m); }

tl_status tlc_mvm(tlc_ctx *c, const tlc_weight *w, const float *xf, const void *xq, int64_t m, float *y, int64_t ldy,
                  int mode) {
    if (!tlc_mvm_ok(w, m))
        return tl_err(TL_ERR_INVALID, "cuda: mvm: %s weight [%lld x %lld] with %lld tokens is not served",
                      tl_type_name(w->type), (long long)w->n_out, (long long)w->n_in, (long long)m);
    if (mode != TLC_MV_STORE && mode != TLC_MV_ACCUM) return tl_err(TL_ERR_INVALID, "cuda: mvm: mode %d", mode);
    const bool fl = tlc_weight_is_float(w);
    if (fl ? !xf : !xq) return tl_err(TL_ERR_INVALID, "cuda: mvm: no %s activation", fl ? "f32" : "q8_1");
    const int8_t *q = (const int8_t *)xq;
    const int mi = (int)m;
    cudaError_t e;
    switch (w->type) {
    case TL_TYPE_F16: e = mvm_launch<TL_TYPE_F16>(c, w, xf, nullptr, mi, y, ldy, mode); break;
    case TL_TYPE_BF16: e = mvm_launch<TL_TYPE_BF16>(c, w, xf, nullptr, mi, y, ldy, mode); break;
    case TL_TYPE_F32: e = mvm_launch<TL_TYPE_F32>(c, w, xf, nullptr, mi, y, ldy, mode); break;
    case TL_TYPE_Q4_0: e = mvm_launch<TL_TYPE_Q4_0>(c, w, nullptr, q, mi, y, ldy, mode); break;
    case TL_TYPE_Q4_1: e = mvm_launch<TL_TYPE_Q4_1>(c, w, nullptr, q, mi, y, ldy, mode); break;
    case TL_TYPE_Q8_0: e = mvm_launch<TL_TYPE_Q8_0>(c, w, nullptr, q, mi, y, ldy, mode); break;
    case TL_TYPE_Q4_K: e = mvm_launch<TL_TYPE_Q4_K>(c, w, nullptr, q, mi, y, ldy, mode); break;
    default: e = mvm_launch<TL_TYPE_Q6_K>(c, w, nullptr, q, mi, y, ldy, mode); break;
    }
    TLC_TRY(e, "mvm");
    return TL_OK;
}
