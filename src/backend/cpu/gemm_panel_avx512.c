/* AVX-512 VNNI body of the panel prefill kernel (see gemm.h).
 *
 * Per block of 32 elements and 4 tokens: the panel's 8 vectors (4 quants
 * of each of 16 rows) are loaded once; each token's 8 groups of 4 quants
 * are broadcast and multiplied in by vpdpbusd, two accumulators per token
 * so the dependency chains stay short. The integer sums are exact; the
 * signed types' q + 128 storage is undone by subtracting 128 * sum(y) in
 * int32, then one convert and one FMA by the 16 rows' d_w times the
 * token's d_y scale them; Q4_1 / Q5_1 add m_w * s_y.
 * K-quants (Q8_K activations) are panels of their 32-element sub-blocks:
 * Q4_K / Q5_K as a Q4_1 / Q5_1 block whose d_w and m_w are the super-block
 * scales times the sub-block's 6-bit scale and min, s_y being
 * d_y * sum(q) from Q8_K's per-16 sums; Q6_K's two 16-element halves have
 * their own scales (d_w, and the m_w slot for the second half), so the
 * halves' sums stay apart, each with its -32 offset taken off in int32 as
 * 32 * the half's Q8_K sum; Q3_K likewise with its values + 4 and an
 * offset of 4; IQ4_XS as IQ4_NL with d_w the super-block d times the
 * sub-block's scale and 128 * the Q8_K sum taken off; Q2_K's bytes carry
 * their 4-bit scale already (scale * q <= 45), so one sum per sub-block is
 * scaled by the super-block's d, and its mins term is one vpdpwssd of the
 * rows' two int16 mins against the two per-16 sums, scaled by -dmin. */
#include <immintrin.h>
#include <string.h>

#include "backend/cpu/gemm.h"
#include "base/transpose_avx2.h"
#include "quant/quant_internal.h"

/* Packing. Each row's block becomes 32 unsigned bytes in element order
 * (signed types + 128, which for int8 is a flip of the top bit); 8 rows'
 * blocks are then transposed as an 8 x 8 matrix of 4-byte groups, so that
 * group g of rows 0..7 and of rows 8..15 form panel vector g. Packing is
 * per matmul call, into per-thread scratch: a panel serves every token of
 * the batch, and the model keeps a single copy of its weights. */

/* 32 bits -> 32 bytes, byte j = 0x10 where bit j is set (Q5 high bits) */
static inline __m256i p_hbits(const uint8_t *qh) {
    uint32_t bits;
    memcpy(&bits, qh, 4);
    return _mm256_maskz_mov_epi8(bits, _mm256_set1_epi8(0x10));
}

static inline __m256i p_nibbles(const uint8_t *qs) {
    const __m128i b = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0x0F));
}

