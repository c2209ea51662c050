/* tallow: public C API.
 *
 * Opaque handles, status codes, no global mutable state. Every function that
 * can fail returns a tl_status; on failure tl_last_error() gives a message
 * for the calling thread saying what went wrong and where. Nothing here
 * exits or aborts the process.
 *
 * Typical use (see examples/simple.c):
 *   tl_model *m; tl_model_load("model.gguf", NULL, &m);
 *   tl_session *s; tl_session_init(m, NULL, &s);
 *   tl_tokenize(m, ...); tl_session_eval(s, toks, n, &logits);
 *   tl_sampler_sample(...); tl_detok_push(...); ...
 */
#ifndef TALLOW_H
#define TALLOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TALLOW_VERSION "0.1.0"

typedef enum tl_status {
    TL_OK = 0,
    TL_ERR_INVALID = 1,     /* bad argument from the caller */
    TL_ERR_IO = 2,          /* open/read/write/mmap failed */
    TL_ERR_FORMAT = 3,      /* malformed file or input */
    TL_ERR_UNSUPPORTED = 4, /* valid but not supported (arch, type, op) */
    TL_ERR_NOMEM = 5,       /* allocation failed */
    TL_ERR_NOT_FOUND = 6,   /* key/tensor/file absent */
    TL_ERR_BACKEND = 7,     /* device/backend failure */
    TL_ERR_STATE = 8,       /* call not valid in the object's current state */
    TL_ERR_FULL = 9         /* a bounded pool (the KV cache's blocks) has no room left */
} tl_status;

/* Message for the last failure on this thread (empty if none yet). */
const char *tl_last_error(void);
const char *tl_status_str(tl_status s);

/* ---- CPU kernels --------------------------------------------------------- */

/* The CPU backend's kernels come in sets by instruction set. AUTO (the
 * default) picks the best set this CPU runs, found with cpuid at first
 * use: AVX512 (AVX-512 F/BW/VL/VNNI; its BF16 weight dots also need
 * AVX512_BF16), else AVX2 (AVX2 + FMA + F16C), else SCALAR (the portable
 * reference kernels, which every other set is tested against). Choosing a
 * lower set is for comparing them; the choice is process-wide, so make it
 * before loading models or between calls, never while one runs. */
typedef enum tl_cpu_kernels {
    TL_CPU_KERNELS_AUTO = 0,
    TL_CPU_KERNELS_SCALAR = 1,
    TL_CPU_KERNELS_AVX2 = 2,
    TL_CPU_KERNELS_AVX512 = 3
} tl_cpu_kernels;

/* TL_ERR_UNSUPPORTED (and no change) if this CPU lacks the set's ISA. */
tl_status tl_cpu_set_kernels(tl_cpu_kernels k);
/* The set that runs now: "scalar", "avx2" or "avx512". */
const char *tl_cpu_kernel_set(void);
/* "auto", "scalar", "avx2", "avx512" -> the enum (TL_ERR_INVALID otherwise). */
tl_status tl_cpu_kernels_parse(const char *name, tl_cpu_kernels *out);

/* ---- models ------------------------------------------------------------ */

typedef struct tl_model tl_model;

typedef enum tl_backend_kind {
    TL_BACKEND_CPU = 0,
    TL_BACKEND_CUDA = 1
} tl_backend_kind;

/* Tuning of the CUDA backend's kernels (defined below, with its defaults). */
typedef struct tl_cuda_tuning tl_cuda_tuning;

typedef struct tl_model_params {
    tl_backend_kind backend; /* CPU by default */
    int32_t n_gpu_layers;    /* for CUDA: layers on the GPU (-1: all) */
    bool verbose;            /* print load progress to stderr */
    const tl_cuda_tuning *cuda_tuning; /* NULL: tl_cuda_tuning_default() */
} tl_model_params;

typedef struct tl_model_info {
    const char *arch;        /* "llama", "qwen2", "qwen3" */
    const char *name;        /* general.name or file name */
    const char *ftype;       /* dominant weight type, e.g. "q4_1" */
    uint64_t n_params;
    uint64_t n_bytes;        /* bytes of tensor data */
    int32_t n_vocab, n_ctx_train, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff;
} tl_model_info;

