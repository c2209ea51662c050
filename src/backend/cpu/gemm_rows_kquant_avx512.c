/* AVX-512 VNNI bodies of the one-token kernels over 4 weight rows (see
 * gemm.h, gemm_4x1_fn) for the Q8_K-activation types Q2_K, Q3_K and IQ4_XS.
 *
 * As in gemm_rows_avx512.c a row sits in each 128-bit lane: 16 bytes of the
 * 4 rows' quants meet the matching 16 activation bytes, broadcast to every
 * lane, in one instruction. Q2_K and Q3_K: 16 bytes of a row are one
 * 16-element group once shifted and masked, so vpmaddubsw gives the group's
 * products as int16 pairs and vpdpwssd multiplies them by the row's group
 * scale (int16, one vpshufb from the row's 16 scales unpacked once per
 * block) into int32. The weights enter unsigned; the mins (Q2_K) or the
 * offset 4 (Q3_K) come back from Q8_K's per-16 sums, one vpdpwssd of a
 * row's 8 scales by 8 broadcast sums. IQ4_XS: the codebook values flipped
 * to unsigned (+128) meet the activations in vpdpbusd per 32-element
 * sub-block, vpmulld by the sub-block scale, the +128 taken off via the
 * per-16 sums. Sums are exact in int32 within a super-block, then
 * converted and scaled by d_w * d_y (and dmin_w * d_y). The next 4 rows are
 * prefetched as one stream. ds1 is unused: Q8_K blocks carry d and sums. */
#include <immintrin.h>
#include <stddef.h>

#include "backend/cpu/gemm.h"
#include "backend/cpu/gemm_rows_avx512.h"
#include "quant/quant_internal.h"

/* the next 4 rows' bytes for block i (ws bytes per block), as one stream */
static inline void k_prefetch(const uint8_t *w, size_t rb, int64_t i, size_t ws) {
    const char *nx = (const char *)w + 4 * rb + (size_t)i * 4 * ws;
    for (size_t o = 0; o < 4 * ws; o += 64) _mm_prefetch(nx + o, _MM_HINT_T0);
}

/* int16 element g % 8 of each lane of s (s_lo for g < 8, s_hi otherwise)
 * repeated over the lane */
static inline __m512i k_pick16(__m512i s_lo, __m512i s_hi, int g) {
    const int k = g % 8;
    return _mm512_shuffle_epi8(g < 8 ? s_lo : s_hi, _mm512_set1_epi16((short)(((2 * k + 1) << 8) | (2 * k))));
}

/* sum_g sc_g * bsums_g per row (4 int32 lanes each) from its 16 scales as
 * int16, 0..7 in s_lo, 8..15 in s_hi */
static inline __m512i k_bsum_dot(__m512i s_lo, __m512i s_hi, const blk_q8_k *y) {
    const __m512i z = _mm512_setzero_si512();
    return _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(z, s_lo, gr_bcast16(y->bsums)), s_hi, gr_bcast16(y->bsums + 8));
}

/* Q2_K: element 128h + 32c + k has bits 2c of qs[32h + k]; 16 bytes at
 * 32h + 16j are group 8h + 2c + j once shifted by 2c */