/* row block as 32 panel bytes, and its d (and m, and Q2_K's mins e) */
static inline __m256i p_block(tl_type t, const uint8_t *row, int64_t i, float *d, float *m, uint32_t *e) {
    const __m256i top = _mm256_set1_epi8((char)0x80);
    switch (t) {
    case TL_TYPE_Q4_0: {
        const blk_q4_0 *b = (const blk_q4_0 *)row + i;
        *d = _cvtsh_ss(b->d);
        return _mm256_add_epi8(p_nibbles(b->qs), _mm256_set1_epi8(120));
    }
    case TL_TYPE_IQ4_NL: {
        const blk_iq4_nl *b = (const blk_iq4_nl *)row + i;
        const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)quant_iq4nl_values));
        *d = _cvtsh_ss(b->d);
        return _mm256_xor_si256(_mm256_shuffle_epi8(lut, p_nibbles(b->qs)), top);
    }
    case TL_TYPE_Q4_1: {
        const blk_q4_1 *b = (const blk_q4_1 *)row + i;
        *d = _cvtsh_ss(b->d);
        *m = _cvtsh_ss(b->m);
        return p_nibbles(b->qs);
    }
    case TL_TYPE_Q5_0: {
        const blk_q5_0 *b = (const blk_q5_0 *)row + i;
        *d = _cvtsh_ss(b->d);
        return _mm256_add_epi8(_mm256_or_si256(p_nibbles(b->qs), p_hbits(b->qh)), _mm256_set1_epi8(112));
    }
    case TL_TYPE_Q5_1: {
        const blk_q5_1 *b = (const blk_q5_1 *)row + i;
        *d = _cvtsh_ss(b->d);
        *m = _cvtsh_ss(b->m);
        return _mm256_or_si256(p_nibbles(b->qs), p_hbits(b->qh));
    }
    case TL_TYPE_Q4_K:
    case TL_TYPE_Q5_K: {
        const int64_t j = i % 8;
        const uint8_t *sc12, *qs;
        uint16_t d16, dm16;
        if (t == TL_TYPE_Q4_K) {
            const blk_q4_k *b = (const blk_q4_k *)row + i / 8;
            sc12 = b->scales, qs = b->qs, d16 = b->d, dm16 = b->dmin;
        } else {
            const blk_q5_k *b = (const blk_q5_k *)row + i / 8;
            sc12 = b->scales, qs = b->qs, d16 = b->d, dm16 = b->dmin;
        }
        uint8_t sc, mn;
        quant_k4_scale_min(sc12, (int)j, &sc, &mn);
        *d = _cvtsh_ss(d16) * (float)sc;
        *m = -_cvtsh_ss(dm16) * (float)mn;
        __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * (j / 2)));
        if (j & 1) q = _mm256_srli_epi16(q, 4);
        q = _mm256_and_si256(q, _mm256_set1_epi8(0x0F));
        if (t == TL_TYPE_Q5_K) {
            const blk_q5_k *b = (const blk_q5_k *)row + i / 8;
            const __m256i qh = _mm256_loadu_si256((const __m256i *)b->qh);
            const __mmask32 hb = _mm256_test_epi8_mask(qh, _mm256_set1_epi8((char)(1 << j)));
            q = _mm256_or_si256(q, _mm256_maskz_mov_epi8(hb, _mm256_set1_epi8(0x10)));
        }
        return q;
    }
    case TL_TYPE_Q6_K: {
        /* sub-block j: half h = j / 4 of the super-block, quarter l = j % 4
         * of it: low nibbles (l < 2) or high ones of ql[64h + 32 (l & 1)..],
         * bits 2l, 2l+1 of qh[32h..] */
        const blk_q6_k *b = (const blk_q6_k *)row + i / 8;
        const int j = (int)(i % 8), h = j / 4, l = j % 4;
        __m256i lo = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32 * (l & 1)));
        if (l >= 2) lo = _mm256_srli_epi16(lo, 4);
        __m256i hi = _mm256_srlv_epi16(_mm256_loadu_si256((const __m256i *)(b->qh + 32 * h)), _mm256_set1_epi16((short)(2 * l)));
        const float dd = _cvtsh_ss(b->d);
        *d = dd * (float)b->scales[2 * j];
        *m = dd * (float)b->scales[2 * j + 1];
        return _mm256_or_si256(_mm256_and_si256(lo, _mm256_set1_epi8(0x0F)),
                               _mm256_slli_epi16(_mm256_and_si256(hi, _mm256_set1_epi8(0x03)), 4));
    }
    case TL_TYPE_Q2_K: {
        /* sub-block j: bit pair j % 4 of qs[32 (j / 4)..], groups 2j, 2j + 1;
         * bytes scale * q (<= 45), d and dmin the super-block's, e the two
         * groups' mins as int16 pair (for vpdpwssd with their Q8_K sums) */
        const blk_q2_k *b = (const blk_q2_k *)row + i / 8;
        const int j = (int)(i % 8);
        const uint8_t s0 = b->scales[2 * j], s1 = b->scales[2 * j + 1];
        *d = _cvtsh_ss(b->d);
        *m = -_cvtsh_ss(b->dmin);
        *e = (uint32_t)(s0 >> 4) | (uint32_t)(s1 >> 4) << 16;
        const __m256i q = _mm256_and_si256(_mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)(b->qs + 32 * (j / 4))),
                                                             2 * (j % 4)),
                                           _mm256_set1_epi8(0x03));
        const __m512i sc = _mm512_inserti64x4(_mm512_set1_epi16(s0 & 0xF), _mm256_set1_epi16(s1 & 0xF), 1);
        return _mm512_cvtepi16_epi8(_mm512_mullo_epi16(_mm512_cvtepu8_epi16(q), sc));
    }
    case TL_TYPE_Q3_K: {
        /* sub-block j: bit pair j % 4 of qs[32 (j / 4)..] and bit j of
         * hmask as u = value + 4 (0..7); d, m: d times the scales of
         * groups 2j, 2j + 1 */
        const blk_q3_k *b = (const blk_q3_k *)row + i / 8;
        const int j = (int)(i % 8);
        int8_t sc[16];
        _mm_storeu_si128((__m128i *)sc, quant_q3_k_scales16(b->scales));
        const float dd = _cvtsh_ss(b->d);
        *d = dd * (float)sc[2 * j];
        *m = dd * (float)sc[2 * j + 1];
        const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)(b->qs + 32 * (j / 4))),
                                                              2 * (j % 4)),
                                            _mm256_set1_epi8(0x03));
        const __mmask32 hb = _mm256_test_epi8_mask(_mm256_loadu_si256((const __m256i *)b->hmask), _mm256_set1_epi8((char)(1 << j)));
        return _mm256_or_si256(lo, _mm256_maskz_mov_epi8(hb, _mm256_set1_epi8(4)));
    }
    case TL_TYPE_IQ4_XS: {
        /* sub-block j: codebook values of qs[16j..16j + 16) + 128, d times
         * its 6-bit scale */
        const blk_iq4_xs *b = (const blk_iq4_xs *)row + i / 8;
        const int j = (int)(i % 8);
        const int sc = (int)((b->scales_l[j / 2] >> (4 * (j % 2))) & 0xF) | (int)((b->scales_h >> (2 * j)) & 3) << 4;
        const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)quant_iq4nl_values));
        *d = _cvtsh_ss(b->d) * (float)(sc - 32);
        return _mm256_xor_si256(_mm256_shuffle_epi8(lut, p_nibbles(b->qs + 16 * j)), top);
    }
    default: { /* Q8_0 */
        const blk_q8_0 *b = (const blk_q8_0 *)row + i;
        *d = _cvtsh_ss(b->d);
        return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)b->qs), top);
    }
    }
}