tl_model_params tl_model_default_params(void);
tl_status tl_model_load(const char *path, const tl_model_params *params, tl_model **out);
void tl_model_free(tl_model *m);
void tl_model_get_info(const tl_model *m, tl_model_info *out);
/* The model's chat template (tokenizer.chat_template), or NULL if it has none. */
const char *tl_model_chat_template(const tl_model *m);
/* An integer metadata value of the model's file (e.g. "llama.pooling_type");
 * TL_ERR_NOT_FOUND if absent, TL_ERR_FORMAT if not an integer. */
tl_status tl_model_meta_int(const tl_model *m, const char *key, int64_t *out);

/* ---- CUDA tuning -----------------------------------------------------------
 * How the CUDA backend's kernels split their work. tl_model_load copies it
 * when the model is placed on the device (tl_model_params.cuda_tuning; NULL:
 * tl_cuda_tuning_default()) and rejects a value outside its range with
 * TL_ERR_INVALID naming the field. The defaults (in brackets) are the fastest
 * measured on an H200 (docs/PERFORMANCE.md); the others are for other cards.
 * A setting changes speed, and where it moves a split the order of a sum, so
 * results may differ in the last bits; flash_prefill off computes the prompt
 * attention in f32 instead of f16. The library reads no environment: a tool
 * may map its own flags or variables onto these fields. Ignored on the CPU. */
struct tl_cuda_tuning {
    bool pdl;               /* programmatic dependent launch: a kernel loads weights as the one before ends [true] */
    bool flash_prefill;     /* prompt attention on the tensor cores (f16 cache, head_dim 64 or 128) [true] */
    int32_t att_split_min;  /* decode attention: fewest positions per split, 1..4096; 8x it merge in a cluster [16] */
    int32_t mv_store_units; /* QKV and output-head matvecs: 16-byte units per lane in flight, 1/2/4/8, 0: by type [0] */
    int32_t mv_glu_units;   /* gate/up matvec: the same, 0: 2 [0] */
    int32_t mv_split_max;   /* Wo/down with fewer 32-row groups than SMs: most blocks sharing a group, 1/2/4 [4] */
    int32_t mvm_max_tokens; /* steps of 2..this many tokens run the few-token matvec (each weight unit
                             * dotted with every token), longer ones the small-batch GEMM, 0..4 [4] */
};
/* The defaults above. mv_store_units 0 means 2 for quantized weights, 8 for
 * 16-bit float rows of at most 2048 values and 4 for other float rows. */
tl_cuda_tuning tl_cuda_tuning_default(void);

/* One chat turn (UTF-8). */
typedef struct tl_chat_message {
    const char *role;    /* "system", "user", "assistant", ... */
    const char *content;
} tl_chat_message;

/* Render a chat template as HF's apply_chat_template(tokenize=False) does,
 * with bos_token/eos_token from the model. tmpl: template source, or NULL
 * for the model's own (TL_ERR_NOT_FOUND if it has none). *out is malloc'd,
 * NUL-terminated (free() it). Errors (template syntax, raise_exception)
 * carry the template line and column. Tokenize the result with
 * add_special=false: templates add BOS themselves. */
tl_status tl_chat_apply_template(const tl_model *m, const char *tmpl, const tl_chat_message *msgs,
                                 int32_t n_msgs, bool add_generation_prompt, char **out, size_t *out_len);
/* The same with the conversation as JSON text: messages_json a JSON array of
 * message objects, passed to the template as they are (so tool_calls,
 * tool_call_id, name reach it), and tools_json a JSON array of tool schemas
 * for the template's `tools` (NULL: none). */
tl_status tl_chat_apply_template_json(const tl_model *m, const char *tmpl, const char *messages_json,
                                      const char *tools_json, bool add_generation_prompt, char **out,
                                      size_t *out_len);

/* ---- tokens -------------------------------------------------------------- */

/* Encode text. add_special: add BOS/EOS as the model's metadata asks.
 * parse_special: match special-token text (e.g. "<|im_start|>") inside the
 * text; turn off for untrusted input. On success *n_out tokens were written;
 * TL_ERR_INVALID with *n_out = needed count if cap is too small. */
tl_status tl_tokenize(const tl_model *m, const char *text, size_t len, bool add_special,
                      bool parse_special, int32_t *out, int32_t cap, int32_t *n_out);
