/* backend/cuda/cuda_common: what the .cu files share and nothing outside
 * backend/cuda sees: the context struct, CUDA-error-to-tl_status helpers and
 * the repacked block layouts. Calls: CUDA runtime, cuBLAS, base/status. */
#ifndef TL_BACKEND_CUDA_COMMON_CUH
#define TL_BACKEND_CUDA_COMMON_CUH

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "backend/cuda/cuda_backend.h"

struct tlc_ctx {
    int device;
    cudaStream_t stream;
    cublasHandle_t blas;
    size_t in_use;       /* bytes handed out by tlc_alloc */
    int n_sm;
    bool capturing;
    /* tuning (tl_cuda_tuning, copied at init) */
    bool pdl;             /* programmatic dependent launch (tlc_launch) */
    bool flash;           /* prompt attention on the tensor cores (cuda_flash.cu) */
    int att_chunk;        /* decode attention: fewest positions per split */
    int mv_store_u;       /* units per lane per pass of the plain store matvecs (QKV, output head); 0: by type */
    int mv_glu_u;         /* the same for the GLU matvec; 0: by type */
    int mv_ks;            /* most blocks (a cluster) that split one 32-row group of a Wo/down matvec: 1, 2 or 4 */
    int mvm_max;          /* most tokens of the few-token matvec (tlc_mvm_use) */
    int64_t att_max_len;  /* longest context of the decode attention launches now (0: not
                           * known; tlc_attn_plan) */
    int *mv_cnt;         /* [TLC_MV_GROUPS] zeroed counters of the matvec q8_1 epilogue
                          * (each launch leaves them zero again) */
};

#define TLC_MV_GROUPS (1 << 16) /* 32-output groups a q8_1-epilogue matvec may have */
#define TLC_ATT_MAX_KV 256      /* decode attention's counters: the last ones of mv_cnt */

/* Programmatic dependent launch (Hopper): a kernel launched with
 * tlc_launch may start while its predecessor is still running; it must call
 * pdl_wait() before reading anything a predecessor wrote (and before
 * writing anything a predecessor reads), and calls pdl_trigger() early so
 * its own successor can be scheduled. Weights (constant) may be read
 * before the wait: that is the point, a matvec streams its weights while
 * the small kernels before it finish. Every kernel launched this way waits
 * unconditionally, so completion stays transitive along the stream.
 * Kernels must not read what a predecessor writes through the non-coherent
 * path (ld.global.nc / __ldg): .nc requires the data to be read-only for the
 * kernel's lifetime, which a producer still running breaks; with weak loads
 * the outputs are bit-identical to serialized launches. tl_cuda_tuning.pdl
 * turns the attribute off; without it the wait is a no-op. */
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

/* RoPE: sine and cosine of rotation pair p's angle over n_rot dims at
 * pos_s, the position already divided by the context scale, with Llama-3's
 * per-pair frequency divisors where fdiv is set (the one formula of every
 * RoPE kernel and epilogue) */
__device__ __forceinline__ void rope_sincos(float pos_s, int p, int n_rot, float base, const float *fdiv, float *s,
                                            float *co) {
    float inv = powf(base, -2.0f * (float)p / (float)n_rot);
    if (fdiv) inv /= fdiv[p];
    sincosf(pos_s * inv, s, co);
}

/* the rotate-and-cache-store of one pair (a, b) of head `head` of a
 * token's [q | k | v] row at pos, shared by the RoPE kernels and the QKV
 * matvec's epilogue: q/k heads rotate (y0, y1) by (s, co) in place, k heads
 * also go into the key cache, v heads (unrotated) into the value cache.
 * Caches are [kv head][n_ctx][hd] halves. */
__device__ __forceinline__ void rope_store_pair(__half *kc, __half *vc, int head, int nh, int nkv, int hd,
                                                int64_t n_ctx, int64_t pos, int a, int b, float s, float co,
                                                float &y0, float &y1) {
    if (head < nh + nkv) {
        /* rounding pinned (one product rounded, the other fused): left to
         * nvcc, the contraction into an FMA differs between inlining sites,
         * and the RoPE kernels and the QKV epilogue must store identical bits */
        const float x0 = y0, x1 = y1;
        y0 = __fmaf_rn(x0, co, -__fmul_rn(x1, s));
        y1 = __fmaf_rn(x0, s, __fmul_rn(x1, co));
        if (head >= nh) {
            __half *kr = kc + ((int64_t)(head - nh) * n_ctx + pos) * hd;
            kr[a] = __float2half(y0);
            kr[b] = __float2half(y1);
        }
    } else {
        __half *vr = vc + ((int64_t)(head - nh - nkv) * n_ctx + pos) * hd;
        vr[a] = __float2half(y0);
        vr[b] = __float2half(y1);
    }
}

/* cp.async (sm_80+): 16 bytes global -> shared (dst a shared-space address);
 * src_bytes < 16 fills the rest with zeros (0: all zeros) */
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N)); }

/* sum / max of v over the 32 lanes of a warp (every lane gets the result) */
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* q8_1 of 32 consecutive values, one per lane (v is element i, the group
 * starting at a multiple of 32): the int8 into q[i] and, by lane 0,
 * (d, d * sum of the int8s) into ds[i / 32] */
__device__ __forceinline__ void warp_q8_1(float v, int8_t *q, float2 *ds, int64_t i, int lane) {
    const float d = warp_max(fabsf(v)) / 127.0f;
    const int qi = d > 0.0f ? __float2int_rn(v / d) : 0;
    q[i] = (int8_t)qi;
    const float sq = warp_sum((float)qi);
    if (lane == 0) ds[i / 32] = make_float2(d, d * sq);
}

