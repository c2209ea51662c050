/* tests/fuzz/fuzz_tokenizer_json: libFuzzer harness for the HF
 * tokenizer.json loader (tok_load_hf_json: cJSON, then normalizers,
 * pre-tokenizer regexes, BPE vocabulary and merges, added tokens, post
 * processor). The input is written as tokenizer.json in a scratch folder; a
 * vocabulary that loads encodes and decodes a short text with and without
 * special tokens.
 * Owns: nothing. Calls: text/tokenizer. */
#include "fuzz_util.h"
#include "text/tokenizer.h"

static const char fuzz_text[] = "Hello  world!\n\t123 4567 <s></s><|endoftext|> \xc3\xa9t\xc3\xa9 \xe2\x96\x81x \xff\xfe";

static void exercise(const tok_vocab *v, unsigned *sum) {
    for (int mode = 0; mode < 2; mode++) {
        int32_t ids[512], n = 0;
        if (tok_encode(v, fuzz_text, sizeof fuzz_text - 1, mode, mode, ids, 512, &n) != TL_OK) continue;
        char *out;
        size_t len;
        if (tok_decode(v, ids, n, mode, &out, &len) == TL_OK) {
            *sum += (unsigned)len;
            free(out);
        }
    }
    int32_t id = tok_find(v, "a", 1);
    size_t len;
    if (id >= 0 && tok_piece(v, id, &len)) *sum += (unsigned)len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_path(0, "tokenizer.json");
    fuzz_write(path, data, size);
    tok_vocab *v;
    if (tok_load_hf_json(path, &v) != TL_OK) return 0;
    unsigned sum = 0;
    exercise(v, &sum);
    fuzz_sink = sum;
    tok_free(v);
    return 0;
}