int32_t tl_token_bos(const tl_model *m);      /* -1 if none */
int32_t tl_token_eos(const tl_model *m);      /* -1 if none */
bool tl_token_is_eog(const tl_model *m, int32_t tok); /* end of generation */
bool tl_token_is_control(const tl_model *m, int32_t tok); /* special/control token */
/* Raw bytes of one token (specials as their text); NULL if out of range. */
const char *tl_token_text(const tl_model *m, int32_t tok, size_t *len);

/* Streaming detokenizer: holds back bytes of an incomplete UTF-8 character
 * so callers never print half a character. */
typedef struct tl_detok tl_detok;
tl_status tl_detok_init(const tl_model *m, tl_detok **out);
void tl_detok_free(tl_detok *d);
/* Append token's text; writes the bytes now complete into buf (NUL
 * terminated) and their count to *n. cap >= 64 is always enough. */
tl_status tl_detok_push(tl_detok *d, int32_t tok, char *buf, size_t cap, size_t *n);
/* Flush held bytes (invalid UTF-8 at the end comes out as U+FFFD). */
tl_status tl_detok_flush(tl_detok *d, char *buf, size_t cap, size_t *n);

/* ---- contexts: many sequences over one paged KV cache --------------------
 *
 * A context owns a KV cache, activation scratch and (on the CPU) a thread
 * pool, and evaluates batches of tokens drawn from many sequences at once:
 * every weight is read once per forward for all of them. The KV cache is a
 * pool of fixed-size blocks of positions shared by all sequences, so memory
 * follows the live tokens; a sequence's positions are always 0..len-1, and
 * a batch appends to its sequences. Forking makes a sequence that shares
 * another's prefix blocks without copying them (a partly filled block is
 * copied when either side next writes to it).
 *
 * Typical use:
 *   tl_context *c; tl_context_init(m, NULL, &c);
 *   tl_batch b = {.n_tokens = n, .token = toks, .seq_id = seqs, .logits = want};
 *   tl_decode(c, &b);                       // positions follow each sequence
 *   const float *lg = tl_context_logits(c, i); // i-th token of the batch
 */

typedef struct tl_context tl_context;

typedef struct tl_context_params {
    int32_t n_ctx;     /* KV positions in the pool, shared by all sequences (0: min(model's, 4096)) */
    int32_t n_seq_max; /* sequence ids are 0..n_seq_max-1 (0: 1) */
    int32_t n_batch;   /* most tokens one forward runs; a larger batch is split (0: 512) */
    int32_t n_threads; /* CPU threads (0: number of cores) */
    int32_t kv_block;  /* positions per KV block, a power of two 1..256 (0: 16) */
    int32_t n_seq_ctx; /* longest one sequence may grow (0: n_ctx, capped by the model's) */
    bool embeddings;   /* also keep each output token's final hidden state (tl_context_embedding) */
    bool profile;      /* time every backend op (CUDA only: steps run eagerly, not from
                        * captured graphs; read the table with tl_context_profile) */
} tl_context_params;

/* One batch: token i goes to sequence seq_id[i] at position pos[i]. Tokens
 * of one sequence must come in position order, each sequence continuing at
 * its current length. A rejected batch changes nothing. */
typedef struct tl_batch {
    int32_t n_tokens;
    const int32_t *token;  /* [n_tokens] */
    const int32_t *pos;    /* [n_tokens] positions, or NULL: each sequence's next ones */
    const int32_t *seq_id; /* [n_tokens] sequence ids, or NULL: all sequence 0 */
    const int8_t *logits;  /* [n_tokens] nonzero: keep this token's logits; NULL: the last token's */
} tl_batch;

typedef struct tl_kv_stats {
    int32_t block_size;      /* positions per block */
    int32_t n_blocks;        /* blocks in the pool */
    int32_t n_used;          /* blocks holding positions of some sequence */
    int32_t n_seqs;          /* sequences with at least one position */
    int64_t n_positions;     /* positions held, summed over sequences (shared ones counted once per sequence) */
    uint64_t bytes_per_block;
    uint64_t bytes_total;    /* the pool's memory */
} tl_kv_stats;

