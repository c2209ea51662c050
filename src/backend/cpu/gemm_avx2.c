/* AVX2 bodies of the 1x4 prefill kernels (see gemm.h). Per weight block:
 * unpack once; per token maddubs + madd into 8 int32 lanes; two rounds of
 * horizontal adds fold the 4 tokens into one vector (exact integer sums),
 * so one convert and one FMA with the 4 combined scales serve all 4 tokens
 * instead of one of each per token. Weights of at most 5
 * unsigned bits fold in int16 before widening (g_fold4_u5), saving 3 of 8
 * multiplies; signed types are shifted to unsigned where the shift's term
 * is cheap (Q4_0, Q5_0: via the activation sums in the scale table). */
#include <immintrin.h>
#include <string.h>

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

/* Unsigned weight bytes u <= 31 against 4 tokens, folded in int16: the
 * maddubs pair sums are added pairwise twice with horizontal adds (each
 * int16 then holds 8 products, |sum| <= 8 * 31 * 127 = 31496, no wrap),
 * and one madd by 1 gives [t0 t1 t2 t3 | t0 t1 t2 t3] as int32. That is
 * 5 multiplies per block and 4 tokens instead of 8 (4 maddubs + 4 madd);
 * on AVX2-only cores the multiplier is what these kernels wait on. */
static inline __m256 g_fold4_u5(__m256i u, const uint8_t *yb, size_t ys) {
    const __m256i p0 = _mm256_maddubs_epi16(u, _mm256_loadu_si256((const __m256i *)yb));
    const __m256i p1 = _mm256_maddubs_epi16(u, _mm256_loadu_si256((const __m256i *)(yb + ys)));
    const __m256i p2 = _mm256_maddubs_epi16(u, _mm256_loadu_si256((const __m256i *)(yb + 2 * ys)));
    const __m256i p3 = _mm256_maddubs_epi16(u, _mm256_loadu_si256((const __m256i *)(yb + 3 * ys)));
    const __m256i h = _mm256_hadd_epi16(_mm256_hadd_epi16(p0, p1), _mm256_hadd_epi16(p2, p3));
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(h, _mm256_set1_epi16(1)));
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
        const __m256 f = g_fold4_u5(q, yb, ys);
        acc = _mm256_fmadd_ps(f, _mm256_mul_ps(g_d4(ds, i), _mm256_broadcastss_ps(dm)), acc);
        /* the min term m_w * s_y of each token, kept apart like the vec_dot kernel does */
        mins = _mm_fmadd_ps(_mm_loadu_ps(ds + i * 8 + 4), _mm_shuffle_ps(dm, dm, 0x55), mins);
    }
    float m[4];
    _mm_storeu_ps(m, mins);
    g_store4(s, acc, m);
}

/* Q4_0: the nibble u = q + 8 unsigned, the offset as -8 * d_w * (d_y * sum(y)) */
void gemm_q4_0_1x4_avx2(int64_t n, float *s, const void *vw, const uint8_t *y, size_t ys, const float *ds) {
    const blk_q4_0 *w = vw;
    const int64_t nb = n / QK;
    __m256 acc = _mm256_setzero_ps();
    __m128 offs = _mm_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const float dw = _cvtsh_ss(w[i].d);
        const uint8_t *yb = y + (size_t)i * sizeof(blk_q8_0) + offsetof(blk_q8_0, qs);
        acc = _mm256_fmadd_ps(g_fold4_u5(g_unpack(w[i].qs), yb, ys), _mm256_mul_ps(g_d4(ds, i), _mm256_set1_ps(dw)), acc);
        offs = _mm_fmadd_ps(_mm_loadu_ps(ds + i * 8 + 4), _mm_set1_ps(dw), offs);
    }
    float o[4];
    _mm_storeu_ps(o, _mm_mul_ps(offs, _mm_set1_ps(-8.0f)));
    g_store4(s, acc, o);
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

/* 32 bits -> 32 bytes, byte j = 0xFF where bit j is set (Q5 high bits) */
static inline __m256i g_bits(const uint8_t *qh) {
    uint32_t bits;
    memcpy(&bits, qh, 4);
    const __m256i spread = _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL, 0x0303030303030303LL);
    const __m256i others = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfeLL); /* ~(1 << (j % 8)) */
    const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), spread);
    return _mm256_cmpeq_epi8(_mm256_or_si256(v, others), _mm256_set1_epi64x(-1));
}

/* signed weight bytes q (|q| <= 127) against 4 Q8_0 tokens, folded */
static inline __m256 g_fold4_s(__m256i q, const uint8_t *yb, size_t ys) {
    const __m256i aq = _mm256_sign_epi8(q, q);
    return g_fold4(g_isum_s(aq, q, yb), g_isum_s(aq, q, yb + ys), g_isum_s(aq, q, yb + 2 * ys),
                   g_isum_s(aq, q, yb + 3 * ys));
}