void gemm_panel_pack_avx512(tl_type t, const uint8_t *w, size_t row_bytes, int nrows, int64_t k, uint8_t *panel) {
    const int64_t nb = k / QK;
    float *pd = (float *)(panel + (size_t)nb * 8 * GEMM_PANEL * 4), *pm = pd + nb * GEMM_PANEL;
    uint32_t *pe = (uint32_t *)(pm + nb * GEMM_PANEL);
    for (int64_t i = 0; i < nb; i++) {
        __m256i h[2][8];
        for (int r = 0; r < GEMM_PANEL; r++) {
            float d = 0.0f, m = 0.0f;
            uint32_t e = 0;
            h[r / 8][r % 8] = r < nrows ? p_block(t, w + (size_t)r * row_bytes, i, &d, &m, &e) : _mm256_setzero_si256();
            pd[i * GEMM_PANEL + r] = d;
            pm[i * GEMM_PANEL + r] = m;
            pe[i * GEMM_PANEL + r] = e;
        }
        cpu_transpose8x32(h[0]);
        cpu_transpose8x32(h[1]);
        __m512i *pq = (__m512i *)(panel + (size_t)i * 8 * GEMM_PANEL * 4);
        for (int g = 0; g < 8; g++) _mm512_store_si512(pq + g, _mm512_inserti64x4(_mm512_castsi256_si512(h[0][g]), h[1][g], 1));
    }
}

