/* tools/args_lora: the `--lora FILE[:SCALE]` option (repeatable) that run,
 * chat, bench, perplexity and serve share: parsing, loading the adapters
 * for a model, and the list of uses to attach to a session or sequence. */
#ifndef TL_TOOLS_ARGS_LORA_H
#define TL_TOOLS_ARGS_LORA_H

#include <stdbool.h>

#include "tallow.h"

#define ARGS_LORA_MAX 8

typedef struct args_lora {
    int32_t n;
    const char *path[ARGS_LORA_MAX];
    tl_lora_use use[ARGS_LORA_MAX]; /* lora set by args_lora_load */
} args_lora;

/* If argv[*i] is --lora, take its value (FILE or FILE:SCALE; a suffix after
 * the last ':' that is not a number stays part of FILE), advance *i and
 * return true; *ok says whether it parsed (messages go to stderr). */
bool args_lora_flag(int argc, char **argv, int *i, args_lora *a, bool *ok);
/* Load every adapter for m; on failure prints "tallow CMD: ..." and frees
 * what was loaded. */
bool args_lora_load(args_lora *a, const tl_model *m, const char *cmd);
/* Attach the loaded adapters to a session (nothing to do when there are none). */
bool args_lora_attach(const args_lora *a, tl_session *s, const char *cmd);
void args_lora_free(args_lora *a);
/* One usage line for the option. */
#define ARGS_LORA_USAGE "  --lora FILE[:SCALE] apply a LoRA adapter (GGUF file or PEFT directory; repeatable; scale 1)\n"

#endif