/* a launch with programmatic dependent launch (when on) and, when cl has
 * more than one block, thread-block clusters of shape cl */
template <typename... KArgs, typename... Args>
static inline cudaError_t tlc_launch_cl(tlc_ctx *c, dim3 cl, void (*k)(KArgs...), dim3 g, dim3 b, size_t smem,
                                        Args... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = g;
    cfg.blockDim = b;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = c->stream;
    cudaLaunchAttribute at[2];
    int n = 0;
    if (c->pdl) {
        at[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[n++].val.programmaticStreamSerializationAllowed = 1;
    }
    if (cl.x * cl.y * cl.z > 1) {
        at[n].id = cudaLaunchAttributeClusterDimension;
        at[n].val.clusterDim.x = cl.x;
        at[n].val.clusterDim.y = cl.y;
        at[n++].val.clusterDim.z = cl.z;
    }
    cfg.attrs = at;
    cfg.numAttrs = n;
    return cudaLaunchKernelEx(&cfg, k, ((KArgs)args)...);
}

template <typename... KArgs, typename... Args>
static inline cudaError_t tlc_launch(tlc_ctx *c, void (*k)(KArgs...), dim3 g, dim3 b, size_t smem,
                                     Args... args) {
    return tlc_launch_cl(c, dim3(1), k, g, b, smem, args...);
}

/* CUDA error -> tl_status with the op named. */
static inline tl_status tlc_cuda_err(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return TL_OK;
    return tl_err(e == cudaErrorMemoryAllocation ? TL_ERR_NOMEM : TL_ERR_BACKEND, "cuda: %s: %s (%s)",
                  what, cudaGetErrorString(e), cudaGetErrorName(e));
}

/* After a launch: the launch error (bad config, no kernel image). Device-side
 * faults surface at the next sync, named there. */
#define TLC_LAUNCH_CHECK(what)                                                                   \
    do {                                                                                         \
        cudaError_t e_ = cudaGetLastError();                                                     \
        if (e_ != cudaSuccess) return tlc_cuda_err(e_, what);                                    \
    } while (0)

#define TLC_TRY(call, what)                                                                      \
    do {                                                                                         \
        cudaError_t e_ = (call);                                                                 \
        if (e_ != cudaSuccess) return tlc_cuda_err(e_, what);                                    \
    } while (0)

static inline unsigned tlc_div_up(int64_t a, int64_t b) { return (unsigned)((a + b - 1) / b); }

/* Repacked layouts (per row; rows are contiguous in q and in s):
 *   Q4_0: q = [nb][16] nibbles (GGUF order: low nibble of byte i = element i,
 *         high = element i+16), s = [nb] half d
 *   Q4_1: q as Q4_0, s = [nb] half2 (d, m)
 *   Q8_0: q = [nb][32] int8, s = [nb] half d
 *   Q4_K: q = [n/32][16] nibbles in Q4_0's order (one 32-value sub-block
 *         per 16 bytes), s = [n/256] half2 (d, dmin) then [n/32] uint16
 *         (6-bit scale | 6-bit min << 8): 148 bytes per 256 values (GGUF:
 *         144), so a decode lane reads whole sub-blocks with one 16-byte
 *         load like Q4_0 instead of halves of 144-byte blocks
 *   Q6_K: q = [n/32][16] low nibbles in Q4_0's order, then [n/32][8] high
 *         bit pairs (uint2 H: value 4j+b of the first 16 at byte b of H.x,
 *         bits 2j..2j+1; the second 16 in H.y), s = [n/256] half d, then
 *         [n/16] int8 scales: 210 bytes per 256 values like GGUF, read as
 *         whole 32-value units (16 + 8 bytes) by one lane
 *   F16/BF16/F32: as GGUF, s unused */
static inline bool tlc_layout(tl_type t, int64_t n_in, size_t *q_row, size_t *s_row) {
    switch (t) {
    case TL_TYPE_F32: *q_row = (size_t)n_in * 4; *s_row = 0; return true;
    case TL_TYPE_F16:
    case TL_TYPE_BF16: *q_row = (size_t)n_in * 2; *s_row = 0; return true;
    case TL_TYPE_Q4_0:
        if (n_in % 32) return false;
        *q_row = (size_t)(n_in / 32) * 16; *s_row = (size_t)(n_in / 32) * 2; return true;
    case TL_TYPE_Q4_1:
        if (n_in % 32) return false;
        *q_row = (size_t)(n_in / 32) * 16; *s_row = (size_t)(n_in / 32) * 4; return true;
    case TL_TYPE_Q8_0:
        if (n_in % 32) return false;
        *q_row = (size_t)(n_in / 32) * 32; *s_row = (size_t)(n_in / 32) * 2; return true;
    case TL_TYPE_Q4_K:
        if (n_in % 256) return false;
        *q_row = (size_t)(n_in / 32) * 16; *s_row = (size_t)(n_in / 256) * 20; return true;
    case TL_TYPE_Q6_K:
        if (n_in % 256) return false;
        *q_row = (size_t)(n_in / 32) * 24; *s_row = (size_t)(n_in / 256) * 18; return true;
    default: return false;
    }
}

/* Kernel launchers shared between files (cuda_weights.cu). */
tl_status tlc_dequant_launch(tlc_ctx *c, const tlc_weight *w, __half *out);

#endif
