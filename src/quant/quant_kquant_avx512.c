/* quant/quant_kquant_avx512: AVX-512 BW/VNNI dots (decode) of Q2_K, Q3_K,
 * Q4_K, Q5_K, Q6_K and IQ4_XS weights with Q8_K activations.
 *
 * The integers are the AVX2 kernels' (maddubs of unsigned weight bytes by
 * signed activation bytes into int16 pairs, which never saturate for these
 * ranges), but on 64 elements per instruction, and the multiply by the
 * sub-block scale and the int32 accumulation are one vpdpwssd. A zmm holds
 * two sub-blocks, so its 32 int16 scale lanes are the two scales, each
 * over its half (one vpermw from the super-block's scales). The min or
 * offset term comes from Q8_K's per-16 sums as in the AVX2 kernels. Only
 * the float summation order differs from the scalar reference. Only called
 * when tl_cpu_use_avx512(). Calls: nothing outside quant. */
#include <immintrin.h>
#include <string.h>

#include "quant/quant_internal.h"

static inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

static inline __m256i ld256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* two 32-byte pieces as one zmm */
static inline __m512i ld2x256(const void *lo, const void *hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(ld256(lo)), ld256(hi), 1);
}

/* int16 lanes 0..15 = v[a], lanes 16..31 = v[b] */
static inline __m512i pick2(__m512i v, int a, int b) {
    const __m512i idx = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16((short)a)),
                                           _mm256_set1_epi16((short)b), 1);
    return _mm512_permutexvar_epi16(idx, v);
}

/* m[j] * (bsums[2j] + bsums[2j+1]) summed pairwise into 4 int32 lanes */
static inline __m128i k4_min_sum(uint64_t m, const int16_t *bsums) {
    const __m128i pairs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)bsums),
                                         _mm_loadu_si128((const __m128i *)(bsums + 8))); /* |pair| <= 32 * 128 */
    return _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)m)), pairs);
}

static inline float hsum4f(__m128 s) {
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Q4_K / Q5_K: 64 bytes of qs at 64h hold sub-blocks 4h and 4h+2 in their
 * low nibbles (activations at 128h and 128h + 64), 4h+1 and 4h+3 in their
 * high nibbles (128h + 32 and 128h + 96). Q5_K's fifth bit of sub-block j
 * is bit j of qh[e], e the element's index within its sub-block. */
static inline __attribute__((always_inline)) float dot_k45(int64_t n, const blk_q4_k *x4, const blk_q5_k *x5, const blk_q8_k *y) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), b4 = _mm512_set1_epi8(0x10);
    __m512 accf = _mm512_setzero_ps();
    __m128 accm = _mm_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint8_t *sc12 = x5 ? x5[i].scales : x4[i].scales;
        const uint8_t *qs = x5 ? x5[i].qs : x4[i].qs;
        uint64_t scw, mw;
        quant_k4_unpack(sc12, &scw, &mw);
        const __m128i mins = k4_min_sum(mw, y[i].bsums);
        const __m512i sc = _mm512_zextsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)scw)));
        const __m512i qh = x5 ? _mm512_broadcast_i64x4(ld256(x5[i].qh)) : _mm512_setzero_si512();
        __m512i acc = _mm512_setzero_si512();
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m512i q = _mm512_loadu_si512((const void *)(qs + 64 * h));
            __m512i lo = _mm512_and_si512(q, m4), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
            if (x5) {
                const int j = 4 * h;
                const __m512i blo = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << j)), _mm256_set1_epi8((char)(4 << j)), 1);
                lo = _mm512_or_si512(lo, _mm512_maskz_mov_epi8(_mm512_test_epi8_mask(qh, blo), b4));
                hi = _mm512_or_si512(hi, _mm512_maskz_mov_epi8(_mm512_test_epi8_mask(qh, _mm512_add_epi8(blo, blo)), b4));
            }
            const int8_t *a = y[i].qs + 128 * h;
            acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(lo, ld2x256(a, a + 64)), pick2(sc, 4 * h, 4 * h + 2));
            acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(hi, ld2x256(a + 32, a + 96)), pick2(sc, 4 * h + 1, 4 * h + 3));
        }
        const float d = x5 ? h2f(x5[i].d) : h2f(x4[i].d), dmin = x5 ? h2f(x5[i].dmin) : h2f(x4[i].dmin);
        accf = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), _mm512_set1_ps(d * y[i].d), accf);
        accm = _mm_fmadd_ps(_mm_cvtepi32_ps(mins), _mm_set1_ps(dmin * y[i].d), accm);
    }
    return _mm512_reduce_add_ps(accf) - hsum4f(accm);
}

void quant_dot_q4_k_q8_k_avx512(int64_t n, float *s, const void *vx, const void *vy) {
    *s = dot_k45(n, vx, NULL, vy);
}

void quant_dot_q5_k_q8_k_avx512(int64_t n, float *s, const void *vx, const void *vy) {
    *s = dot_k45(n, NULL, vx, vy);
}

