/* quant/quant_kquant_avx2: AVX2 kernels for the K-quant (and IQ4_XS) dots
 * with Q8_K activations, and the Q8_K activation quantizer.
 *
 * Each dot forms exactly the integers the scalar reference forms: per
 * super-block, 8 int32 lanes of scale * sum(q * a) built with maddubs
 * (unsigned weight bytes x signed activation bytes -> int16 pairs, never
 * saturating for these ranges) and madd by the sub-block scale, with the
 * min or offset term from Q8_K's per-16 sums. The lanes are converted to
 * float and accumulated with FMA across super-blocks (one horizontal sum
 * per row, not per super-block), so only the float summation order differs
 * from the scalar reference. The Q8_K quantizer is bit-exact with the
 * scalar one. Only called when tl_cpu_use_avx2(). Calls: nothing
 * outside quant. */
#include <immintrin.h>
#include <string.h>

#include "quant/quant_internal.h"

static inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

static inline __m256i loadu256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* m[j] * (bsums[2j] + bsums[2j+1]) summed pairwise into 4 int32 lanes */
static inline __m128i k4_min_sum(uint64_t m, const int16_t *bsums) {
    __m128i b0 = _mm_loadu_si128((const __m128i *)bsums);
    __m128i b1 = _mm_loadu_si128((const __m128i *)(bsums + 8));
    __m128i pairs = _mm_hadd_epi16(b0, b1); /* |pair| <= 32 * 127: no wrap */
    __m128i m16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)m));
    return _mm_madd_epi16(m16, pairs);
}

static inline float hsum8f(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float hsum4f(__m128 s) {
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 8 int16 values in both 128-bit lanes -> value j in every 16-bit slot */
static inline __m256i bcast16(__m256i v8, int j) {
    return _mm256_shuffle_epi8(v8, _mm256_set1_epi16((short)(0x0100 + 0x0202 * j)));
}

/* 8 int16 values in both lanes -> value 2k in the low lane, 2k+1 in the
 * high lane (scales of two consecutive 16-element groups) */
static inline __m256i bcast16_pair(__m256i v8, int k) {
    return _mm256_shuffle_epi8(v8, _mm256_set_m128i(_mm_set1_epi16((short)(0x0302 + 0x0404 * k)),
                                                    _mm_set1_epi16((short)(0x0100 + 0x0404 * k))));
}

static inline __m256i bcast128_i16(__m128i v) { return _mm256_broadcastsi128_si256(v); }

void quant_dot_q4_k_q8_k_avx2(int64_t n, float *s, const void *vx, const void *vy) {
    const blk_q4_k *x = vx;
    const blk_q8_k *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 accf = _mm256_setzero_ps();
    __m128 accm = _mm_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        uint64_t scw, mw;
        quant_k4_unpack(x[i].scales, &scw, &mw);
        const __m128i mins = k4_min_sum(mw, y[i].bsums);
        const __m256i sc = bcast128_i16(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)scw)));
        __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int p = 0; p < 4; p++) {
            __m256i q = loadu256(x[i].qs + 32 * p);
            __m256i lo = _mm256_and_si256(q, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            __m256i p0 = _mm256_maddubs_epi16(lo, loadu256(y[i].qs + 64 * p));
            __m256i p1 = _mm256_maddubs_epi16(hi, loadu256(y[i].qs + 64 * p + 32));
            acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(p0, bcast16(sc, 2 * p)));
            acc1 = _mm256_add_epi32(acc1, _mm256_madd_epi16(p1, bcast16(sc, 2 * p + 1)));
        }
        accf = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(acc0, acc1)), _mm256_set1_ps(h2f(x[i].d) * y[i].d), accf);
        accm = _mm_fmadd_ps(_mm_cvtepi32_ps(mins), _mm_set1_ps(h2f(x[i].dmin) * y[i].d), accm);
    }
    *s = hsum8f(accf) - hsum4f(accm);
}

/* 0x10 in byte k where bit j of qh[k] is set (j is a constant after
 * unrolling: mask the bit, then move it to bit 4 of each byte) */
static inline __m256i q5k_high(__m256i qh, int j) {
    const __m256i bit = _mm256_and_si256(qh, _mm256_set1_epi8((char)(1 << j)));
    if (j < 4) return _mm256_slli_epi16(bit, 4 - j);
    if (j > 4) return _mm256_srli_epi16(bit, j - 4);
    return bit;
}

