/* examples/simple: load a GGUF model and stream a greedy completion through
 * the public API.   usage: example_simple MODEL.gguf "prompt" [n_tokens] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tallow.h"

static int fail(const char *what) {
    fprintf(stderr, "%s: %s\n", what, tl_last_error());
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.gguf PROMPT [N]\n", argv[0]);
        return 2;
    }
    int n_gen = argc > 3 ? atoi(argv[3]) : 32;
    tl_model *model;
    if (tl_model_load(argv[1], NULL, &model)) return fail("load");
    tl_session *sess;
    if (tl_session_init(model, NULL, &sess)) return fail("session");
    tl_sampler_params sp = tl_sampler_default_params();
    sp.temp = 0; /* greedy */
    tl_model_info info;
    tl_model_get_info(model, &info);
    tl_sampler *smp;
    tl_detok *dt;
    if (tl_sampler_init(&sp, info.n_vocab, &smp) || tl_detok_init(model, &dt)) return fail("init");

    int32_t toks[1024], n;
    if (tl_tokenize(model, argv[2], strlen(argv[2]), true, false, toks, 1024, &n)) return fail("tokenize");
    const float *logits;
    if (tl_session_eval(sess, toks, n, &logits)) return fail("prompt");
    char buf[128];
    size_t len;
    printf("%s", argv[2]);
    for (int i = 0; i < n_gen; i++) {
        int32_t t = tl_sampler_sample(smp, logits);
        if (tl_token_is_eog(model, t)) break;
        tl_detok_push(dt, t, buf, sizeof buf, &len);
        fwrite(buf, 1, len, stdout);
        fflush(stdout);
        if (tl_session_eval(sess, &t, 1, &logits)) return fail("decode");
    }
    tl_detok_flush(dt, buf, sizeof buf, &len);
    printf("%.*s\n", (int)len, buf);
    tl_detok_free(dt);
    tl_sampler_free(smp);
    tl_session_free(sess);
    tl_model_free(model);
    return 0;
}
