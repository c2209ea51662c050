/* llm/backend: connects a model to a device backend. The CPU needs nothing
 * (weights stay in the mapping); CUDA uploads weights once at load. */
#include <string.h>

#include "llm/model.h"
#include "llm/session.h"
#ifdef TALLOW_CUDA
#include "backend/cuda/cuda_llm.h" /* CUDA hook (backend/cuda owns it) */
#endif

tl_status llm_backend_attach(tl_model *m) {
    switch (m->params.backend) {
    case TL_BACKEND_CPU:
        return TL_OK;
    case TL_BACKEND_CUDA:
#ifdef TALLOW_CUDA
        return llm_cuda_attach(m);
#else
        return tl_err(TL_ERR_UNSUPPORTED, "model: the CUDA backend is not built into this tallow "
                                          "(configure with -DTALLOW_CUDA=ON)");
#endif
    }
    return tl_err(TL_ERR_INVALID, "model: unknown backend %d", (int)m->params.backend);
}

tl_status tl_model_device_stats(tl_model *m, bool measure, tl_device_stats *out) {
    if (!m || !out) return tl_err(TL_ERR_INVALID, "device stats: NULL argument");
    memset(out, 0, sizeof *out);
    if (m->params.backend != TL_BACKEND_CUDA)
        return tl_err(TL_ERR_UNSUPPORTED, "device stats: the model runs on the CPU");
#ifdef TALLOW_CUDA
    /* the CUDA KV cache: f16 K and V per layer */
    out->kv_bytes_per_pos = (uint64_t)m->hp.n_layer * 2 * (uint64_t)m->hp.n_head_kv * (uint64_t)m->hp.head_dim * 2;
    return llm_cuda_device_stats(m, measure, out);
#else
    (void)measure;
    return tl_err(TL_ERR_UNSUPPORTED, "device stats: the CUDA backend is not built into this tallow");
#endif
}

uint64_t tl_session_device_bytes(const tl_session *s) {
#ifdef TALLOW_CUDA
    if (s && s->model->params.backend == TL_BACKEND_CUDA) return llm_cuda_session_bytes(s);
#endif
    (void)s;
    return 0;
}

void llm_backend_detach(tl_model *m) {
#ifdef TALLOW_CUDA
    if (m->backend_ctx) llm_cuda_detach(m);
#endif
    (void)m;
}
