/* quant/quant: the kernel registry. Three tables map a tl_type to its
 * kernels: the scalar reference set (the oracle), the AVX2/FMA set and the
 * AVX-512 set; each differs from the one below it only where it has its own
 * kernel and otherwise repeats that entry. Which table serves is base/cpu's
 * kernel level (tl_cpu_set_kernels() in tallow.h).
 * Calls: base (cpu, status), tensor/dtype, the quant_* kernel files. */
#include <string.h>

#include "base/cpu.h"
#include "quant/quant_internal.h"

#define ENTRY(T, VT, TF, FF, VD) [TL_TYPE_##T] = {TL_TYPE_##T, TL_TYPE_##VT, TF, FF, VD}

/* Types usable only as activations (Q8_1, Q8_K) have no vec_dot. */
#define REF_ENTRIES                                                                               \
    ENTRY(F32, F32, quant_f32_to_float, quant_f32_from_float, quant_dot_f32_f32),                 \
    ENTRY(F16, F16, quant_f16_to_float, quant_f16_from_float, quant_dot_f16_f16),                 \
    ENTRY(BF16, BF16, quant_bf16_to_float, quant_bf16_from_float, quant_dot_bf16_bf16),           \
    ENTRY(Q4_0, Q8_0, quant_q4_0_to_float, quant_q4_0_from_float, quant_dot_q4_0_q8_0),           \
    ENTRY(Q4_1, Q8_1, quant_q4_1_to_float, quant_q4_1_from_float, quant_dot_q4_1_q8_1),           \
    ENTRY(Q5_0, Q8_0, quant_q5_0_to_float, quant_q5_0_from_float, quant_dot_q5_0_q8_0),           \
    ENTRY(Q5_1, Q8_1, quant_q5_1_to_float, quant_q5_1_from_float, quant_dot_q5_1_q8_1),           \
    ENTRY(Q8_0, Q8_0, quant_q8_0_to_float, quant_q8_0_from_float, quant_dot_q8_0_q8_0),           \
    ENTRY(Q8_1, Q8_1, quant_q8_1_to_float, quant_q8_1_from_float, NULL),                          \
    ENTRY(IQ4_NL, Q8_0, quant_iq4_nl_to_float, quant_iq4_nl_from_float, quant_dot_iq4_nl_q8_0),   \
    ENTRY(MXFP4, Q8_0, quant_mxfp4_to_float, quant_mxfp4_from_float, quant_dot_mxfp4_q8_0),       \
    ENTRY(Q2_K, Q8_K, quant_q2_k_to_float, quant_q2_k_from_float, quant_dot_q2_k_q8_k),           \
    ENTRY(Q3_K, Q8_K, quant_q3_k_to_float, quant_q3_k_from_float, quant_dot_q3_k_q8_k),           \
    ENTRY(Q4_K, Q8_K, quant_q4_k_to_float, quant_q4_k_from_float, quant_dot_q4_k_q8_k),           \
    ENTRY(Q5_K, Q8_K, quant_q5_k_to_float, quant_q5_k_from_float, quant_dot_q5_k_q8_k),           \
    ENTRY(Q6_K, Q8_K, quant_q6_k_to_float, quant_q6_k_from_float, quant_dot_q6_k_q8_k),           \
    ENTRY(Q8_K, Q8_K, quant_q8_k_to_float, quant_q8_k_from_float, NULL),                          \
    ENTRY(IQ4_XS, Q8_K, quant_iq4_xs_to_float, quant_iq4_xs_from_float, quant_dot_iq4_xs_q8_k)

static const quant_kernels ref_tab[TL_TYPE_COUNT] = {
    REF_ENTRIES,
};

