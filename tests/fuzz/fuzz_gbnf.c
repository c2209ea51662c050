/* tests/fuzz/fuzz_gbnf: libFuzzer harness for GBNF grammars and JSON
 * Schemas (a request body carries either). The first byte picks: even, the
 * rest is GBNF; odd, a JSON Schema converted to GBNF. A grammar that
 * compiles is driven over a small vocabulary (the 256 bytes, an end token):
 * masks, then a walk taking the lowest allowed token, checking every mask
 * bit it takes is accepted, for up to 64 tokens.
 * Owns: nothing. Calls: the public grammar API. */
#include "fuzz_util.h"
#include "tallow.h"

static tl_grammar_vocab *vocab;
static char bytes[256];

static void vocab_once(void) {
    if (vocab) return;
    const char *t[257];
    size_t l[257];
    uint8_t k[257];
    for (int i = 0; i < 256; i++) bytes[i] = (char)i, t[i] = &bytes[i], l[i] = 1, k[i] = 0;
    t[256] = "</s>", l[256] = 4, k[256] = 1;
    if (tl_grammar_vocab_init_pieces(257, t, l, k, &vocab)) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    vocab_once();
    const char *text = (const char *)data + 1;
    size_t n = size - 1;
    char *gbnf = NULL;
    if (data[0] & 1) {
        if (tl_json_schema_to_gbnf(text, n, NULL, &gbnf) != TL_OK) return 0;
        text = gbnf, n = strlen(gbnf);
    }
    tl_grammar_params gp = tl_grammar_default_params();
    gp.mask_cache_bytes = 1 << 16;
    gp.max_states = 256;
    tl_grammar *g;
    if (tl_grammar_init(vocab, text, n, NULL, &gp, &g) == TL_OK) {
        for (int step = 0; step < 64; step++) {
            const uint32_t *w;
            if (tl_grammar_mask(g, &w) != TL_OK) break;
            int tok = -1;
            for (int t = 0; t < 257 && tok < 0; t++)
                if (w[t >> 5] >> (t & 31) & 1) tok = t;
            if (tok < 0) break;
            if (tl_grammar_accept(g, tok) != TL_OK) __builtin_trap(); /* an allowed token must be accepted */
            if (tok == 256) break;
        }
        tl_grammar_free(g);
    } else if (gbnf) {
        __builtin_trap(); /* the converter's output must always compile */
    }
    free(gbnf);
    return 0;
}
