/* bench/grammar_mask: token-mask time per token, MaskBench style.
 *   bench_grammar_mask TOKENIZER_DIR GRAMMAR DOCS.jsonl
 * GRAMMAR is a GBNF file, "json" for the built-in JSON-object grammar, or
 * "schema" to compile each line's "schema" with tl_json_schema_to_gbnf.
 * Each line of DOCS.jsonl is {"schema": ..., "doc": "<text>"} (or just a
 * JSON document when GRAMMAR is a file or "json"). Every document is
 * tokenized; a fresh grammar is compiled per document (cold mask cache);
 * then per token: time tl_grammar_mask (single thread), check the token is
 * allowed (a disallowed one is a failure: the grammar rejects a valid
 * document), accept it. Prints mean, p50, p99 and max mask time, in wall
 * time and in the thread's CPU time (which time spent preempted on a
 * loaded machine does not inflate). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tallow.h"
#include "text/tokenizer.h"

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static double cpu_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static char *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long l = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)l + 1);
    *n = fread(b, 1, (size_t)l, f);
    b[*n] = 0;
    fclose(f);
    return b;
}


int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s TOKENIZER_DIR GRAMMAR|json|schema DOCS.jsonl\n", argv[0]);
        return 2;
    }
    tok_vocab *tv;
    if (tok_load_hf_json(argv[1], &tv)) {
        fprintf(stderr, "%s\n", tl_last_error());
        return 1;
    }
    int32_t nv = tok_n_vocab(tv);
    const char **text = malloc((size_t)nv * sizeof *text);
    size_t *len = malloc((size_t)nv * sizeof *len);
    uint8_t *kind = malloc((size_t)nv);
    for (int32_t i = 0; i < nv; i++) {
        text[i] = tok_piece(tv, i, &len[i]);
        kind[i] = tok_is_eog(tv, i) ? 1 : tok_is_control(tv, i) ? 2 : 0;
    }
    double t0 = now_us();
    tl_grammar_vocab *v;
    if (tl_grammar_vocab_init_pieces(nv, text, len, kind, &v)) {
        fprintf(stderr, "%s\n", tl_last_error());
        return 1;
    }
    double t_vocab = now_us() - t0;
    const char *gfixed = NULL;
    size_t glen = 0;
    char *gfile = NULL;
    bool per_schema = !strcmp(argv[2], "schema");
    if (!strcmp(argv[2], "json")) gfixed = tl_grammar_json_gbnf(), glen = strlen(gfixed);
    else if (!per_schema) {
        if (!(gfile = read_file(argv[2], &glen))) return fprintf(stderr, "cannot read %s\n", argv[2]), 1;
        gfixed = gfile;
    }
    size_t dn;
    char *docs = read_file(argv[3], &dn);
    if (!docs) return fprintf(stderr, "cannot read %s\n", argv[3]), 1;
    size_t cap = 1 << 20, n = 0;
    double *t = malloc(cap * sizeof *t), *tc = malloc(cap * sizeof *tc), compile = 0;
    int32_t *toks = malloc((1 << 20) * sizeof *toks);
    int n_docs = 0, n_fail = 0, n_skip = 0, n_bad = 0;
    for (char *line = strtok(docs, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        if (!j) continue;
        char *doc = NULL, *gtext = NULL;
        cJSON *d = cJSON_GetObjectItem(j, "doc");
        doc = d && cJSON_IsString(d) ? strdup(d->valuestring) : cJSON_PrintUnformatted(j);
        const char *g_src = gfixed;
        size_t g_len = glen;
        if (per_schema) {
            char *sch = cJSON_PrintUnformatted(cJSON_GetObjectItem(j, "schema"));
            /* the schema's own meaning (unlisted members allowed), as the
             * documents were written against it */
            tl_json_schema_params jp = tl_json_schema_default_params();
            jp.extra_properties = true;
            if (tl_json_schema_to_gbnf(sch, strlen(sch), &jp, &gtext)) {
                n_skip++;
                free(sch);
                free(doc);
                cJSON_Delete(j);
                continue;
            }
            free(sch);
            g_src = gtext, g_len = strlen(gtext);
        }
        int32_t nt = 0;
        tok_encode(tv, doc, strlen(doc), false, false, toks, 1 << 20, &nt);
        double c0 = now_us();
        tl_grammar *g;
        if (tl_grammar_init(v, g_src, g_len, NULL, NULL, &g)) {
            fprintf(stderr, "grammar refused: %s: %.120s\n", tl_last_error(), doc);
            n_bad++;
            free(gtext);
            free(doc);
            cJSON_Delete(j);
            continue;
        }
        compile += now_us() - c0;
        n_docs++;
        for (int32_t i = 0; i <= nt; i++) {
            int32_t tok = i < nt ? toks[i] : tok_eos(tv);
            const uint32_t *w;
            double a = now_us(), ac = cpu_us();
            tl_status s = tl_grammar_mask(g, &w);
            double bc = cpu_us();
            if (getenv("GRDBG")) { size_t tl; const char *tt = tok_piece(tv, tok, &tl); fprintf(stderr, "TOK %d [%.*s] %.0f\n", i, (int)tl, tt, now_us() - a); }
            double b = now_us();
            if (b - a > 100000) fprintf(stderr, "slow mask %.0f us: doc %d token %d: %.120s\n", b - a, n_docs, i, doc);
            if (n == cap) cap *= 2, t = realloc(t, cap * sizeof *t), tc = realloc(tc, cap * sizeof *tc);
            tc[n] = bc - ac;
            t[n++] = b - a;
            if (s || tok < 0 || !(w[tok >> 5] >> (tok & 31) & 1) || tl_grammar_accept(g, tok)) {
                n_fail++;
                fprintf(stderr, "doc %d token %d (%d of %d) not allowed: %.80s\n", n_docs, tok, i, nt, doc);
                break;
            }
        }
        tl_grammar_free(g);
        free(gtext);
        free(doc);
        cJSON_Delete(j);
    }
    qsort(t, n, sizeof *t, cmp_d);
    qsort(tc, n, sizeof *tc, cmp_d);
    double sum = 0, sum_c = 0;
    for (size_t i = 0; i < n; i++) sum += t[i], sum_c += tc[i];
    printf("vocab %d tokens, trie built in %.1f ms; %d documents (%d schemas unsupported, %d grammars refused), %zu tokens, "
           "%d rejected\n",
           nv, t_vocab / 1e3, n_docs, n_skip, n_bad, n, n_fail);
    printf("compile per grammar: mean %.1f us\n", n_docs ? compile / n_docs : 0);
    if (n)
        printf("mask per token: mean %.1f us, p50 %.1f us, p99 %.1f us, max %.1f us\n", sum / n, t[n / 2],
               t[(size_t)(n * 0.99)], t[n - 1]);
    if (n)
        printf("mask per token, thread CPU time: mean %.1f us, p50 %.1f us, p99 %.1f us, max %.1f us\n", sum_c / n,
               tc[n / 2], tc[(size_t)(n * 0.99)], tc[n - 1]);

    tl_grammar_vocab_free(v);
    tok_free(tv);
    return n_fail || n_bad ? 1 : 0;
}
