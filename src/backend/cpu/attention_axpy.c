/* backend/cpu/attention_axpy: acc += a * v for an f16 vector v, with an
 * AVX2/F16C path chosen at run time (the V accumulation is half of the
 * attention work at long context). */
#include <stdbool.h>
#include <stdint.h>

#include "base/cpu.h"
#include "base/fp16.h"

void attn_axpy_f16_avx2(float *acc, float a, const uint16_t *v, int64_t n);

void attn_axpy_f16(float *acc, float a, const uint16_t *v, int64_t n) {
    if (tl_cpu_use_avx2() && n % 8 == 0) {
        attn_axpy_f16_avx2(acc, a, v, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) acc[i] += a * tl_fp16_to_fp32(v[i]);
}
