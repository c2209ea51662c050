/* tools/args_grammar: see args_grammar.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "args_grammar.h"

bool args_grammar_flag(int argc, char **argv, int *i, args_grammar *ag, bool *ok) {
    const char *a = argv[*i];
    if (!strcmp(a, "--grammar")) *ok = args_str(argc, argv, i, &ag->grammar_file);
    else if (!strcmp(a, "--json-schema")) *ok = args_str(argc, argv, i, &ag->schema_file);
    else if (!strcmp(a, "--json")) ag->json = true, *ok = true;
    else if (!strcmp(a, "--stop")) {
        const char *s;
        *ok = args_str(argc, argv, i, &s);
        if (*ok && ag->n_stops == ARGS_MAX_STOPS) {
            fprintf(stderr, "tallow: more than %d --stop strings\n", ARGS_MAX_STOPS);
            *ok = false;
        } else if (*ok && !*s) {
            fprintf(stderr, "tallow: --stop needs a non-empty string\n");
            *ok = false;
        } else if (*ok) {
            ag->stops[ag->n_stops++] = s;
        }
    } else return false;
    return true;
}

bool args_grammar_load(args_grammar *ag, const tl_model *m, const char *cmd) {
    if (tl_stop_init(ag->stops, ag->n_stops, &ag->stop)) {
        fprintf(stderr, "tallow %s: %s\n", cmd, tl_last_error());
        return false;
    }
    int n = (ag->grammar_file != NULL) + (ag->schema_file != NULL) + ag->json;
    if (!n) return true;
    if (n > 1) {
        fprintf(stderr, "tallow %s: use one of --grammar, --json-schema, --json\n", cmd);
        return false;
    }
    size_t len = 0;
    if (ag->json) {
        ag->gbnf = strdup(tl_grammar_json_gbnf());
        len = ag->gbnf ? strlen(ag->gbnf) : 0;
    } else {
        const char *path = ag->grammar_file ? ag->grammar_file : ag->schema_file;
        char *text = args_read_file(path, &len);
        if (!text) {
            fprintf(stderr, "tallow %s: cannot read '%s'\n", cmd, path);
            return false;
        }
        if (ag->grammar_file) {
            ag->gbnf = text;
        } else {
            tl_status s = tl_json_schema_to_gbnf(text, len, NULL, &ag->gbnf);
            free(text);
            if (s) {
                fprintf(stderr, "tallow %s: %s: %s\n", cmd, path, tl_last_error());
                return false;
            }
            len = strlen(ag->gbnf);
        }
    }
    if (!ag->gbnf || tl_grammar_vocab_init(m, &ag->vocab) ||
        tl_grammar_init(ag->vocab, ag->gbnf, len, NULL, NULL, &ag->grammar)) {
        fprintf(stderr, "tallow %s: %s%s%s\n", cmd, ag->grammar_file ? ag->grammar_file : "",
                ag->grammar_file ? ": " : "", ag->gbnf ? tl_last_error() : "out of memory");
        return false;
    }
    return true;
}

void args_grammar_free(args_grammar *ag) {
    tl_grammar_free(ag->grammar);
    tl_grammar_vocab_free(ag->vocab);
    tl_stop_free(ag->stop);
    free(ag->gbnf);
    ag->grammar = NULL, ag->vocab = NULL, ag->stop = NULL, ag->gbnf = NULL;
}