void gemm_q2_k_4x1_avx512(int64_t n, float *s, const void *vw, size_t rb, const uint8_t *vy, const float *ds1) {
    (void)ds1;
    const uint8_t *w = vw;
    const blk_q8_k *y = (const blk_q8_k *)vy;
    const __m512i m2 = _mm512_set1_epi8(0x03), m4 = _mm512_set1_epi8(0x0F), z = _mm512_setzero_si512();
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint8_t *b = w + (size_t)i * sizeof(blk_q2_k);
        k_prefetch(w, rb, i, sizeof(blk_q2_k));
        const __m512i sc8 = gr_rows16(b, rb, offsetof(blk_q2_k, scales));
        const __m512i scl = _mm512_and_si512(sc8, m4), mn = _mm512_and_si512(_mm512_srli_epi16(sc8, 4), m4);
        const __m512i s_lo = _mm512_unpacklo_epi8(scl, z), s_hi = _mm512_unpackhi_epi8(scl, z);
        const __m512i mins = k_bsum_dot(_mm512_unpacklo_epi8(mn, z), _mm512_unpackhi_epi8(mn, z), &y[i]);
        __m512i sum = z;
#pragma GCC unroll 4
        for (int p = 0; p < 4; p++) {
            const int h = p / 2, j = p % 2;
            const __m512i q = gr_rows16(b, rb, offsetof(blk_q2_k, qs) + 16 * p);
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                const int g = 8 * h + 2 * c + j;
                const __m512i u = _mm512_and_si512(_mm512_srli_epi16(q, 2 * c), m2);
                const __m512i pr = _mm512_maddubs_epi16(u, gr_bcast16(y[i].qs + 16 * g));
                sum = _mm512_dpwssd_epi32(sum, pr, k_pick16(s_lo, s_hi, g));
            }
        }
        const __m512 dw = gr_f16x4(b, rb, offsetof(blk_q2_k, d)), dm = gr_f16x4(b, rb, offsetof(blk_q2_k, dmin));
        const __m512 t = _mm512_fmsub_ps(_mm512_cvtepi32_ps(sum), dw, _mm512_mul_ps(_mm512_cvtepi32_ps(mins), dm));
        acc = _mm512_fmadd_ps(t, _mm512_set1_ps(y[i].d), acc);
    }
    gr_store4(s, acc);
}

/* Q3_K: the low 2 bits as Q2_K; the third of element 128h + 32c + k is
 * bit 4h + c of hmask[k]; u = low2 | bit << 2 is the value + 4 */
void gemm_q3_k_4x1_avx512(int64_t n, float *s, const void *vw, size_t rb, const uint8_t *vy, const float *ds1) {
    (void)ds1;
    const uint8_t *w = vw;
    const blk_q8_k *y = (const blk_q8_k *)vy;
    const __m512i m2 = _mm512_set1_epi8(0x03), four = _mm512_set1_epi8(0x04), z = _mm512_setzero_si512();
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint8_t *b = w + (size_t)i * sizeof(blk_q3_k);
        k_prefetch(w, rb, i, sizeof(blk_q3_k));
        __m512i sc8 = _mm512_castsi128_si512(quant_q3_k_scales16(b + offsetof(blk_q3_k, scales)));
        sc8 = _mm512_inserti32x4(sc8, quant_q3_k_scales16(b + rb + offsetof(blk_q3_k, scales)), 1);
        sc8 = _mm512_inserti32x4(sc8, quant_q3_k_scales16(b + 2 * rb + offsetof(blk_q3_k, scales)), 2);
        sc8 = _mm512_inserti32x4(sc8, quant_q3_k_scales16(b + 3 * rb + offsetof(blk_q3_k, scales)), 3);
        const __m512i s_lo = _mm512_srai_epi16(_mm512_unpacklo_epi8(sc8, sc8), 8);
        const __m512i s_hi = _mm512_srai_epi16(_mm512_unpackhi_epi8(sc8, sc8), 8);
        const __m512i offs = k_bsum_dot(s_lo, s_hi, &y[i]);
        const __m512i hm0 = gr_rows16(b, rb, offsetof(blk_q3_k, hmask));
        const __m512i hm1 = gr_rows16(b, rb, offsetof(blk_q3_k, hmask) + 16);
        __m512i sum = z;
#pragma GCC unroll 4
        for (int p = 0; p < 4; p++) {
            const int h = p / 2, j = p % 2;
            const __m512i q = gr_rows16(b, rb, offsetof(blk_q3_k, qs) + 16 * p), hm = j ? hm1 : hm0;
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                const int g = 8 * h + 2 * c + j, bit = 4 * h + c;
                const __m512i hb = bit >= 2 ? _mm512_srli_epi16(hm, bit - 2) : _mm512_slli_epi16(hm, 2 - bit);
                const __m512i u = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(q, 2 * c), m2),
                                                  _mm512_and_si512(hb, four));
                const __m512i pr = _mm512_maddubs_epi16(u, gr_bcast16(y[i].qs + 16 * g));
                sum = _mm512_dpwssd_epi32(sum, pr, k_pick16(s_lo, s_hi, g));
            }
        }
        const __m512i sumi = _mm512_sub_epi32(sum, _mm512_slli_epi32(offs, 2));
        const __m512 dw = gr_f16x4(b, rb, offsetof(blk_q3_k, d));
        acc = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(sumi), dw), _mm512_set1_ps(y[i].d), acc);
    }
    gr_store4(s, acc);
}

