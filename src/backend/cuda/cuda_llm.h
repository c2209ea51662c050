/* backend/cuda/cuda_llm: the llama-family forward pass on the CUDA backend,
 * and the hooks llm/backend.c and llm/session.c call when a model is loaded
 * with TL_BACKEND_CUDA (compiled only with TALLOW_CUDA=ON).
 * Owns: the device copy of the weights (model->backend_ctx) and each
 * session's device state (session->backend_ctx: KV cache, activations, the
 * captured decode graph). Calls: backend/cuda (C ABI), llm/session.h. */
#ifndef TL_BACKEND_CUDA_LLM_H
#define TL_BACKEND_CUDA_LLM_H

#include "llm/session.h"

/* Upload the model's weights (progress on stderr for large files). */
tl_status llm_cuda_attach(tl_model *m);
void llm_cuda_detach(tl_model *m);
/* Device KV cache + activations for a session of s->n_ctx / s->n_batch. */
tl_status llm_cuda_session_init(tl_session *s);
void llm_cuda_session_free(tl_session *s);
/* tl_session_eval / tl_session_eval_all on the device. Logits are copied to
 * the host only when asked for (logits != NULL / out). */
tl_status llm_cuda_eval(tl_session *s, const int32_t *tokens, int32_t n, const float **logits);
tl_status llm_cuda_eval_all(tl_session *s, const int32_t *tokens, int32_t n, float *out);
/* Evaluate and return the greedy next token, chosen on the device: only the
 * token id crosses the bus. */
tl_status llm_cuda_eval_greedy(tl_session *s, const int32_t *tokens, int32_t n, int32_t *next);
/* Device memory held for the model's weights and for this session. */
size_t llm_cuda_weight_bytes(const tl_model *m);
size_t llm_cuda_session_bytes(const tl_session *s);
/* tl_model_device_stats for a CUDA model (kv_bytes_per_pos filled by the caller). */
tl_status llm_cuda_device_stats(const tl_model *m, bool measure, tl_device_stats *out);

#endif
