/* test_train_export: a Llama-style model from the training framework,
 * exported with tt_export_gguf, loaded by the engine (tl_model_load) and run
 * with tl_session_eval_all gives the same logits as the framework's own
 * forward, and its tokenizer maps text bytes to the same byte tokens.
 * The engine (src/llm) is an independent implementation of the llama
 * forward (its own RoPE, attention, KV cache, GGUF reader), so agreement
 * checks the export conventions: dims order, no Q/K permutation with
 * interleaved RoPE, eps and rope base metadata, GQA head mapping.
 * Weights get std 0.3 (not the training init's 0.02) so logits are O(1..10)
 * and attention is far from uniform: a wrong convention then moves logits by
 * O(1). Tolerance: max abs diff <= 1e-2 * max |logit|. The engine's CPU
 * attention rounds Q, K, V and the probabilities to f16 (11 significant
 * bits, relative 4.9e-4 each); with scores of magnitude ~10 that moves the
 * softmax by ~0.5%, which the framework (f32 throughout) does not do.
 * A negative control (the framework forward
 * with the RoPE rotating the other way, i.e. the unpermuted-HF mistake
 * class) must differ by far more than the tolerance, proving the check can
 * fail. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tallow.h"
#include "test_util.h"
#include "tallow_train.h"

int main(void) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/tt_export_%d.gguf", (int)getpid());
    tt_model_config cfg = tt_model_config_default(TT_ARCH_LLAMA, 256, 64, 64, 2, 4);
    cfg.kv_heads = 2;
    cfg.ffn = 96;
    cfg.norm_eps = 1e-5;
    cfg.rope_theta = 10000.0;
    tt_model m;
    CHECK(tt_model_init(&m, &cfg, 3) == TL_OK, "init");
    tt_rng r;
    tt_rng_seed(&r, 5);
    for (int i = 0; i < m.params.n; i++) {
        tt_tensor *t = m.params.p[i].t;
        if (t->ndim == 2) tt_init_normal(t, &r, 0.0, 0.3);
        else tt_init_normal(t, &r, 1.0, 0.2); /* norm gains away from 1 */
    }
    CHECK(tt_export_gguf(&m, path, NULL) == TL_OK, "export: %s", tl_last_error());

    const char *text = "It is a truth universally acknowledged, that a single man in pos";
    int32_t n = (int32_t)strlen(text);
    int32_t ids[128];
    for (int i = 0; i < n; i++) ids[i] = (unsigned char)text[i];

    tl_model *em = NULL;
    tl_model_params mp = tl_model_default_params();
    tl_status s = tl_model_load(path, &mp, &em);
    CHECK(s == TL_OK, "engine load: %s", tl_last_error());
    if (s != TL_OK) {
        tt_model_free(&m);
        remove(path);
        return test_finish();
    }
    /* tokenizer: byte-level, every byte its own token */
    int32_t toks[128], nt = 0;
    s = tl_tokenize(em, text, (size_t)n, false, false, toks, 128, &nt);
    CHECK(s == TL_OK && nt == n, "tokenize: %d tokens for %d bytes (%s)", nt, n, tl_last_error());
    int tok_ok = s == TL_OK && nt == n;
    for (int i = 0; tok_ok && i < n; i++) tok_ok = toks[i] == ids[i];
    CHECK(tok_ok, "engine tokens differ from the byte values");

    tl_session *sess = NULL;
    tl_session_params sp = tl_session_default_params();
    sp.n_ctx = 64;
    sp.n_threads = 2;
    CHECK(tl_session_init(em, &sp, &sess) == TL_OK, "session: %s", tl_last_error());
    float *el = malloc(sizeof(float) * (size_t)n * 256);
    CHECK(sess && tl_session_eval_all(sess, ids, n, el) == TL_OK, "eval_all: %s", tl_last_error());

    tt_ctx *c;
    tt_ctx_init(2, &c);
    tt_set_grad_enabled(c, false);
    m.training = false;
    tt_tensor *lg = tt_model_forward(c, &m, ids, 1, n);
    CHECK(lg != NULL, "forward: %s", tl_last_error());
    double maxd = 0, maxv = 0;
    int argmax_same = 0;
    for (int t = 0; lg && t < n; t++) {
        int a1 = 0, a2 = 0;
        for (int v = 0; v < 256; v++) {
            double x = tt_get(lg, (int64_t)t * 256 + v), y = el[t * 256 + v];
            maxd = fmax(maxd, fabs(x - y));
            maxv = fmax(maxv, fabs(x));
            if (x > tt_get(lg, (int64_t)t * 256 + a1)) a1 = v;
            if (y > el[t * 256 + a2]) a2 = v;
        }
        argmax_same += a1 == a2;
    }
    printf("engine vs framework logits: max abs diff %.3g (max |logit| %.3g), argmax agree %d/%d\n", maxd, maxv,
           argmax_same, n);
    CHECK(maxd <= 1e-2 * maxv, "logits differ by %g (max |logit| %g)", maxd, maxv);
    CHECK(maxv > 1.0, "logits too small (%g) for a meaningful comparison", maxv);
    tt_ctx_reset(c);

    /* negative control: RoPE with the other rotation direction */
    {
        /* swap the sign of each pair's second component in wq/wk rows <=> rotate
         * by -angle; the engine's logits must then disagree */
        for (int64_t l = 0; l < cfg.layers; l++) {
            tt_tensor *ws[2] = {m.blocks[l].wq, m.blocks[l].wk};
            for (int k = 0; k < 2; k++) {
                float *w = tt_data(ws[k]);
                int64_t rows = ws[k]->shape[0], cols = ws[k]->shape[1];
                for (int64_t rr = 1; rr < rows; rr += 2)
                    for (int64_t j = 0; j < cols; j++) w[rr * cols + j] = -w[rr * cols + j];
            }
        }
        tt_tensor *lg2 = tt_model_forward(c, &m, ids, 1, n);
        double d2 = 0;
        for (int64_t i = 0; lg2 && i < (int64_t)n * 256; i++) d2 = fmax(d2, fabs(tt_get(lg2, i) - el[i]));
        printf("negative control (mirrored RoPE) max abs diff %.3g\n", d2);
        CHECK(d2 > 10 * 1e-2 * maxv, "negative control differs only by %g: the comparison is not sensitive", d2);
    }
    tt_ctx_free(c);
    free(el);
    tl_session_free(sess);
    tl_model_free(em);
    tt_model_free(&m);
    remove(path);
    return test_finish();
}
