/* backend/cpu/elementwise: norms (RMSNorm, LayerNorm), activations, residual adds and RoPE.
 * These are a few percent of a forward pass; they stay scalar C that the
 * compiler vectorises, single-threaded, in float with double-free loops,
 * except the FFN activations, whose exp/tanh go 8 at a time through
 * elementwise_avx2.c where the CPU has AVX2 + FMA (libm per element cost
 * 9% of a Gemma-3 prompt). */
#include <math.h>
#include <stdlib.h>

#include "base/cpu.h"
#include "base/fp16.h"
#include "ops/ops.h"

int64_t ops__gelu_avx2(float *x, int64_t n);
int64_t ops__gelu_mul_avx2(float *g, const float *u, int64_t n);
int64_t ops__silu_mul_avx2(float *g, const float *u, int64_t n);

void ops_rmsnorm(const float *x, const float *w, int64_t n, int64_t m, float eps, float *y) {
    for (int64_t j = 0; j < m; j++) {
        const float *xj = x + j * n;
        float *yj = y + j * n;
        /* accumulate the mean square in double: n is up to ~16k */
        double ss = 0.0;
        for (int64_t i = 0; i < n; i++) ss += (double)xj[i] * xj[i];
        const float scale = 1.0f / sqrtf((float)(ss / (double)n) + eps);
        if (w)
            for (int64_t i = 0; i < n; i++) yj[i] = xj[i] * scale * w[i];
        else
            for (int64_t i = 0; i < n; i++) yj[i] = xj[i] * scale;
    }
}

void ops_layernorm(const float *x, const float *w, const float *b, int64_t n, int64_t m, float eps, float *y) {
    for (int64_t j = 0; j < m; j++) {
        const float *xj = x + j * n;
        float *yj = y + j * n;
        /* two passes in double: mean, then the centred sum of squares (no cancellation) */
        double sum = 0.0, ss = 0.0;
        for (int64_t i = 0; i < n; i++) sum += xj[i];
        const double mean = sum / (double)n;
        for (int64_t i = 0; i < n; i++) ss += ((double)xj[i] - mean) * ((double)xj[i] - mean);
        const float mu = (float)mean, rstd = (float)(1.0 / sqrt(ss / (double)n + (double)eps));
        for (int64_t i = 0; i < n; i++) {
            float v = (xj[i] - mu) * rstd;
            if (w) v *= w[i];
            if (b) v += b[i];
            yj[i] = v;
        }
    }
}

void ops_add_bias(float *x, const float *b, int64_t n, int64_t m) {
    for (int64_t j = 0; j < m; j++)
        for (int64_t i = 0; i < n; i++) x[j * n + i] += b[i];
}

void ops_add(float *x, const float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] += y[i];
}

void ops_silu_mul(float *g, const float *u, int64_t n) {
    int64_t i = tl_cpu_use_avx2() ? ops__silu_mul_avx2(g, u, n) : 0;
    for (; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

void ops_gelu_mul(float *g, const float *u, int64_t n) {
    const float c = 0.7978845608028654f; /* sqrt(2/pi) */
    for (int64_t i = tl_cpu_use_avx2() ? ops__gelu_mul_avx2(g, u, n) : 0; i < n; i++) {
        const float x = g[i];
        g[i] = 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x))) * u[i];
    }
}

void ops_gelu(float *x, int64_t n) {
    const float c = 0.7978845608028654f; /* sqrt(2/pi) */
    for (int64_t i = tl_cpu_use_avx2() ? ops__gelu_avx2(x, n) : 0; i < n; i++) {
        const float v = x[i];
        x[i] = 0.5f * v * (1.0f + tanhf(c * (v + 0.044715f * v * v * v)));
    }
}

void ops_scale(float *x, float s, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] *= s;
}

void ops_rope(float *x, int64_t head_dim, int64_t n_heads, int64_t m, const int32_t *pos,
              const ops_rope_params *p) {
    const int64_t half = p->n_rot / 2;
    for (int64_t j = 0; j < m; j++) {
        const float t = (float)pos[j] / p->scale;
        for (int64_t i = 0; i < half; i++) {
            /* theta_i = pos * base^(-2i/n_rot), optionally divided by a per-frequency factor */
            float inv = powf(p->base, -2.0f * (float)i / (float)p->n_rot);
            if (p->freq_factors) inv /= p->freq_factors[i];
            const float ang = t * inv;
            const float cs = cosf(ang), sn = sinf(ang);
            for (int64_t h = 0; h < n_heads; h++) {
                float *xh = x + (j * n_heads + h) * head_dim;
                int64_t a = p->neox ? i : 2 * i;
                int64_t b = p->neox ? i + half : 2 * i + 1;
                const float x0 = xh[a], x1 = xh[b];
                xh[a] = x0 * cs - x1 * sn;
                xh[b] = x0 * sn + x1 * cs;
            }
        }
    }
}

void ops_store_f16(uint16_t *dst, const float *src, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = tl_fp32_to_fp16(src[i]);
}
