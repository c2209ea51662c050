/* AVX2 bodies of the 1x4 prefill kernels for the K-quants and IQ4_XS (Q8_K
 * activations; see gemm.h). Per 256-element super-block each 32-element
 * chunk of the weight is unpacked once into 32 bytes plus its sub-block
 * scales as int16 lanes and used for 4 tokens: maddubs per token, the
 * tokens' int16 pair sums folded with horizontal adds where the weight
 * range allows, then madd by the scales (the vec_dot kernels' integers,
 * exactly, without their per-token unpacking). The per-16 activation sums
 * (Q8_K bsums) give the min or offset term. One convert and one FMA per
 * super-block serve all 4 tokens. */
#include <immintrin.h>
#include <string.h>

#include "backend/cpu/gemm.h"
#include "quant/quant_internal.h"

static inline __m256i kq_load(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* 8 int16 values (both halves) -> value j in every lane */
static inline __m256i kq_bcast16(__m256i v8, int j) {
    return _mm256_shuffle_epi8(v8, _mm256_set1_epi16((short)(0x0100 + 0x0202 * j)));
}

/* 8 int16 values (both halves) -> value 2k in the low half, 2k+1 in the
 * high half (the scales of two consecutive 16-element groups) */
static inline __m256i kq_bcast16_pair(__m256i v8, int k) {
    return _mm256_shuffle_epi8(v8, _mm256_set_m128i(_mm_set1_epi16((short)(0x0302 + 0x0404 * k)),
                                                    _mm_set1_epi16((short)(0x0100 + 0x0404 * k))));
}

/* The 4 tokens' state within one super-block. Each weight chunk of 32
 * elements is unpacked into a register and used at once for the 4 tokens
 * (chunk outer, token inner): storing the unpacked super-block and
 * reloading it would stall on store forwarding of 256-bit vectors. */
typedef struct {
    const blk_q8_k *y[4];
    __m256i acc[4]; /* per token (kq_chunk_s), or folded: acc[0] (kq_chunk_u),
                       acc[0] tokens 0-1 and acc[1] tokens 2-3 (kq_chunk_u6) */
} kq_tok4;

static inline void kq_begin(kq_tok4 *k, const uint8_t *y, size_t ys, int64_t i) {
#pragma GCC unroll 4
    for (int t = 0; t < 4; t++) {
        k->y[t] = (const blk_q8_k *)(y + (size_t)t * ys) + i;
        k->acc[t] = _mm256_setzero_si256();
    }
}

static inline __m256i kq_p(const kq_tok4 *k, int t, int j, __m256i q) {
    return _mm256_maddubs_epi16(q, kq_load(k->y[t]->qs + 32 * j));
}

/* Unsigned weight bytes u <= 31 (Q2_K..Q5_K): the 4 tokens' maddubs pair
 * sums are added pairwise twice in int16 (8 products per lane, |sum| <=
 * 8 * 31 * 127 = 31496: no wrap; horizontal adds stay within each 128-bit
 * half, so per-16 scales still match), then one madd by the scales gives
 * [t0 t1 t2 t3 | t0 t1 t2 t3]: 5 multiplies per chunk and 4 tokens instead
 * of 8, the multiplier being this CPU's bottleneck here. */
static inline void kq_chunk_u(kq_tok4 *k, int j, __m256i q, __m256i sc) {
    const __m256i h = _mm256_hadd_epi16(_mm256_hadd_epi16(kq_p(k, 0, j, q), kq_p(k, 1, j, q)),
                                        _mm256_hadd_epi16(kq_p(k, 2, j, q), kq_p(k, 3, j, q)));
    k->acc[0] = _mm256_add_epi32(k->acc[0], _mm256_madd_epi16(h, sc));
}

/* u <= 63 (Q6_K): one pairwise add only (4 products, <= 32004) */
static inline void kq_chunk_u6(kq_tok4 *k, int j, __m256i q, __m256i sc) {
    k->acc[0] = _mm256_add_epi32(k->acc[0], _mm256_madd_epi16(_mm256_hadd_epi16(kq_p(k, 0, j, q), kq_p(k, 1, j, q)), sc));
    k->acc[1] = _mm256_add_epi32(k->acc[1], _mm256_madd_epi16(_mm256_hadd_epi16(kq_p(k, 2, j, q), kq_p(k, 3, j, q)), sc));
}

/* signed weight bytes q (IQ4_XS): |q| times a carrying q's sign, per token */
static inline void kq_chunk_s(kq_tok4 *k, int j, __m256i q, __m256i sc) {
    const __m256i aq = _mm256_sign_epi8(q, q);
#pragma GCC unroll 4
    for (int t = 0; t < 4; t++) {
        const __m256i a = _mm256_sign_epi8(kq_load(k->y[t]->qs + 32 * j), q);
        k->acc[t] = _mm256_add_epi32(k->acc[t], _mm256_madd_epi16(_mm256_maddubs_epi16(aq, a), sc));
    }
}

/* 4 per-token int32 vectors -> [t0 t1 t2 t3 | t0 t1 t2 t3] (exact) */
static inline __m256i kq_fold4(const __m256i v[4]) {
    return _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
}

static inline void kq_store4(float *s, __m256 acc) {
    _mm_storeu_ps(s, _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1)));
}