void quant_dot_q5_k_q8_k_avx2(int64_t n, float *s, const void *vx, const void *vy) {
    const blk_q5_k *x = vx;
    const blk_q8_k *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 accf = _mm256_setzero_ps();
    __m128 accm = _mm_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        uint64_t scw, mw;
        quant_k4_unpack(x[i].scales, &scw, &mw);
        const __m128i mins = k4_min_sum(mw, y[i].bsums);
        const __m256i sc = bcast128_i16(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)scw)));
        const __m256i qh = loadu256(x[i].qh);
        __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int p = 0; p < 4; p++) {
            __m256i q = loadu256(x[i].qs + 32 * p);
            __m256i lo = _mm256_or_si256(_mm256_and_si256(q, m4), q5k_high(qh, 2 * p));
            __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), q5k_high(qh, 2 * p + 1));
            __m256i p0 = _mm256_maddubs_epi16(lo, loadu256(y[i].qs + 64 * p));
            __m256i p1 = _mm256_maddubs_epi16(hi, loadu256(y[i].qs + 64 * p + 32));
            acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(p0, bcast16(sc, 2 * p)));
            acc1 = _mm256_add_epi32(acc1, _mm256_madd_epi16(p1, bcast16(sc, 2 * p + 1)));
        }
        accf = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(acc0, acc1)), _mm256_set1_ps(h2f(x[i].d) * y[i].d), accf);
        accm = _mm_fmadd_ps(_mm_cvtepi32_ps(mins), _mm_set1_ps(h2f(x[i].dmin) * y[i].d), accm);
    }
    *s = hsum8f(accf) - hsum4f(accm);
}

/* Q6_K: weights q in 0..63 enter maddubs unsigned; the -32 offset comes
 * back as 32 * sum_g scale_g * bsum_g */
void quant_dot_q6_k_q8_k_avx2(int64_t n, float *s, const void *vx, const void *vy) {
    const blk_q6_k *x = vx;
    const blk_q8_k *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03);
    __m256 accf = _mm256_setzero_ps();
    __m128 accm = _mm_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)x[i].scales);
        const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
        const __m256i offs = _mm256_madd_epi16(sc16, loadu256(y[i].bsums));
        __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256i sc = bcast128_i16(h ? _mm256_extracti128_si256(sc16, 1) : _mm256_castsi256_si128(sc16));
            const __m256i l0 = loadu256(x[i].ql + 64 * h), l1 = loadu256(x[i].ql + 64 * h + 32);
            const __m256i qh = loadu256(x[i].qh + 32 * h);
            const int8_t *a = y[i].qs + 128 * h;
            __m256i q0 = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4));
            __m256i q1 = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4));
            __m256i q2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4));
            __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4));
            acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(_mm256_maddubs_epi16(q0, loadu256(a)), bcast16_pair(sc, 0)));
            acc1 = _mm256_add_epi32(acc1, _mm256_madd_epi16(_mm256_maddubs_epi16(q1, loadu256(a + 32)), bcast16_pair(sc, 1)));
            acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(_mm256_maddubs_epi16(q2, loadu256(a + 64)), bcast16_pair(sc, 2)));
            acc1 = _mm256_add_epi32(acc1, _mm256_madd_epi16(_mm256_maddubs_epi16(q3, loadu256(a + 96)), bcast16_pair(sc, 3)));
        }
        const __m256i sumi = _mm256_sub_epi32(_mm256_add_epi32(acc0, acc1), _mm256_slli_epi32(offs, 5));
        accf = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(h2f(x[i].d) * y[i].d), accf);
    }
    *s = hsum8f(accf) - hsum4f(accm);
}

/* Q2_K: 2-bit weights unsigned into maddubs; scale per 16 (low nibble of
 * scales[g]), the min part as sum_g (scales[g] >> 4) * bsum_g */
