/* tensor: a typed, strided view of memory on a device.
 *
 * ne[] are sizes with ne[0] the fastest-varying dimension (GGUF order, the
 * reverse of NumPy's shape); nb[] are byte strides. For quantized types a
 * "row" of ne[0] elements is a sequence of blocks and nb[0] is the block's
 * byte size per blck elements (rows are always contiguous). A tensor either
 * owns its buffer (`owned` set, freed by tl_tensor_free) or views memory it
 * does not own (mmapped weights, arenas, other tensors).
 * Owns: optionally its buffer. Calls: base, tensor/dtype. */
#ifndef TL_TENSOR_TENSOR_H
#define TL_TENSOR_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "tensor/dtype.h"

#define TL_MAX_DIMS 4

typedef enum tl_device {
    TL_DEVICE_CPU = 0,
    TL_DEVICE_CUDA = 1
} tl_device;

typedef struct tl_tensor {
    tl_type type;
    tl_device device;
    int32_t n_dims;
    int64_t ne[TL_MAX_DIMS]; /* sizes, ne[0] fastest; unused dims are 1 */
    size_t nb[TL_MAX_DIMS];  /* byte strides */
    void *data;
    bool owned;              /* data was allocated for this tensor */
    const char *name;        /* optional, not owned */
} tl_tensor;

/* Describe contiguous memory (no allocation). TL_ERR_INVALID on bad sizes. */
tl_status tl_tensor_view(tl_tensor *t, tl_type type, int32_t n_dims, const int64_t *ne, void *data);
/* Allocate a contiguous zeroed CPU tensor (64-byte aligned). */
tl_status tl_tensor_alloc(tl_tensor *t, tl_type type, int32_t n_dims, const int64_t *ne);
void tl_tensor_free(tl_tensor *t);
int64_t tl_tensor_nelements(const tl_tensor *t);
size_t tl_tensor_nbytes(const tl_tensor *t); /* of a contiguous tensor */
bool tl_tensor_is_contiguous(const tl_tensor *t);

#endif