tl_context_params tl_context_default_params(void);
tl_status tl_context_init(tl_model *m, const tl_context_params *params, tl_context **out);
void tl_context_free(tl_context *c);
const tl_model *tl_context_model(const tl_context *c);
int32_t tl_context_n_ctx(const tl_context *c);     /* positions in the pool */
int32_t tl_context_n_seq_max(const tl_context *c);
int32_t tl_context_n_seq_ctx(const tl_context *c); /* longest sequence */

/* Evaluate a batch. Validated first (token ids, sequence ids, positions,
 * sizes, room in the pool: TL_ERR_FULL naming the blocks needed and free);
 * on any error no sequence changes. */
tl_status tl_decode(tl_context *c, const tl_batch *b);
/* The op timing table of a context made with profile on (largest total
 * first: op, tokens in the step, count, total ms, mean us, share of the
 * device time) since the last call, NUL-terminated into buf; the totals
 * start again. An op that marks its parts (a linear's matmul, "matmul:
 * ...") is charged only for the rest. TL_ERR_INVALID without profile. */
tl_status tl_context_profile(tl_context *c, char *buf, size_t n);
/* Logits [n_vocab] of token i of the last batch, if it asked for them, else
 * NULL. Valid until the next tl_decode. On a GPU a row is copied to the
 * host when first asked for. */
const float *tl_context_logits(tl_context *c, int32_t i);
/* Argmax of those logits (lowest id on ties); on a GPU computed on the
 * device, so only the id is copied. TL_ERR_INVALID if i kept no logits. */
tl_status tl_context_greedy(tl_context *c, int32_t i, int32_t *tok);
/* Final hidden state [n_embd] of token i (after the output norm), with
 * params.embeddings set; else NULL. */
const float *tl_context_embedding(tl_context *c, int32_t i);

/* Wait until the context's device work is done (evaluation on a GPU returns
 * before it finishes; reading outputs waits too). */
tl_status tl_context_synchronize(tl_context *c);

/* Sequences. */
int32_t tl_seq_len(const tl_context *c, int32_t seq);        /* positions held; -1: bad id */
tl_status tl_seq_remove(tl_context *c, int32_t seq);         /* forget it, freeing its blocks */
tl_status tl_seq_truncate(tl_context *c, int32_t seq, int32_t len); /* keep positions < len */
/* dst (which must be empty) becomes src's first len positions, sharing
 * their KV blocks. */
tl_status tl_seq_fork(tl_context *c, int32_t src, int32_t dst, int32_t len);
void tl_context_kv_stats(const tl_context *c, tl_kv_stats *out);

/* ---- sessions: one sequence (a context of one sequence) ------------------- */

typedef struct tl_session tl_session;

typedef struct tl_session_params {
    int32_t n_ctx;     /* context length (0: min(model's, 4096)) */
    int32_t n_batch;   /* max tokens per forward call (0: 512) */
    int32_t n_threads; /* CPU threads (0: number of cores) */
} tl_session_params;

tl_session_params tl_session_default_params(void);
tl_status tl_session_init(tl_model *m, const tl_session_params *params, tl_session **out);
void tl_session_free(tl_session *s);
/* Run n tokens at the current position (appending to the KV cache; long
 * inputs are split into n_batch chunks). *logits (may be NULL) receives the
 * last token's logits [n_vocab], valid until the next call. */
tl_status tl_session_eval(tl_session *s, const int32_t *tokens, int32_t n, const float **logits);
/* As eval, but logits for every token: out must hold n * n_vocab floats. */
tl_status tl_session_eval_all(tl_session *s, const int32_t *tokens, int32_t n, float *out);
/* As eval, then the greedy next token (argmax of the last token's logits;
 * on CUDA computed on the device so only the id is copied back). */
tl_status tl_session_eval_greedy(tl_session *s, const int32_t *tokens, int32_t n, int32_t *next);
int32_t tl_session_pos(const tl_session *s);
/* Forget everything at and after pos (pos <= current position). */
tl_status tl_session_rewind(tl_session *s, int32_t pos);
int32_t tl_session_n_ctx(const tl_session *s);
/* The session's context (its one sequence is 0), e.g. for tl_context_kv_stats. */
tl_context *tl_session_context(tl_session *s);