#if defined(__x86_64__) || defined(__i386__)
#define HAVE_AVX2_TABLE 1
#define AVX2_ENTRIES \
    ENTRY(F32, F32, quant_f32_to_float, quant_f32_from_float, quant_dot_f32_f32_avx2),\
    ENTRY(F16, F16, quant_f16_to_float_avx2, quant_f16_from_float_avx2, quant_dot_f16_f16_avx2),\
    ENTRY(BF16, BF16, quant_bf16_to_float, quant_bf16_from_float_avx2, quant_dot_bf16_bf16_avx2),\
    ENTRY(Q4_0, Q8_0, quant_q4_0_to_float, quant_q4_0_from_float, quant_dot_q4_0_q8_0_avx2),\
    ENTRY(Q4_1, Q8_1, quant_q4_1_to_float, quant_q4_1_from_float, quant_dot_q4_1_q8_1_avx2),\
    ENTRY(Q5_0, Q8_0, quant_q5_0_to_float, quant_q5_0_from_float, quant_dot_q5_0_q8_0_avx2),\
    ENTRY(Q5_1, Q8_1, quant_q5_1_to_float, quant_q5_1_from_float, quant_dot_q5_1_q8_1_avx2),\
    ENTRY(Q8_0, Q8_0, quant_q8_0_to_float, quant_q8_0_from_float_avx2, quant_dot_q8_0_q8_0_avx2),\
    ENTRY(Q8_1, Q8_1, quant_q8_1_to_float, quant_q8_1_from_float_avx2, NULL),\
    ENTRY(IQ4_NL, Q8_0, quant_iq4_nl_to_float, quant_iq4_nl_from_float, quant_dot_iq4_nl_q8_0_avx2),\
    ENTRY(MXFP4, Q8_0, quant_mxfp4_to_float, quant_mxfp4_from_float, quant_dot_mxfp4_q8_0_avx2),\
    ENTRY(Q8_K, Q8_K, quant_q8_k_to_float, quant_q8_k_from_float_avx2, NULL),\
    ENTRY(Q2_K, Q8_K, quant_q2_k_to_float, quant_q2_k_from_float, quant_dot_q2_k_q8_k_avx2),\
    ENTRY(Q3_K, Q8_K, quant_q3_k_to_float, quant_q3_k_from_float, quant_dot_q3_k_q8_k_avx2),\
    ENTRY(IQ4_XS, Q8_K, quant_iq4_xs_to_float, quant_iq4_xs_from_float, quant_dot_iq4_xs_q8_k_avx2),\
    ENTRY(Q4_K, Q8_K, quant_q4_k_to_float, quant_q4_k_from_float, quant_dot_q4_k_q8_k_avx2),\
    ENTRY(Q5_K, Q8_K, quant_q5_k_to_float, quant_q5_k_from_float, quant_dot_q5_k_q8_k_avx2),\
    ENTRY(Q6_K, Q8_K, quant_q6_k_to_float, quant_q6_k_from_float, quant_dot_q6_k_q8_k_avx2)
/* AVX-512 F/BW/VL/VNNI kernels where they exist */
#define AVX512_ENTRIES \
    ENTRY(F16, F16, quant_f16_to_float_avx2, quant_f16_from_float_avx2, quant_dot_f16_f16_avx512),\
    ENTRY(Q5_0, Q8_0, quant_q5_0_to_float, quant_q5_0_from_float, quant_dot_q5_0_q8_0_avx512),\
    ENTRY(Q5_1, Q8_1, quant_q5_1_to_float, quant_q5_1_from_float, quant_dot_q5_1_q8_1_avx512),\
    ENTRY(IQ4_NL, Q8_0, quant_iq4_nl_to_float, quant_iq4_nl_from_float, quant_dot_iq4_nl_q8_0_avx512),\
    ENTRY(Q4_K, Q8_K, quant_q4_k_to_float, quant_q4_k_from_float, quant_dot_q4_k_q8_k_avx512),\
    ENTRY(Q5_K, Q8_K, quant_q5_k_to_float, quant_q5_k_from_float, quant_dot_q5_k_q8_k_avx512),\
    ENTRY(Q6_K, Q8_K, quant_q6_k_to_float, quant_q6_k_from_float, quant_dot_q6_k_q8_k_avx512),\
    ENTRY(Q2_K, Q8_K, quant_q2_k_to_float, quant_q2_k_from_float, quant_dot_q2_k_q8_k_avx512),\
    ENTRY(Q3_K, Q8_K, quant_q3_k_to_float, quant_q3_k_from_float, quant_dot_q3_k_q8_k_avx512),\
    ENTRY(IQ4_XS, Q8_K, quant_iq4_xs_to_float, quant_iq4_xs_from_float, quant_dot_iq4_xs_q8_k_avx512),\
    ENTRY(Q4_0, Q8_0, quant_q4_0_to_float, quant_q4_0_from_float, quant_dot_q4_0_q8_0_avx512),\
    ENTRY(Q4_1, Q8_1, quant_q4_1_to_float, quant_q4_1_from_float, quant_dot_q4_1_q8_1_avx512),\
    ENTRY(Q8_0, Q8_0, quant_q8_0_to_float, quant_q8_0_from_float_avx2, quant_dot_q8_0_q8_0_avx512)