/* How the offset term enters: KQ_MIN subtracts dmin * (mn . bsums) in
 * float (Q4_K, Q5_K, Q2_K); mode > 0 subtracts (mn . bsums) << mode from
 * the integer sum (Q6_K: 32 = 1 << 5, Q3_K: 4 = 1 << 2); KQ_NONE: none. */
enum { KQ_NONE = 0, KQ_MIN = -1 };

/* Close a super-block: si is the folded integer sum [t0 t1 t2 t3 | same];
 * scale by d_w * d_y and apply the offset term (mode is a constant). */
static inline __m256 kq_end(__m256 acc, const kq_tok4 *k, __m256i si, __m256i mn, float d, float dmin, int mode) {
    __m256i co = _mm256_setzero_si256();
    if (mode != KQ_NONE) {
        __m256i c[4];
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++) c[t] = _mm256_madd_epi16(mn, kq_load(k->y[t]->bsums));
        co = kq_fold4(c);
    }
    if (mode > 0) si = _mm256_sub_epi32(si, _mm256_slli_epi32(co, mode));
    const __m128 dy = _mm_setr_ps(k->y[0]->d, k->y[1]->d, k->y[2]->d, k->y[3]->d);
    const __m256 dy8 = _mm256_set_m128(dy, dy);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(si), _mm256_mul_ps(dy8, _mm256_set1_ps(d)), acc);
    if (mode == KQ_MIN) acc = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(co), _mm256_mul_ps(dy8, _mm256_set1_ps(dmin)), acc);
    return acc;
}

/* Q4_K / Q5_K scales and mins: *sc16 = scale j as int16 lane j (both
 * halves); returns the mins as 16 int16 lanes, min j in lanes 2j, 2j+1
 * (it weighs the bsums of 16-element groups 2j and 2j+1) */
static inline __m256i kq_k4_scales(const uint8_t *s12, __m256i *sc16) {
    uint32_t w[3];
    memcpy(w, s12, 12);
    const uint32_t lo6 = 0x3f3f3f3fu, lo4 = 0x0f0f0f0fu, lo2 = 0x03030303u;
    const uint64_t sc = (uint64_t)(w[0] & lo6) | (uint64_t)((w[2] & lo4) | ((w[0] >> 6) & lo2) << 4) << 32;
    const uint64_t m = (uint64_t)(w[1] & lo6) | (uint64_t)(((w[2] >> 4) & lo4) | ((w[1] >> 6) & lo2) << 4) << 32;
    *sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc)));
    const __m128i m8 = _mm_cvtsi64_si128((long long)m);
    return _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
}

