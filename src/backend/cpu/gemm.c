#include "backend/cpu/gemm.h"

#include "base/cpu.h"
#include "base/fp16.h"
#include "quant/quant_internal.h"

void gemm_q4_0_1x4_avx2(int64_t n, float *s, const void *w, const uint8_t *y, size_t ys, const float *ds);
void gemm_q4_1_1x4_avx2(int64_t n, float *s, const void *w, const uint8_t *y, size_t ys, const float *ds);
void gemm_q8_0_1x4_avx2(int64_t n, float *s, const void *w, const uint8_t *y, size_t ys, const float *ds);
void gemm_q5_0_1x4_avx2(int64_t n, float *s, const void *w, const uint8_t *y, size_t ys, const float *ds);
void gemm_q5_1_1x4_avx2(int64_t n, float *s, const void *w, const uint8_t *y, size_t ys, const float *ds);
void gemm_iq4_nl_1x4_avx2(int64_t n, float *s, const void *w, const uint8_t *y, size_t ys, const float *ds);
void gemm_q2_k_1x4_avx2(int64_t n, float *s, const void *w, const uint8_t *y, size_t ys, const float *ds);
void gemm_q3_k_1x4_avx2(int64_t n, float *s, const void *w, const uint8_t *y, size_t ys, const float *ds);
void gemm_q4_k_1x4_avx2(int64_t n, float *s, const void *w, const uint8_t *y, size_t ys, const float *ds);
void gemm_q5_k_1x4_avx2(int64_t n, float *s, const void *w, const uint8_t *y, size_t ys, const float *ds);
void gemm_q6_k_1x4_avx2(int64_t n, float *s, const void *w, const uint8_t *y, size_t ys, const float *ds);
void gemm_iq4_xs_1x4_avx2(int64_t n, float *s, const void *w, const uint8_t *y, size_t ys, const float *ds);

void gemm_q5_0_1x1_avx2(int64_t n, float *s, const void *w, const uint8_t *y, const float *ds1);
void gemm_q5_1_1x1_avx2(int64_t n, float *s, const void *w, const uint8_t *y, const float *ds1);
void gemm_q5_0_1x1_avx512(int64_t n, float *s, const void *w, const uint8_t *y, const float *ds1);
void gemm_q8_0_4x1_avx512(int64_t n, float *s, const void *w, size_t rb, const uint8_t *y, const float *ds1);
void gemm_q4_0_4x1_avx512(int64_t n, float *s, const void *w, size_t rb, const uint8_t *y, const float *ds1);
void gemm_q4_1_4x1_avx512(int64_t n, float *s, const void *w, size_t rb, const uint8_t *y, const float *ds1);
void gemm_iq4_nl_4x1_avx512(int64_t n, float *s, const void *w, size_t rb, const uint8_t *y, const float *ds1);
void gemm_q5_1_1x1_avx512(int64_t n, float *s, const void *w, const uint8_t *y, const float *ds1);
void gemm_q2_k_4x1_avx512(int64_t n, float *s, const void *w, size_t rb, const uint8_t *y, const float *ds1);
void gemm_q3_k_4x1_avx512(int64_t n, float *s, const void *w, size_t rb, const uint8_t *y, const float *ds1);
void gemm_iq4_xs_4x1_avx512(int64_t n, float *s, const void *w, size_t rb, const uint8_t *y, const float *ds1);

void gemm_f16_1x4_avx2(int64_t n, float *s, const uint16_t *w, const float *y, size_t y_stride);
void gemm_f16_1x1_avx2(int64_t n, float *s, const uint16_t *w, const float *y);

gemm_f16_1x4_fn gemm_get_f16_1x4(void) { return tl_cpu_use_avx2() ? gemm_f16_1x4_avx2 : 0; }
gemm_f16_1x1_fn gemm_get_f16_1x1(void) { return tl_cpu_use_avx2() ? gemm_f16_1x1_avx2 : 0; }

bool gemm_f16_panel_ok(void) { return tl_cpu_use_avx512(); }
bool gemm_bf16_panel_ok(void) { return tl_cpu_use_avx512() && tl_cpu_has_avx512_bf16(); }

size_t gemm_few_bytes(int64_t k) { return (size_t)(k / QK) * GEMM_FEW_GROUPS * GEMM_FEW_SLOT; }