/* Later initializers for the same index override earlier ones (C11
 * 6.7.9p19), so the scalar set is listed first and SIMD entries after. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
static const quant_kernels avx2_tab[TL_TYPE_COUNT] = {
    REF_ENTRIES,
    AVX2_ENTRIES,
};
static const quant_kernels avx512_tab[TL_TYPE_COUNT] = {
    REF_ENTRIES,
    AVX2_ENTRIES,
    AVX512_ENTRIES,
};
/* BF16 weights where the CPU also has AVX512_BF16 */
static const quant_kernels bf16_avx512 = {TL_TYPE_BF16, TL_TYPE_BF16, quant_bf16_to_float, quant_bf16_from_float_avx2,
                                          quant_dot_bf16_bf16_avx512};
#pragma GCC diagnostic pop
#endif

const quant_kernels *quant_kernels_ref(tl_type t) {
    if ((unsigned)t >= TL_TYPE_COUNT || ref_tab[t].to_float == NULL) return NULL;
    return &ref_tab[t];
}

const quant_kernels *quant_kernels_at(int level, tl_type t) {
    const quant_kernels *k = quant_kernels_ref(t);
    if (!k || level > tl_cpu_detected_level()) return NULL;
#ifdef HAVE_AVX2_TABLE
    if (level == TL_CPU_LEVEL_AVX512) return t == TL_TYPE_BF16 && tl_cpu_has_avx512_bf16() ? &bf16_avx512 : &avx512_tab[t];
    if (level == TL_CPU_LEVEL_AVX2) return &avx2_tab[t];
#endif
    return k;
}

const quant_kernels *quant_kernels_get(tl_type t) { return quant_kernels_at(tl_cpu_level(), t); }

static tl_status check_args(tl_type t, int64_t n, const char *what, const quant_kernels **out) {
    const quant_kernels *k = quant_kernels_ref(t);
    if (!k) return tl_err(TL_ERR_UNSUPPORTED, "quant: no %s for type %s", what, tl_type_name(t));
    const tl_type_info *ti = tl_type_get(t);
    if (n < 0 || n % ti->blck != 0)
        return tl_err(TL_ERR_INVALID, "quant: %s of %lld elements: not a multiple of %s's block of %d",
                      what, (long long)n, ti->name, (int)ti->blck);
    *out = k;
    return TL_OK;
}

/* Both convenience calls use the reference kernels: they are the bit-exact
 * definition (dequantization is exact either way; quantization of
 * activations on the hot path goes through quant_kernels_get instead). */
tl_status quant_dequantize(tl_type t, const void *src, float *dst, int64_t n) {
    const quant_kernels *k;
    tl_status st = check_args(t, n, "dequantizer", &k);
    if (st != TL_OK) return st;
    if (n > 0) k->to_float(src, dst, n);
    return TL_OK;
}

tl_status quant_quantize(tl_type t, const float *src, void *dst, int64_t n) {
    const quant_kernels *k;
    tl_status st = check_args(t, n, "quantizer", &k);
    if (st != TL_OK) return st;
    if (n > 0) k->from_float(src, dst, n);
    return TL_OK;
}

static bool row_fits(tl_type t, int64_t ne0) { return ne0 % tl_type_get(t)->blck == 0; }

tl_type quant_row_fallback(tl_type t, int64_t ne0) {
    if (row_fits(t, ne0)) return t;
    tl_type f;
    switch (t) {
    case TL_TYPE_Q2_K: case TL_TYPE_Q3_K: case TL_TYPE_IQ4_XS: f = TL_TYPE_IQ4_NL; break;
    case TL_TYPE_Q4_K: f = TL_TYPE_Q5_0; break;
    case TL_TYPE_Q5_K: f = TL_TYPE_Q5_1; break;
    case TL_TYPE_Q6_K: f = TL_TYPE_Q8_0; break;
    default: f = TL_TYPE_F16; break;
    }
    return row_fits(f, ne0) ? f : TL_TYPE_F16;
}
