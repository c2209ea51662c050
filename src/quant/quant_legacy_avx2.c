/* quant/quant_legacy_avx2: AVX2/FMA kernels for the 32-element block types.
 *
 * Dots: each block's integer sum is formed exactly with the byte
 * multiply-add pattern (maddubs: unsigned x signed bytes -> int16 pairs,
 * then madd -> int32 lanes). Four blocks per iteration: their fp16 scales
 * are converted together, their lane sums reduced together (hadd), and one
 * FMA scales and accumulates them. The per-block integers equal the
 * reference's; only the float summation order differs. maddubs needs one
 * unsigned operand: signed weights use |x| and y*sign(x), which is exact
 * while activations stay in [-127, 127], as every Q8 quantizer here
 * guarantees. Measured against ggml's AVX2 kernels in the same process:
 * >= 1.0x on a Xeon (Sapphire Rapids class), ~0.9x on this AMD EPYC
 * (fp16 conversion is slower there; ggml uses a 256 KB lookup table).
 * Activation quantizers (Q8_0, Q8_1) are bit-exact with the scalar ones.
 * Only called when tl_cpu_use_avx2(). Calls: nothing outside quant. */
#include "quant/quant_simd_avx2.h"

/* Per-type block dots: 8 int32 lanes that sum to the block's exact
 * integer dot with the activation block. */
static inline __m256i bd_q8_0(const blk_q8_0 *x, const blk_q8_0 *y) {
    return dot_s8s8(loadu256(x->qs), loadu256(y->qs));
}

/* (q - 8) . y as maddubs(q, y) - maddubs(8, y): both int16 pair sums stay
 * within +-3810, and it is cheaper than the sign trick */
static inline __m256i bd_q4_0(const blk_q4_0 *x, const blk_q8_0 *y) {
    const __m256i yy = loadu256(y->qs);
    const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(unpack_nibbles(x->qs), yy),
                                       _mm256_maddubs_epi16(_mm256_set1_epi8(8), yy));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

static inline __m256i bd_q4_1(const blk_q4_1 *x, const blk_q8_1 *y) {
    return dot_u8s8(unpack_nibbles(x->qs), loadu256(y->qs));
}

/* Q5_0 weight q-16 as a signed byte: with the 5th bit set it is the low
 * nibble, without it the nibble minus 16 (= nibble | 0xF0) */
static inline __m256i bd_q5_0(const blk_q5_0 *x, const blk_q8_0 *y) {
    __m256i hb = bits_to_bytes(load_u32(x->qh));
    __m256i q = _mm256_or_si256(unpack_nibbles(x->qs), _mm256_andnot_si256(hb, _mm256_set1_epi8((char)0xF0)));
    return dot_s8s8(q, loadu256(y->qs));
}

static inline __m256i bd_q5_1(const blk_q5_1 *x, const blk_q8_1 *y) {
    __m256i hb = bits_to_bytes(load_u32(x->qh));
    __m256i q = _mm256_or_si256(unpack_nibbles(x->qs), _mm256_and_si256(hb, _mm256_set1_epi8(0x10)));
    return dot_u8s8(q, loadu256(y->qs));
}

/* codebook types: nibble -> value by byte shuffle of a 16-entry table */
static inline __m256i bd_lut(const uint8_t *qs, const int8_t *yq, __m256i table) {
    return dot_s8s8(_mm256_shuffle_epi8(table, unpack_nibbles(qs)), loadu256(yq));
}

