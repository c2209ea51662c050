/* tests/gpu/gpu_util: what the GPU tests share: the CHECK/OK harness,
 * a seeded generator, random GGUF weights with sane scales, their CPU
 * dequantization (the quant layer: the independent oracle) and the relative
 * L2 error with non-finite values counted. Header-only (one test per binary).
 * Calls: quant, base/fp16. */
#ifndef TL_TESTS_GPU_UTIL_H
#define TL_TESTS_GPU_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

extern "C" {
#include "base/fp16.h"
#include "quant/quant.h"
}

static int n_pass, n_fail, n_skip;

#define CHECK(cond, ...)                                                                          \
    do {                                                                                          \
        if (cond) {                                                                               \
            n_pass++;                                                                             \
        } else {                                                                                  \
            n_fail++;                                                                             \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                        \
            fprintf(stderr, __VA_ARGS__);                                                         \
            fprintf(stderr, "\n");                                                                \
        }                                                                                         \
    } while (0)

#define OK(call)                                                                                  \
    do {                                                                                          \
        tl_status s_ = (call);                                                                    \
        if (s_ != TL_OK) {                                                                        \
            fprintf(stderr, "FATAL %s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call,             \
                    tl_status_str(s_), tl_last_error());                                          \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

/* ---- random ----------------------------------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd_u32(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}
static float rnd_unif(void) { return (rnd_u32() >> 8) * (1.0f / 16777216.0f); }
static float rnd_normal(void) {
    float u1 = rnd_unif() + 1e-7f, u2 = rnd_unif();
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}

/* random raw GGUF data for n_out rows of n_in: random bytes, then every scale
 * field set to a random finite half so values stay in a sane range */
static std::vector<uint8_t> random_weight(tl_type t, int64_t n_in, int64_t n_out) {
    size_t row = tl_row_bytes(t, n_in);
    std::vector<uint8_t> w(row * n_out);
    if (t == TL_TYPE_F32 || t == TL_TYPE_F16 || t == TL_TYPE_BF16) {
        for (int64_t i = 0; i < n_in * n_out; i++) {
            float v = rnd_normal() * 0.05f;
            if (t == TL_TYPE_F32) memcpy(&w[i * 4], &v, 4);
            else {
                uint16_t h = t == TL_TYPE_F16 ? tl_fp32_to_fp16(v) : tl_fp32_to_bf16(v);
                memcpy(&w[i * 2], &h, 2);
            }
        }
        return w;
    }
    for (auto &b : w) b = (uint8_t)rnd_u32();
    const tl_type_info *ti = tl_type_get(t);
    size_t nblk = w.size() / ti->size;
    for (size_t b = 0; b < nblk; b++) {
        uint8_t *p = &w[b * ti->size];
        auto seth = [&](size_t off, float v) {
            uint16_t h = tl_fp32_to_fp16(v);
            memcpy(p + off, &h, 2);
        };
        switch (t) {
        case TL_TYPE_Q4_0: case TL_TYPE_Q8_0: seth(0, (0.5f + rnd_unif()) * 0.01f); break;
        case TL_TYPE_Q4_1: seth(0, (0.5f + rnd_unif()) * 0.01f); seth(2, -0.08f * rnd_unif()); break;
        case TL_TYPE_Q4_K: seth(0, (0.5f + rnd_unif()) * 0.001f); seth(2, (0.5f + rnd_unif()) * 0.001f); break;
        case TL_TYPE_Q6_K: seth(208, (0.5f + rnd_unif()) * 0.001f); break;
        default: break;
        }
    }
    return w;
}

static bool cpu_dequant(tl_type t, const std::vector<uint8_t> &raw, int64_t n_in, int64_t n_out,
                        std::vector<float> &out) {
    out.resize((size_t)n_in * n_out);
    size_t row = tl_row_bytes(t, n_in);
    for (int64_t r = 0; r < n_out; r++)
        if (quant_dequantize(t, &raw[r * row], &out[r * n_in], n_in) != TL_OK) return false;
    return true;
}

static double rel_err(const float *a, const double *ref, size_t n, size_t *n_nan) {
    double num = 0, den = 0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i])) { bad++; continue; }
        double d = a[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    if (n_nan) *n_nan = bad;
    return bad ? INFINITY : sqrt(num / (den > 0 ? den : 1e-300));
}

#endif
