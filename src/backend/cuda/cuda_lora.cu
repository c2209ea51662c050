/* backend/cuda/cuda_lora: see cuda_lora.h. The shrink is a warp-per-rank
 * dot product over n_in (lanes stride the row, a shuffle reduction ends
 * it); the expand gives each thread one output of one row and walks that
 * row's entries, reading Bt so that neighbouring threads read neighbouring
 * outputs. Both are bound by reading A / Bt once per entry and row; at
 * rank 16 that is 16 (n_in + n_out) floats per token, small beside the
 * base weight's n_in * n_out.
 * Owns: nothing. Calls: CUDA runtime. */
#include <cuda_runtime.h>

#include "backend/cuda/cuda_lora.h"

#define LORA_SHRINK_WARPS 4
#define LORA_EXPAND_THREADS 256

__global__ void lora_shrink_k(const float *__restrict__ x, int64_t ldx, int32_t n_in,
                              const int32_t *__restrict__ ent_row, const int32_t *__restrict__ ent_grp,
                              const tlc_lora_group *__restrict__ groups, int32_t max_rank, float *__restrict__ tmp) {
    const int e = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const tlc_lora_group g = groups[ent_grp[e]];
    const float *xr = x + (int64_t)ent_row[e] * ldx;
    for (int r = warp; r < g.rank; r += LORA_SHRINK_WARPS) {
        const float *a = g.a + (int64_t)r * n_in;
        float acc = 0.0f;
        for (int k = lane; k < n_in; k += 32) acc = fmaf(a[k], xr[k], acc);
        for (int off = 16; off; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
        if (lane == 0) tmp[(int64_t)e * max_rank + r] = acc;
    }
}

__global__ void lora_expand_k(float *__restrict__ y, int64_t ldy, int32_t n_out, const int32_t *__restrict__ row_ptr,
                              const int32_t *__restrict__ ent_grp, const tlc_lora_group *__restrict__ groups,
                              int32_t max_rank, const float *__restrict__ tmp) {
    const int t = blockIdx.x, o = blockIdx.y * LORA_EXPAND_THREADS + threadIdx.x;
    if (o >= n_out) return;
    float acc = 0.0f;
    for (int e = row_ptr[t]; e < row_ptr[t + 1]; e++) {
        const tlc_lora_group g = groups[ent_grp[e]];
        const float *te = tmp + (int64_t)e * max_rank;
        float d = 0.0f;
        for (int r = 0; r < g.rank; r++) d = fmaf(g.bt[(int64_t)r * n_out + o], te[r], d);
        acc = fmaf(g.scale, d, acc);
    }
    y[(int64_t)t * ldy + o] += acc;
}

static tl_status lora_launch_err(const char *what) {
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? TL_OK : tl_err(TL_ERR_BACKEND, "cuda: %s: %s", what, cudaGetErrorString(e));
}

extern "C" tl_status tlc_lora_shrink(const float *x, int64_t ldx, int32_t n_in, const int32_t *ent_row,
                                     const int32_t *ent_grp, int32_t n_ent, const tlc_lora_group *groups,
                                     int32_t max_rank, float *tmp, void *stream) {
    if (n_ent <= 0) return TL_OK;
    if (n_in <= 0 || max_rank <= 0 || ldx < n_in)
        return tl_err(TL_ERR_INVALID, "cuda: lora_shrink: n_in %d, ldx %lld, max_rank %d", n_in, (long long)ldx,
                      max_rank);
    lora_shrink_k<<<n_ent, 32 * LORA_SHRINK_WARPS, 0, (cudaStream_t)stream>>>(x, ldx, n_in, ent_row, ent_grp, groups,
                                                                            max_rank, tmp);
    return lora_launch_err("lora_shrink");
}

extern "C" tl_status tlc_lora_expand(float *y, int64_t ldy, int32_t n_out, const int32_t *row_ptr, int32_t n_rows,
                                     const int32_t *ent_grp, const tlc_lora_group *groups, int32_t max_rank,
                                     const float *tmp, void *stream) {
    if (n_rows <= 0) return TL_OK;
    if (n_out <= 0 || max_rank <= 0 || ldy < n_out)
        return tl_err(TL_ERR_INVALID, "cuda: lora_expand: n_out %d, ldy %lld, %d rows", n_out, (long long)ldy, n_rows);
    dim3 grid((unsigned)n_rows, (unsigned)((n_out + LORA_EXPAND_THREADS - 1) / LORA_EXPAND_THREADS));
    lora_expand_k<<<grid, LORA_EXPAND_THREADS, 0, (cudaStream_t)stream>>>(y, ldy, n_out, row_ptr, ent_grp, groups,
                                                                         max_rank, tmp);
    return lora_launch_err("lora_expand");
}
