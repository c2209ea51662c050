/* quant/quant_legacy_avx512: AVX-512 VNNI dot kernels (decode) for Q8_0,
 * Q4_0, Q4_1, Q5_0, Q5_1 and IQ4_NL weights.
 *
 * Same loop as the AVX2 kernels (4 blocks per iteration, scales converted
 * 4 at a time, one FMA per 4 blocks), but each block's integer sum comes
 * from vpdpbusd (u8 x s8, 4 products summed into an int32 lane in one
 * instruction) instead of the maddubs + madd pair, which also removes the
 * int16 intermediate. vpdpbusd needs one unsigned operand: Q8_0 uses |x|
 * and y with x's sign (exact while |y| <= 127, as our quantizers give),
 * Q4_0 the nibble u = q + 8 and subtracts 8 * sum(y) by a second vpdpbusd
 * against 8s (Q5_0 likewise with 16s; the fifth bits become 0x10 bytes by
 * one masked move), IQ4_NL its codebook value's magnitude with the sign
 * moved onto y as Q8_0 does. Only called when tl_cpu_use_avx512(). Calls: nothing
 * outside quant. */
#include "quant/quant_simd_avx2.h"

static inline __m256i vnni(__m256i u, __m256i s) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s); }

static inline __m256i bd_q8_0(const blk_q8_0 *x, const blk_q8_0 *y) {
    const __m256i q = loadu256(x->qs);
    return vnni(_mm256_sign_epi8(q, q), _mm256_sign_epi8(loadu256(y->qs), q));
}

static inline __m256i bd_q4_0(const blk_q4_0 *x, const blk_q8_0 *y) {
    const __m256i yy = loadu256(y->qs);
    return _mm256_sub_epi32(vnni(unpack_nibbles(x->qs), yy), vnni(_mm256_set1_epi8(8), yy));
}

static inline __m256i bd_q4_1(const blk_q4_1 *x, const blk_q8_1 *y) {
    return vnni(unpack_nibbles(x->qs), loadu256(y->qs));
}

static inline __m256i q5_u(const uint8_t *qs, const uint8_t *qh) {
    return _mm256_or_si256(unpack_nibbles(qs), _mm256_maskz_mov_epi8(load_u32(qh), _mm256_set1_epi8(0x10)));
}

static inline __m256i bd_q5_0(const blk_q5_0 *x, const blk_q8_0 *y) {
    const __m256i yy = loadu256(y->qs);
    return _mm256_sub_epi32(vnni(q5_u(x->qs, x->qh), yy), vnni(_mm256_set1_epi8(16), yy));
}

static inline __m256i bd_q5_1(const blk_q5_1 *x, const blk_q8_1 *y) { return vnni(q5_u(x->qs, x->qh), loadu256(y->qs)); }

static inline __m256i bd_iq4_nl(const blk_iq4_nl *x, const blk_q8_0 *y, __m256i table) {
    const __m256i q = _mm256_shuffle_epi8(table, unpack_nibbles(x->qs));
    return vnni(_mm256_sign_epi8(q, q), _mm256_sign_epi8(loadu256(y->qs), q));
}

#define DOT4_MIN(d) (void)0

void quant_dot_q8_0_q8_0_avx512(int64_t n, float *s, const void *vx, const void *vy) {
    const blk_q8_0 *x = vx;
    const blk_q8_0 *y = vy;
    const int64_t nb = n / QK;
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
#define BD(k) bd_q8_0(&x[k], &y[k])
    DOT4_LOOP(BD, scales4(&x[i], sizeof *x))
    for (; i < nb; i++) acc = acc_block(acc, BD(i), h2f(x[i].d) * h2f(y[i].d));
#undef BD
    *s = hsum8(acc);
}

void quant_dot_q4_0_q8_0_avx512(int64_t n, float *s, const void *vx, const void *vy) {
    const blk_q4_0 *x = vx;
    const blk_q8_0 *y = vy;
    const int64_t nb = n / QK;
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
#define BD(k) bd_q4_0(&x[k], &y[k])
    DOT4_LOOP(BD, scales4(&x[i], sizeof *x))
    for (; i < nb; i++) acc = acc_block(acc, BD(i), h2f(x[i].d) * h2f(y[i].d));
#undef BD
    *s = hsum8(acc);
}

void quant_dot_q5_0_q8_0_avx512(int64_t n, float *s, const void *vx, const void *vy) {
    const blk_q5_0 *x = vx;
    const blk_q8_0 *y = vy;
    const int64_t nb = n / QK;
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
#define BD(k) bd_q5_0(&x[k], &y[k])
    DOT4_LOOP(BD, scales4(&x[i], sizeof *x))
    for (; i < nb; i++) acc = acc_block(acc, BD(i), h2f(x[i].d) * h2f(y[i].d));
#undef BD
    *s = hsum8(acc);
}

void quant_dot_iq4_nl_q8_0_avx512(int64_t n, float *s, const void *vx, const void *vy) {
    const blk_iq4_nl *x = vx;
    const blk_q8_0 *y = vy;
    const int64_t nb = n / QK;
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)quant_iq4nl_values));
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
#define BD(k) bd_iq4_nl(&x[k], &y[k], table)
    DOT4_LOOP(BD, scales4(&x[i], sizeof *x))
    for (; i < nb; i++) acc = acc_block(acc, BD(i), h2f(x[i].d) * h2f(y[i].d));
#undef BD
    *s = hsum8(acc);
}

/* Q4_1 / Q5_1: the scale products' odd lanes are m_x * s_y, summed apart */
#undef DOT4_MIN
#define DOT4_MIN(d) (accm = _mm256_add_ps(accm, d))

void quant_dot_q4_1_q8_1_avx512(int64_t n, float *s, const void *vx, const void *vy) {
    const blk_q4_1 *x = vx;
    const blk_q8_1 *y = vy;
    const int64_t nb = n / QK;
    __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
    float summ = 0.0f;
    int64_t i = 0;
#define BD(k) bd_q4_1(&x[k], &y[k])
    DOT4_LOOP(BD, scales4(&x[i], sizeof *x))
    for (; i < nb; i++) {
        acc = acc_block(acc, BD(i), h2f(x[i].d) * h2f(y[i].d));
        summ += h2f(x[i].m) * h2f(y[i].s);
    }
#undef BD
    accm = _mm256_blend_ps(_mm256_setzero_ps(), accm, 0xAA);
    *s = hsum8(acc) + (hsum8(accm) + summ);
}

void quant_dot_q5_1_q8_1_avx512(int64_t n, float *s, const void *vx, const void *vy) {
    const blk_q5_1 *x = vx;
    const blk_q8_1 *y = vy;
    const int64_t nb = n / QK;
    __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
    float summ = 0.0f;
    int64_t i = 0;
#define BD(k) bd_q5_1(&x[k], &y[k])
    DOT4_LOOP(BD, scales4(&x[i], sizeof *x))
    for (; i < nb; i++) {
        acc = acc_block(acc, BD(i), h2f(x[i].d) * h2f(y[i].d));
        summ += h2f(x[i].m) * h2f(y[i].s);
    }
#undef BD
    accm = _mm256_blend_ps(_mm256_setzero_ps(), accm, 0xAA);
    *s = hsum8(acc) + (hsum8(accm) + summ);
}
#undef DOT4_MIN
