/* quant/quant_internal: block layouts and kernel declarations shared by the
 * quant module's files (private to src/quant; other modules use quant.h).
 *
 * Layouts are the GGUF specification's, byte for byte: fp16 fields are raw
 * IEEE half bits (uint16_t), everything is little-endian, and the structs
 * have no padding (checked by the static asserts below). Blocks of 4-bit
 * types store element i in the low nibble of byte i and element i+16 (i+
 * half the block) in the high nibble. Owns: layouts. Calls: nothing. */
#ifndef TL_QUANT_INTERNAL_H
#define TL_QUANT_INTERNAL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "quant/quant.h"

/* Reference kernels must round exactly like the oracle (numpy does each
 * multiply and add separately); a fused multiply-add changes the last bit of
 * a scale or a rounding decision. GCC contracts a*b+c into an FMA whenever
 * the target has FMA (-march=native, the *_avx2.c files), so every quant
 * file turns contraction off; SIMD code asks for FMA by intrinsic only. */
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

/* the signed value of largest magnitude in x[0..n) (the first on ties; 0
 * for an all-zero block): the scale anchor of every symmetric quantizer */
static inline float quant_absmax_signed(const float *x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        const float a = fabsf(x[j]);
        if (a > amax) {
            amax = a;
            max = x[j];
        }
    }
    return max;
}

#define QK 32   /* legacy block size */
#define QK_K 256 /* K-quant super-block size */

typedef struct { uint16_t d; uint8_t qs[QK / 2]; } blk_q4_0;                      /* 18 */
typedef struct { uint16_t d, m; uint8_t qs[QK / 2]; } blk_q4_1;                   /* 20 */
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[QK / 2]; } blk_q5_0;       /* 22 */
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[QK / 2]; } blk_q5_1;    /* 24 */
typedef struct { uint16_t d; int8_t qs[QK]; } blk_q8_0;                           /* 34 */
typedef struct { uint16_t d, s; int8_t qs[QK]; } blk_q8_1; /* s = d * sum(qs)        36 */
typedef struct { uint16_t d; uint8_t qs[QK / 2]; } blk_iq4_nl;                    /* 18 */
typedef struct { uint8_t e; uint8_t qs[QK / 2]; } blk_mxfp4; /* e: E8M0 exponent     17 */

/* K-quants: 256 elements in sub-blocks of 16 or 32 with quantized scales. */
typedef struct {
    uint8_t scales[QK_K / 16]; /* low nibble scale, high nibble min, per 16 */
    uint8_t qs[QK_K / 4];      /* 2-bit quants */
    uint16_t d, dmin;
} blk_q2_k; /* 84 */
typedef struct {
    uint8_t hmask[QK_K / 8]; /* high bit (set = no -4 offset) */
    uint8_t qs[QK_K / 4];    /* low 2 bits */
    uint8_t scales[12];      /* 16 6-bit scales, biased by 32 */
    uint16_t d;
} blk_q3_k; /* 110 */
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[12]; /* 8 6-bit scales + 8 6-bit mins */
    uint8_t qs[QK_K / 2];
} blk_q4_k; /* 144 */
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
} blk_q5_k; /* 176 */
typedef struct {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t scales[QK_K / 16];
    uint16_t d;
} blk_q6_k; /* 210 */
typedef struct {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16]; /* sum of each 16 quants */
} blk_q8_k; /* 292 */
typedef struct {
    uint16_t d;
    uint16_t scales_h;       /* high 2 bits of the 8 6-bit scales */
    uint8_t scales_l[QK_K / 64]; /* low 4 bits */
    uint8_t qs[QK_K / 2];
} blk_iq4_xs; /* 136 */