void gemm_q4_k_1x4_avx2(int64_t n, float *s, const void *vw, const uint8_t *y, size_t ys, const float *ds) {
    (void)ds;
    const blk_q4_k *w = vw;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        kq_tok4 k;
        kq_begin(&k, y, ys, i);
        __m256i sc;
        const __m256i mn = kq_k4_scales(w[i].scales, &sc);
#pragma GCC unroll 4
        for (int p = 0; p < 4; p++) {
            const __m256i q = kq_load(w[i].qs + 32 * p);
            kq_chunk_u(&k, 2 * p, _mm256_and_si256(q, m4), kq_bcast16(sc, 2 * p));
            kq_chunk_u(&k, 2 * p + 1, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4), kq_bcast16(sc, 2 * p + 1));
        }
        acc = kq_end(acc, &k, k.acc[0], mn, _cvtsh_ss(w[i].d), _cvtsh_ss(w[i].dmin), KQ_MIN);
    }
    kq_store4(s, acc);
}

/* 0x10 in byte k where bit j of qh[k] is set */
static inline __m256i kq_q5_high(__m256i qh, int j) {
    const __m256i bit = _mm256_and_si256(qh, _mm256_set1_epi8((char)(1 << j)));
    if (j < 4) return _mm256_slli_epi16(bit, 4 - j);
    if (j > 4) return _mm256_srli_epi16(bit, j - 4);
    return bit;
}

void gemm_q5_k_1x4_avx2(int64_t n, float *s, const void *vw, const uint8_t *y, size_t ys, const float *ds) {
    (void)ds;
    const blk_q5_k *w = vw;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        kq_tok4 k;
        kq_begin(&k, y, ys, i);
        __m256i sc;
        const __m256i mn = kq_k4_scales(w[i].scales, &sc);
        const __m256i qh = kq_load(w[i].qh);
#pragma GCC unroll 4
        for (int p = 0; p < 4; p++) {
            const __m256i q = kq_load(w[i].qs + 32 * p);
            kq_chunk_u(&k, 2 * p, _mm256_or_si256(_mm256_and_si256(q, m4), kq_q5_high(qh, 2 * p)), kq_bcast16(sc, 2 * p));
            kq_chunk_u(&k, 2 * p + 1,
                     _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), kq_q5_high(qh, 2 * p + 1)),
                     kq_bcast16(sc, 2 * p + 1));
        }
        acc = kq_end(acc, &k, k.acc[0], mn, _cvtsh_ss(w[i].d), _cvtsh_ss(w[i].dmin), KQ_MIN);
    }
    kq_store4(s, acc);
}

/* the 8 int16 per-16 scales of half h of a super-block, in both halves */
static inline __m256i kq_half(__m256i sc16, int h) {
    return _mm256_broadcastsi128_si256(h ? _mm256_extracti128_si256(sc16, 1) : _mm256_castsi256_si128(sc16));
}

/* Q6_K: 0..63 unsigned into maddubs; the -32 returns as 32 * sc . bsums */
void gemm_q6_k_1x4_avx2(int64_t n, float *s, const void *vw, const uint8_t *y, size_t ys, const float *ds) {
    (void)ds;
    const blk_q6_k *w = vw;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        kq_tok4 k;
        kq_begin(&k, y, ys, i);
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w[i].scales));
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256i sc = kq_half(sc16, h);
            const __m256i l0 = kq_load(w[i].ql + 64 * h), l1 = kq_load(w[i].ql + 64 * h + 32);
            const __m256i qh = kq_load(w[i].qh + 32 * h);
            kq_chunk_u6(&k, 4 * h, _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4)),
                     kq_bcast16_pair(sc, 0));
            kq_chunk_u6(&k, 4 * h + 1,
                     _mm256_or_si256(_mm256_and_si256(l1, m4),
                                     _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4)),
                     kq_bcast16_pair(sc, 1));
            kq_chunk_u6(&k, 4 * h + 2,
                     _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                     _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4)),
                     kq_bcast16_pair(sc, 2));
            kq_chunk_u6(&k, 4 * h + 3,
                     _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                     _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4)),
                     kq_bcast16_pair(sc, 3));
        }
        acc = kq_end(acc, &k, _mm256_hadd_epi32(k.acc[0], k.acc[1]), sc16, _cvtsh_ss(w[i].d), 0.0f, 5);
    }
    kq_store4(s, acc);
}

