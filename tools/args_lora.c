/* tools/args_lora: see args_lora.h. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args_lora.h"

bool args_lora_flag(int argc, char **argv, int *i, args_lora *a, bool *ok) {
    if (strcmp(argv[*i], "--lora")) return false;
    *ok = false;
    if (*i + 1 >= argc) {
        fprintf(stderr, "tallow %s: --lora needs FILE[:SCALE]\n", argv[0]);
        return true;
    }
    if (a->n == ARGS_LORA_MAX) {
        fprintf(stderr, "tallow %s: at most %d --lora adapters\n", argv[0], ARGS_LORA_MAX);
        return true;
    }
    char *v = argv[++*i];
    float scale = 1.0f;
    char *colon = strrchr(v, ':');
    if (colon && colon[1]) {
        char *end;
        errno = 0;
        double s = strtod(colon + 1, &end);
        if (!*end && !errno && isfinite(s)) { /* FILE:SCALE */
            scale = (float)s;
            *colon = 0;
        }
    }
    if (!*v) {
        fprintf(stderr, "tallow %s: --lora: empty file name\n", argv[0]);
        return true;
    }
    a->path[a->n] = v;
    a->use[a->n] = (tl_lora_use){.lora = NULL, .scale = scale};
    a->n++;
    *ok = true;
    return true;
}

bool args_lora_load(args_lora *a, const tl_model *m, const char *cmd) {
    for (int32_t k = 0; k < a->n; k++) {
        tl_lora *l;
        if (tl_lora_load(m, a->path[k], &l)) {
            fprintf(stderr, "tallow %s: %s\n", cmd, tl_last_error());
            args_lora_free(a);
            return false;
        }
        a->use[k].lora = l;
    }
    return true;
}

bool args_lora_attach(const args_lora *a, tl_session *s, const char *cmd) {
    if (!a->n) return true;
    if (tl_session_set_lora(s, a->use, a->n)) {
        fprintf(stderr, "tallow %s: %s\n", cmd, tl_last_error());
        return false;
    }
    return true;
}

void args_lora_free(args_lora *a) {
    for (int32_t k = 0; k < a->n; k++) {
        tl_lora_free((tl_lora *)a->use[k].lora);
        a->use[k].lora = NULL;
    }
}
