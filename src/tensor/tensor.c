#include "tensor/tensor.h"

#include <stdlib.h>
#include <string.h>

static tl_status tensor_fill(tl_tensor *t, tl_type type, int32_t n_dims, const int64_t *ne) {
    const tl_type_info *ti = tl_type_get(type);
    if (!ti) return tl_err(TL_ERR_INVALID, "tensor: unknown type %u", (unsigned)type);
    if (n_dims < 1 || n_dims > TL_MAX_DIMS)
        return tl_err(TL_ERR_INVALID, "tensor: %d dims (1..%d allowed)", n_dims, TL_MAX_DIMS);
    memset(t, 0, sizeof *t);
    t->type = type;
    t->n_dims = n_dims;
    for (int i = 0; i < TL_MAX_DIMS; i++) {
        int64_t n = i < n_dims ? ne[i] : 1;
        if (n <= 0) return tl_err(TL_ERR_INVALID, "tensor: dim %d has size %lld", i, (long long)n);
        t->ne[i] = n;
    }
    size_t row = tl_row_bytes(type, t->ne[0]);
    if (row == 0)
        return tl_err(TL_ERR_INVALID, "tensor: row of %lld is not a whole number of %s blocks",
                      (long long)t->ne[0], ti->name);
    t->nb[0] = ti->size;
    t->nb[1] = row;
    for (int i = 2; i < TL_MAX_DIMS; i++)
        if (!tl_mul_ok(t->nb[i - 1], (size_t)t->ne[i - 1], &t->nb[i]))
            return tl_err(TL_ERR_INVALID, "tensor: size overflows");
    size_t total;
    if (!tl_mul_ok(t->nb[3], (size_t)t->ne[3], &total))
        return tl_err(TL_ERR_INVALID, "tensor: size overflows");
    return TL_OK;
}

tl_status tl_tensor_view(tl_tensor *t, tl_type type, int32_t n_dims, const int64_t *ne, void *data) {
    tl_status s = tensor_fill(t, type, n_dims, ne);
    if (s) return s;
    t->data = data;
    return TL_OK;
}

tl_status tl_tensor_alloc(tl_tensor *t, tl_type type, int32_t n_dims, const int64_t *ne) {
    tl_status s = tensor_fill(t, type, n_dims, ne);
    if (s) return s;
    size_t bytes = tl_tensor_nbytes(t);
    size_t padded = (bytes + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, padded ? padded : 64);
    if (!p) return tl_err(TL_ERR_NOMEM, "tensor: cannot allocate %zu bytes", bytes);
    memset(p, 0, padded ? padded : 64);
    t->data = p;
    t->owned = true;
    return TL_OK;
}

void tl_tensor_free(tl_tensor *t) {
    if (t && t->owned) free(t->data);
    if (t) {
        t->data = NULL;
        t->owned = false;
    }
}

int64_t tl_tensor_nelements(const tl_tensor *t) {
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

size_t tl_tensor_nbytes(const tl_tensor *t) {
    return t->nb[3] * (size_t)t->ne[3];
}

bool tl_tensor_is_contiguous(const tl_tensor *t) {
    const tl_type_info *ti = tl_type_get(t->type);
    if (!ti || t->nb[0] != ti->size) return false;
    if (t->nb[1] != tl_row_bytes(t->type, t->ne[0])) return false;
    return t->nb[2] == t->nb[1] * (size_t)t->ne[1] && t->nb[3] == t->nb[2] * (size_t)t->ne[2];
}
