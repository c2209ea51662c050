/* train/cuda/tcu_frozen: frozen GGUF weights on the device for adapter
 * fine-tuning. A weight is uploaded once in the engine's repacked layout and
 * dequantized to f32 by the engine's kernel whenever a matmul needs it, so
 * the training forward sees the values the engine's CUDA backend computes
 * with. Owns: each weight's device copy. Calls: backend/cuda (layout,
 * upload, dequantization), CUDA runtime. */
#include <stdlib.h>

#include "train/cuda/tcu_common.cuh"

struct tcu_frozen {
    tlc_weight w;
    void *mem;
};

extern "C" tl_status tcu_frozen_upload(tcu_frozen **out, const void *host, uint32_t type, int64_t n_in,
                                       int64_t n_out) {
    TCU_STATE(s);
    *out = NULL;
    const tl_type t = (tl_type)type;
    const size_t nb = n_in % 32 ? 0 : tlc_weight_bytes(t, n_in, n_out);
    if (!nb)
        return tl_err(TL_ERR_UNSUPPORTED,
                      "train cuda: frozen %s weight [%lld, %lld]: the CUDA kernels take F32, F16, BF16, Q4_0, "
                      "Q4_1, Q8_0, Q4_K and Q6_K with rows of a multiple of 32 values (256 for K-quants)",
                      tl_type_name(t), (long long)n_out, (long long)n_in);
    tcu_frozen *f = (tcu_frozen *)calloc(1, sizeof *f);
    const size_t raw = tl_row_bytes(t, n_in) * (size_t)n_out;
    void *staging = NULL;
    tl_status st = TL_OK;
    if (!f || !(f->mem = tcu_alloc(nb)) || !(staging = tcu_alloc(raw)))
        st = tl_err(TL_ERR_NOMEM, "train cuda: out of device memory for a frozen %s weight (%zu bytes)",
                    tl_type_name(t), nb + raw);
    if (!st) st = tlc_weight_describe(&f->w, t, n_in, n_out, f->mem);
    if (!st) st = tlc_weight_upload_on(s->stream, &f->w, host, staging);
    if (!st) st = tcu_err(cudaStreamSynchronize(s->stream), "frozen weight upload");
    tcu_free(staging);
    if (st) {
        if (f) tcu_free(f->mem);
        free(f);
        return st;
    }
    *out = f;
    return TL_OK;
}

extern "C" void tcu_frozen_free(tcu_frozen *f) {
    if (!f) return;
    tcu_free(f->mem);
    free(f);
}

extern "C" tl_status tcu_frozen_dequant(const tcu_frozen *f, float *dst) {
    TCU_STATE_D(s, f->w.n_out);
    return tlc_dequant_f32_on(s->stream, &f->w, dst);
}
