/* tools/args_grammar: the structured-output flags shared by run and chat:
 * --grammar FILE, --json-schema FILE, --json, --stop STR (repeatable). */
#ifndef TL_TOOLS_ARGS_GRAMMAR_H
#define TL_TOOLS_ARGS_GRAMMAR_H

#include <stdbool.h>

#include "tallow.h"

#define ARGS_MAX_STOPS 64

typedef struct args_grammar {
    const char *grammar_file, *schema_file;
    bool json;
    const char *stops[ARGS_MAX_STOPS];
    int n_stops;
    char *gbnf;            /* the grammar text in use */
    tl_grammar_vocab *vocab;
    tl_grammar *grammar;   /* NULL without a grammar flag */
    tl_stop *stop;         /* always made (no strings: releases everything) */
    /* DRY's sequence breakers: strings, and the tokens whose text holds one */
    const char *breakers[ARGS_MAX_STOPS];
    int n_breakers;
    int32_t *breaker_ids;
    bool finish_given;     /* --grammar-finish N given (else the sampler's default) */
    int32_t finish;
} args_grammar;

#define ARGS_GRAMMAR_USAGE                                                                    \
    "  --grammar FILE      constrain output to a GBNF grammar\n"                              \
    "  --json-schema FILE  constrain output to a JSON Schema\n"                               \
    "  --json              constrain output to a JSON object\n"                               \
    "  --stop STR          stop at STR (not printed; repeatable, up to 64)\n"                \
    "  --grammar-finish N  close the grammar's output within -n once fewer than its shortest\n" \
    "                      completion + N tokens are left (default 64; -1: off)\n"

/* True if argv[*i] is one of the flags (*ok: its value was good). */
bool args_grammar_flag(int argc, char **argv, int *i, args_grammar *ag, bool *ok);
/* Read / convert / compile what the flags ask for; prints errors with cmd.
 * Also sets sp's DRY breaker tokens when DRY is on. */
bool args_grammar_load(args_grammar *ag, const tl_model *m, tl_sampler_params *sp, const char *cmd);
void args_grammar_free(args_grammar *ag);

#endif