/* ---- the kernel ---- */

static inline __m512i bcast4(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* how a type's block sums become outputs: P_SGN, P_MIN the 32-block types
 * (signed, with min), then the Q8_K types: P_KMIN (Q4_K, Q5_K), P_K6 (Q6_K,
 * Q3_K: halves apart, an offset off each), P_KSGN (IQ4_XS: signed), P_K2
 * (Q2_K: scale in the bytes, mins by vpdpwssd) */
enum { P_SGN, P_MIN, P_KMIN, P_K6, P_KSGN, P_K2 };

/* byte offset of block i's quants in an activation row */
static inline size_t p_yoff(int mode, int64_t i, size_t yb, size_t yo) {
    if (mode >= P_KMIN) return (size_t)(i / 8) * sizeof(blk_q8_k) + offsetof(blk_q8_k, qs) + (size_t)(i % 8) * QK;
    return (size_t)i * yb + yo;
}

/* NT tokens (1..4) from token j0: 16 outputs each; koff: P_K6's offset */
static inline __attribute__((always_inline)) void panel_tokens(int nt, int64_t nb, int mode, int koff,
                                                               const uint8_t *panel, const uint8_t *y, size_t ys,
                                                               size_t yb, size_t yo, const float *ds, int64_t dsj,
                                                               int nrows, float *out, int64_t ldo) {
    const float *pd = (const float *)(panel + (size_t)nb * 8 * GEMM_PANEL * 4), *pm = pd + nb * GEMM_PANEL;
    const uint32_t *pe = (const uint32_t *)(pm + nb * GEMM_PANEL);
    __m512 f[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t i = 0; i < nb; i++) {
        const __m512i *pq = (const __m512i *)(panel + (size_t)i * 8 * GEMM_PANEL * 4);
        /* every loop below unrolled, so that w and f stay in registers
         * (at -O2 GCC keeps them as stack arrays otherwise) */
        __m512i w[8];
#pragma GCC unroll 8
        for (int g = 0; g < 8; g++) w[g] = _mm512_load_si512(pq + g);
        const __m512 dw = _mm512_loadu_ps(pd + i * GEMM_PANEL);
        const size_t off = p_yoff(mode, i, yb, yo);
#pragma GCC unroll 4
        for (int t = 0; t < nt; t++) {
            const uint8_t *q = y + (size_t)t * ys + off;
            /* a0: elements 0..15, a1: 16..31 */
            __m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int g = 0; g < 4; g++) {
                a0 = _mm512_dpbusd_epi32(a0, w[g], bcast4(q + 4 * g));
                a1 = _mm512_dpbusd_epi32(a1, w[g + 4], bcast4(q + 4 * g + 16));
            }
            const float *dj = ds + t * dsj + 2 * i;
            const __m512 dy = _mm512_set1_ps(dj[0]);
            /* this sub-block's two per-16 sums in its Q8_K block */
            const int16_t *bs = mode >= P_K6 ? (const int16_t *)(q - (size_t)(i % 8) * QK + QK_K) + 2 * (i % 8) : NULL;
            if (mode == P_K2) {
                int32_t bs2;
                memcpy(&bs2, bs, 4);
                const __m512i mn = _mm512_dpwssd_epi32(_mm512_setzero_si512(), _mm512_loadu_si512((const void *)(pe + i * GEMM_PANEL)),
                                                       _mm512_set1_epi32(bs2));
                f[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(a0, a1)), _mm512_mul_ps(dw, dy), f[t]);
                f[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(mn), _mm512_mul_ps(_mm512_loadu_ps(pm + i * GEMM_PANEL), dy), f[t]);
                continue;
            }
            if (mode == P_KSGN) {
                const __m512i s = _mm512_sub_epi32(_mm512_add_epi32(a0, a1), _mm512_set1_epi32(128 * (bs[0] + bs[1])));
                f[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, dy), f[t]);
                continue;
            }
            if (mode == P_K6) {
                a0 = _mm512_sub_epi32(a0, _mm512_set1_epi32(koff * bs[0]));
                a1 = _mm512_sub_epi32(a1, _mm512_set1_epi32(koff * bs[1]));
                f[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a0), _mm512_mul_ps(dw, dy), f[t]);
                f[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a1), _mm512_mul_ps(_mm512_loadu_ps(pm + i * GEMM_PANEL), dy),
                                       f[t]);
                continue;
            }
            __m512i s = _mm512_add_epi32(a0, a1);
            if (mode == P_SGN) s = _mm512_sub_epi32(s, _mm512_set1_epi32((int32_t)dj[1]));
            f[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, dy), f[t]);
            if (mode != P_SGN) f[t] = _mm512_fmadd_ps(_mm512_loadu_ps(pm + i * GEMM_PANEL), _mm512_set1_ps(dj[1]), f[t]);
        }
    }
    const __mmask16 keep = (__mmask16)((1u << nrows) - 1);
