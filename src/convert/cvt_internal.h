/* convert/cvt_internal: what the convert files share: the parsed config
 * (hf_config.c), the weight index over safetensors shards (hf_tensors.c),
 * JSON file reading, and the tokenizer writer (hf_tokenizer.c).
 * Owns: nothing. Calls: cJSON, io. */
#ifndef TL_CONVERT_CVT_INTERNAL_H
#define TL_CONVERT_CVT_INTERNAL_H

#include <cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "io/gguf.h"
#include "io/safetensors.h"

typedef enum cvt_arch { CVT_ARCH_LLAMA, CVT_ARCH_QWEN2, CVT_ARCH_QWEN3, CVT_ARCH_GEMMA3 } cvt_arch;

typedef struct cvt_hparams {
    cvt_arch arch;
    const char *arch_name;  /* GGUF general.architecture */
    int64_t n_embd, n_layer, n_ff, n_head, n_head_kv, n_vocab;
    int64_t head_dim;       /* config's head_dim, or n_embd / n_head */
    bool has_head_dim;      /* config.json states head_dim (written as key/value_length) */
    int64_t n_ctx;          /* max_position_embeddings; 0 if absent */
    double rope_theta;      /* 0 if absent */
    double norm_eps;        /* rms_norm_eps; < 0 if absent */
    bool tied;              /* tie_word_embeddings */
    bool tied_known;        /* the config states it (else: tied iff there is no lm_head.weight) */
    /* llama3 rope scaling -> rope_freqs.weight */
    bool rope_llama3;
    double rs_factor, rs_low, rs_high, rs_orig_ctx;
    /* linear rope scaling -> rope.scaling.{type,factor} */
    bool rope_linear;
    double rs_linear_factor;
    int64_t sliding_window; /* gemma3; 0 if absent */
} cvt_hparams;

/* Read and parse a JSON file of at most CVT_MAX_JSON_BYTES; errors name the
 * file (and byte offset). cJSON bounds nesting (CJSON_NESTING_LIMIT, 1000). */
#define CVT_MAX_JSON_BYTES (1L << 31)
tl_status cvt_read_json(const char *path, cJSON **out);
/* path = dir + "/" + name, malloc'd. NULL on overflow/out of memory. */
char *cvt_path_join(const char *dir, const char *name);
bool cvt_file_exists(const char *path);

/* config.json -> hparams. TL_ERR_UNSUPPORTED for an unknown architecture. */
tl_status cvt_config_parse(const cJSON *cfg, const char *path, cvt_hparams *hp);

/* The model's weights over one or more mmapped safetensors files. */
typedef struct cvt_weights cvt_weights;
tl_status cvt_weights_open(const char *dir, cvt_weights **out);
void cvt_weights_free(cvt_weights *w);
/* NULL if absent; *file (may be NULL) gets the shard's file name. */
const st_tensor *cvt_weights_find(cvt_weights *w, const char *name, const char **file);
/* Mark a tensor consumed; cvt_weights_unused gives the first never-used
 * tensor name (or NULL) so stray weights are an error, not silently lost. */
void cvt_weights_use(cvt_weights *w, const char *name);
const char *cvt_weights_unused(const cvt_weights *w, const char *const *ignore_suffixes);

/* tokenizer.json (+ tokenizer_config.json, config.json special ids) ->
 * tokenizer.ggml.* and tokenizer.chat_template keys. n_vocab_cfg > 0 pads the
 * token list to that size (config.json vocab_size). *n_tokens gets the token
 * count written. */
tl_status cvt_tokenizer_write(gguf_writer *w, const char *tok_dir, const cJSON *config, int64_t n_vocab_cfg,
                              int64_t *n_tokens);

#endif
