/* quant/quant_float: the plain float types F32, F16 and BF16 as quant
 * "types": conversions and the scalar reference dots. F16 and BF16 weights
 * are dotted with activations converted to the same type (what the
 * reference engine does), so a dot is exact products accumulated in double
 * here; the SIMD twins accumulate in float. Calls: base/fp16. */
#include <string.h>

#include "base/fp16.h"
#include "quant/quant_internal.h"

void quant_f32_to_float(const void *src, float *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void quant_f32_from_float(const float *src, void *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void quant_f16_to_float(const void *src, float *dst, int64_t n) {
    const uint16_t *h = src;
    for (int64_t i = 0; i < n; i++) dst[i] = tl_fp16_to_fp32(h[i]);
}

void quant_f16_from_float(const float *src, void *dst, int64_t n) {
    uint16_t *h = dst;
    for (int64_t i = 0; i < n; i++) h[i] = tl_fp32_to_fp16(src[i]);
}

void quant_bf16_to_float(const void *src, float *dst, int64_t n) {
    const uint16_t *h = src;
    for (int64_t i = 0; i < n; i++) dst[i] = tl_bf16_to_fp32(h[i]);
}

void quant_bf16_from_float(const float *src, void *dst, int64_t n) {
    uint16_t *h = dst;
    for (int64_t i = 0; i < n; i++) h[i] = tl_fp32_to_bf16(src[i]);
}

void quant_dot_f32_f32(int64_t n, float *s, const void *x, const void *y) {
    const float *a = x, *b = y;
    double acc = 0.0;
    for (int64_t i = 0; i < n; i++) acc += (double)a[i] * (double)b[i];
    *s = (float)acc;
}

void quant_dot_f16_f16(int64_t n, float *s, const void *x, const void *y) {
    const uint16_t *a = x, *b = y;
    double acc = 0.0;
    for (int64_t i = 0; i < n; i++)
        acc += (double)tl_fp16_to_fp32(a[i]) * (double)tl_fp16_to_fp32(b[i]);
    *s = (float)acc;
}

void quant_dot_bf16_bf16(int64_t n, float *s, const void *x, const void *y) {
    const uint16_t *a = x, *b = y;
    double acc = 0.0;
    for (int64_t i = 0; i < n; i++)
        acc += (double)tl_bf16_to_fp32(a[i]) * (double)tl_bf16_to_fp32(b[i]);
    *s = (float)acc;
}
