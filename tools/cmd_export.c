/* tools/cmd_export: `tallow export CKPT OUT.gguf [--type f32|f16|bf16]
 * [--tokenizer FILE.gguf]`: a training checkpoint (from `tallow train`) ->
 * a "llama" (--arch llama) or "gpt2" (--arch gpt2) GGUF that `tallow run`
 * loads. The tokenizer is the one the checkpoint records (`tallow train
 * --tokenizer`), else the byte-level 256-token vocabulary; --tokenizer
 * overrides the recorded path (e.g. after moving the file).
 * Uses the training framework (src/train) directly. */
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "base/status.h"
#include "commands.h"
#include "tallow_train.h"

static void export_usage(FILE *f) {
    fprintf(f, "usage: tallow export CKPT.safetensors OUT.gguf [--type f32|f16|bf16] [--tokenizer FILE.gguf]\n"
               "  --type       2-d weight type (default f32; norms and biases stay f32)\n"
               "  --tokenizer  the GGUF whose vocabulary the model was trained with (default: the one\n"
               "               recorded in the checkpoint; none recorded: byte-level)\n");
}

int cmd_export(int argc, char **argv) {
    const char *in = NULL, *out = NULL, *type = "f32", *tok = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool ok = true;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            export_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--type")) ok = args_str(argc, argv, &i, &type);
        else if (!strcmp(a, "--tokenizer")) ok = args_str(argc, argv, &i, &tok);
        else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "tallow export: unknown option '%s'\n", a);
            export_usage(stderr);
            return 2;
        } else if (!in) in = a;
        else if (!out) out = a;
        else ok = false;
        if (!ok) {
            export_usage(stderr);
            return 2;
        }
    }
    if (!in || !out) {
        export_usage(stderr);
        return 2;
    }
    tt_model_config cfg;
    tt_model m = {0};
    char rec[4096];
    int64_t rec_vocab = 256;
    tl_status s = tt_checkpoint_read_config(in, &cfg);
    if (!s) s = tt_checkpoint_read_tokenizer(in, rec, sizeof rec, &rec_vocab);
    if (!s && !tok && rec[0]) tok = rec;
    if (!s && rec[0] && rec_vocab != cfg.vocab)
        s = tl_err(TL_ERR_FORMAT, "checkpoint '%s': tokenizer vocab %lld != model vocab %lld", in,
                   (long long)rec_vocab, (long long)cfg.vocab);
    if (!s) s = tt_model_init(&m, &cfg, 0);
    if (!s) s = tt_checkpoint_load(in, &m, NULL, NULL, NULL);
    tt_export_opts opts = {type, tok};
    if (!s) s = tt_export_gguf(&m, out, &opts);
    if (s) {
        fprintf(stderr, "tallow export: %s\n", tl_last_error());
        tt_model_free(&m);
        return 1;
    }
    fprintf(stderr, "wrote %s (%s, %lld params, %s, tokenizer %s)\n", out, cfg.arch == TT_ARCH_GPT2 ? "gpt2" : "llama",
            (long long)tt_params_count(&m.params), type, tok ? tok : "byte-level");
    tt_model_free(&m);
    return 0;
}