_Static_assert(sizeof(blk_q4_0) == 18, "q4_0 layout");
_Static_assert(sizeof(blk_q4_1) == 20, "q4_1 layout");
_Static_assert(sizeof(blk_q5_0) == 22, "q5_0 layout");
_Static_assert(sizeof(blk_q5_1) == 24, "q5_1 layout");
_Static_assert(sizeof(blk_q8_0) == 34, "q8_0 layout");
_Static_assert(sizeof(blk_q8_1) == 36, "q8_1 layout");
_Static_assert(sizeof(blk_iq4_nl) == 18, "iq4_nl layout");
_Static_assert(sizeof(blk_mxfp4) == 17, "mxfp4 layout");
_Static_assert(sizeof(blk_q2_k) == 84, "q2_k layout");
_Static_assert(sizeof(blk_q3_k) == 110, "q3_k layout");
_Static_assert(sizeof(blk_q4_k) == 144, "q4_k layout");
_Static_assert(sizeof(blk_q5_k) == 176, "q5_k layout");
_Static_assert(sizeof(blk_q6_k) == 210, "q6_k layout");
_Static_assert(sizeof(blk_q8_k) == 292, "q8_k layout");
_Static_assert(sizeof(blk_iq4_xs) == 136, "iq4_xs layout");

/* The non-linear 4-bit codebook of IQ4_NL / IQ4_XS, and MXFP4's E2M1
 * values doubled (so they are integers; the block scale is halved). */
extern const int8_t quant_iq4nl_values[16];
extern const int8_t quant_mxfp4_values[16];