void quant_dot_q2_k_q8_k_avx2(int64_t n, float *s, const void *vx, const void *vy) {
    const blk_q2_k *x = vx;
    const blk_q8_k *y = vy;
    const __m256i m2 = _mm256_set1_epi8(0x03);
    __m256 accf = _mm256_setzero_ps();
    __m128 accm = _mm_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)x[i].scales);
        const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sc8, _mm_set1_epi8(0x0F)));
        const __m256i mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), _mm_set1_epi8(0x0F)));
        const __m256i mins = _mm256_madd_epi16(mn16, loadu256(y[i].bsums));
        __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256i sc = bcast128_i16(h ? _mm256_extracti128_si256(sc16, 1) : _mm256_castsi256_si128(sc16));
            const __m256i qs = loadu256(x[i].qs + 32 * h);
            const int8_t *a = y[i].qs + 128 * h;
            __m256i q0 = _mm256_and_si256(qs, m2);
            __m256i q1 = _mm256_and_si256(_mm256_srli_epi16(qs, 2), m2);
            __m256i q2 = _mm256_and_si256(_mm256_srli_epi16(qs, 4), m2);
            __m256i q3 = _mm256_and_si256(_mm256_srli_epi16(qs, 6), m2);
            acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(_mm256_maddubs_epi16(q0, loadu256(a)), bcast16_pair(sc, 0)));
            acc1 = _mm256_add_epi32(acc1, _mm256_madd_epi16(_mm256_maddubs_epi16(q1, loadu256(a + 32)), bcast16_pair(sc, 1)));
            acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(_mm256_maddubs_epi16(q2, loadu256(a + 64)), bcast16_pair(sc, 2)));
            acc1 = _mm256_add_epi32(acc1, _mm256_madd_epi16(_mm256_maddubs_epi16(q3, loadu256(a + 96)), bcast16_pair(sc, 3)));
        }
        accf = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(acc0, acc1)), _mm256_set1_ps(h2f(x[i].d) * y[i].d), accf);
        accf = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_set1_ps(h2f(x[i].dmin) * y[i].d), accf);
    }
    *s = hsum8f(accf) - hsum4f(accm);
}

/* Q3_K: weights as unsigned u = low2 | hbit << 2 (0..7) into maddubs; the
 * value is u - 4, so 4 * sum_g scale_g * bsum_g is subtracted at the end */
void quant_dot_q3_k_q8_k_avx2(int64_t n, float *s, const void *vx, const void *vy) {
    const blk_q3_k *x = vx;
    const blk_q8_k *y = vy;
    const __m256i m2 = _mm256_set1_epi8(0x03);
    __m256 accf = _mm256_setzero_ps();
    __m128 accm = _mm_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        /* 16 6-bit scales: low nibbles from bytes 0..7 (scales 0-7 low
         * nibble, 8-15 high nibble), top bits from bytes 8..11 */
        uint32_t u[3];
        memcpy(u, x[i].scales, 12);
        const uint32_t lo4 = 0x0f0f0f0fu, lo2 = 0x03030303u;
        const uint32_t w0 = (u[0] & lo4) | (u[2] & lo2) << 4, w1 = (u[1] & lo4) | ((u[2] >> 2) & lo2) << 4;
        const uint32_t w2 = ((u[0] >> 4) & lo4) | ((u[2] >> 4) & lo2) << 4;
        const uint32_t w3 = ((u[1] >> 4) & lo4) | ((u[2] >> 6) & lo2) << 4;
        const __m128i sc8 = _mm_sub_epi8(_mm_setr_epi32((int)w0, (int)w1, (int)w2, (int)w3), _mm_set1_epi8(32));
        const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
        const __m256i offs = _mm256_madd_epi16(sc16, loadu256(y[i].bsums));
        const __m256i hm = loadu256(x[i].hmask);
        __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256i sc = bcast128_i16(h ? _mm256_extracti128_si256(sc16, 1) : _mm256_castsi256_si128(sc16));
            const __m256i qs = loadu256(x[i].qs + 32 * h);
            const int8_t *a = y[i].qs + 128 * h;
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                /* bit b = 4h + k of the hmask byte, moved to bit 2 */
                const int b = 4 * h + k;
                __m256i hb = _mm256_and_si256(hm, _mm256_set1_epi8((char)(1 << b)));
                hb = b < 2 ? _mm256_slli_epi16(hb, 2 - b) : b > 2 ? _mm256_srli_epi16(hb, b - 2) : hb;
                __m256i q = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qs, 2 * k), m2), hb);
                __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(q, loadu256(a + 32 * k)), bcast16_pair(sc, k));
                if (k & 1) acc1 = _mm256_add_epi32(acc1, p);
                else acc0 = _mm256_add_epi32(acc0, p);
            }
        }
        const __m256i sumi = _mm256_sub_epi32(_mm256_add_epi32(acc0, acc1), _mm256_slli_epi32(offs, 2));
        accf = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(h2f(x[i].d) * y[i].d), accf);
    }
    *s = hsum8f(accf) - hsum4f(accm);
}

