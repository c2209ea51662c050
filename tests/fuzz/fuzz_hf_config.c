/* tests/fuzz/fuzz_hf_config: libFuzzer harness for a Hugging Face
 * checkpoint's config.json: the input is parsed with cJSON and mapped to
 * hyper-parameters by cvt_config_parse (architecture, sizes, RoPE layouts);
 * a config that is accepted then drives the tokenizer conversion
 * (cvt_tokenizer_write: special-token ids from config.json, the token list
 * padded to its vocab_size) over the committed tiny tokenizer, into a GGUF
 * writer that is freed unwritten.
 * Owns: nothing. Calls: convert (cvt_config_parse, cvt_tokenizer_write),
 * cJSON, io/gguf writer. */
#include "convert/cvt_internal.h"
#include "fuzz_util.h"

static const char *tok_dir;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    tok_dir = getenv("TALLOW_TINY_TOKENIZER");
    if (!tok_dir) tok_dir = "tests/fixtures/hf_tiny_tokenizer";
    if (!cvt_file_exists("tests/fixtures/hf_tiny_tokenizer/tokenizer.json") && !getenv("TALLOW_TINY_TOKENIZER"))
        fprintf(stderr, "fuzz_hf_config: %s/tokenizer.json not found (run from the source root): "
                        "configs are parsed only\n", tok_dir);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cJSON *cfg = cJSON_ParseWithLength((const char *)data, size);
    if (!cfg) return 0;
    cvt_hparams hp;
    if (cvt_config_parse(cfg, "config.json", &hp) == TL_OK) {
        if (hp.n_embd < 1 || hp.n_head < 1 || hp.n_head_kv < 1 || hp.n_head % hp.n_head_kv || hp.head_dim % 2 ||
            hp.n_vocab < 1)
            __builtin_trap(); /* what the converter relies on once the config is accepted */
        gguf_writer *w;
        if (gguf_writer_init(&w) == TL_OK) {
            int64_t n_tokens = 0;
            if (cvt_tokenizer_write(w, tok_dir, cfg, hp.n_vocab, &n_tokens) == TL_OK && n_tokens != hp.n_vocab)
                __builtin_trap(); /* the token list is padded to exactly vocab_size */
            gguf_writer_free(w);
        }
    }
    cJSON_Delete(cfg);
    return 0;
}
