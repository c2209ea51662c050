#include "tensor/dtype.h"

#include <string.h>
#include <strings.h>

/* Block sizes and byte sizes are the GGUF specification's; ids 4, 5 and
 * 31-33, 36-38 are retired and have no entry. */
static const tl_type_info tl_types[TL_TYPE_COUNT] = {
    [TL_TYPE_F32] = {"f32", 1, 4, false},
    [TL_TYPE_F16] = {"f16", 1, 2, false},
    [TL_TYPE_Q4_0] = {"q4_0", 32, 18, true},
    [TL_TYPE_Q4_1] = {"q4_1", 32, 20, true},
    [TL_TYPE_Q5_0] = {"q5_0", 32, 22, true},
    [TL_TYPE_Q5_1] = {"q5_1", 32, 24, true},
    [TL_TYPE_Q8_0] = {"q8_0", 32, 34, true},
    [TL_TYPE_Q8_1] = {"q8_1", 32, 36, true},
    [TL_TYPE_Q2_K] = {"q2_k", 256, 84, true},
    [TL_TYPE_Q3_K] = {"q3_k", 256, 110, true},
    [TL_TYPE_Q4_K] = {"q4_k", 256, 144, true},
    [TL_TYPE_Q5_K] = {"q5_k", 256, 176, true},
    [TL_TYPE_Q6_K] = {"q6_k", 256, 210, true},
    [TL_TYPE_Q8_K] = {"q8_k", 256, 292, true},
    [TL_TYPE_IQ2_XXS] = {"iq2_xxs", 256, 66, true},
    [TL_TYPE_IQ2_XS] = {"iq2_xs", 256, 74, true},
    [TL_TYPE_IQ3_XXS] = {"iq3_xxs", 256, 98, true},
    [TL_TYPE_IQ1_S] = {"iq1_s", 256, 50, true},
    [TL_TYPE_IQ4_NL] = {"iq4_nl", 32, 18, true},
    [TL_TYPE_IQ3_S] = {"iq3_s", 256, 110, true},
    [TL_TYPE_IQ2_S] = {"iq2_s", 256, 82, true},
    [TL_TYPE_IQ4_XS] = {"iq4_xs", 256, 136, true},
    [TL_TYPE_I8] = {"i8", 1, 1, false},
    [TL_TYPE_I16] = {"i16", 1, 2, false},
    [TL_TYPE_I32] = {"i32", 1, 4, false},
    [TL_TYPE_I64] = {"i64", 1, 8, false},
    [TL_TYPE_F64] = {"f64", 1, 8, false},
    [TL_TYPE_IQ1_M] = {"iq1_m", 256, 56, true},
    [TL_TYPE_BF16] = {"bf16", 1, 2, false},
    [TL_TYPE_TQ1_0] = {"tq1_0", 256, 54, true},
    [TL_TYPE_TQ2_0] = {"tq2_0", 256, 66, true},
    [TL_TYPE_MXFP4] = {"mxfp4", 32, 17, true},
};

const tl_type_info *tl_type_get(uint32_t t) {
    if (t >= TL_TYPE_COUNT || tl_types[t].name == NULL) return NULL;
    return &tl_types[t];
}

const char *tl_type_name(uint32_t t) {
    const tl_type_info *ti = tl_type_get(t);
    return ti ? ti->name : "unknown";
}

bool tl_type_from_name(const char *name, tl_type *out) {
    for (uint32_t t = 0; t < TL_TYPE_COUNT; t++) {
        if (tl_types[t].name && strcasecmp(tl_types[t].name, name) == 0) {
            *out = (tl_type)t;
            return true;
        }
    }
    return false;
}

size_t tl_row_bytes(uint32_t t, int64_t n) {
    const tl_type_info *ti = tl_type_get(t);
    if (!ti || n <= 0 || n % ti->blck != 0) return 0;
    size_t r;
    if (__builtin_mul_overflow((size_t)(n / ti->blck), ti->size, &r)) return 0;
    return r;
}
