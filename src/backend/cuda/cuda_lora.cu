/* backend/cuda/cuda_lora: see cuda_lora.h. The shrink gives each (entry,
 * rank) dot product over n_in its own block (lanes stride the row four
 * floats at a time where the rows allow, a shuffle and a shared-memory
 * step end it), so even one token spreads over rank blocks; the expand
 * gives each thread one output of one row and walks that row's entries,
 * reading Bt so that neighbouring threads read neighbouring outputs. Both
 * are bound by reading A / Bt once per entry and row; at rank 16 that is
 * 16 (n_in + n_out) floats per token, small beside the base weight's
 * n_in * n_out. Sums run in a fixed order: the same bits on every run.
 * Owns: nothing. Calls: CUDA runtime. */
#include <cuda_runtime.h>

#include "backend/cuda/cuda_lora.h"

#define LORA_SHRINK_THREADS 128
#define LORA_EXPAND_THREADS 256

__global__ void lora_shrink_k(const float *__restrict__ x, int64_t ldx, int32_t n_in,
                              const int32_t *__restrict__ ent_row, const int32_t *__restrict__ ent_grp,
                              const tlc_lora_group *__restrict__ groups, int32_t max_rank, float *__restrict__ tmp,
                              bool vec4) {
    __shared__ float part[LORA_SHRINK_THREADS / 32];
    const int e = blockIdx.x, r = blockIdx.y, tid = threadIdx.x;
    const tlc_lora_group g = groups[ent_grp[e]];
    if (r >= g.rank) return;
    const float *xr = x + (int64_t)ent_row[e] * ldx, *a = g.a + (int64_t)r * n_in;
    float acc = 0.0f;
    if (vec4) {
        const float4 *a4 = (const float4 *)a, *x4 = (const float4 *)xr;
        for (int k = tid; k < n_in / 4; k += LORA_SHRINK_THREADS) {
            const float4 av = a4[k], xv = x4[k];
            acc = fmaf(av.x, xv.x, acc);
            acc = fmaf(av.y, xv.y, acc);
            acc = fmaf(av.z, xv.z, acc);
            acc = fmaf(av.w, xv.w, acc);
        }
    } else {
        for (int k = tid; k < n_in; k += LORA_SHRINK_THREADS) acc = fmaf(a[k], xr[k], acc);
    }
    for (int off = 16; off; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (tid % 32 == 0) part[tid / 32] = acc;
    __syncthreads();
    if (tid == 0) {
        float sum = 0.0f;
        for (int w = 0; w < LORA_SHRINK_THREADS / 32; w++) sum += part[w];
        tmp[(int64_t)e * max_rank + r] = sum;
    }
}

__global__ void lora_expand_k(float *__restrict__ y, int64_t ldy, int32_t n_cols, const int32_t *__restrict__ row_ptr,
                              const int32_t *__restrict__ ent_grp, const tlc_lora_group *__restrict__ groups,
                              int32_t max_rank, const float *__restrict__ tmp) {
    const int t = blockIdx.x, o = blockIdx.y * LORA_EXPAND_THREADS + threadIdx.x;
    if (o >= n_cols) return;
    float acc = 0.0f;
    bool hit = false;
    for (int e = row_ptr[t]; e < row_ptr[t + 1]; e++) {
        const tlc_lora_group g = groups[ent_grp[e]];
        const int oc = o - g.col0;
        if (oc < 0 || oc >= g.n_out) continue;
        const float *te = tmp + (int64_t)e * max_rank;
        float d = 0.0f;
        for (int r = 0; r < g.rank; r++) d = fmaf(g.bt[(int64_t)r * g.n_out + oc], te[r], d);
        acc = fmaf(g.scale, d, acc);
        hit = true;
    }
    if (hit) y[(int64_t)t * ldy + o] += acc;
}

static tl_status lora_launch_err(const char *what) {
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? TL_OK : tl_err(TL_ERR_BACKEND, "cuda: %s: %s", what, cudaGetErrorString(e));
}

extern "C" tl_status tlc_lora_shrink(const float *x, int64_t ldx, int32_t n_in, const int32_t *ent_row,
                                     const int32_t *ent_grp, int32_t n_ent, const tlc_lora_group *groups,
                                     int32_t max_rank, float *tmp, void *stream) {
    if (n_ent <= 0) return TL_OK;
    if (n_in <= 0 || max_rank <= 0 || max_rank > 65535 || ldx < n_in)
        return tl_err(TL_ERR_INVALID, "cuda: lora_shrink: n_in %d, ldx %lld, max_rank %d", n_in, (long long)ldx,
                      max_rank);
    /* float4 rows when n_in and ldx keep every row 16-byte aligned (A rows
     * are n_in floats apart; the allocations themselves are aligned) */
    const bool vec4 = n_in % 4 == 0 && ldx % 4 == 0 && ((uintptr_t)x & 15) == 0;
    dim3 grid((unsigned)n_ent, (unsigned)max_rank);
    lora_shrink_k<<<grid, LORA_SHRINK_THREADS, 0, (cudaStream_t)stream>>>(x, ldx, n_in, ent_row, ent_grp, groups,
                                                                         max_rank, tmp, vec4);
    return lora_launch_err("lora_shrink");
}

extern "C" tl_status tlc_lora_expand(float *y, int64_t ldy, int32_t n_cols, const int32_t *row_ptr, int32_t n_rows,
                                     const int32_t *ent_grp, const tlc_lora_group *groups, int32_t max_rank,
                                     const float *tmp, void *stream) {
    if (n_rows <= 0) return TL_OK;
    if (n_cols <= 0 || max_rank <= 0 || ldy < n_cols)
        return tl_err(TL_ERR_INVALID, "cuda: lora_expand: n_cols %d, ldy %lld, %d rows", n_cols, (long long)ldy, n_rows);
    dim3 grid((unsigned)n_rows, (unsigned)((n_cols + LORA_EXPAND_THREADS - 1) / LORA_EXPAND_THREADS));
    lora_expand_k<<<grid, LORA_EXPAND_THREADS, 0, (cudaStream_t)stream>>>(y, ldy, n_cols, row_ptr, ent_grp, groups,
                                                                         max_rank, tmp);
    return lora_launch_err("lora_expand");
}