/* Q5_0: the unsigned 5-bit u = q + 16 into maddubs (no per-token sign
 * step); the offset returns as -16 * d_w * (d_y * sum(y)) from the table */
void gemm_q5_0_1x4_avx2(int64_t n, float *s, const void *vw, const uint8_t *y, size_t ys, const float *ds) {
    const blk_q5_0 *w = vw;
    const int64_t nb = n / QK;
    __m256 acc = _mm256_setzero_ps();
    __m128 offs = _mm_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const __m256i q = _mm256_or_si256(g_unpack(w[i].qs), _mm256_and_si256(g_bits(w[i].qh), _mm256_set1_epi8(0x10)));
        const float dw = _cvtsh_ss(w[i].d);
        const uint8_t *yb = y + (size_t)i * sizeof(blk_q8_0) + offsetof(blk_q8_0, qs);
        const __m256 f = g_fold4_u5(q, yb, ys);
        acc = _mm256_fmadd_ps(f, _mm256_mul_ps(g_d4(ds, i), _mm256_set1_ps(dw)), acc);
        offs = _mm_fmadd_ps(_mm_loadu_ps(ds + i * 8 + 4), _mm_set1_ps(dw), offs);
    }
    float o[4];
    _mm_storeu_ps(o, _mm_mul_ps(offs, _mm_set1_ps(-16.0f)));
    g_store4(s, acc, o);
}

/* Q5_1: unsigned 0..31 weights, min term as in Q4_1 */
void gemm_q5_1_1x4_avx2(int64_t n, float *s, const void *vw, const uint8_t *y, size_t ys, const float *ds) {
    const blk_q5_1 *w = vw;
    const int64_t nb = n / QK;
    __m256 acc = _mm256_setzero_ps();
    __m128 mins = _mm_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const __m256i q = _mm256_or_si256(g_unpack(w[i].qs), _mm256_and_si256(g_bits(w[i].qh), _mm256_set1_epi8(0x10)));
        const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128((int)((uint32_t)w[i].d | ((uint32_t)w[i].m << 16))));
        const uint8_t *yb = y + (size_t)i * sizeof(blk_q8_1) + offsetof(blk_q8_1, qs);
        const __m256 f = g_fold4_u5(q, yb, ys);
        acc = _mm256_fmadd_ps(f, _mm256_mul_ps(g_d4(ds, i), _mm256_broadcastss_ps(dm)), acc);
        mins = _mm_fmadd_ps(_mm_loadu_ps(ds + i * 8 + 4), _mm_shuffle_ps(dm, dm, 0x55), mins);
    }
    float m[4];
    _mm_storeu_ps(m, mins);
    g_store4(s, acc, m);
}

/* IQ4_NL: codebook values (-127..113) by byte shuffle, then as Q8_0 */
void gemm_iq4_nl_1x4_avx2(int64_t n, float *s, const void *vw, const uint8_t *y, size_t ys, const float *ds) {
    const blk_iq4_nl *w = vw;
    const int64_t nb = n / QK;
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)quant_iq4nl_values));
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const __m256i q = _mm256_shuffle_epi8(table, g_unpack(w[i].qs));
        const uint8_t *yb = y + (size_t)i * sizeof(blk_q8_0) + offsetof(blk_q8_0, qs);
        acc = _mm256_fmadd_ps(g_fold4_s(q, yb, ys), _mm256_mul_ps(g_d4(ds, i), _mm256_set1_ps(_cvtsh_ss(w[i].d))), acc);
    }
    g_store4(s, acc, NULL);
}

/* ---- decode (1 token): the int16 fold across 4 consecutive blocks ------
 * The same fold as g_fold4_u5, over blocks of one token instead of one
 * block of 4 tokens: [b0 b1 b2 b3 | b0 b1 b2 b3] as int32, scaled by the 4
 * blocks' d_w * d_y. ds1 is the token's [n/32][2] table (d, s). */
static inline __m256 g_fold4_blocks(__m256i u0, __m256i u1, __m256i u2, __m256i u3, const uint8_t *y0, size_t bs) {
    const __m256i p0 = _mm256_maddubs_epi16(u0, _mm256_loadu_si256((const __m256i *)y0));
    const __m256i p1 = _mm256_maddubs_epi16(u1, _mm256_loadu_si256((const __m256i *)(y0 + bs)));
    const __m256i p2 = _mm256_maddubs_epi16(u2, _mm256_loadu_si256((const __m256i *)(y0 + 2 * bs)));
    const __m256i p3 = _mm256_maddubs_epi16(u3, _mm256_loadu_si256((const __m256i *)(y0 + 3 * bs)));
    const __m256i h = _mm256_hadd_epi16(_mm256_hadd_epi16(p0, p1), _mm256_hadd_epi16(p2, p3));
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(h, _mm256_set1_epi16(1)));
}

