/* tallow CLI entry: dispatches to one subcommand per file. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "tallow.h"

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} tool_cmd;

static const tool_cmd tool_cmds[] = {
    {"run", cmd_run, "generate text from a prompt"},
    {"bench", cmd_bench, "measure prompt and generation speed"},
    {"inspect", cmd_inspect, "print a GGUF file's metadata and tensors"},
    {"synth", cmd_synth, "write a random-weight GGUF of a standard model shape"},
    {"tokenize", cmd_tokenize, "text -> token ids with a model's or tokenizer.json's tokenizer"},
    {"template", cmd_template, "render a chat template for messages given as JSON"},
    {"chat", cmd_chat, "interactive chat with a model (conversation kept in the KV cache)"},
    {"train", cmd_train, "train a byte-level GPT-2/Llama-style model on a text file"},
    {"export", cmd_export, "write a trained checkpoint as a GGUF model"},
    {"perplexity", cmd_perplexity, "perplexity of a model on a text file (llama.cpp method)"},
    {"quantize", cmd_quantize, "rewrite a GGUF model in another tensor type (q8_0, q4_k_m, ...)"},
    {"convert", cmd_convert, "convert a Hugging Face checkpoint (safetensors) to GGUF"},
    {"finetune", cmd_finetune, "train a LoRA adapter on a GGUF model (base frozen), written as a GGUF adapter"},
    {"serve", cmd_serve, "OpenAI-compatible HTTP server with continuous batching"},
    {"lora", cmd_lora, "merge LoRA adapters into a model (lora merge), or check them (lora info)"},
};

static void tool_usage(FILE *f) {
    fprintf(f, "tallow %s: LLM inference engine and deep-learning framework\n\n", TALLOW_VERSION);
    fprintf(f, "usage: tallow COMMAND [options]   (tallow COMMAND --help for its options)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof tool_cmds / sizeof tool_cmds[0]; i++)
        fprintf(f, "  %-12s %s\n", tool_cmds[i].name, tool_cmds[i].help);
}

/* Output lost to a full disk or a closed pipe is a failure of any command. */
static int tool_finish(const char *name, int rc) {
    if ((fflush(stdout) != 0 || ferror(stdout)) && rc == 0) {
        fprintf(stderr, "tallow%s%s: cannot write the output: %s\n", name ? " " : "", name ? name : "",
                errno ? strerror(errno) : "write error");
        rc = 1;
    }
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        tool_usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        tool_usage(stdout);
        return tool_finish(NULL, 0);
    }
    if (!strcmp(argv[1], "--version")) {
        printf("tallow %s\n", TALLOW_VERSION);
        return tool_finish(NULL, 0);
    }
    for (size_t i = 0; i < sizeof tool_cmds / sizeof tool_cmds[0]; i++) {
        if (strcmp(argv[1], tool_cmds[i].name)) continue;
        return tool_finish(argv[1], tool_cmds[i].fn(argc - 1, argv + 1));
    }
    fprintf(stderr, "tallow: unknown command '%s'\n\n", argv[1]);
    tool_usage(stderr);
    return 2;
}