/* IQ4_XS: codebook lookup by byte shuffle, signed x signed via sign trick,
 * pairs madd'ed by the sub-block scale */
void quant_dot_iq4_xs_q8_k_avx2(int64_t n, float *s, const void *vx, const void *vy) {
    const blk_iq4_xs *x = vx;
    const blk_q8_k *y = vy;
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)quant_iq4nl_values));
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 accf = _mm256_setzero_ps();
    __m128 accm = _mm_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        const __m256i sc = bcast128_i16(_mm_cvtepi8_epi16(quant_iq4_xs_scales8(&x[i])));
        __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            __m256i b = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(x[i].qs + 16 * j)));
            __m256i idx = _mm256_and_si256(_mm256_blend_epi32(b, _mm256_srli_epi16(b, 4), 0xF0), m4);
            __m256i q = _mm256_shuffle_epi8(table, idx);
            __m256i a = loadu256(y[i].qs + 32 * j);
            __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(a, q));
            p = _mm256_madd_epi16(p, bcast16(sc, j));
            if (j & 1) acc1 = _mm256_add_epi32(acc1, p);
            else acc0 = _mm256_add_epi32(acc0, p);
        }
        accf = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(acc0, acc1)), _mm256_set1_ps(h2f(x[i].d) * y[i].d), accf);
    }
    *s = hsum8f(accf) - hsum4f(accm);
}

/* ---- Q8_K activations, bit-exact with quant_q8_k_from_float ---- */

void quant_q8_k_from_float_avx2(const float *src, void *dst, int64_t n) {
    blk_q8_k *b = dst;
    const __m256 signbit = _mm256_set1_ps(-0.0f);
    const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
    for (int64_t i = 0; i < n / QK_K; i++, src += QK_K) {
        __m256 amax8 = _mm256_setzero_ps();
        for (int j = 0; j < QK_K; j += 8)
            amax8 = _mm256_max_ps(_mm256_andnot_ps(signbit, _mm256_loadu_ps(src + j)), amax8);
        __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax8), _mm256_extractf128_ps(amax8, 1));
        m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        m = _mm_max_ss(m, _mm_movehdup_ps(m));
        const float amax = _mm_cvtss_f32(m);
        if (amax == 0.0f) {
            memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        /* the signed value: first element whose magnitude is amax */
        float max = 0.0f;
        const __m256 va = _mm256_set1_ps(amax);
        for (int j = 0; j < QK_K; j += 8) {
            int mask = _mm256_movemask_ps(
                _mm256_cmp_ps(_mm256_andnot_ps(signbit, _mm256_loadu_ps(src + j)), va, _CMP_EQ_OQ));
            if (mask) {
                max = src[j + __builtin_ctz((unsigned)mask)];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const __m256 vs = _mm256_set1_ps(iscale);
        for (int c = 0; c < QK_K / 32; c++) {
            __m256i q[4];
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                __m256 v = _mm256_mul_ps(vs, _mm256_loadu_ps(src + 32 * c + 8 * k));
                v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
                q[k] = _mm256_cvtps_epi32(v); /* round to nearest even (MXCSR default) */
            }
            __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
            p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *)(b[i].qs + 32 * c), p);
            /* per-16 sums: bytes 0..15 in the low lane, 16..31 in the high */
            __m256i w = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), p), _mm256_set1_epi16(1));
            w = _mm256_hadd_epi32(w, w);
            w = _mm256_hadd_epi32(w, w);
            b[i].bsums[2 * c] = (int16_t)_mm256_extract_epi32(w, 0);
            b[i].bsums[2 * c + 1] = (int16_t)_mm256_extract_epi32(w, 4);
        }
        b[i].d = 1.0f / iscale;
    }
}