/* Q6_K: per half h, ql[64h..64h+64) gives elements 128h + 0..63 in its low
 * nibbles and 128h + 64..127 in its high ones; their 2 high bits are bit
 * pairs 0, 1 (first 32 elements of each) and 2, 3 of qh[32h..32h+32),
 * so the qh bytes go to both zmm halves, the upper one shifted by 2. The
 * weights q in 0..63 enter maddubs unsigned; the -32 offset comes back as
 * 32 * sum_g scale_g * bsum_g. */
void quant_dot_q6_k_q8_k_avx512(int64_t n, float *s, const void *vx, const void *vy) {
    const blk_q6_k *x = vx;
    const blk_q8_k *y = vy;
    const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(0x03);
    const __m512i shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    __m256 accf = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[i].scales));
        const __m256i offs = _mm256_madd_epi16(sc16, ld256(y[i].bsums));
        const __m512i sc = _mm512_castsi256_si512(sc16);
        __m512i acc = _mm512_setzero_si512();
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m512i l = _mm512_loadu_si512((const void *)(x[i].ql + 64 * h));
            const __m512i qh = _mm512_srlv_epi16(_mm512_broadcast_i64x4(ld256(x[i].qh + 32 * h)), shift);
            const __m512i q01 = _mm512_or_si512(_mm512_and_si512(l, m4), _mm512_slli_epi16(_mm512_and_si512(qh, m2), 4));
            const __m512i q23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
                                                _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qh, 4), m2), 4));
            const int8_t *a = y[i].qs + 128 * h;
            /* int16 lane w of q01's products covers elements 2w, 2w+1: scale 8h + w / 8 */
            const __m512i i01 = _mm512_add_epi16(_mm512_set1_epi16((short)(8 * h)),
                                                 _mm512_set_epi64(0x0003000300030003, 0x0003000300030003,
                                                                  0x0002000200020002, 0x0002000200020002,
                                                                  0x0001000100010001, 0x0001000100010001, 0, 0));
            const __m512i i23 = _mm512_add_epi16(i01, _mm512_set1_epi16(4));
            acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(q01, _mm512_loadu_si512((const void *)a)),
                                      _mm512_permutexvar_epi16(i01, sc));
            acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(q23, _mm512_loadu_si512((const void *)(a + 64))),
                                      _mm512_permutexvar_epi16(i23, sc));
        }
        const __m256i s8 = _mm256_add_epi32(_mm512_castsi512_si256(acc), _mm512_extracti64x4_epi64(acc, 1));
        const __m256i sumi = _mm256_sub_epi32(s8, _mm256_slli_epi32(offs, 5));
        accf = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(h2f(x[i].d) * y[i].d), accf);
    }
    __m128 r = _mm_add_ps(_mm256_castps256_ps128(accf), _mm256_extractf128_ps(accf, 1));
    *s = hsum4f(r);
}

/* int16 lane w of a Q2_K / Q3_K chunk's maddubs products covers elements
 * 2w, 2w+1 of its two 32-element pieces (128 apart): 16-element group
 * 8 (w / 16) + 2c + (w % 16) / 8 for chunk c; this is the index of group
 * c = 0, the others add 2c */
static inline __m512i k23_group_idx(void) {
    return _mm512_set_epi64(0x0009000900090009, 0x0009000900090009, 0x0008000800080008, 0x0008000800080008,
                            0x0001000100010001, 0x0001000100010001, 0, 0);
}

static inline float hsum8f(__m256 v) {
    return hsum4f(_mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)));
}

/* Q2_K: qs[0..64) as one zmm, chunk c (elements 32c + k and 128 + 32c + k)
 * its bit pair c; weights 0..3 enter maddubs unsigned, the 16 scales
 * (low nibbles) multiply in by vpdpwssd, the mins (high nibbles) come from
 * Q8_K's per-16 sums */
void quant_dot_q2_k_q8_k_avx512(int64_t n, float *s, const void *vx, const void *vy) {
    const blk_q2_k *x = vx;
    const blk_q8_k *y = vy;
    const __m512i m2 = _mm512_set1_epi8(0x03), gidx = k23_group_idx();
    const __m128i m4 = _mm_set1_epi8(0x0F);
    __m256 accf = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)x[i].scales);
        const __m512i sc = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(sc8, m4)));
        const __m256i mins = _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), m4)),
                                               ld256(y[i].bsums));
        const __m512i qs = _mm512_loadu_si512((const void *)x[i].qs);
        __m512i acc = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const __m512i q = _mm512_and_si512(_mm512_srli_epi16(qs, 2 * c), m2);
            const int8_t *a = y[i].qs + 32 * c;
            acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(q, ld2x256(a, a + 128)),
                                      _mm512_permutexvar_epi16(_mm512_add_epi16(gidx, _mm512_set1_epi16((short)(2 * c))), sc));
        }
        const __m256i s8 = _mm256_add_epi32(_mm512_castsi512_si256(acc), _mm512_extracti64x4_epi64(acc, 1));
        accf = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s8), _mm256_set1_ps(h2f(x[i].d) * y[i].d), accf);
        accf = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_set1_ps(h2f(x[i].dmin) * y[i].d), accf);
    }
    *s = hsum8f(accf);
}

