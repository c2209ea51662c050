/* tests/fuzz/fuzz_model: libFuzzer harness for loading a model through the
 * public API: the input is written as a GGUF file and given to
 * tl_model_load (metadata, architecture, shapes and types checked at load);
 * a model that loads gets a small session, a short forward of a few tokens
 * (ids taken from the input, so out-of-range ones are tried too), greedy
 * argmax, tokenization and detokenization. The seeds are tiny random-weight
 * models of each architecture (make_seeds.py).
 * Owns: nothing past the call. Calls: the public API (tallow.h). */
#include "fuzz_util.h"
#include "tallow.h"

static void run_model(tl_model *m, const uint8_t *data, size_t size, unsigned *sum) {
    tl_model_info info;
    tl_model_get_info(m, &info);
    tl_session_params sp = tl_session_default_params();
    sp.n_ctx = 8;
    sp.n_batch = 4;
    sp.n_threads = 1;
    tl_session *s;
    if (tl_session_init(m, &sp, &s) != TL_OK) return;
    int32_t toks[6];
    int nt = 0;
    for (size_t i = 0; i < 6 && i < size; i++) {
        uint8_t b = data[size - 1 - i];
        /* mostly valid ids, now and then one past the vocabulary */
        toks[nt++] = b == 0xff ? info.n_vocab : (int32_t)(b % (info.n_vocab > 0 ? info.n_vocab : 1));
    }
    const float *logits = NULL;
    if (nt && tl_session_eval(s, toks, nt, &logits) == TL_OK && logits) {
        *sum += logits[0] > 0.0f;
        int32_t next;
        if (tl_session_eval_greedy(s, toks, 1, &next) == TL_OK) *sum += (unsigned)next;
    }
    tl_session_free(s);
    int32_t ids[64], n = 0;
    static const char text[] = "Hi there <|im_end|> \xc3\xa9";
    if (tl_tokenize(m, text, sizeof text - 1, true, true, ids, 64, &n) == TL_OK) {
        tl_detok *d;
        if (tl_detok_init(m, &d) == TL_OK) {
            char buf[128];
            size_t k;
            for (int i = 0; i < n; i++)
                if (tl_detok_push(d, ids[i], buf, sizeof buf, &k) == TL_OK) *sum += (unsigned)k;
            tl_detok_free(d);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_path(0, "model.gguf");
    fuzz_write(path, data, size);
    tl_model *m;
    if (tl_model_load(path, NULL, &m) != TL_OK) return 0;
    unsigned sum = 0;
    run_model(m, data, size, &sum);
    fuzz_sink = sum;
    tl_model_free(m);
    return 0;
}
