/* backend/cuda/cuda_deq: 8 consecutive values of a repacked weight row
 * (deq8<type>), shared by the prefill dequantization (cuda_weights.cu) and
 * the small-batch matmul (cuda_mm.cu), so both see the same values.
 * Calls: CUDA. */
#ifndef TL_BACKEND_CUDA_DEQ_CUH
#define TL_BACKEND_CUDA_DEQ_CUH

#include "backend/cuda/cuda_common.cuh"

/* 8 consecutive values (group g of the row: values 8g..8g+7) for the prefill
 * dequantization: one 16-byte store per thread, coalesced across the warp. */
template <int T> __device__ __forceinline__ void deq8(const tlc_weight &w, int64_t row, int64_t g, float *o);

template <> __device__ __forceinline__ void deq8<TL_TYPE_Q4_0>(const tlc_weight &w, int64_t row, int64_t g, float *o) {
    int64_t ch = g >> 2;
    int part = (int)(g & 3);
    uint2 q = *(const uint2 *)((const uint8_t *)w.q + w.q_row * row + ch * 16 + (part & 1) * 8);
    float d = __half2float(((const __half *)((const uint8_t *)w.s + w.s_row * row))[ch]);
    int sh = (part >> 1) * 4;
    for (int i = 0; i < 8; i++) {
        uint32_t wd = i < 4 ? q.x : q.y;
        o[i] = d * (float)((int)((wd >> (8 * (i & 3) + sh)) & 0xF) - 8);
    }
}
template <> __device__ __forceinline__ void deq8<TL_TYPE_Q4_1>(const tlc_weight &w, int64_t row, int64_t g, float *o) {
    int64_t ch = g >> 2;
    int part = (int)(g & 3);
    uint2 q = *(const uint2 *)((const uint8_t *)w.q + w.q_row * row + ch * 16 + (part & 1) * 8);
    float2 dm = __half22float2(((const __half2 *)((const uint8_t *)w.s + w.s_row * row))[ch]);
    int sh = (part >> 1) * 4;
    for (int i = 0; i < 8; i++) {
        uint32_t wd = i < 4 ? q.x : q.y;
        o[i] = dm.x * (float)((wd >> (8 * (i & 3) + sh)) & 0xF) + dm.y;
    }
}
template <> __device__ __forceinline__ void deq8<TL_TYPE_Q8_0>(const tlc_weight &w, int64_t row, int64_t g, float *o) {
    int64_t ch = g >> 2;
    uint2 q = *(const uint2 *)((const uint8_t *)w.q + w.q_row * row + g * 8);
    float d = __half2float(((const __half *)((const uint8_t *)w.s + w.s_row * row))[ch]);
    for (int i = 0; i < 8; i++) {
        uint32_t wd = i < 4 ? q.x : q.y;
        o[i] = d * (float)(int8_t)((wd >> (8 * (i & 3))) & 0xFF);
    }
}
template <> __device__ __forceinline__ void deq8<TL_TYPE_Q4_K>(const tlc_weight &w, int64_t row, int64_t g, float *o) {
    int64_t ch = g >> 2;
    int part = (int)(g & 3);
    uint2 q = *(const uint2 *)((const uint8_t *)w.q + w.q_row * row + ch * 16 + (part & 1) * 8);
    const uint8_t *s = (const uint8_t *)w.s + w.s_row * row;
    float2 dd = __half22float2(((const __half2 *)s)[ch >> 3]);
    uint16_t scm = ((const uint16_t *)(s + w.n_in / 256 * 4))[ch];
    float ds = dd.x * (float)(scm & 0xFF), dm = dd.y * (float)(scm >> 8);
    int sh = (part >> 1) * 4;
    for (int i = 0; i < 8; i++) {
        uint32_t wd = i < 4 ? q.x : q.y;
        o[i] = ds * (float)((wd >> (8 * (i & 3) + sh)) & 0xF) - dm;
    }
}
/* the same values as q6k_value for v = 8 part + i, with each part loaded
 * once: the 8 low-nibble bytes (one 8-byte load), the 4 high-bit bytes of
 * this half of the unit (one 4-byte load: n_in % 256 == 0 keeps it
 * aligned), d times the sub-block scale */
template <> __device__ __forceinline__ void deq8<TL_TYPE_Q6_K>(const tlc_weight &w, int64_t row, int64_t g, float *o) {
    const uint8_t *q = (const uint8_t *)w.q + w.q_row * row, *s = (const uint8_t *)w.s + w.s_row * row;
    const int64_t ch = g >> 2;
    const int part = (int)(g & 3), hi = part >> 1, lo = part & 1;
    const uint2 nb = *(const uint2 *)(q + ch * 16 + lo * 8);
    const uint32_t hb = *(const uint32_t *)(q + w.n_in / 2 + ch * 8 + hi * 4);
    const float ds = __half2float(((const __half *)s)[ch / 8]) * (float)((const int8_t *)(s + w.n_in / 256 * 2))[ch * 2 + hi];
    for (int i = 0; i < 8; i++) {
        const uint32_t wd = i < 4 ? nb.x : nb.y;
        const int nib = (int)(wd >> (8 * (i & 3) + 4 * hi)) & 0xF;
        const int h = (int)(hb >> (8 * (i & 3) + 2 * (lo * 2 + (i >> 2)))) & 3;
        o[i] = ds * (float)((nib | (h << 4)) - 32);
    }
}
template <> __device__ __forceinline__ void deq8<TL_TYPE_F32>(const tlc_weight &w, int64_t row, int64_t g, float *o) {
    const float4 *p = (const float4 *)((const uint8_t *)w.q + w.q_row * row + g * 32);
    float4 a = p[0], b = p[1];
    o[0] = a.x; o[1] = a.y; o[2] = a.z; o[3] = a.w; o[4] = b.x; o[5] = b.y; o[6] = b.z; o[7] = b.w;
}

#endif