/* Q3_K: as Q2_K, with the third bit of chunk c from hmask bit c (low
 * piece) or c + 4 (high piece); u = low2 | hbit << 2 is the value + 4, so
 * 4 * sum_g scale_g * bsum_g is taken off in int32 */
void quant_dot_q3_k_q8_k_avx512(int64_t n, float *s, const void *vx, const void *vy) {
    const blk_q3_k *x = vx;
    const blk_q8_k *y = vy;
    const __m512i m2 = _mm512_set1_epi8(0x03), four = _mm512_set1_epi8(4), gidx = k23_group_idx();
    __m256 accf = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        const __m256i sc16 = _mm256_cvtepi8_epi16(quant_q3_k_scales16(x[i].scales));
        const __m256i offs = _mm256_madd_epi16(sc16, ld256(y[i].bsums));
        const __m512i sc = _mm512_castsi256_si512(sc16);
        const __m512i qs = _mm512_loadu_si512((const void *)x[i].qs);
        const __m512i hm = _mm512_broadcast_i64x4(ld256(x[i].hmask));
        __m512i acc = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << c)), _mm256_set1_epi8((char)(16 << c)), 1);
            const __m512i u = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(qs, 2 * c), m2),
                                              _mm512_maskz_mov_epi8(_mm512_test_epi8_mask(hm, bit), four));
            const int8_t *a = y[i].qs + 32 * c;
            acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(u, ld2x256(a, a + 128)),
                                      _mm512_permutexvar_epi16(_mm512_add_epi16(gidx, _mm512_set1_epi16((short)(2 * c))), sc));
        }
        const __m256i s8 = _mm256_add_epi32(_mm512_castsi512_si256(acc), _mm512_extracti64x4_epi64(acc, 1));
        const __m256i sumi = _mm256_sub_epi32(s8, _mm256_slli_epi32(offs, 2));
        accf = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(h2f(x[i].d) * y[i].d), accf);
    }
    *s = hsum8f(accf);
}

/* IQ4_XS: a zmm holds sub-blocks 2p and 2p + 1 (their 32 bytes of
 * nibbles: 128-bit lanes low, high nibbles of the first 16 bytes, then of
 * the next 16), looked up in the codebook by vpshufb; vpdpbusd takes the
 * values' magnitudes and the activations with the values' signs (exact
 * while |a| <= 127), lanes 0..7 summing sub-block 2p and 8..15 sub-block
 * 2p + 1, which vpmulld scales by their 6-bit scales */
/* the 8 six-bit scales minus 32 as int16 lanes (scale j: nibble j % 2 of
 * scales_l[j / 2], bits 2j, 2j + 1 of scales_h) */
static inline __m128i iq4_xs_scales(const blk_iq4_xs *b) {
    uint32_t l;
    memcpy(&l, b->scales_l, 4);
    const __m128i lo = _mm_cvtepu8_epi16(_mm_unpacklo_epi8(_mm_cvtsi32_si128((int)(l & 0x0f0f0f0fu)),
                                                           _mm_cvtsi32_si128((int)((l >> 4) & 0x0f0f0f0fu))));
    const __m128i hi = _mm_and_si128(_mm_srlv_epi16(_mm_set1_epi16((short)b->scales_h), _mm_setr_epi16(0, 2, 4, 6, 8, 10, 12, 14)),
                                     _mm_set1_epi16(3));
    return _mm_sub_epi16(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi16(32));
}

void quant_dot_iq4_xs_q8_k_avx512(int64_t n, float *s, const void *vx, const void *vy) {
    const blk_iq4_xs *x = vx;
    const blk_q8_k *y = vy;
    const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)quant_iq4nl_values));
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i sidx = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    __m512 accf = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        const __m512i sc = _mm512_castsi256_si512(_mm256_cvtepi16_epi32(iq4_xs_scales(&x[i])));
        __m512i acc = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int p = 0; p < 4; p++) {
            const __m512i b = _mm512_shuffle_i64x2(_mm512_castsi256_si512(ld256(x[i].qs + 32 * p)),
                                                   _mm512_castsi256_si512(ld256(x[i].qs + 32 * p)), 0x50);
            const __m512i idx = _mm512_and_si512(_mm512_mask_srli_epi16(b, 0xFF00FF00u, b, 4), m4);
            const __m512i q = _mm512_shuffle_epi8(table, idx);
            const __m512i a = _mm512_loadu_si512((const void *)(y[i].qs + 64 * p));
            const __m512i as = _mm512_mask_sub_epi8(a, _mm512_movepi8_mask(q), _mm512_setzero_si512(), a);
            const __m512i d = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(q), as);
            acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(d, _mm512_permutexvar_epi32(_mm512_add_epi32(sidx, _mm512_set1_epi32(2 * p)), sc)));
        }
        accf = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), _mm512_set1_ps(h2f(x[i].d) * y[i].d), accf);
    }
    *s = _mm512_reduce_add_ps(accf);
}