bool gemm_few_ok(tl_type t) {
    return tl_cpu_use_avx512() && (t == TL_TYPE_Q8_0 || t == TL_TYPE_Q4_0 || t == TL_TYPE_Q4_1 || t == TL_TYPE_Q5_0 ||
                                   t == TL_TYPE_Q5_1 || t == TL_TYPE_IQ4_NL);
}

gemm_1x4_fn gemm_get_1x4(tl_type t) {
    if (!tl_cpu_use_avx2()) return 0;
    switch (t) {
    case TL_TYPE_Q4_0: return gemm_q4_0_1x4_avx2;
    case TL_TYPE_Q4_1: return gemm_q4_1_1x4_avx2;
    case TL_TYPE_Q8_0: return gemm_q8_0_1x4_avx2;
    case TL_TYPE_Q5_0: return gemm_q5_0_1x4_avx2;
    case TL_TYPE_Q5_1: return gemm_q5_1_1x4_avx2;
    case TL_TYPE_IQ4_NL: return gemm_iq4_nl_1x4_avx2;
    case TL_TYPE_Q2_K: return gemm_q2_k_1x4_avx2;
    case TL_TYPE_Q3_K: return gemm_q3_k_1x4_avx2;
    case TL_TYPE_Q4_K: return gemm_q4_k_1x4_avx2;
    case TL_TYPE_Q5_K: return gemm_q5_k_1x4_avx2;
    case TL_TYPE_Q6_K: return gemm_q6_k_1x4_avx2;
    case TL_TYPE_IQ4_XS: return gemm_iq4_xs_1x4_avx2;
    default: return 0;
    }
}

gemm_4x1_fn gemm_get_4x1(tl_type t) {
    if (!tl_cpu_use_avx512()) return 0;
    switch (t) {
    case TL_TYPE_Q8_0: return gemm_q8_0_4x1_avx512;
    case TL_TYPE_Q4_0: return gemm_q4_0_4x1_avx512;
    case TL_TYPE_Q4_1: return gemm_q4_1_4x1_avx512;
    case TL_TYPE_IQ4_NL: return gemm_iq4_nl_4x1_avx512;
    case TL_TYPE_Q2_K: return gemm_q2_k_4x1_avx512;
    case TL_TYPE_Q3_K: return gemm_q3_k_4x1_avx512;
    case TL_TYPE_IQ4_XS: return gemm_iq4_xs_4x1_avx512;
    default: return 0;
    }
}

gemm_1x1_fn gemm_get_1x1(tl_type t) {
    if (!tl_cpu_use_avx2()) return 0;
    if (tl_cpu_use_avx512()) switch (t) {
        case TL_TYPE_Q5_0: return gemm_q5_0_1x1_avx512;
        case TL_TYPE_Q5_1: return gemm_q5_1_1x1_avx512;
        default: return 0;
        }
    switch (t) {
    case TL_TYPE_Q5_0: return gemm_q5_0_1x1_avx2;
    case TL_TYPE_Q5_1: return gemm_q5_1_1x1_avx2;
    default: return 0;
    }
}

/* the block's (d, s) as the 4-token table holds them */
static void gemm_block_ds(tl_type at, const uint8_t *row, int64_t i, float *d, float *s) {
    if (at == TL_TYPE_Q8_1) {
        const blk_q8_1 *b = (const blk_q8_1 *)row + i;
        *d = tl_fp16_to_fp32(b->d);
        *s = tl_fp16_to_fp32(b->s);
    } else {
        /* Q8_0 carries no sum: d * sum(q) here, for the kernels that shift
         * signed weights to unsigned (Q4_0, Q5_0) */
        const blk_q8_0 *b = (const blk_q8_0 *)row + i;
        int sum = 0;
        for (int e = 0; e < QK; e++) sum += b->qs[e];
        *d = tl_fp16_to_fp32(b->d);
        *s = *d * (float)sum;
    }
}

void gemm_prep_scales1(tl_type at, int64_t n, const uint8_t *y, float *ds1) {
    for (int64_t i = 0; i < n / QK; i++) gemm_block_ds(at, y, i, &ds1[2 * i], &ds1[2 * i + 1]);
}

void gemm_prep_scales(tl_type at, int64_t n, const uint8_t *y, size_t y_stride, float *ds) {
    const int64_t nb = n / QK;
    for (int t = 0; t < 4; t++) {
        const uint8_t *row = y + (size_t)t * y_stride;
        for (int64_t i = 0; i < nb; i++) gemm_block_ds(at, row, i, &ds[i * 8 + t], &ds[i * 8 + 4 + t]);
    }
}
