/* AVX2 bodies of the 1x4 prefill kernels (see gemm.h). Per weight block:
 * unpack once; one multiply gives the 4 combined scales (and Q4_1's 4 min
 * terms); then per token block maddubs + madd into 8 int32 lanes, convert,
 * and FMA with that token's scale. The loop over tokens is written out so
 * the 4 accumulators stay in registers. */
#include <immintrin.h>

#include "backend/cpu/gemm.h"
#include "quant/quant_internal.h"

static inline __m256i g_unpack(const uint8_t *qs) {
    __m128i b = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0x0F));
}

static inline float g_hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* unsigned x times signed y (32 bytes at p) -> 8 float sums */
static inline __m256 g_dot_u(__m256i ux, const void *p) {
    __m256i v = _mm256_loadu_si256((const __m256i *)p);
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(ux, v), _mm256_set1_epi16(1)));
}

/* signed x times signed y: |x| as unsigned times y with x's sign moved onto
 * it (exact for x = -128 too; y comes from our quantizer, so |y| <= 127) */
static inline __m256 g_dot_s(__m256i ax, __m256i sx, const void *p) {
    __m256i v = _mm256_loadu_si256((const __m256i *)p);
    return _mm256_cvtepi32_ps(
        _mm256_madd_epi16(_mm256_maddubs_epi16(ax, _mm256_sign_epi8(v, sx)), _mm256_set1_epi16(1)));
}

#define LANE(v, t) _mm256_permutevar8x32_ps(v, _mm256_set1_epi32(t))

void gemm_q4_1_1x4_avx2(int64_t n, float *s, const void *vw, const uint8_t *y, size_t ys, const float *ds) {
    const blk_q4_1 *w = vw;
    const int64_t nb = n / QK;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, am = a0;
    for (int64_t i = 0; i < nb; i++) {
        const __m256i q = g_unpack(w[i].qs);
        /* [dw x4, mw x4] * [d0..d3, s0..s3]: the 4 scales, then the 4 min terms */
        const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128((int)((uint32_t)w[i].d | ((uint32_t)w[i].m << 16))));
        const __m256 wv = _mm256_set_m128(_mm_shuffle_ps(dm, dm, 0x55), _mm_shuffle_ps(dm, dm, 0x00));
        const __m256 sc = _mm256_mul_ps(wv, _mm256_loadu_ps(ds + i * 8));
        am = _mm256_add_ps(am, sc);
        const uint8_t *yb = y + (size_t)i * sizeof(blk_q8_1) + offsetof(blk_q8_1, qs);
        a0 = _mm256_fmadd_ps(g_dot_u(q, yb), LANE(sc, 0), a0);
        a1 = _mm256_fmadd_ps(g_dot_u(q, yb + ys), LANE(sc, 1), a1);
        a2 = _mm256_fmadd_ps(g_dot_u(q, yb + 2 * ys), LANE(sc, 2), a2);
        a3 = _mm256_fmadd_ps(g_dot_u(q, yb + 3 * ys), LANE(sc, 3), a3);
    }
    float m[8];
    _mm256_storeu_ps(m, am);
    s[0] = g_hsum(a0) + m[4];
    s[1] = g_hsum(a1) + m[5];
    s[2] = g_hsum(a2) + m[6];
    s[3] = g_hsum(a3) + m[7];
}

void gemm_q4_0_1x4_avx2(int64_t n, float *s, const void *vw, const uint8_t *y, size_t ys, const float *ds) {
    const blk_q4_0 *w = vw;
    const int64_t nb = n / QK;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < nb; i++) {
        const __m256i q = _mm256_sub_epi8(g_unpack(w[i].qs), _mm256_set1_epi8(8));
        const __m256i aq = _mm256_sign_epi8(q, q);
        const __m256 sc = _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(w[i].d)), _mm256_loadu_ps(ds + i * 8));
        const uint8_t *yb = y + (size_t)i * sizeof(blk_q8_0) + offsetof(blk_q8_0, qs);
        a0 = _mm256_fmadd_ps(g_dot_s(aq, q, yb), LANE(sc, 0), a0);
        a1 = _mm256_fmadd_ps(g_dot_s(aq, q, yb + ys), LANE(sc, 1), a1);
        a2 = _mm256_fmadd_ps(g_dot_s(aq, q, yb + 2 * ys), LANE(sc, 2), a2);
        a3 = _mm256_fmadd_ps(g_dot_s(aq, q, yb + 3 * ys), LANE(sc, 3), a3);
    }
    s[0] = g_hsum(a0), s[1] = g_hsum(a1), s[2] = g_hsum(a2), s[3] = g_hsum(a3);
}

void gemm_q8_0_1x4_avx2(int64_t n, float *s, const void *vw, const uint8_t *y, size_t ys, const float *ds) {
    const blk_q8_0 *w = vw;
    const int64_t nb = n / QK;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < nb; i++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)w[i].qs);
        const __m256i aq = _mm256_sign_epi8(q, q);
        const __m256 sc = _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(w[i].d)), _mm256_loadu_ps(ds + i * 8));
        const uint8_t *yb = y + (size_t)i * sizeof(blk_q8_0) + offsetof(blk_q8_0, qs);
        a0 = _mm256_fmadd_ps(g_dot_s(aq, q, yb), LANE(sc, 0), a0);
        a1 = _mm256_fmadd_ps(g_dot_s(aq, q, yb + ys), LANE(sc, 1), a1);
        a2 = _mm256_fmadd_ps(g_dot_s(aq, q, yb + 2 * ys), LANE(sc, 2), a2);
        a3 = _mm256_fmadd_ps(g_dot_s(aq, q, yb + 3 * ys), LANE(sc, 3), a3);
    }
    s[0] = g_hsum(a0), s[1] = g_hsum(a1), s[2] = g_hsum(a2), s[3] = g_hsum(a3);
}

/* ---- F16 weights: one row against 4 (or 1) f32 activation rows ----------
 * The activations arrive already rounded to f16 and widened back to f32
 * (the reference engine multiplies f16 by f16), so each weight vector is
 * converted once and used for 4 tokens' FMAs. */
void gemm_f16_1x4_avx2(int64_t n, float *s, const uint16_t *w, const float *y, size_t y_stride) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    const float *y0 = y, *y1 = y + y_stride, *y2 = y + 2 * y_stride, *y3 = y + 3 * y_stride;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 wv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + i)));
        a0 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(y0 + i), a0);
        a1 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(y1 + i), a1);
        a2 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(y2 + i), a2);
        a3 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(y3 + i), a3);
    }
    s[0] = g_hsum(a0), s[1] = g_hsum(a1), s[2] = g_hsum(a2), s[3] = g_hsum(a3);
    for (; i < n; i++) {
        const float wf = _cvtsh_ss(w[i]);
        s[0] += wf * y0[i], s[1] += wf * y1[i], s[2] += wf * y2[i], s[3] += wf * y3[i];
    }
}

void gemm_f16_1x1_avx2(int64_t n, float *s, const uint16_t *w, const float *y) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + i))), _mm256_loadu_ps(y + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + i + 8))),
                             _mm256_loadu_ps(y + i + 8), a1);
    }
    float r = g_hsum(_mm256_add_ps(a0, a1));
    for (; i < n; i++) r += _cvtsh_ss(w[i]) * y[i];
    *s = r;
}

/* y = (float)(f16)x, round to nearest even, as F16C converts */
void gemm_round_f16_avx2(const float *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT)));
    for (; i < n; i++) y[i] = _cvtsh_ss(_cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT));
}