/* ---- LoRA adapters -------------------------------------------------------
 *
 * An adapter changes some of a model's weights to W + s * B A (A: rank x
 * n_in, B: n_out x rank), with s = scale * alpha / rank (rsLoRA: alpha /
 * sqrt(rank)). It is applied at run time beside the unchanged base weights
 * (any type, quantized included), so one loaded model serves many adapters;
 * each sequence of a context may use its own set (several adapters add up),
 * and a batch mixing them is still one forward.
 *
 * Loading reads either a GGUF adapter (general.type = "adapter",
 * adapter.type = "lora", adapter.lora.alpha, tensors "<weight>.lora_a" /
 * "<weight>.lora_b", as llama.cpp's convert_lora_to_gguf.py writes) or a
 * PEFT directory (adapter_config.json + adapter_model.safetensors; HF names
 * mapped to the GGUF ones, llama's Q/K rows permuted in B as the model's
 * converter permuted the base). Every tensor is checked against the model
 * (name, shape, rank, type): a mismatch is an error naming the tensor, and
 * the model is never changed. Adapted weights: attn_q/k/v/output and
 * ffn_gate/up/down of the llama family and gemma3.
 *
 * An adapter may be used with any model whose adapted weights have the
 * shapes it was checked against (attaching checks again); it must outlive
 * every session or context using it. */

typedef struct tl_lora tl_lora;

/* One adapter in a set, with the user's scale (1: as trained). */
typedef struct tl_lora_use {
    const tl_lora *lora;
    float scale;
} tl_lora_use;

typedef struct tl_lora_info {
    const char *name;    /* file or directory name */
    const char *format;  /* "gguf" or "peft" */
    int32_t n_weights;   /* adapted weights */
    int32_t rank_min, rank_max;
    float alpha;         /* 0: the file gives none (s = scale) */
    bool rslora;
} tl_lora_info;

/* path: a GGUF adapter file or a PEFT directory, for model m. */
tl_status tl_lora_load(const tl_model *m, const char *path, tl_lora **out);
void tl_lora_free(tl_lora *l);
void tl_lora_get_info(const tl_lora *l, tl_lora_info *out);
/* Bake n adapters into a copy of m's file: out_path gets every tensor and
 * key of the model with W += s B A in each adapted weight. type: NULL keeps
 * each merged weight's type, else a type name ("f16", "q8_0", ...) for the
 * merged weights. n_threads <= 0: one. */
tl_status tl_lora_merge(const tl_model *m, const tl_lora_use *u, int32_t n, const char *out_path, const char *type,
                        int32_t n_threads);
/* Sequence seq of a context uses these n adapters (at most 8; n = 0: none)
 * from its next tl_decode on; the set stays with the sequence id until
 * replaced (removing or truncating its positions keeps it). Tokens of
 * sequences with different sets still run in one forward. */
tl_status tl_seq_set_lora(tl_context *c, int32_t seq, const tl_lora_use *u, int32_t n);
/* The same for a session's one sequence. */
tl_status tl_session_set_lora(tl_session *s, const tl_lora_use *u, int32_t n);

/* ---- device figures (GPU backends) --------------------------------------- */

/* What tallow bench needs for its fraction-of-floor columns. */
typedef struct tl_device_stats {
    char name[256];
    double copy_gbs;           /* device-to-device copy, GB/s counting read + write (0: not measured) */
    double gemm_tflops;        /* f16 GEMM on the tensor cores, TFLOP/s (0: not measured) */
    uint64_t weight_bytes;     /* device memory holding the weights */
    uint64_t decode_bytes;     /* weight bytes one decode step reads, in the file's encoding
                                * (what any engine must stream): all but the token embedding
                                * table (one row), unless the output head is it */
    uint64_t kv_bytes_per_pos; /* KV cache bytes per position, all layers */
    uint64_t mem_free, mem_total;
} tl_device_stats;
/* Figures of a model loaded on a GPU backend; measure: also time the
 * ceilings now (a copy of up to 2 GiB each way and an 8192^3 f16 GEMM,
 * about a second; needs that memory free). TL_ERR_UNSUPPORTED for a model
 * on the CPU. */
tl_status tl_model_device_stats(tl_model *m, bool measure, tl_device_stats *out);
/* Device memory a session holds (KV cache, activations, scratch); 0 on the CPU. */
uint64_t tl_session_device_bytes(const tl_session *s);

