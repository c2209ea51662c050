/* text/tokenizer: BPE tokenizers (byte-level and SentencePiece-style) and
 * streaming detokenization.
 *
 * A tok_vocab is built once from GGUF metadata (tokenizer.ggml.*) or from a
 * Hugging Face tokenizer.json (or GPT-2's encoder.json + vocab.bpe) and is
 * immutable afterwards, so any number of threads may encode with it at once.
 * The pipeline mirrors HF `tokenizers`, which is the oracle in the tests:
 *   added/special tokens split out -> normalizer -> pre-tokenizer (regex
 *   splits, PCRE2) -> BPE merges per word -> BOS/EOS.
 * Owns: the vocabulary, merge table, pre-tokenizer regexes.
 * Calls: base, io/gguf, PCRE2, utf8proc (NFC), cJSON (tokenizer.json). */
#ifndef TL_TEXT_TOKENIZER_H
#define TL_TEXT_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "io/gguf.h"

typedef struct tok_vocab tok_vocab;

/* Documented caps on what a vocabulary file may ask for (a file asking for
 * more is TL_ERR_FORMAT naming the cap). The largest real vocabularies hold
 * about 262k tokens of at most 256 bytes. Token ids must also be mostly
 * dense: a vocabulary of n slots needs at least n/2 tokens that the input
 * states, so memory follows the input's size, never a lone large id. */
#define TOK_MAX_VOCAB (1 << 22)          /* token ids 0 .. TOK_MAX_VOCAB-1 */
#define TOK_MAX_TOKEN_BYTES (1 << 16)    /* bytes of one token's text */
#define TOK_MAX_MERGES (4 * TOK_MAX_VOCAB)
#define TOK_MAX_FILE_BYTES (1L << 30)    /* a tokenizer.json / encoder.json / vocab.bpe file */
/* the normalizers' output of n input bytes stays within 16 n + 4096 bytes
 * (real ones grow a text at most ~3x; a chain of Replace ops whose
 * replacement contains its pattern would grow it exponentially) */
#define TOK_MAX_NORM_GROWTH 16
/* The density rule: n_slots ids may be allocated for n_stated tokens. */
static inline bool tok_ids_dense(int64_t n_slots, int64_t n_stated) { return n_slots <= 2 * n_stated; }

/* GGUF tokenizer.ggml.* metadata: model "gpt2" (byte-level BPE, with
 * tokenizer.ggml.pre choosing the pre-tokenizer) or "llama" (SentencePiece
 * BPE from scores, byte fallback). The vocab copies what it needs: the
 * gguf_file may be closed afterwards. Malformed metadata -> TL_ERR_FORMAT,
 * unknown model/pre -> TL_ERR_UNSUPPORTED. */
tl_status tok_load_gguf(const gguf_file *f, tok_vocab **out);
/* HF tokenizer.json (model BPE). If path is a directory, it is searched for
 * tokenizer.json, then encoder.json + vocab.bpe (GPT-2). A path ending in
 * encoder.json loads it with the vocab.bpe beside it. A tokenizer_config.json
 * beside tokenizer.json supplies eos_token when present. */
tl_status tok_load_hf_json(const char *path, tok_vocab **out);
/* GPT-2 style files: encoder.json (token -> id) and vocab.bpe (merges). */
tl_status tok_load_gpt2_files(const char *encoder_json, const char *vocab_bpe, tok_vocab **out);
void tok_free(tok_vocab *v);

int32_t tok_n_vocab(const tok_vocab *v);
int32_t tok_bos(const tok_vocab *v); /* -1 if none */
int32_t tok_eos(const tok_vocab *v); /* -1 if none */
/* End of generation: eos, eot, eom and end-of-turn tokens such as
 * <|im_end|>, <|eot_id|>, <end_of_turn>, <|endoftext|>. */
bool tok_is_eog(const tok_vocab *v, int32_t id);
/* Control tokens (HF "special": true; GGUF token_type CONTROL). */
bool tok_is_control(const tok_vocab *v, int32_t id);
bool tok_add_bos(const tok_vocab *v);
bool tok_add_eos(const tok_vocab *v);
/* The byte-level (GPT-2) vocabulary text of byte b: printable bytes stand
 * for themselves, the others for U+0100 onwards in byte order; written as
 * NUL-terminated UTF-8 into out (at most 2 bytes + NUL). Writers of
 * byte-level vocabularies (export, synth) use it. */
void tok_byte_level_text(uint8_t b, char out[4]);

/* "gpt2"-style byte-level or "spm"; and the pre-tokenizer name. */
const char *tok_kind_name(const tok_vocab *v);
/* Id of a token by its exact vocabulary text (as stored: "<|im_end|>",
 * "Ġthe", "▁the"), or -1. */
int32_t tok_find(const tok_vocab *v, const char *text, size_t len);

/* Encode text (any bytes; invalid UTF-8 is kept losslessly as byte tokens).
 * add_special: add BOS/EOS as the vocab asks. parse_special: match control
 * token text ("<|im_start|>") inside the text; when false those are plain
 * text (user-defined / non-special added tokens are still matched, as HF
 * does). cap too small: TL_ERR_INVALID and *n_out = needed (nothing else is
 * promised about out). */
tl_status tok_encode(const tok_vocab *v, const char *text, size_t len, bool add_special,
                     bool parse_special, int32_t *out, int32_t cap, int32_t *n_out);

/* The token's output bytes: byte-level mapping undone, "▁" -> " ",
 * "<0xNN>" -> that byte; control tokens give their text. NULL if out of
 * range. Not NUL-terminated; valid while v lives. */
const char *tok_piece(const tok_vocab *v, int32_t id, size_t *len);
/* The token as stored in the vocabulary ("Ġthe", "▁the", "<0x0A>"). */
const char *tok_text(const tok_vocab *v, int32_t id, size_t *len);

/* Streaming detokenizer: feed ids, get text that only ever contains whole
 * UTF-8 characters (bytes of a character split across byte tokens are held
 * back until complete). Invalid sequences become U+FFFD, one per maximal
 * invalid subpart (as Rust's from_utf8_lossy, which HF uses). By default
 * control tokens are skipped (HF decode's skip_special_tokens=True) and, for
 * tokenizers that prepend a space marker (Llama-2), the first space of the
 * stream is dropped. */
typedef struct tok_detok tok_detok;
tl_status tok_detok_init(const tok_vocab *v, tok_detok **out);
void tok_detok_free(tok_detok *d);
/* Render control tokens as their text instead of skipping them. */
void tok_detok_set_render_control(tok_detok *d, bool render);
/* Forget pending bytes and restart (new stream). */
void tok_detok_reset(tok_detok *d);
/* Push one id; writes complete characters to buf and NUL-terminates it
 * (*n excludes the NUL). cap too small (needs *n + 1): TL_ERR_INVALID, *n
 * = bytes needed without the NUL, and the id is NOT consumed (retry with a
 * bigger buffer). Out-of-range id: TL_ERR_INVALID. */
tl_status tok_detok_push(tok_detok *d, int32_t id, char *buf, size_t cap, size_t *n);
/* End of stream: pending bytes (an incomplete character) become U+FFFD. */
tl_status tok_detok_flush(tok_detok *d, char *buf, size_t cap, size_t *n);

/* Decode a whole id sequence the same way (convenience over detok). The
 * result is malloc'd and NUL-terminated; *len excludes the NUL. */
tl_status tok_decode(const tok_vocab *v, const int32_t *ids, int32_t n, bool render_control,
                     char **out, size_t *len);

#endif
