/* tools/cmd_export: `tallow export CKPT OUT.gguf`: a Llama-style training
 * checkpoint (from `tallow train --arch llama`) -> a llama-architecture GGUF
 * with f32 weights and a byte-level tokenizer, which `tallow run` loads.
 * Uses the training framework (src/train) directly. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "train/train.h"

int cmd_export(int argc, char **argv) {
    if (argc != 3 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        fprintf(argc == 2 ? stdout : stderr, "usage: tallow export CKPT.safetensors OUT.gguf\n");
        return argc == 2 ? 0 : 2;
    }
    tt_model_config cfg;
    tt_model m = {0};
    tl_status s = tt_checkpoint_read_config(argv[1], &cfg);
    if (!s) s = tt_model_init(&m, &cfg, 0);
    if (!s) s = tt_checkpoint_load(argv[1], &m, NULL, NULL, NULL);
    if (!s) s = tt_export_gguf(&m, argv[2]);
    if (s) {
        fprintf(stderr, "tallow export: %s\n", tl_last_error());
        tt_model_free(&m);
        return 1;
    }
    fprintf(stderr, "wrote %s (llama, %lld params, f32)\n", argv[2], (long long)tt_params_count(&m.params));
    tt_model_free(&m);
    return 0;
}