static inline float e8m0_half(uint8_t e) {
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

#define DOT4_MIN(d) (void)0

void quant_dot_q8_0_q8_0_avx2(int64_t n, float *s, const void *vx, const void *vy) {
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

void quant_dot_q4_0_q8_0_avx2(int64_t n, float *s, const void *vx, const void *vy) {
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

void quant_dot_q5_0_q8_0_avx2(int64_t n, float *s, const void *vx, const void *vy) {
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

void quant_dot_iq4_nl_q8_0_avx2(int64_t n, float *s, const void *vx, const void *vy) {
    const blk_iq4_nl *x = vx;
    const blk_q8_0 *y = vy;
    const int64_t nb = n / QK;
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)quant_iq4nl_values));
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
#define BD(k) bd_lut(x[k].qs, y[k].qs, table)
    DOT4_LOOP(BD, scales4(&x[i], sizeof *x))
    for (; i < nb; i++) acc = acc_block(acc, BD(i), h2f(x[i].d) * h2f(y[i].d));
#undef BD
    *s = hsum8(acc);
}

void quant_dot_mxfp4_q8_0_avx2(int64_t n, float *s, const void *vx, const void *vy) {
    const blk_mxfp4 *x = vx;
    const blk_q8_0 *y = vy;
    const int64_t nb = n / QK;
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)quant_mxfp4_values));
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
#define BD(k) bd_lut(x[k].qs, y[k].qs, table)
#define XS _mm256_setr_ps(e8m0_half(x[i].e), 0, e8m0_half(x[i + 1].e), 0, e8m0_half(x[i + 2].e), 0, \
                          e8m0_half(x[i + 3].e), 0)
    DOT4_LOOP(BD, XS)
    for (; i < nb; i++) acc = acc_block(acc, BD(i), e8m0_half(x[i].e) * h2f(y[i].d));
#undef XS
#undef BD
    *s = hsum8(acc);
}

/* Q4_1 / Q5_1: the scale products' odd lanes are m_x * s_y, summed apart */
#undef DOT4_MIN
#define DOT4_MIN(d) (accm = _mm256_add_ps(accm, d))

void quant_dot_q4_1_q8_1_avx2(int64_t n, float *s, const void *vx, const void *vy) {
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

void quant_dot_q5_1_q8_1_avx2(int64_t n, float *s, const void *vx, const void *vy) {
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
#undef DOT4_LOOP

/* ---- activation quantizers, bit-exact with quant_q8_{0,1}_from_float ---- */

/* quantize one block of 32 floats; returns d, stores qs and the sum of qs */
static inline float q8_block_avx2(const float *x, int8_t *qs, int *sum) {
    const __m256 signbit = _mm256_set1_ps(-0.0f);
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int k = 0; k < 4; k++) {
        v[k] = _mm256_loadu_ps(x + 8 * k);
        amax = _mm256_max_ps(_mm256_andnot_ps(signbit, v[k]), amax); /* NaN skipped */
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    /* the reference engine's SIMD activation rule (id = 127/amax, halves to
     * even), not its scalar one: see quant_q8_0_act_from_float_ref */
    const float amax_s = _mm_cvtss_f32(m);
    const float d = amax_s / 127.0f;
    const float id = amax_s != 0.0f ? 127.0f / amax_s : 0.0f;
    const __m256 vid = _mm256_set1_ps(id);
    __m256i q[4];
    const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
    for (int k = 0; k < 4; k++)
        q[k] = _mm256_cvttps_epi32(_mm256_round_ps(_mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(v[k], vid), lo), hi),
                                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    __m256i s32 = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
    s4 = _mm_hadd_epi32(s4, s4);
    s4 = _mm_hadd_epi32(s4, s4);
    *sum = _mm_cvtsi128_si32(s4);
    /* packs work per 128-bit lane; the permute puts the dwords back in order */
    __m256i p01 = _mm256_packs_epi32(q[0], q[1]);
    __m256i p23 = _mm256_packs_epi32(q[2], q[3]);
    __m256i b = _mm256_packs_epi16(p01, p23);
    b = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)qs, b);
    return d;
}

void quant_q8_0_from_float_avx2(const float *src, void *dst, int64_t n) {
    blk_q8_0 *b = dst;
    int sum;
    for (int64_t i = 0; i < n / QK; i++, src += QK)
        b[i].d = _cvtss_sh(q8_block_avx2(src, b[i].qs, &sum), _MM_FROUND_TO_NEAREST_INT);
}

void quant_q8_1_from_float_avx2(const float *src, void *dst, int64_t n) {
    blk_q8_1 *b = dst;
    for (int64_t i = 0; i < n / QK; i++, src += QK) {
        int sum;
        float d = q8_block_avx2(src, b[i].qs, &sum);
        b[i].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
        b[i].s = _cvtss_sh((float)sum * d, _MM_FROUND_TO_NEAREST_INT);
    }
}
