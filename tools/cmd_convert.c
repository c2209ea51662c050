/* tools/cmd_convert: `tallow convert HF_DIR OUT.gguf [--type T] [--vocab-only]
 * [--tokenizer DIR] [-t N]`: a Hugging Face checkpoint folder (config.json,
 * safetensors, tokenizer.json) -> a GGUF model, laid out as llama.cpp's
 * converter lays it out. Prints one progress line per tensor to stderr.
 * Owns: nothing. Calls: convert (below the model level, like quantize). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "commands.h"
#include "convert/convert.h"

static void convert_usage(FILE *f) {
    fprintf(f,
            "usage: tallow convert HF_DIR OUT.gguf [options]\n"
            "  convert a Hugging Face checkpoint (config.json, model.safetensors or sharded\n"
            "  model-*.safetensors + model.safetensors.index.json, tokenizer.json,\n"
            "  tokenizer_config.json) to GGUF. Architectures: llama, qwen2, qwen3, gemma3.\n"
            "  --type T          weight type (default f16): %s\n"
            "                    (norms, biases and 1-d tensors stay f32)\n"
            "  --vocab-only      write only the metadata and tokenizer (config.json optional)\n"
            "  --tokenizer DIR   read tokenizer.json / tokenizer_config.json from DIR\n"
            "  -t N              worker threads (default: number of CPUs)\n",
            cvt_type_names());
}

static void convert_log(void *ctx, const char *msg) {
    (void)ctx;
    fprintf(stderr, "%s\n", msg);
}

int cmd_convert(int argc, char **argv) {
    const char *pos[2];
    int npos = 0;
    long nc = sysconf(_SC_NPROCESSORS_ONLN);
    int32_t n_threads = nc < 1 ? 1 : nc > 64 ? 64 : (int32_t)nc;
    cvt_params p = {.type = TL_TYPE_F16, .file_type = 1, .log = convert_log};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            convert_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--type") || !strcmp(argv[i], "--outtype")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "tallow convert: %s needs a value\n", argv[i]);
                return 2;
            }
            if (!cvt_type_from_name(argv[++i], &p.type, &p.file_type)) {
                fprintf(stderr, "tallow convert: unknown type '%s' (one of: %s)\n", argv[i], cvt_type_names());
                return 2;
            }
        } else if (!strcmp(argv[i], "--vocab-only")) {
            p.vocab_only = true;
        } else if (!strcmp(argv[i], "--tokenizer")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "tallow convert: --tokenizer needs a folder\n");
                return 2;
            }
            p.tokenizer_dir = argv[++i];
        } else if (!strcmp(argv[i], "-t") || !strcmp(argv[i], "--threads")) {
            if (!args_int(argc, argv, &i, 1, 256, &n_threads)) return 2;
        } else if (argv[i][0] == '-' && argv[i][1] != 0) {
            fprintf(stderr, "tallow convert: unknown option '%s'\n", argv[i]);
            convert_usage(stderr);
            return 2;
        } else if (npos < 2) {
            pos[npos++] = argv[i];
        } else {
            fprintf(stderr, "tallow convert: too many arguments\n");
            convert_usage(stderr);
            return 2;
        }
    }
    if (npos != 2) {
        convert_usage(stderr);
        return 2;
    }
    p.hf_dir = pos[0];
    p.out_path = pos[1];
    p.n_threads = n_threads;
    if (cvt_convert(&p) != TL_OK) {
        fprintf(stderr, "tallow convert: %s\n", tl_last_error());
        return 1;
    }
    return 0;
}
