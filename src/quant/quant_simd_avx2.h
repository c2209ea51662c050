/* quant/quant_simd_avx2: inline helpers shared by the AVX2 and AVX-512
 * dot kernels of the 32-element block types (include only from files
 * compiled with at least -mavx2 -mfma -mf16c). Calls: nothing. */
#ifndef TL_QUANT_SIMD_AVX2_H
#define TL_QUANT_SIMD_AVX2_H

#include <immintrin.h>
#include <string.h>

#include "quant/quant_internal.h"

static inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 16 bytes of nibbles -> 32 bytes: element j (low nibble of byte j) in
 * bytes 0..15, element j+16 (high nibble) in bytes 16..31 */
static inline __m256i unpack_nibbles(const uint8_t *qs) {
    /* broadcast + shift + blend: single-uop steps on both Intel and AMD
     * (a variable shift is slow on Zen 2, an insert is slower on Intel) */
    __m256i b = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    return _mm256_and_si256(_mm256_blend_epi32(b, _mm256_srli_epi16(b, 4), 0xF0), _mm256_set1_epi8(0x0F));
}

/* The first 4 bytes of 4 consecutive blocks (two fp16 fields, or one field
 * and 2 bytes of quants we ignore) as 8 floats: lanes 2k, 2k+1 = block k.
 * Converting the scales of 4 blocks at once saves most of the per-block
 * scalar fp16 work. */
static inline __m256 scales4(const void *base, size_t stride) {
    const uint8_t *p = base;
    int32_t a, b, c, d;
    memcpy(&a, p, 4);
    memcpy(&b, p + stride, 4);
    memcpy(&c, p + 2 * stride, 4);
    memcpy(&d, p + 3 * stride, 4);
    return _mm256_cvtph_ps(_mm_setr_epi32(a, b, c, d));
}

/* 4 blocks' 8-lane int32 sums -> floats [s0 s1 s2 s3 | s0' s1' s2' s3']
 * where block k's sum is sk + sk' (integer adds: exact) */
static inline __m256 sum4(__m256i p0, __m256i p1, __m256i p2, __m256i p3) {
    return _mm256_cvtepi32_ps(_mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3)));
}

/* scales4 products [a0 b0 a1 b1 a2 b2 a3 b3] -> [a0 a1 a2 a3 a0 a1 a2 a3] */
static inline __m256 even4(__m256 v) { return _mm256_permutevar8x32_ps(v, _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6)); }


/* 32 bits -> 32 bytes, byte j = 0xFF if bit j is set */
static inline __m256i bits_to_bytes(uint32_t bits) {
    const __m256i spread = _mm256_setr_epi64x(0x0000000000000000LL, 0x0101010101010101LL,
                                              0x0202020202020202LL, 0x0303030303030303LL);
    const __m256i others = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfeLL); /* ~(1 << (j%8)) */
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), spread);
    return _mm256_cmpeq_epi8(_mm256_or_si256(v, others), _mm256_set1_epi64x(-1));
}

/* 8 int32 partial sums of unsigned-byte x signed-byte products */
static inline __m256i dot_u8s8(__m256i ux, __m256i sy) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(ux, sy), _mm256_set1_epi16(1));
}

/* same for signed x signed (|x| <= 127 or y != -128) */
static inline __m256i dot_s8s8(__m256i sx, __m256i sy) {
    return dot_u8s8(_mm256_sign_epi8(sx, sx), _mm256_sign_epi8(sy, sx));
}

static inline __m256i loadu256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

static inline uint32_t load_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline __m256 acc_block(__m256 acc, __m256i sumi, float d) {
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(d), acc);
}

/* The loops of the dot kernels take 4 blocks per iteration: the fp16
 * scales of the 4 weight and 4 activation blocks are converted in one
 * instruction each, the 4 integer sums are reduced together (sum4) and
 * scaled by one FMA; DOT4_MIN (defined by the includer) sees the scale
 * products. Leftover blocks (n/32 not a multiple of 4) go one at a time. */
#define DOT4_LOOP(BD, XS)                                                                        \
    for (; i + 3 < nb; i += 4) {                                                                 \
        const __m256 d = _mm256_mul_ps(XS, scales4(&y[i], sizeof *y));                           \
        acc = _mm256_fmadd_ps(sum4(BD(i), BD(i + 1), BD(i + 2), BD(i + 3)), even4(d), acc);      \
        DOT4_MIN(d);                                                                             \
    }

#endif
