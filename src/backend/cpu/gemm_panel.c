/* backend/cpu/gemm_panel: sizes, type support and the activation table of
 * the AVX-512 VNNI panel prefill kernel (layout in gemm.h; packing and the
 * kernel are in gemm_panel_avx512.c). Calls: quant block layouts, base/cpu. */
#include <string.h>

#include "backend/cpu/gemm.h"
#include "base/cpu.h"
#include "base/fp16.h"
#include "quant/quant_internal.h"

size_t gemm_panel_bytes(int64_t k) {
    const size_t nb = (size_t)(k + QK - 1) / QK;
    return nb * (8 * GEMM_PANEL * 4 + 3 * GEMM_PANEL * sizeof(float));
}

bool gemm_panel_ok(tl_type t) {
    if (!tl_cpu_use_avx512()) return false;
    switch (t) {
    case TL_TYPE_Q4_0: case TL_TYPE_Q4_1: case TL_TYPE_Q5_0: case TL_TYPE_Q5_1: case TL_TYPE_Q8_0:
    case TL_TYPE_IQ4_NL: case TL_TYPE_Q2_K: case TL_TYPE_Q3_K: case TL_TYPE_Q4_K: case TL_TYPE_Q5_K:
    case TL_TYPE_Q6_K: case TL_TYPE_IQ4_XS:
        return true;
    default:
        return false;
    }
}

void gemm_panel_prep(tl_type at, int64_t n, const uint8_t *y, float *ds1) {
    for (int64_t i = 0; i < n / QK; i++) {
        if (at == TL_TYPE_Q8_K) {
            /* sub-block i % 8 of super-block i / 8: d and d * sum(q) */
            const blk_q8_k *b = (const blk_q8_k *)y + i / 8;
            const int j = (int)(i % 8);
            ds1[2 * i] = b->d;
            ds1[2 * i + 1] = b->d * (float)(b->bsums[2 * j] + b->bsums[2 * j + 1]);
        } else if (at == TL_TYPE_Q8_1) {
            const blk_q8_1 *b = (const blk_q8_1 *)y + i;
            ds1[2 * i] = tl_fp16_to_fp32(b->d);
            ds1[2 * i + 1] = tl_fp16_to_fp32(b->s);
        } else {
            const blk_q8_0 *b = (const blk_q8_0 *)y + i;
            int sum = 0;
            for (int e = 0; e < QK; e++) sum += b->qs[e];
            ds1[2 * i] = tl_fp16_to_fp32(b->d);
            ds1[2 * i + 1] = (float)(128 * sum); /* |128 * sum| <= 2^19: exact */
        }
    }
}
