/* backend/cuda/cuda_deq: 8 consecutive values of a repacked weight row
 * (group g: values 8g..8g+7), shared by the prefill dequantization
 * (cuda_weights.cu) and the small-batch matmul (cuda_mm.cu), so both see the
 * same values. Split in two so a kernel can issue the loads of a later
 * slice before converting the current one: deq_raw<T>::load reads the
 * group's bytes and scales, cvt turns them into floats; deq8 is both.
 * Calls: CUDA. */
#ifndef TL_BACKEND_CUDA_DEQ_CUH
#define TL_BACKEND_CUDA_DEQ_CUH

#include "backend/cuda/cuda_common.cuh"

template <int T> struct deq_raw;

template <> struct deq_raw<TL_TYPE_Q4_0> {
    uint2 q;
    float d;
    int sh;
    __device__ __forceinline__ void load(const tlc_weight &w, int64_t row, int64_t g) {
        const int64_t ch = g >> 2;
        const int part = (int)(g & 3);
        q = *(const uint2 *)((const uint8_t *)w.q + w.q_row * row + ch * 16 + (part & 1) * 8);
        d = __half2float(((const __half *)((const uint8_t *)w.s + w.s_row * row))[ch]);
        sh = (part >> 1) * 4;
    }
    __device__ __forceinline__ void cvt(float *o) const {
        for (int i = 0; i < 8; i++) {
            const uint32_t wd = i < 4 ? q.x : q.y;
            o[i] = d * (float)((int)((wd >> (8 * (i & 3) + sh)) & 0xF) - 8);
        }
    }
};

template <> struct deq_raw<TL_TYPE_Q4_1> {
    uint2 q;
    float2 dm;
    int sh;
    __device__ __forceinline__ void load(const tlc_weight &w, int64_t row, int64_t g) {
        const int64_t ch = g >> 2;
        const int part = (int)(g & 3);
        q = *(const uint2 *)((const uint8_t *)w.q + w.q_row * row + ch * 16 + (part & 1) * 8);
        dm = __half22float2(((const __half2 *)((const uint8_t *)w.s + w.s_row * row))[ch]);
        sh = (part >> 1) * 4;
    }
    __device__ __forceinline__ void cvt(float *o) const {
        for (int i = 0; i < 8; i++) {
            const uint32_t wd = i < 4 ? q.x : q.y;
            o[i] = dm.x * (float)((wd >> (8 * (i & 3) + sh)) & 0xF) + dm.y;
        }
    }
};

template <> struct deq_raw<TL_TYPE_Q8_0> {
    uint2 q;
    float d;
    __device__ __forceinline__ void load(const tlc_weight &w, int64_t row, int64_t g) {
        q = *(const uint2 *)((const uint8_t *)w.q + w.q_row * row + g * 8);
        d = __half2float(((const __half *)((const uint8_t *)w.s + w.s_row * row))[g >> 2]);
    }
    __device__ __forceinline__ void cvt(float *o) const {
        for (int i = 0; i < 8; i++) {
            const uint32_t wd = i < 4 ? q.x : q.y;
            o[i] = d * (float)(int8_t)((wd >> (8 * (i & 3))) & 0xFF);
        }
    }
};

template <> struct deq_raw<TL_TYPE_Q4_K> {
    uint2 q;
    float ds, dm;
    int sh;
    __device__ __forceinline__ void load(const tlc_weight &w, int64_t row, int64_t g) {
        const int64_t ch = g >> 2;
        const int part = (int)(g & 3);
        q = *(const uint2 *)((const uint8_t *)w.q + w.q_row * row + ch * 16 + (part & 1) * 8);
        const uint8_t *s = (const uint8_t *)w.s + w.s_row * row;
        const float2 dd = __half22float2(((const __half2 *)s)[ch >> 3]);
        const uint16_t scm = ((const uint16_t *)(s + w.n_in / 256 * 4))[ch];
        ds = dd.x * (float)(scm & 0xFF), dm = dd.y * (float)(scm >> 8);
        sh = (part >> 1) * 4;
    }
    __device__ __forceinline__ void cvt(float *o) const {
        for (int i = 0; i < 8; i++) {
            const uint32_t wd = i < 4 ? q.x : q.y;
            o[i] = ds * (float)((wd >> (8 * (i & 3) + sh)) & 0xF) - dm;
        }
    }
};

/* the 8 low-nibble bytes (one 8-byte load), the 4 high-bit bytes of this
 * half of the unit (one 4-byte load: n_in % 256 == 0 keeps it aligned), d
 * times the sub-block scale */
template <> struct deq_raw<TL_TYPE_Q6_K> {
    uint2 nb;
    uint32_t hb;
    float ds;
    int hi, lo;
    __device__ __forceinline__ void load(const tlc_weight &w, int64_t row, int64_t g) {
        const uint8_t *q = (const uint8_t *)w.q + w.q_row * row, *s = (const uint8_t *)w.s + w.s_row * row;
        const int64_t ch = g >> 2;
        const int part = (int)(g & 3);
        hi = part >> 1, lo = part & 1;
        nb = *(const uint2 *)(q + ch * 16 + lo * 8);
        hb = *(const uint32_t *)(q + w.n_in / 2 + ch * 8 + hi * 4);
        ds = __half2float(((const __half *)s)[ch / 8]) * (float)((const int8_t *)(s + w.n_in / 256 * 2))[ch * 2 + hi];
    }
    __device__ __forceinline__ void cvt(float *o) const {
        for (int i = 0; i < 8; i++) {
            const uint32_t wd = i < 4 ? nb.x : nb.y;
            const int nib = (int)(wd >> (8 * (i & 3) + 4 * hi)) & 0xF;
            const int h = (int)(hb >> (8 * (i & 3) + 2 * (lo * 2 + (i >> 2)))) & 3;
            o[i] = ds * (float)((nib | (h << 4)) - 32);
        }
    }
};

template <> struct deq_raw<TL_TYPE_F32> {
    float4 a, b;
    __device__ __forceinline__ void load(const tlc_weight &w, int64_t row, int64_t g) {
        const float4 *p = (const float4 *)((const uint8_t *)w.q + w.q_row * row + g * 32);
        a = p[0], b = p[1];
    }
    __device__ __forceinline__ void cvt(float *o) const {
        o[0] = a.x; o[1] = a.y; o[2] = a.z; o[3] = a.w; o[4] = b.x; o[5] = b.y; o[6] = b.z; o[7] = b.w;
    }
};

template <int T> __device__ __forceinline__ void deq8(const tlc_weight &w, int64_t row, int64_t g, float *o) {
    deq_raw<T> r;
    r.load(w, row, g);
    r.cvt(o);
}

#endif