#pragma GCC unroll 4
    for (int t = 0; t < nt; t++) _mm512_mask_storeu_ps(out + t * ldo, keep, f[t]);
}

static inline __attribute__((always_inline)) void panel_run(int mode, int koff, int64_t nb, const uint8_t *panel,
                                                            const uint8_t *y, size_t ys, size_t yb, size_t yo,
                                                            const float *ds, int64_t m, int nrows, float *out,
                                                            int64_t ldo) {
    int64_t j = 0;
    for (; j + 4 <= m; j += 4)
        panel_tokens(4, nb, mode, koff, panel, y + (size_t)j * ys, ys, yb, yo, ds + j * nb * 2, nb * 2, nrows, out + j * ldo,
                     ldo);
    switch (m - j) {
    case 1: panel_tokens(1, nb, mode, koff, panel, y + (size_t)j * ys, ys, yb, yo, ds + j * nb * 2, nb * 2, nrows, out + j * ldo, ldo); break;
    case 2: panel_tokens(2, nb, mode, koff, panel, y + (size_t)j * ys, ys, yb, yo, ds + j * nb * 2, nb * 2, nrows, out + j * ldo, ldo); break;
    case 3: panel_tokens(3, nb, mode, koff, panel, y + (size_t)j * ys, ys, yb, yo, ds + j * nb * 2, nb * 2, nrows, out + j * ldo, ldo); break;
    default: break;
    }
}

void gemm_panel_run_avx512(tl_type t, int64_t k, const uint8_t *panel, const uint8_t *y, size_t ys, const float *ds,
                           int64_t m, int nrows, float *out, int64_t ldo) {
    const int64_t nb = k / QK;
    switch (t) {
    case TL_TYPE_Q4_1: case TL_TYPE_Q5_1:
        panel_run(P_MIN, 0, nb, panel, y, ys, sizeof(blk_q8_1), offsetof(blk_q8_1, qs), ds, m, nrows, out, ldo);
        break;
    case TL_TYPE_Q4_K: case TL_TYPE_Q5_K:
        panel_run(P_KMIN, 0, nb, panel, y, ys, 0, 0, ds, m, nrows, out, ldo);
        break;
    case TL_TYPE_Q6_K:
        panel_run(P_K6, 32, nb, panel, y, ys, 0, 0, ds, m, nrows, out, ldo);
        break;
    case TL_TYPE_Q3_K:
        panel_run(P_K6, 4, nb, panel, y, ys, 0, 0, ds, m, nrows, out, ldo);
        break;
    case TL_TYPE_IQ4_XS:
        panel_run(P_KSGN, 0, nb, panel, y, ys, 0, 0, ds, m, nrows, out, ldo);
        break;
    case TL_TYPE_Q2_K:
        panel_run(P_K2, 0, nb, panel, y, ys, 0, 0, ds, m, nrows, out, ldo);
        break;
    default:
        panel_run(P_SGN, 0, nb, panel, y, ys, sizeof(blk_q8_0), offsetof(blk_q8_0, qs), ds, m, nrows, out, ldo);
        break;
    }
}