/* 6-bit scale j (0..7) and min of a Q4_K / Q5_K super-block. */
static inline void quant_k4_scale_min(const uint8_t *s, int j, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (uint8_t)((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
        *m = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

/* All 8 scales and 8 mins of a Q4_K / Q5_K super-block at once, as the
 * bytes of two 64-bit words (scale j / min j in byte j), for the SIMD
 * kernels. */
static inline void quant_k4_unpack(const uint8_t *s12, uint64_t *sc, uint64_t *m) {
    uint32_t u[3];
    memcpy(u, s12, 12);
    const uint32_t lo6 = 0x3f3f3f3fu, lo4 = 0x0f0f0f0fu, lo2 = 0x03030303u;
    *sc = (uint64_t)(u[0] & lo6) | (uint64_t)((u[2] & lo4) | ((u[0] >> 6) & lo2) << 4) << 32;
    *m = (uint64_t)(u[1] & lo6) | (uint64_t)(((u[2] >> 4) & lo4) | ((u[1] >> 6) & lo2) << 4) << 32;
}

/* E8M0 exponent to 2^(e-127) / 2 as float (the halving pairs with the
 * doubled MXFP4 values); exact for every e. */
float quant_e8m0_half(uint8_t e);

/* IQ4_NL helpers shared with IQ4_XS: nearest codebook index to v, and a
 * scale search for one group of n values (returns d, fills idx). */
int quant_iq4nl_nearest(float v);
float quant_iq4nl_block(const float *x, int n, uint8_t *idx);

/* Round half away from zero, as C's roundf (the GGUF reference rounding). */
int quant_round_away(float x);
/* Round half to even for |x| < 2^22 (what the reference engine's
 * nearest_int does under the default rounding mode). */
int quant_round_even(float x);

/* ---- scalar reference kernels ---- */
#define QUANT_DECL_TF(name) void name(const void *src, float *dst, int64_t n)
#define QUANT_DECL_FF(name) void name(const float *src, void *dst, int64_t n)
#define QUANT_DECL_VD(name) void name(int64_t n, float *s, const void *x, const void *y)

QUANT_DECL_TF(quant_f32_to_float);    QUANT_DECL_FF(quant_f32_from_float);
QUANT_DECL_TF(quant_f16_to_float);    QUANT_DECL_FF(quant_f16_from_float);
QUANT_DECL_TF(quant_bf16_to_float);   QUANT_DECL_FF(quant_bf16_from_float);
QUANT_DECL_VD(quant_dot_f32_f32);
QUANT_DECL_VD(quant_dot_f16_f16);
QUANT_DECL_VD(quant_dot_bf16_bf16);

QUANT_DECL_TF(quant_q4_0_to_float);   QUANT_DECL_FF(quant_q4_0_from_float);
QUANT_DECL_TF(quant_q4_1_to_float);   QUANT_DECL_FF(quant_q4_1_from_float);
QUANT_DECL_TF(quant_q5_0_to_float);   QUANT_DECL_FF(quant_q5_0_from_float);
QUANT_DECL_TF(quant_q5_1_to_float);   QUANT_DECL_FF(quant_q5_1_from_float);
QUANT_DECL_TF(quant_q8_0_to_float);   QUANT_DECL_FF(quant_q8_0_from_float);
QUANT_DECL_TF(quant_q8_1_to_float);   QUANT_DECL_FF(quant_q8_1_from_float);
QUANT_DECL_TF(quant_iq4_nl_to_float); QUANT_DECL_FF(quant_iq4_nl_from_float);
QUANT_DECL_TF(quant_mxfp4_to_float);  QUANT_DECL_FF(quant_mxfp4_from_float);
QUANT_DECL_VD(quant_dot_q4_0_q8_0);
QUANT_DECL_VD(quant_dot_q4_1_q8_1);
QUANT_DECL_VD(quant_dot_q5_0_q8_0);
QUANT_DECL_VD(quant_dot_q5_1_q8_1);
QUANT_DECL_VD(quant_dot_q8_0_q8_0);
QUANT_DECL_VD(quant_dot_iq4_nl_q8_0);
QUANT_DECL_VD(quant_dot_mxfp4_q8_0);

QUANT_DECL_TF(quant_q2_k_to_float);   QUANT_DECL_FF(quant_q2_k_from_float);
QUANT_DECL_TF(quant_q3_k_to_float);   QUANT_DECL_FF(quant_q3_k_from_float);
QUANT_DECL_TF(quant_q4_k_to_float);   QUANT_DECL_FF(quant_q4_k_from_float);
QUANT_DECL_TF(quant_q5_k_to_float);   QUANT_DECL_FF(quant_q5_k_from_float);
QUANT_DECL_TF(quant_q6_k_to_float);   QUANT_DECL_FF(quant_q6_k_from_float);
QUANT_DECL_TF(quant_q8_k_to_float);   QUANT_DECL_FF(quant_q8_k_from_float);
QUANT_DECL_TF(quant_iq4_xs_to_float); QUANT_DECL_FF(quant_iq4_xs_from_float);
QUANT_DECL_VD(quant_dot_q2_k_q8_k);
QUANT_DECL_VD(quant_dot_q3_k_q8_k);
QUANT_DECL_VD(quant_dot_q4_k_q8_k);
QUANT_DECL_VD(quant_dot_q5_k_q8_k);
QUANT_DECL_VD(quant_dot_q6_k_q8_k);
QUANT_DECL_VD(quant_dot_iq4_xs_q8_k);

/* ---- AVX2/FMA/F16C kernels (call only if tl_cpu_use_avx2()) ---- */
QUANT_DECL_FF(quant_f16_from_float_avx2);
QUANT_DECL_TF(quant_f16_to_float_avx2);
QUANT_DECL_FF(quant_bf16_from_float_avx2);
QUANT_DECL_FF(quant_q8_0_from_float_avx2);
QUANT_DECL_FF(quant_q8_1_from_float_avx2);
QUANT_DECL_FF(quant_q8_k_from_float_avx2);
QUANT_DECL_VD(quant_dot_f32_f32_avx2);
QUANT_DECL_VD(quant_dot_f16_f16_avx2);
QUANT_DECL_VD(quant_dot_bf16_bf16_avx2);
QUANT_DECL_VD(quant_dot_q4_0_q8_0_avx2);
QUANT_DECL_VD(quant_dot_q4_1_q8_1_avx2);
QUANT_DECL_VD(quant_dot_q5_0_q8_0_avx2);
QUANT_DECL_VD(quant_dot_q5_1_q8_1_avx2);
QUANT_DECL_VD(quant_dot_q8_0_q8_0_avx2);
QUANT_DECL_VD(quant_dot_iq4_nl_q8_0_avx2);
QUANT_DECL_VD(quant_dot_mxfp4_q8_0_avx2);
QUANT_DECL_VD(quant_dot_q2_k_q8_k_avx2);
QUANT_DECL_VD(quant_dot_q3_k_q8_k_avx2);
QUANT_DECL_VD(quant_dot_iq4_xs_q8_k_avx2);
QUANT_DECL_VD(quant_dot_q4_k_q8_k_avx2);
QUANT_DECL_VD(quant_dot_q5_k_q8_k_avx2);
QUANT_DECL_VD(quant_dot_q6_k_q8_k_avx2);

/* ---- AVX-512 F/BW/VL/VNNI kernels (call only if tl_cpu_use_avx512()) ---- */
QUANT_DECL_VD(quant_dot_q4_0_q8_0_avx512);
QUANT_DECL_VD(quant_dot_q4_1_q8_1_avx512);
QUANT_DECL_VD(quant_dot_q8_0_q8_0_avx512);
QUANT_DECL_VD(quant_dot_f16_f16_avx512);
QUANT_DECL_VD(quant_dot_q5_0_q8_0_avx512);
QUANT_DECL_VD(quant_dot_q5_1_q8_1_avx512);
QUANT_DECL_VD(quant_dot_iq4_nl_q8_0_avx512);
QUANT_DECL_VD(quant_dot_q4_k_q8_k_avx512);
QUANT_DECL_VD(quant_dot_q5_k_q8_k_avx512);
QUANT_DECL_VD(quant_dot_q6_k_q8_k_avx512);
QUANT_DECL_VD(quant_dot_q2_k_q8_k_avx512);
QUANT_DECL_VD(quant_dot_q3_k_q8_k_avx512);
QUANT_DECL_VD(quant_dot_iq4_xs_q8_k_avx512);
/* also needs tl_cpu_has_avx512_bf16() */
QUANT_DECL_VD(quant_dot_bf16_bf16_avx512);

#ifdef __AVX2__
#include <immintrin.h>
#include <string.h>
/* IQ4_XS block b's 8 six-bit scales minus 32 as int8 (scale j: nibble j % 2
 * of scales_l[j / 2], bits 2j..2j+1 of scales_h), shared by the dot kernel
 * and the prefill kernel (files compiled with -mavx2 only). */
static inline __m128i quant_iq4_xs_scales8(const blk_iq4_xs *b) {
    uint32_t l;
    memcpy(&l, b->scales_l, 4);
    const uint32_t h = b->scales_h;
    const __m128i even = _mm_cvtsi32_si128((int)(l & 0x0f0f0f0fu));
    const __m128i odd = _mm_cvtsi32_si128((int)((l >> 4) & 0x0f0f0f0fu));
    uint64_t hi = 0;
    for (int j = 0; j < 8; j++) hi |= (uint64_t)((h >> (2 * j)) & 3) << (8 * j + 4);
    return _mm_sub_epi8(_mm_or_si128(_mm_unpacklo_epi8(even, odd), _mm_cvtsi64_si128((long long)hi)),
                        _mm_set1_epi8(32));
}

/* The 16 signed 6-bit scales of a Q3_K super-block as int8 lanes (stored
 * biased by 32: low nibble of byte j % 8, the high one for j >= 8; top 2
 * bits at bit 2 (j / 4) of byte 8 + j % 4), for the SIMD kernels. */
static inline __m128i quant_q3_k_scales16(const uint8_t *s12) {
    uint32_t top;
    memcpy(&top, s12 + 8, 4);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m128i lo8 = _mm_loadl_epi64((const __m128i *)s12);
    const __m128i lo = _mm_unpacklo_epi64(_mm_and_si128(lo8, m4), _mm_and_si128(_mm_srli_epi16(lo8, 4), m4));
    /* scales 4k..4k+3 take bits 2k, 2k+1 of bytes 8..11 */
    const __m128i hi = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32((int)top), _mm_setr_epi32(0, 2, 4, 6)),
                                     _mm_set1_epi8(0x03));
    return _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi8(32));
}
#endif

#endif