/* ---- grammars (structured output) ----------------------------------------
 * A GBNF grammar (llama.cpp's syntax) compiled against a vocabulary gives,
 * at each step, the set of tokens that keep the output inside the grammar.
 * Attach one to a sampler (tl_sampler_set_grammar) and tl_sampler_sample
 * picks only allowed tokens while tl_sampler_accept advances it.
 * Errors in grammar text are TL_ERR_FORMAT "grammar: line L, column C: ...". */

typedef struct tl_grammar_vocab tl_grammar_vocab;
typedef struct tl_grammar tl_grammar;

/* The vocabulary index grammars walk (a byte trie of the token texts). One
 * per model, shared by any number of grammars; it must outlive them. */
tl_status tl_grammar_vocab_init(const tl_model *m, tl_grammar_vocab **out);
/* The same from token texts: kind[i] 0 = text, 1 = end of generation
 * (allowed where the grammar may end), 2 = never allowed. */
tl_status tl_grammar_vocab_init_pieces(int32_t n, const char *const *text, const size_t *len, const uint8_t *kind,
                                       tl_grammar_vocab **out);
void tl_grammar_vocab_free(tl_grammar_vocab *v);

typedef struct tl_grammar_params {
    /* Bytes of token masks kept, one per parser state seen (a mask is
     * n_vocab/8 bytes); when full the cache starts over. Default 32 MiB.
     * The same bound again holds the per-lexeme parts of masks that are
     * reused between states (one mask and a list of trie nodes each), and
     * a third time the per-state token distances of completion pressure
     * (tl_grammar_mask_within). */
    size_t mask_cache_bytes;
    /* Parser states kept before the automaton is rebuilt from the current
     * state. Default 65536. */
    int32_t max_states;
} tl_grammar_params;

tl_grammar_params tl_grammar_default_params(void);
/* Compile gbnf (len bytes) with start rule root (NULL: "root") over v. */
tl_status tl_grammar_init(const tl_grammar_vocab *v, const char *gbnf, size_t len, const char *root,
                          const tl_grammar_params *params, tl_grammar **out);
void tl_grammar_free(tl_grammar *g);
/* Back to the start (and inactive again if lazy). */
void tl_grammar_reset(tl_grammar *g);
/* Lazy activation: the grammar allows everything until one of the trigger
 * strings appears in the accepted text, then constrains from the trigger's
 * first byte on (so the grammar should start with the trigger text). */
tl_status tl_grammar_set_triggers(tl_grammar *g, const char *const *triggers, int32_t n);
bool tl_grammar_is_active(const tl_grammar *g);
/* Allowed tokens now: bit t of (*words)[t / 32] (bit t % 32) is set when
 * token t is allowed. Valid until the next call on g. */
tl_status tl_grammar_mask(tl_grammar *g, const uint32_t **words);
/* Advance by a token: TL_ERR_INVALID (and g unchanged) if not allowed. */
tl_status tl_grammar_accept(tl_grammar *g, int32_t tok);
/* Advance by raw bytes (text the caller forces); TL_ERR_INVALID, g
 * unchanged, if they leave the grammar. */
tl_status tl_grammar_accept_bytes(tl_grammar *g, const char *s, size_t n);
/* Whether the text so far is a complete sentence of the grammar, and whether
 * an end-of-generation token was accepted. */
bool tl_grammar_can_end(const tl_grammar *g);
bool tl_grammar_ended(const tl_grammar *g);
/* Completion pressure. *bytes: the length of the shortest text that makes
 * the output so far a complete sentence (0 where it may end, and while
 * lazy and inactive or ended; INT32_MAX at a dead end). Every rule's
 * shortest expansion is found once at compile time, so minLength,
 * minItems and required members count. */
tl_status tl_grammar_distance(tl_grammar *g, int32_t *bytes);
/* The mask of tl_grammar_mask less the tokens after which the output could
 * no longer be completed, and an end-of-generation token drawn, within
 * budget tokens in all (this one included), counting every later token as
 * one byte. When the distance is already budget or more: less the tokens
 * that do not shorten it. Where no token
 * would qualify, the plain mask (never a dead end it did not have). */