/* IQ4_XS: sub-block j is 16 bytes at qs + 16j, elements 32j.. in the low
 * nibbles and 32j + 16.. in the high ones (IQ4_NL's layout); its 6-bit
 * scale minus 32 is nibble j % 2 of scales_l[j / 2] and bits 2j, 2j + 1 of
 * scales_h */
void gemm_iq4_xs_4x1_avx512(int64_t n, float *s, const void *vw, size_t rb, const uint8_t *vy, const float *ds1) {
    (void)ds1;
    const uint8_t *w = vw;
    const blk_q8_k *y = (const blk_q8_k *)vy;
    const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)quant_iq4nl_values));
    const __m512i m4 = _mm512_set1_epi8(0x0F), flip = _mm512_set1_epi8((char)0x80), z = _mm512_setzero_si512();
    /* per int16 lane j of a row: its scales_l byte 2 + j / 2 (bytes from
     * offset 2 of the block) and scales_h's two bytes 0, 1 */
    const __m512i lidx = _mm512_broadcast_i32x4(_mm_setr_epi8(2, -1, 2, -1, 3, -1, 3, -1, 4, -1, 4, -1, 5, -1, 5, -1));
    const __m512i hidx = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1));
    const __m512i lsh = _mm512_broadcast_i32x4(_mm_setr_epi16(0, 4, 0, 4, 0, 4, 0, 4));
    const __m512i hsh = _mm512_broadcast_i32x4(_mm_setr_epi16(0, 2, 4, 6, 8, 10, 12, 14));
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint8_t *b = w + (size_t)i * sizeof(blk_iq4_xs);
        k_prefetch(w, rb, i, sizeof(blk_iq4_xs));
        const __m512i hdr = gr_rows16(b, rb, offsetof(blk_iq4_xs, scales_h));
        const __m512i lo = _mm512_and_si512(_mm512_srlv_epi16(_mm512_shuffle_epi8(hdr, lidx), lsh), _mm512_set1_epi16(0x0F));
        const __m512i hi = _mm512_and_si512(_mm512_srlv_epi16(_mm512_shuffle_epi8(hdr, hidx), hsh), _mm512_set1_epi16(0x03));
        /* int16 lane j of a row: its scale j minus 32 */
        const __m512i sc16 = _mm512_sub_epi16(_mm512_or_si512(lo, _mm512_slli_epi16(hi, 4)), _mm512_set1_epi16(32));
        const __m512i sc_a = _mm512_srai_epi32(_mm512_unpacklo_epi16(sc16, sc16), 16);
        const __m512i sc_b = _mm512_srai_epi32(_mm512_unpackhi_epi16(sc16, sc16), 16);
        /* sum_j sc_j * (bsums[2j] + bsums[2j + 1]) per row */
        const __m128i pairs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)y[i].bsums),
                                             _mm_loadu_si128((const __m128i *)(y[i].bsums + 8)));
        const __m512i offs = _mm512_dpwssd_epi32(z, sc16, _mm512_broadcast_i32x4(pairs));
        __m512i sum = z;
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            const __m512i q = gr_rows16(b, rb, offsetof(blk_iq4_xs, qs) + 16 * j);
            const __m512i ul = _mm512_xor_si512(_mm512_shuffle_epi8(table, _mm512_and_si512(q, m4)), flip);
            const __m512i uh =
                _mm512_xor_si512(_mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(q, 4), m4)), flip);
            const __m512i d = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(z, ul, gr_bcast16(y[i].qs + 32 * j)), uh,
                                                  gr_bcast16(y[i].qs + 32 * j + 16));
            const int k = j % 4;
            const __m512i scj = _mm512_shuffle_epi8(
                j < 4 ? sc_a : sc_b, _mm512_set1_epi32((4 * k) | (4 * k + 1) << 8 | (4 * k + 2) << 16 | (4 * k + 3) << 24));
            sum = _mm512_add_epi32(sum, _mm512_mullo_epi32(d, scj));
        }
        const __m512i sumi = _mm512_sub_epi32(sum, _mm512_slli_epi32(offs, 7));
        const __m512 dw = gr_f16x4(b, rb, offsetof(blk_iq4_xs, d));
        acc = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(sumi), dw), _mm512_set1_ps(y[i].d), acc);
    }
    gr_store4(s, acc);
}
