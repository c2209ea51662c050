/* tests/fuzz/fuzz_encode: libFuzzer harness for encoding and decoding with
 * real vocabularies (../shared/tokenizers, or $TALLOW_TOKENIZERS): GPT-2's
 * encoder.json + vocab.bpe and the Llama-2, Llama-3, Qwen3 and Gemma-3
 * tokenizer.json files, loaded once. The first input byte picks the
 * vocabulary and the add_special / parse_special flags, the rest is the text.
 * Checked beyond "no crash": the encoder's count contract (a too-small
 * buffer reports the size needed), the streaming detokenizer against the
 * whole-sequence decoder with tiny buffers (retrying as the API says), and,
 * for the byte-level vocabularies without a normalizer (GPT-2, Llama-3),
 * that valid UTF-8 encoded without specials decodes to itself.
 * Owns: the vocabularies (process lifetime). Calls: text/tokenizer. */
#include "fuzz_util.h"
#include "text/tokenizer.h"

typedef struct fvocab {
    const char *name;
    tok_vocab *v;
    bool lossless; /* byte-level, no normalizer: decode(encode(x)) == x */
} fvocab;

static fvocab fv[] = {{"gpt2", NULL, true}, {"llama3", NULL, true}, {"llama2", NULL, false},
                      {"qwen3", NULL, false}, {"gemma3", NULL, false}};
static int n_loaded;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *dir = getenv("TALLOW_TOKENIZERS");
    if (!dir) dir = "../shared/tokenizers";
    for (size_t i = 0; i < sizeof fv / sizeof fv[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, fv[i].name);
        if (tok_load_hf_json(path, &fv[i].v) == TL_OK) n_loaded++;
        else fprintf(stderr, "fuzz_encode: %s not loaded: %s\n", path, tl_last_error());
    }
    if (!n_loaded) {
        fprintf(stderr, "fuzz_encode: no vocabulary under %s\n", dir);
        exit(77);
    }
    return 0;
}

static bool valid_utf8(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (!len || i + len > n) return false;
        uint32_t cp = len == 1 ? c : c & (0x7F >> len);
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return false;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += len;
    }
    return true;
}

/* The streaming detokenizer with 5-byte buffers, grown on demand. */
static char *stream_decode(const tok_vocab *v, const int32_t *ids, int32_t n, size_t *len) {
    tok_detok *d;
    if (tok_detok_init(v, &d) != TL_OK) return NULL;
    tok_detok_set_render_control(d, true);
    size_t cap = 256, o = 0;
    char *acc = malloc(cap), *buf = malloc(5);
    size_t bcap = 5;
    for (int32_t i = 0; i <= n; i++) {
        size_t k;
        tl_status st = i < n ? tok_detok_push(d, ids[i], buf, bcap, &k) : tok_detok_flush(d, buf, bcap, &k);
        if (st == TL_ERR_INVALID && k + 1 > bcap) { /* too small: not consumed, retry */
            bcap = k + 1;
            buf = realloc(buf, bcap);
            i--;
            continue;
        }
        if (st != TL_OK) __builtin_trap();
        if (o + k + 1 > cap) acc = realloc(acc, cap = 2 * (o + k + 1));
        memcpy(acc + o, buf, k);
        o += k;
    }
    acc[o] = 0;
    free(buf);
    tok_detok_free(d);
    *len = o;
    return acc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const fvocab *f = &fv[data[0] % (sizeof fv / sizeof fv[0])];
    if (!f->v) return 0;
    bool add_special = data[0] & 0x40, parse_special = data[0] & 0x80;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    int32_t small[4], n = 0;
    tl_status st = tok_encode(f->v, text, len, add_special, parse_special, small, 4, &n);
    int32_t *ids = small;
    if (st == TL_ERR_INVALID && n > 4) { /* the count contract: retry with the size reported */
        ids = malloc(sizeof *ids * (size_t)n);
        int32_t need = n;
        st = tok_encode(f->v, text, len, add_special, parse_special, ids, need, &n);
        if (st != TL_OK || n != need) __builtin_trap();
    }
    if (st == TL_OK) {
        char *whole;
        size_t wl, sl;
        if (tok_decode(f->v, ids, n, true, &whole, &wl) != TL_OK) __builtin_trap();
        char *streamed = stream_decode(f->v, ids, n, &sl);
        if (!streamed || sl != wl || memcmp(streamed, whole, wl)) __builtin_trap();
        if (f->lossless && !add_special && !parse_special && valid_utf8(data + 1, len) &&
            (wl != len || memcmp(whole, text, len)))
            __builtin_trap();
        fuzz_sink += (unsigned)wl;
        free(whole);
        free(streamed);
    }
    if (ids != small) free(ids);
    return 0;
}
