/* AVX-512 VNNI bodies of the one-token kernels of Q5_0 and Q5_1 (see
 * gemm.h): per block the fifth bits become 0x10 bytes by one masked move
 * and the integer sum is one vpdpbusd; 4 blocks' sums are reduced together,
 * converted and scaled by one FMA with their d_w * d_y, and Q5_0's -16
 * offset (Q5_1's min) is d_w (m_w) times the table's s_y. */
#include <immintrin.h>

#include "backend/cpu/gemm.h"
#include "quant/quant_simd_avx2.h"

static inline __m256i g5_u(const uint8_t *qs, const uint8_t *qh) {
    return _mm256_or_si256(unpack_nibbles(qs), _mm256_maskz_mov_epi8(load_u32(qh), _mm256_set1_epi8(0x10)));
}

static inline __m256i g5_dot(__m256i u, const uint8_t *yq) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, loadu256(yq));
}

/* 4 fp16 fields at stride bytes as floats */
static inline __m128 g5_h4(const void *p, size_t stride) {
    const uint8_t *b = p;
    uint16_t h[4];
    for (int i = 0; i < 4; i++) memcpy(&h[i], b + i * stride, 2);
    uint64_t v;
    memcpy(&v, h, 8);
    return _mm_cvtph_ps(_mm_cvtsi64_si128((long long)v));
}

static inline float g5_hsum4(__m128 v) {
    v = _mm_add_ps(v, _mm_movehl_ps(v, v));
    return _mm_cvtss_f32(_mm_add_ss(v, _mm_movehdup_ps(v)));
}

/* min: Q5_1 (m_w * s_y added), else Q5_0 (16 d_w * s_y taken off) */
static inline __attribute__((always_inline)) float g5_1x1(bool min, int64_t n, const void *vw, const uint8_t *y,
                                                          const float *ds1) {
    const size_t ws = min ? sizeof(blk_q5_1) : sizeof(blk_q5_0), bs = min ? sizeof(blk_q8_1) : sizeof(blk_q8_0);
    const size_t qso = min ? offsetof(blk_q5_1, qs) : offsetof(blk_q5_0, qs);
    const size_t qho = min ? offsetof(blk_q5_1, qh) : offsetof(blk_q5_0, qh);
    const size_t mo = offsetof(blk_q5_1, m);
    const uint8_t *w = vw, *yq = y + (min ? offsetof(blk_q8_1, qs) : offsetof(blk_q8_0, qs));
    const int64_t nb = n / QK;
    __m256 acc = _mm256_setzero_ps();
    __m128 offs = _mm_setzero_ps();
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4) {
        const uint8_t *b = w + (size_t)i * ws;
        const __m256 f = sum4(g5_dot(g5_u(b + qso, b + qho), yq + (size_t)i * bs),
                              g5_dot(g5_u(b + ws + qso, b + ws + qho), yq + (size_t)(i + 1) * bs),
                              g5_dot(g5_u(b + 2 * ws + qso, b + 2 * ws + qho), yq + (size_t)(i + 2) * bs),
                              g5_dot(g5_u(b + 3 * ws + qso, b + 3 * ws + qho), yq + (size_t)(i + 3) * bs));
        const __m128 a = _mm_loadu_ps(ds1 + 2 * i), c = _mm_loadu_ps(ds1 + 2 * i + 4);
        const __m128 d = _mm_shuffle_ps(a, c, 0x88), sv = _mm_shuffle_ps(a, c, 0xDD);
        const __m128 dw = g5_h4(b, ws);
        const __m128 sc = _mm_mul_ps(dw, d);
        acc = _mm256_fmadd_ps(f, _mm256_set_m128(sc, sc), acc);
        offs = _mm_fmadd_ps(min ? g5_h4(b + mo, ws) : dw, sv, offs);
    }
    float r = hsum8(acc) + (min ? 1.0f : -16.0f) * g5_hsum4(offs);
    for (; i < nb; i++) {
        const uint8_t *b = w + (size_t)i * ws;
        uint16_t dh, mh = 0;
        memcpy(&dh, b, 2);
        if (min) memcpy(&mh, b + mo, 2);
        const float ip = hsum8(_mm256_cvtepi32_ps(g5_dot(g5_u(b + qso, b + qho), yq + (size_t)i * bs)));
        r += min ? h2f(dh) * ds1[2 * i] * ip + h2f(mh) * ds1[2 * i + 1]
                 : h2f(dh) * (ds1[2 * i] * ip - 16.0f * ds1[2 * i + 1]);
    }
    return r;
}

void gemm_q5_0_1x1_avx512(int64_t n, float *s, const void *vw, const uint8_t *y, const float *ds1) {
    *s = g5_1x1(false, n, vw, y, ds1);
}

void gemm_q5_1_1x1_avx512(int64_t n, float *s, const void *vw, const uint8_t *y, const float *ds1) {
    *s = g5_1x1(true, n, vw, y, ds1);
}
