/* tools/cmd_lora: `tallow lora merge BASE.gguf ADAPTER[:SCALE]... -o OUT.gguf
 * [--type T] [-t N]`: bake LoRA adapters (GGUF adapter files or PEFT
 * directories) into a copy of the base model; `tallow lora info BASE.gguf
 * ADAPTER...`: check adapters against a base and print what they adapt.
 * Uses the public API only. */
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "args_lora.h"
#include "commands.h"
#include "tallow.h"

static void lora_usage(FILE *f) {
    fprintf(f, "usage: tallow lora merge BASE.gguf ADAPTER[:SCALE]... -o OUT.gguf [--type T] [-t N]\n"
               "       tallow lora info BASE.gguf ADAPTER...\n"
               "  ADAPTER   a GGUF LoRA adapter or a PEFT directory (adapter_config.json +\n"
               "            adapter_model.safetensors); SCALE multiplies its alpha/r (default 1)\n"
               "  -o FILE   output model (written as FILE.tmp, then renamed)\n"
               "  --type T  type of the merged weights (default: each keeps its own; f32, f16,\n"
               "            bf16, q8_0, q4_0, q4_k, ...); other tensors are copied unchanged\n"
               "  -t, --threads N  threads (default 1)\n");
}

int cmd_lora(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        lora_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    bool merge = !strcmp(argv[1], "merge");
    if (!merge && strcmp(argv[1], "info")) {
        fprintf(stderr, "tallow lora: unknown subcommand '%s'\n", argv[1]);
        lora_usage(stderr);
        return 2;
    }
    const char *base = NULL, *out = NULL, *type = NULL;
    int32_t n_threads = 1;
    args_lora la = {0};
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        bool ok = true;
        if (!strcmp(a, "-o")) ok = args_str(argc, argv, &i, &out);
        else if (!strcmp(a, "--type")) ok = args_str(argc, argv, &i, &type);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) ok = args_int(argc, argv, &i, 1, 1024, &n_threads);
        else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "tallow lora: unknown option '%s'\n", a);
            ok = false;
        } else if (!base) base = a;
        else { /* an adapter: reuse --lora's FILE[:SCALE] parsing */
            char *fake[3] = {"lora", "--lora", argv[i]};
            int k = 1;
            args_lora_flag(3, fake, &k, &la, &ok);
        }
        if (!ok) {
            lora_usage(stderr);
            return 2;
        }
    }
    if (!base || !la.n || (merge && !out)) {
        fprintf(stderr, "tallow lora: need BASE, at least one ADAPTER%s\n", merge ? " and -o OUT" : "");
        lora_usage(stderr);
        return 2;
    }
    tl_model *m = NULL;
    tl_model_params mp = tl_model_default_params();
    int rc = 1;
    if (tl_model_load(base, &mp, &m)) {
        fprintf(stderr, "tallow lora: %s\n", tl_last_error());
        return 1;
    }
    if (!args_lora_load(&la, m, "lora")) goto done;
    for (int32_t k = 0; k < la.n; k++) {
        tl_lora_info li;
        tl_lora_get_info(la.use[k].lora, &li);
        fprintf(merge ? stderr : stdout, "%s: %s adapter, %d weights, rank %d..%d, alpha %g%s, scale %g\n",
                la.path[k], li.format, li.n_weights, li.rank_min, li.rank_max, li.alpha, li.rslora ? " (rsLoRA)" : "",
                la.use[k].scale);
    }
    if (merge) {
        if (tl_lora_merge(m, la.use, la.n, out, type, n_threads)) {
            fprintf(stderr, "tallow lora: %s\n", tl_last_error());
            goto done;
        }
        fprintf(stderr, "wrote %s\n", out);
    }
    rc = 0;
done:
    args_lora_free(&la);
    tl_model_free(m);
    return rc;
}