tl_status tl_grammar_mask_within(tl_grammar *g, int32_t budget, const uint32_t **words);
/* GBNF text of any JSON object (--json, response_format json_object). */
const char *tl_grammar_json_gbnf(void);
/* JSON Schema (len bytes of JSON) -> GBNF with start rule "root"; *out is
 * malloc'd (free() it). Supported: type (or a list of types), properties /
 * required / additionalProperties, enum, const, items / prefixItems /
 * minItems / maxItems, anyOf, oneOf (as anyOf), allOf (of object schemas),
 * $ref to local pointers ($defs / definitions, recursion), minLength /
 * maxLength, pattern, format (date, time, date-time, uuid, email), integer
 * minimum / maximum / exclusive bounds, number minimum 0, nullable.
 * Annotations are ignored; any other keyword is TL_ERR_UNSUPPORTED naming it
 * and where it is. Objects follow the schema's property order. */
typedef struct tl_json_schema_params {
    /* Where an object schema does not say additionalProperties: true lets
     * the grammar produce members beyond the listed ones (JSON Schema's
     * meaning, which a model can loop in); false (the default) produces
     * only the listed ones, which is still valid under the schema. */
    bool extra_properties;
} tl_json_schema_params;
tl_json_schema_params tl_json_schema_default_params(void);
tl_status tl_json_schema_to_gbnf(const char *schema, size_t len, const tl_json_schema_params *params, char **out);

/* ---- tool calls -----------------------------------------------------------
 * A grammar for an OpenAI `tools` array in a model family's own tool-call
 * syntax, and the parser of generated text back into OpenAI tool_calls:
 *   HERMES  (Qwen3, Hermes): <tool_call>{"name": N, "arguments": {...}}</tool_call>, repeatable
 *   LLAMA3  (Llama 3.1): [<|python_tag|>] {"name": N, "parameters": {...}}
 *   MISTRAL: [TOOL_CALLS][{"name": N, "arguments": {...}}, ...] */
typedef enum tl_tool_format { TL_TOOLS_HERMES = 0, TL_TOOLS_LLAMA3 = 1, TL_TOOLS_MISTRAL = 2 } tl_tool_format;
typedef enum tl_tool_choice { TL_TOOL_AUTO = 0, TL_TOOL_NONE = 1, TL_TOOL_REQUIRED = 2, TL_TOOL_NAMED = 3 } tl_tool_choice;
/* *gbnf (malloc'd; NULL for TL_TOOL_NONE) constrains the calls; arguments
 * follow each function's "parameters" JSON Schema. For TL_TOOL_AUTO
 * *triggers / *n_triggers are the texts that open a call: pass them to
 * tl_grammar_set_triggers so the model may also answer in prose (static
 * strings, do not free). name: the function for TL_TOOL_NAMED. */
tl_status tl_tool_grammar(tl_tool_format fmt, const char *tools_json, size_t len, tl_tool_choice choice,
                          const char *name, char **gbnf, const char *const **triggers, int32_t *n_triggers);
/* Split generated text into *content (the prose, calls removed) and
 * *calls_json (a JSON array of {"id", "type": "function", "function":
 * {"name", "arguments": "<JSON text>"}}, "[]" when none); both malloc'd.
 * Text that looks like a call but does not parse stays in the content. */
tl_status tl_tool_parse(tl_tool_format fmt, const char *text, size_t len, char **content, char **calls_json);

/* ---- stop strings -------------------------------------------------------
 * Streamed text is held back while its end could still become a stop
 * string, so what tl_stop_push releases never contains part of one. */
typedef struct tl_stop tl_stop;
/* n strings (none empty, at most 256 of at most 4096 bytes); n = 0 stops
 * nothing and holds nothing back. */
tl_status tl_stop_init(const char *const *strs, int32_t n, tl_stop **out);
void tl_stop_free(tl_stop *s);
void tl_stop_reset(tl_stop *s);
/* Feed text; *out / *n_out: the bytes now safe to emit (valid until the
 * next call on s). *stopped: a stop string matched (the bytes before it
 * were released; further pushes release nothing). */
tl_status tl_stop_push(tl_stop *s, const char *text, size_t len, const char **out, size_t *n_out, bool *stopped);
/* At the end of generation: the bytes still held (a partial match). */
tl_status tl_stop_flush(tl_stop *s, const char **out, size_t *n_out);

