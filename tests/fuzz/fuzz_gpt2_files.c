/* tests/fuzz/fuzz_gpt2_files: libFuzzer harness for GPT-2's tokenizer files:
 * the input carries encoder.json (token -> id) and vocab.bpe (merges),
 * split as fuzz_split2 says, loaded with tok_load_gpt2_files; a vocabulary
 * that loads encodes and decodes a short text.
 * Owns: nothing. Calls: text/tokenizer. */
#include "fuzz_util.h"
#include "text/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *enc, *bpe;
    size_t en, bn;
    fuzz_split2(data, size, &enc, &en, &bpe, &bn);
    const char *ep = fuzz_path(0, "encoder.json"), *bp = fuzz_path(1, "vocab.bpe");
    fuzz_write(ep, enc, en);
    fuzz_write(bp, bpe, bn);
    tok_vocab *v;
    if (tok_load_gpt2_files(ep, bp, &v) != TL_OK) return 0;
    static const char text[] = "The quick  brown fox's 42 \xc3\xa9 <|endoftext|>\n";
    int32_t ids[256], n = 0;
    unsigned sum = 0;
    if (tok_encode(v, text, sizeof text - 1, true, true, ids, 256, &n) == TL_OK) {
        char *out;
        size_t len;
        if (tok_decode(v, ids, n, true, &out, &len) == TL_OK) {
            sum += (unsigned)len;
            free(out);
        }
    }
    fuzz_sink = sum;
    tok_free(v);
    return 0;
}