/* Q3_K: u = low2 | hbit << 2 (0..7) unsigned; the value is u - 4 */
void gemm_q3_k_1x4_avx2(int64_t n, float *s, const void *vw, const uint8_t *y, size_t ys, const float *ds) {
    (void)ds;
    const blk_q3_k *w = vw;
    const __m256i m2 = _mm256_set1_epi8(0x03);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        kq_tok4 k;
        kq_begin(&k, y, ys, i);
        /* 16 6-bit scales biased by 32: low nibbles in bytes 0..7, top bits in 8..11 */
        uint32_t v[3];
        memcpy(v, w[i].scales, 12);
        const uint32_t lo4 = 0x0f0f0f0fu, lo2 = 0x03030303u;
        const uint32_t w0 = (v[0] & lo4) | (v[2] & lo2) << 4, w1 = (v[1] & lo4) | ((v[2] >> 2) & lo2) << 4;
        const uint32_t w2 = ((v[0] >> 4) & lo4) | ((v[2] >> 4) & lo2) << 4;
        const uint32_t w3 = ((v[1] >> 4) & lo4) | ((v[2] >> 6) & lo2) << 4;
        const __m256i sc16 =
            _mm256_cvtepi8_epi16(_mm_sub_epi8(_mm_setr_epi32((int)w0, (int)w1, (int)w2, (int)w3), _mm_set1_epi8(32)));
        const __m256i hm = kq_load(w[i].hmask);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            /* bit j of the hmask byte, moved to bit 2 */
            __m256i hb = _mm256_and_si256(hm, _mm256_set1_epi8((char)(1 << j)));
            hb = j < 2 ? _mm256_slli_epi16(hb, 2 - j) : j > 2 ? _mm256_srli_epi16(hb, j - 2) : hb;
            const __m256i q =
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(kq_load(w[i].qs + 32 * (j / 4)), 2 * (j % 4)), m2), hb);
            kq_chunk_u(&k, j, q, kq_bcast16_pair(kq_half(sc16, j / 4), j % 4));
        }
        acc = kq_end(acc, &k, k.acc[0], sc16, _cvtsh_ss(w[i].d), 0.0f, 2);
    }
    kq_store4(s, acc);
}

/* Q2_K: 2-bit unsigned; scale = low nibble, min = high nibble per 16 */
void gemm_q2_k_1x4_avx2(int64_t n, float *s, const void *vw, const uint8_t *y, size_t ys, const float *ds) {
    (void)ds;
    const blk_q2_k *w = vw;
    const __m256i m2 = _mm256_set1_epi8(0x03);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        kq_tok4 k;
        kq_begin(&k, y, ys, i);
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)w[i].scales);
        const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sc8, _mm_set1_epi8(0x0F)));
        const __m256i mn = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), _mm_set1_epi8(0x0F)));
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            kq_chunk_u(&k, j, _mm256_and_si256(_mm256_srli_epi16(kq_load(w[i].qs + 32 * (j / 4)), 2 * (j % 4)), m2),
                     kq_bcast16_pair(kq_half(sc16, j / 4), j % 4));
        acc = kq_end(acc, &k, k.acc[0], mn, _cvtsh_ss(w[i].d), _cvtsh_ss(w[i].dmin), KQ_MIN);
    }
    kq_store4(s, acc);
}

/* IQ4_XS: codebook values by byte shuffle (signed), 6-bit scales - 32 */
void gemm_iq4_xs_1x4_avx2(int64_t n, float *s, const void *vw, const uint8_t *y, size_t ys, const float *ds) {
    (void)ds;
    const blk_iq4_xs *w = vw;
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)quant_iq4nl_values));
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        kq_tok4 k;
        kq_begin(&k, y, ys, i);
        const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(quant_iq4_xs_scales8(&w[i])));
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            const __m256i b = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(w[i].qs + 16 * j)));
            const __m256i q =
                _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_blend_epi32(b, _mm256_srli_epi16(b, 4), 0xF0), m4));
            kq_chunk_s(&k, j, q, kq_bcast16(sc16, j));
        }
        acc = kq_end(acc, &k, kq_fold4(k.acc), _mm256_setzero_si256(), _cvtsh_ss(w[i].d), 0.0f, KQ_NONE);
    }
    kq_store4(s, acc);
}
