/* AVX2 bodies of the 1x4 prefill kernels (see gemm.h). Per weight block:
 * unpack once; per token maddubs + madd into 8 int32 lanes; two rounds of
 * horizontal adds fold the 4 tokens into one vector (exact integer sums),
 * so one convert and one FMA with the 4 combined scales serve all 4 tokens.
 * On this Zen 1 core that fold made Q4_1 prefill 17% faster than one
 * convert + FMA per token (docs/PERFORMANCE.md). */
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

/* 8 int32 partial sums of unsigned x (0..15) times signed y (32 bytes at p) */
static inline __m256i g_isum(__m256i ux, const void *p) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(ux, _mm256_loadu_si256((const __m256i *)p)), _mm256_set1_epi16(1));
}
/* same for signed x: |x| as unsigned times y with x's sign moved onto it
 * (exact for x = -128 too; y comes from our quantizer, so |y| <= 127) */
static inline __m256i g_isum_s(__m256i ax, __m256i sx, const void *p) {
    __m256i v = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)p), sx);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(ax, v), _mm256_set1_epi16(1));
}

/* Fold the 4 tokens' 8-lane integer sums into one vector with two exact
 * partial sums per token, [t0 t1 t2 t3 | t0 t1 t2 t3] (low | high 128-bit
 * half), so each block needs one convert and one FMA for all 4 tokens
 * instead of four of each. */
static inline __m256 g_fold4(__m256i s0, __m256i s1, __m256i s2, __m256i s3) {
    return _mm256_cvtepi32_ps(_mm256_hadd_epi32(_mm256_hadd_epi32(s0, s1), _mm256_hadd_epi32(s2, s3)));
}

/* the 4 activation scales d0..d3 of block i in both halves */
static inline __m256 g_d4(const float *ds, int64_t i) { return _mm256_broadcast_ps((const __m128 *)(ds + i * 8)); }

static inline void g_store4(float *s, __m256 acc, const float *extra) {
    __m128 r = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    if (extra) r = _mm_add_ps(r, _mm_loadu_ps(extra));
    _mm_storeu_ps(s, r);
}

void gemm_q4_1_1x4_avx2(int64_t n, float *s, const void *vw, const uint8_t *y, size_t ys, const float *ds) {
    const blk_q4_1 *w = vw;
    const int64_t nb = n / QK;
    __m256 acc = _mm256_setzero_ps();
    __m128 mins = _mm_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const __m256i q = g_unpack(w[i].qs);
        const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128((int)((uint32_t)w[i].d | ((uint32_t)w[i].m << 16))));
        const uint8_t *yb = y + (size_t)i * sizeof(blk_q8_1) + offsetof(blk_q8_1, qs);
        const __m256 f = g_fold4(g_isum(q, yb), g_isum(q, yb + ys), g_isum(q, yb + 2 * ys), g_isum(q, yb + 3 * ys));
        acc = _mm256_fmadd_ps(f, _mm256_mul_ps(g_d4(ds, i), _mm256_broadcastss_ps(dm)), acc);
        /* the min term m_w * s_y of each token, kept apart like the vec_dot kernel does */
        mins = _mm_fmadd_ps(_mm_loadu_ps(ds + i * 8 + 4), _mm_shuffle_ps(dm, dm, 0x55), mins);
    }
    float m[4];
    _mm_storeu_ps(m, mins);
    g_store4(s, acc, m);
}

void gemm_q4_0_1x4_avx2(int64_t n, float *s, const void *vw, const uint8_t *y, size_t ys, const float *ds) {
    const blk_q4_0 *w = vw;
    const int64_t nb = n / QK;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const __m256i q = _mm256_sub_epi8(g_unpack(w[i].qs), _mm256_set1_epi8(8));
        const __m256i aq = _mm256_sign_epi8(q, q);
        const uint8_t *yb = y + (size_t)i * sizeof(blk_q8_0) + offsetof(blk_q8_0, qs);
        const __m256 f = g_fold4(g_isum_s(aq, q, yb), g_isum_s(aq, q, yb + ys), g_isum_s(aq, q, yb + 2 * ys),
                                 g_isum_s(aq, q, yb + 3 * ys));
        acc = _mm256_fmadd_ps(f, _mm256_mul_ps(g_d4(ds, i), _mm256_set1_ps(_cvtsh_ss(w[i].d))), acc);
    }
    g_store4(s, acc, NULL);
}

void gemm_q8_0_1x4_avx2(int64_t n, float *s, const void *vw, const uint8_t *y, size_t ys, const float *ds) {
    const blk_q8_0 *w = vw;
    const int64_t nb = n / QK;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)w[i].qs);
        const __m256i aq = _mm256_sign_epi8(q, q);
        const uint8_t *yb = y + (size_t)i * sizeof(blk_q8_0) + offsetof(blk_q8_0, qs);
        const __m256 f = g_fold4(g_isum_s(aq, q, yb), g_isum_s(aq, q, yb + ys), g_isum_s(aq, q, yb + 2 * ys),
                                 g_isum_s(aq, q, yb + 3 * ys));
        acc = _mm256_fmadd_ps(f, _mm256_mul_ps(g_d4(ds, i), _mm256_set1_ps(_cvtsh_ss(w[i].d))), acc);
    }
    g_store4(s, acc, NULL);
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
