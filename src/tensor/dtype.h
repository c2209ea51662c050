/* tensor/dtype: the element types tallow knows, with GGUF's numeric ids.
 *
 * The enum values are the ids GGUF files store (ggml_type), so a file's type
 * field maps to tl_type without a table. Quantized types are stored in blocks
 * of `blck` elements taking `size` bytes; a row of n elements (n a multiple
 * of blck) takes n/blck*size bytes. Owns: the type table. Calls: nothing. */
#ifndef TL_TENSOR_DTYPE_H
#define TL_TENSOR_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

typedef enum tl_type {
    TL_TYPE_F32 = 0,
    TL_TYPE_F16 = 1,
    TL_TYPE_Q4_0 = 2,
    TL_TYPE_Q4_1 = 3,
    TL_TYPE_Q5_0 = 6,
    TL_TYPE_Q5_1 = 7,
    TL_TYPE_Q8_0 = 8,
    TL_TYPE_Q8_1 = 9,
    TL_TYPE_Q2_K = 10,
    TL_TYPE_Q3_K = 11,
    TL_TYPE_Q4_K = 12,
    TL_TYPE_Q5_K = 13,
    TL_TYPE_Q6_K = 14,
    TL_TYPE_Q8_K = 15,
    TL_TYPE_IQ2_XXS = 16,
    TL_TYPE_IQ2_XS = 17,
    TL_TYPE_IQ3_XXS = 18,
    TL_TYPE_IQ1_S = 19,
    TL_TYPE_IQ4_NL = 20,
    TL_TYPE_IQ3_S = 21,
    TL_TYPE_IQ2_S = 22,
    TL_TYPE_IQ4_XS = 23,
    TL_TYPE_I8 = 24,
    TL_TYPE_I16 = 25,
    TL_TYPE_I32 = 26,
    TL_TYPE_I64 = 27,
    TL_TYPE_F64 = 28,
    TL_TYPE_IQ1_M = 29,
    TL_TYPE_BF16 = 30,
    TL_TYPE_TQ1_0 = 34,
    TL_TYPE_TQ2_0 = 35,
    TL_TYPE_MXFP4 = 39,
    TL_TYPE_COUNT = 40
} tl_type;

typedef struct tl_type_info {
    const char *name;  /* "q4_0", NULL for ids that are not a type */
    int32_t blck;      /* elements per block (1 for plain types) */
    size_t size;       /* bytes per block */
    bool quantized;
} tl_type_info;

/* Info for type t, or NULL if t is not a known type id. */
const tl_type_info *tl_type_get(uint32_t t);
/* Name or "unknown(N)" into a static string for known ids; never NULL. */
const char *tl_type_name(uint32_t t);
/* Parse "q4_0"/"Q4_0"; returns false if unknown. */
bool tl_type_from_name(const char *name, tl_type *out);
/* Bytes for a row of n elements; 0 if n is not a multiple of the block size
 * or the type is unknown (n > 0 assumed). Overflow-checked: 0 on overflow. */
size_t tl_row_bytes(uint32_t t, int64_t n);

#endif