/* ---- sampling ------------------------------------------------------------ */

typedef struct tl_sampler tl_sampler;

/* Added to one token's logit before any other stage; -INFINITY bans it. */
typedef struct tl_logit_bias {
    int32_t token;
    float bias;
} tl_logit_bias;

typedef struct tl_sampler_params {
    float temp;            /* <= 0: greedy */
    int32_t top_k;         /* <= 0: off */
    float top_p;           /* >= 1: off */
    float min_p;           /* <= 0: off */
    float repeat_penalty;  /* 1: off */
    int32_t repeat_last_n; /* window for all three penalties */
    /* OpenAI's meanings: logit -= frequency_penalty * count + presence_penalty
     * * (count > 0), count = occurrences in the window; 0: off. */
    float presence_penalty;
    float frequency_penalty;
    const tl_logit_bias *logit_bias; /* [n_logit_bias], copied by tl_sampler_init */
    int32_t n_logit_bias;
    uint64_t seed;
    /* The stages below have llama.cpp's meanings; any of them on (or a
     * samplers order) runs the configurable chain (llm/sampler_chain.c). */
    float typical_p;            /* locally typical sampling; >= 1: off */
    float top_n_sigma;          /* keep logits >= max - n * stddev; <= 0: off */
    float xtc_probability;      /* XTC: chance to drop the top tokens; 0: off */
    float xtc_threshold;        /* XTC: tokens with p >= this are "top" (0.1) */
    float dry_multiplier;       /* DRY repeat penalty; 0: off */
    float dry_base;             /* DRY: penalty grows as base^(length - allowed) (1.75) */
    int32_t dry_allowed_length; /* DRY: repeats this long are free (2) */
    int32_t dry_last_n;         /* DRY: tokens of history searched (1024) */
    const int32_t *dry_breakers; /* [n_dry_breakers] tokens a repeat never crosses (copied) */
    int32_t n_dry_breakers;
    int32_t mirostat;           /* 0: off, 1 or 2: Mirostat v1 / v2 (instead of the cuts) */
    float mirostat_tau;         /* target surprise (5.0) */
    float mirostat_eta;         /* learning rate (0.1) */
    /* Stage order, ';'-separated llama.cpp names: penalties, dry, top_n_sigma,
     * top_k, typ_p, top_p, min_p, xtc, temperature (penalties first if at
     * all). NULL: that order. Copied by tl_sampler_init. */
    const char *samplers;
    /* Completion pressure: once the tokens left (tl_sampler_set_budget) are
     * at most the grammar's shortest completion in bytes plus this margin,
     * only tokens that keep the output closable within the budget are
     * candidates, so a grammar's output ends complete (strings, arrays and
     * objects closed) instead of being cut. < 0: off. Default 64. */
    int32_t grammar_finish;
} tl_sampler_params;

tl_sampler_params tl_sampler_default_params(void);
tl_status tl_sampler_init(const tl_sampler_params *p, int32_t n_vocab, tl_sampler **out);
void tl_sampler_free(tl_sampler *s);
/* Pick a token from logits [n_vocab] (logits are not modified). With a
 * grammar attached only allowed tokens are candidates; -1 when the grammar
 * allows none (a dead end) or fails (tl_last_error says which). */
int32_t tl_sampler_sample(tl_sampler *s, const float *logits);
/* Record a token (prompt or generated) for the repetition penalty, and
 * advance the attached grammar by it. */
void tl_sampler_accept(tl_sampler *s, int32_t tok);
/* Reset the penalty history, the generator and the attached grammar. */
void tl_sampler_reset(tl_sampler *s);
/* Attach a grammar (NULL detaches). The sampler borrows it: g must outlive
 * the attachment. Attach after accepting the prompt: every token accepted
 * from then on advances the grammar. */
tl_status tl_sampler_set_grammar(tl_sampler *s, tl_grammar *g);
/* Tokens that may still be generated, the next one included (-n, or
 * max_tokens); every tl_sampler_accept from then on counts one down. n < 0
 * (the default): no budget, no completion pressure. tl_sampler_reset keeps
 * it. */
void tl_sampler_set_budget(tl_sampler *s, int32_t n);

#ifdef __cplusplus
}
#endif
#endif