/* d and s of 4 consecutive blocks from a [.][2] table: [d0 d1 d2 d3], [s0 s1 s2 s3] */
static inline void g_ds4(const float *ds1, __m128 *d, __m128 *sv) {
    const __m128 a = _mm_loadu_ps(ds1), b = _mm_loadu_ps(ds1 + 4);
    *d = _mm_shuffle_ps(a, b, 0x88);
    *sv = _mm_shuffle_ps(a, b, 0xDD);
}

static inline __m256i g_q5_0_u(const blk_q5_0 *b) {
    return _mm256_or_si256(g_unpack(b->qs), _mm256_and_si256(g_bits(b->qh), _mm256_set1_epi8(0x10)));
}

static inline __m256i g_q5_1_u(const blk_q5_1 *b) {
    return _mm256_or_si256(g_unpack(b->qs), _mm256_and_si256(g_bits(b->qh), _mm256_set1_epi8(0x10)));
}

static inline float g_hsum4(__m128 v) {
    v = _mm_add_ps(v, _mm_movehl_ps(v, v));
    return _mm_cvtss_f32(_mm_add_ss(v, _mm_movehdup_ps(v)));
}

/* dw of 4 consecutive fp16 fields at stride bytes */
static inline __m128 g_h4(const void *p, size_t stride) {
    const uint8_t *b = p;
    uint16_t h[4];
    for (int i = 0; i < 4; i++) memcpy(&h[i], b + i * stride, 2);
    uint64_t v;
    memcpy(&v, h, 8);
    return _mm_cvtph_ps(_mm_cvtsi64_si128((long long)v));
}

/* Q5_0, one token: sum_b dw_b * (dy_b * isum(u_b, y_b) - 16 * s_b) */
void gemm_q5_0_1x1_avx2(int64_t n, float *s, const void *vw, const uint8_t *y, const float *ds1) {
    const blk_q5_0 *w = vw;
    const int64_t nb = n / QK;
    const size_t bs = sizeof(blk_q8_0);
    const uint8_t *yq = y + offsetof(blk_q8_0, qs);
    __m256 acc = _mm256_setzero_ps();
    __m128 offs = _mm_setzero_ps();
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4) {
        const __m256 f = g_fold4_blocks(g_q5_0_u(&w[i]), g_q5_0_u(&w[i + 1]), g_q5_0_u(&w[i + 2]),
                                        g_q5_0_u(&w[i + 3]), yq + (size_t)i * bs, bs);
        __m128 d, sv;
        g_ds4(ds1 + 2 * i, &d, &sv);
        const __m128 dw = g_h4(&w[i].d, sizeof *w);
        const __m128 sc = _mm_mul_ps(dw, d);
        acc = _mm256_fmadd_ps(f, _mm256_set_m128(sc, sc), acc);
        offs = _mm_fmadd_ps(dw, sv, offs);
    }
    float r = g_hsum(acc) - 16.0f * g_hsum4(offs);
    for (; i < nb; i++) {
        const __m256i ip = g_isum(g_q5_0_u(&w[i]), yq + (size_t)i * bs);
        const float dw = _cvtsh_ss(w[i].d);
        r += dw * (ds1[2 * i] * g_hsum(_mm256_cvtepi32_ps(ip)) - 16.0f * ds1[2 * i + 1]);
    }
    *s = r;
}

/* Q5_1, one token: sum_b dw_b * dy_b * isum(u_b, y_b) + m_b * s_b */
void gemm_q5_1_1x1_avx2(int64_t n, float *s, const void *vw, const uint8_t *y, const float *ds1) {
    const blk_q5_1 *w = vw;
    const int64_t nb = n / QK;
    const size_t bs = sizeof(blk_q8_1);
    const uint8_t *yq = y + offsetof(blk_q8_1, qs);
    __m256 acc = _mm256_setzero_ps();
    __m128 mins = _mm_setzero_ps();
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4) {
        const __m256 f = g_fold4_blocks(g_q5_1_u(&w[i]), g_q5_1_u(&w[i + 1]), g_q5_1_u(&w[i + 2]),
                                        g_q5_1_u(&w[i + 3]), yq + (size_t)i * bs, bs);
        __m128 d, sv;
        g_ds4(ds1 + 2 * i, &d, &sv);
        const __m128 sc = _mm_mul_ps(g_h4(&w[i].d, sizeof *w), d);
        acc = _mm256_fmadd_ps(f, _mm256_set_m128(sc, sc), acc);
        mins = _mm_fmadd_ps(g_h4(&w[i].m, sizeof *w), sv, mins);
    }
    float r = g_hsum(acc) + g_hsum4(mins);
    for (; i < nb; i++) {
        const __m256i ip = g_isum(g_q5_1_u(&w[i]), yq + (size_t)i * bs);
        r += _cvtsh_ss(w[i].d) * ds1[2 * i] * g_hsum(_mm256_cvtepi32_ps(ip)) + _cvtsh_ss(w[i].m) * ds1[2 * i + 1];
    }
    *s = r;
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
