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
    else if (!strcmp(a, "--grammar-finish")) *ok = args_int(argc, argv, i, -1, 1 << 24, &ag->finish), ag->finish_given = true;
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
    } else if (!strcmp(a, "--dry-sequence-breaker")) {
        const char *s;
        *ok = args_str(argc, argv, i, &s);
        if (*ok && (ag->n_breakers == ARGS_MAX_STOPS || !*s)) {
            fprintf(stderr, "tallow: --dry-sequence-breaker needs a non-empty string (at most %d)\n", ARGS_MAX_STOPS);
            *ok = false;
        } else if (*ok) {
            ag->breakers[ag->n_breakers++] = s;
        }
    } else return false;
    return true;
}

/* The tokens whose text contains a breaker string (llama.cpp's defaults
 * when none were given). */
static bool args_breakers(args_grammar *ag, const tl_model *m, tl_sampler_params *sp) {
    static const char *const defaults[] = {"\n", ":", "\"", "*"};
    const char *const *b = ag->n_breakers ? ag->breakers : defaults;
    int nb = ag->n_breakers ? ag->n_breakers : 4;
    tl_model_info info;
    tl_model_get_info(m, &info);
    ag->breaker_ids = malloc(((size_t)info.n_vocab + 1) * sizeof *ag->breaker_ids);
    if (!ag->breaker_ids) return false;
    int32_t n = 0;
    for (int32_t t = 0; t < info.n_vocab; t++) {
        size_t len;
        const char *txt = tl_token_text(m, t, &len);
        bool hit = false;
        for (int k = 0; k < nb && txt && !hit; k++) {
            size_t l = strlen(b[k]);
            for (size_t i = 0; i + l <= len && !hit; i++) hit = !memcmp(txt + i, b[k], l);
        }
        if (hit) ag->breaker_ids[n++] = t;
    }
    sp->dry_breakers = ag->breaker_ids;
    sp->n_dry_breakers = n;
    return true;
}

bool args_grammar_load(args_grammar *ag, const tl_model *m, tl_sampler_params *sp, const char *cmd) {
    if (ag->finish_given) sp->grammar_finish = ag->finish;
    if (sp->dry_multiplier > 0 && !args_breakers(ag, m, sp)) {
        fprintf(stderr, "tallow %s: out of memory\n", cmd);
        return false;
    }
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
    free(ag->breaker_ids);
    ag->breaker_ids = NULL;
    ag->grammar = NULL, ag->vocab = NULL, ag->stop = NULL, ag->gbnf = NULL;
}
