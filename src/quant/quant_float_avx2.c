/* quant/quant_float_avx2: AVX2/FMA/F16C kernels for F32, F16 and BF16:
 * dots (float accumulation in four independent FMA chains, so the sum order
 * differs from the double-accumulating reference) and activation conversion
 * (bit-exact with the scalar reference: F16C rounds to nearest even as
 * base/fp16 does). Only called when tl_cpu_use_avx2(). Calls: base/fp16
 * for tails. */
#include <immintrin.h>

#include "base/fp16.h"
#include "quant/quant_internal.h"

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

void quant_dot_f32_f32_avx2(int64_t n, float *s, const void *vx, const void *vy) {
    const float *x = vx, *y = vy;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(y + i + 16), a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(y + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
    float sum = hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; i++) sum += x[i] * y[i];
    *s = sum;
}

static inline __m256 load_h8(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

void quant_dot_f16_f16_avx2(int64_t n, float *s, const void *vx, const void *vy) {
    const uint16_t *x = vx, *y = vy;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(load_h8(x + i), load_h8(y + i), a0);
        a1 = _mm256_fmadd_ps(load_h8(x + i + 8), load_h8(y + i + 8), a1);
        a2 = _mm256_fmadd_ps(load_h8(x + i + 16), load_h8(y + i + 16), a2);
        a3 = _mm256_fmadd_ps(load_h8(x + i + 24), load_h8(y + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(load_h8(x + i), load_h8(y + i), a0);
    float sum = hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; i++) sum += tl_fp16_to_fp32(x[i]) * tl_fp16_to_fp32(y[i]);
    *s = sum;
}

static inline __m256 load_bf8(const uint16_t *p) {
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

void quant_dot_bf16_bf16_avx2(int64_t n, float *s, const void *vx, const void *vy) {
    const uint16_t *x = vx, *y = vy;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(load_bf8(x + i), load_bf8(y + i), a0);
        a1 = _mm256_fmadd_ps(load_bf8(x + i + 8), load_bf8(y + i + 8), a1);
        a2 = _mm256_fmadd_ps(load_bf8(x + i + 16), load_bf8(y + i + 16), a2);
        a3 = _mm256_fmadd_ps(load_bf8(x + i + 24), load_bf8(y + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(load_bf8(x + i), load_bf8(y + i), a0);
    float sum = hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; i++) sum += tl_bf16_to_fp32(x[i]) * tl_bf16_to_fp32(y[i]);
    *s = sum;
}

void quant_f16_from_float_avx2(const float *src, void *dst, int64_t n) {
    uint16_t *h = dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(h + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) h[i] = tl_fp32_to_fp16(src[i]);
}

void quant_f16_to_float_avx2(const void *src, float *dst, int64_t n) {
    const uint16_t *h = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load_h8(h + i));
    for (; i < n; i++) dst[i] = tl_fp16_to_fp32(h[i]);
}

/* Same integer recipe as tl_fp32_to_bf16: quiet NaNs, else round to
 * nearest even by adding 0x7fff + lsb and truncating. */
void quant_bf16_from_float_avx2(const float *src, void *dst, int64_t n) {
    uint16_t *h = dst;
    const __m256i absmask = _mm256_set1_epi32(0x7fffffff);
    const __m256i inf = _mm256_set1_epi32(0x7f800000);
    const __m256i bias = _mm256_set1_epi32(0x7fff);
    const __m256i one = _mm256_set1_epi32(1);
    const __m256i qbit = _mm256_set1_epi32(64);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i r[2];
        for (int k = 0; k < 2; k++) {
            __m256i x = _mm256_loadu_si256((const __m256i *)(src + i + 8 * k));
            __m256i isnan = _mm256_cmpgt_epi32(_mm256_and_si256(x, absmask), inf);
            __m256i hi = _mm256_srli_epi32(x, 16);
            __m256i rounded = _mm256_srli_epi32(
                _mm256_add_epi32(x, _mm256_add_epi32(bias, _mm256_and_si256(hi, one))), 16);
            __m256i nanv = _mm256_or_si256(hi, qbit);
            r[k] = _mm256_blendv_epi8(rounded, nanv, isnan);
        }
        /* packus interleaves 128-bit lanes; permute restores element order */
        __m256i p = _mm256_packus_epi32(r[0], r[1]);
        p = _mm256_permute4x64_epi64(p, 0xD8);
        _mm256_storeu_si256((__m256i *)(h + i), p);
    }
    for (; i < n; i++) h[i] = tl_fp32_to_bf16(src[i]);
}
