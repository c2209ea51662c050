/* backend/cpu/gemm_rows_avx512: loads shared by the AVX-512 one-token
 * kernels over 4 weight rows (gemm_rows_avx512.c, gemm_rows_kquant_avx512.c):
 * a 512-bit vector holds one row per 128-bit lane. Include only from files
 * compiled with AVX-512. Owns nothing. */
#ifndef TL_BACKEND_CPU_GEMM_ROWS_AVX512_H
#define TL_BACKEND_CPU_GEMM_ROWS_AVX512_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* 16 bytes at off of each of the 4 rows w, w + rb, ..., one per 128-bit lane */
static inline __m512i gr_rows16(const uint8_t *w, size_t rb, size_t off) {
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(w + off)));
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(w + rb + off)), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(w + 2 * rb + off)), 2);
    return _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(w + 3 * rb + off)), 3);
}

/* 16 bytes at p in every lane */
static inline __m512i gr_bcast16(const void *p) { return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)p)); }

static inline int gr_u16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return h;
}

/* the fp16 field at off of the 4 rows' block, as floats repeated over each
 * row's 4 lanes (read next to the block's values, in the same lines) */
static inline __m512 gr_f16x4(const uint8_t *b, size_t rb, size_t off) {
    __m128i h = _mm_cvtsi32_si128(gr_u16(b + off));
    h = _mm_insert_epi16(h, gr_u16(b + rb + off), 1);
    h = _mm_insert_epi16(h, gr_u16(b + 2 * rb + off), 2);
    h = _mm_insert_epi16(h, gr_u16(b + 3 * rb + off), 3);
    const __m512i rep = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    return _mm512_permutexvar_ps(rep, _mm512_castps128_ps512(_mm_cvtph_ps(h)));
}

/* s[r] = the sum of row r's 4 lanes of acc */
static inline void gr_store4(float *s, __m512 acc) {
    __m512 t = _mm512_add_ps(acc, _mm512_permute_ps(acc, _MM_SHUFFLE(2, 3, 0, 1)));
    t = _mm512_add_ps(t, _mm512_permute_ps(t, _MM_SHUFFLE(1, 0, 3, 2)));
    const __m512 r4 = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), t);
    _mm_storeu_ps(s, _mm512_castps512_ps128(r4));
}

#endif
