#include "backend/cpu/gemm.h"

#include "base/cpu.h"
#include "base/fp16.h"
#include "quant/quant_internal.h"

void gemm_q4_0_1x4_avx2(int64_t n, float *s, const void *w, const uint8_t *y, size_t ys, const float *ds);
void gemm_q4_1_1x4_avx2(int64_t n, float *s, const void *w, const uint8_t *y, size_t ys, const float *ds);
void gemm_q8_0_1x4_avx2(int64_t n, float *s, const void *w, const uint8_t *y, size_t ys, const float *ds);

void gemm_f16_1x4_avx2(int64_t n, float *s, const uint16_t *w, const float *y, size_t y_stride);
void gemm_f16_1x1_avx2(int64_t n, float *s, const uint16_t *w, const float *y);

gemm_f16_1x4_fn gemm_get_f16_1x4(void) { return tl_cpu_has_avx2_fma() ? gemm_f16_1x4_avx2 : 0; }
gemm_f16_1x1_fn gemm_get_f16_1x1(void) { return tl_cpu_has_avx2_fma() ? gemm_f16_1x1_avx2 : 0; }

gemm_1x4_fn gemm_get_1x4(tl_type t) {
    if (!tl_cpu_has_avx2_fma()) return 0;
    switch (t) {
    case TL_TYPE_Q4_0: return gemm_q4_0_1x4_avx2;
    case TL_TYPE_Q4_1: return gemm_q4_1_1x4_avx2;
    case TL_TYPE_Q8_0: return gemm_q8_0_1x4_avx2;
    default: return 0;
    }
}

void gemm_prep_scales(tl_type at, int64_t n, const uint8_t *y, size_t y_stride, float *ds) {
    const int64_t nb = n / QK;
    for (int t = 0; t < 4; t++) {
        const uint8_t *row = y + (size_t)t * y_stride;
        for (int64_t i = 0; i < nb; i++) {
            if (at == TL_TYPE_Q8_1) {
                const blk_q8_1 *b = (const blk_q8_1 *)row + i;
                ds[i * 8 + t] = tl_fp16_to_fp32(b->d);
                ds[i * 8 + 4 + t] = tl_fp16_to_fp32(b->s);
            } else {
                const blk_q8_0 *b = (const blk_q8_0 *)row + i;
                ds[i * 8 + t] = tl_fp16_to_fp32(b->d);
                ds[i * 8 + 4 + t] = 0.0f;
            }
        }
    }
}
