/* convert: Hugging Face checkpoint folder -> GGUF model file.
 *
 * Reads config.json (architecture and hyper-parameters), the safetensors
 * weights (one model.safetensors, or shards listed by
 * model.safetensors.index.json), tokenizer.json + tokenizer_config.json,
 * and writes a GGUF laid out as llama.cpp's convert_hf_to_gguf.py lays it
 * out (tensor names, GGUF dim order, llama Q/K row permutation, Llama-3
 * rope_freqs, Gemma's norm weights stored as 1 + w, tokenizer.ggml.* keys),
 * so the file runs in tallow and in llama.cpp. Architectures: llama, qwen2,
 * qwen3, gemma3 (text). Weights are mmapped and converted one tensor at a
 * time while the file is written (rows split over a thread pool): the model
 * is never in memory twice.
 * Owns: nothing past the call. Calls: io (safetensors, gguf writer), quant,
 * base (threadpool, status), cJSON. */
#ifndef TL_CONVERT_CONVERT_H
#define TL_CONVERT_CONVERT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "tensor/dtype.h"

/* Progress and notes for a person (the library itself never prints). */
typedef void (*cvt_log_fn)(void *ctx, const char *msg);

typedef struct cvt_params {
    const char *hf_dir;        /* config.json + *.safetensors (+ tokenizer files) */
    const char *tokenizer_dir; /* tokenizer.json etc.; NULL = hf_dir */
    const char *out_path;      /* written as out_path.tmp, then renamed */
    tl_type type;              /* type of the weight matrices (F32, F16, BF16, Q8_0, ...) */
    uint32_t file_type;        /* general.file_type (llama_ftype numbering) */
    bool vocab_only;           /* metadata + tokenizer, no tensors; config.json optional */
    int n_threads;             /* <= 0: one */
    cvt_log_fn log;            /* may be NULL */
    void *log_ctx;
} cvt_params;

/* One conversion. Errors (missing file, bad JSON, unknown architecture,
 * missing tensor, shape mismatch, truncated shard, unsupported tokenizer)
 * return non-OK with a message naming the file and tensor or key; the output
 * file is not left behind. */
tl_status cvt_convert(const cvt_params *p);

/* Output type by name ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0",
 * "q5_1", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq4_nl", "iq4_xs"), case
 * insensitive; false if unknown. */
bool cvt_type_from_name(const char *name, tl_type *type, uint32_t *file_type);
/* The accepted names, comma separated. */
const char *cvt_type_names(void);

#endif
