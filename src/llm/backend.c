/* llm/backend: connects a model to a device backend. The CPU needs nothing
 * (weights stay in the mapping); CUDA uploads weights once at load. */
#include "llm/model.h"
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

void llm_backend_detach(tl_model *m) {
#ifdef TALLOW_CUDA
    if (m->backend_ctx) llm_cuda_detach(m);
#endif
    (void)m;
}
