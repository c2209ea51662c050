/* bench/grammar_finish: the cost of completion pressure per step.
 *   bench_grammar_finish TOKENIZER_DIR
 * Over the tokenizer's vocabulary, the built-in JSON grammar fed three
 * prefixes (inside a string, inside an array, before a value), and a JSON
 * Schema string of at most 40 characters (a state that changes with every
 * character). At each, in thread CPU time: the cached tl_grammar_mask;
 * tl_grammar_mask_within with the budget equal to the distance (pressure
 * binds) on a fresh grammar whose plain mask is already cached ("first":
 * median of 5 grammars, min-max), then again on that grammar 200 times with
 * budgets cycling over distance .. distance + 3 (p50, p99); and with 16
 * tokens to spare (p50 of 21). Then a trace: four JSON documents fed token
 * by token to one fresh grammar each, the budget at every step the tokens
 * left plus 1 (pressure binds at every step), the time of the mask under
 * that budget less the cached plain mask's: mean, p50, p99, max over all
 * steps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "tallow.h"
#include "text/tokenizer.h"
static double cpu_us(void) { struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec * 1e6 + t.tv_nsec / 1e3; }
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
static tl_grammar *at(tl_grammar_vocab *v, const char *gs, const char *prefix) {
    tl_grammar *g;
    if (tl_grammar_init(v, gs, strlen(gs), NULL, NULL, &g)) return fprintf(stderr, "%s\n", tl_last_error()), NULL;
    if (tl_grammar_accept_bytes(g, prefix, strlen(prefix))) return fprintf(stderr, "%s\n", tl_last_error()), tl_grammar_free(g), NULL;
    return g;
}
int main(int argc, char **argv) {
    if (argc != 2) return fprintf(stderr, "usage: %s TOKENIZER_DIR\n", argv[0]), 2;
    tok_vocab *tv;
    if (tok_load_hf_json(argv[1], &tv)) return fprintf(stderr, "%s\n", tl_last_error()), 1;
    int32_t nv = tok_n_vocab(tv);
    const char **text = malloc(nv * sizeof *text); size_t *len = malloc(nv * sizeof *len); uint8_t *kind = malloc(nv);
    for (int32_t i = 0; i < nv; i++) { text[i] = tok_piece(tv, i, &len[i]); kind[i] = tok_is_eog(tv, i) ? 1 : tok_is_control(tv, i) ? 2 : 0; }
    tl_grammar_vocab *v;
    if (tl_grammar_vocab_init_pieces(nv, text, len, kind, &v)) return fprintf(stderr, "%s\n", tl_last_error()), 1;
    const char *schema = "{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"string\", \"maxLength\": 40}}, \"required\": [\"a\"]}";
    char *sg = NULL;
    if (tl_json_schema_to_gbnf(schema, strlen(schema), NULL, &sg)) return fprintf(stderr, "%s\n", tl_last_error()), 1;
    const char *json = tl_grammar_json_gbnf();
    const char *grammars[] = {json, json, json, sg};
    const char *prefixes[] = {"{\"a\": \"hello wor", "{\"a\": [1, 2", "{\"a\": {\"b\": ", "{\"a\":\"hello wor"};
    const char *names[] = {"string", "array", "value", "string{0,40}"};
    for (int k = 0; k < 4; k++) {
        const uint32_t *w;
        double tf[5], tm[21], tw[200], t16[21];
        int32_t d = 0, na = 0, nw = 0;
        for (int r = 0; r < 5; r++) {
            tl_grammar *g = at(v, grammars[k], prefixes[k]);
            if (!g) return 1;
            tl_grammar_distance(g, &d);
            tl_grammar_mask(g, &w);
            double a = cpu_us(); tl_grammar_mask_within(g, d, &w); tf[r] = cpu_us() - a;
            tl_grammar_free(g);
        }
        tl_grammar *g = at(v, grammars[k], prefixes[k]);
        if (!g) return 1;
        tl_grammar_mask_within(g, d, &w);
        for (int r = 0; r < 21; r++) { double a = cpu_us(); tl_grammar_mask(g, &w); tm[r] = cpu_us() - a; }
        for (int r = 0; r < 200; r++) { double a = cpu_us(); tl_grammar_mask_within(g, d + r % 4, &w); tw[r] = cpu_us() - a; }
        for (int r = 0; r < 21; r++) { double a = cpu_us(); tl_grammar_mask_within(g, d + 16, &w); t16[r] = cpu_us() - a; }
        tl_grammar_mask(g, &w); for (int i = 0; i < nv; i++) na += w[i >> 5] >> (i & 31) & 1;
        tl_grammar_mask_within(g, d, &w); for (int i = 0; i < nv; i++) nw += w[i >> 5] >> (i & 31) & 1;
        qsort(tf, 5, sizeof *tf, cmp); qsort(tm, 21, sizeof *tm, cmp); qsort(tw, 200, sizeof *tw, cmp); qsort(t16, 21, sizeof *t16, cmp);
        printf("%-12s %-18s distance %d: allowed %d, within %d; mask (cached) p50 %.1f us; mask_within first %.0f us (%.0f-%.0f), "
               "again p50 %.1f us p99 %.1f us; budget d+16 p50 %.1f us\n",
               names[k], prefixes[k], d, na, nw, tm[10], tf[2], tf[0], tf[4], tw[100], tw[197], t16[10]);
        tl_grammar_free(g);
    }
    const char *docs[] = {
        "{\"name\": \"Ada Lovelace\", \"born\": 1815, \"tags\": [\"math\", \"poetry\", \"engines\"], \"note\": \"wrote the first program\"}",
        "{\"items\": [{\"id\": 1, \"qty\": 2.5, \"ok\": true}, {\"id\": 2, \"qty\": -1e3, \"ok\": false}], \"total\": null}",
        "{\"city\": \"Z\u00fcrich\", \"text\": \"caf\u00e9 \u4e2d\u6587 \\\"quoted\\\" line\\nbreak\", \"deep\": {\"a\": {\"b\": [[1], [2, 3]]}}}",
        "{\"title\": \"A long description of a product that goes on for a while, with commas, numbers like 42 and more words\", \"price\": 19.99}"};
    double *ts = malloc(4096 * sizeof *ts), sum = 0;
    int nt = 0;
    for (int k = 0; k < 4; k++) {
        int32_t toks[512], n = 0;
        if (tok_encode(tv, docs[k], strlen(docs[k]), false, false, toks, 512, &n)) return fprintf(stderr, "%s\n", tl_last_error()), 1;
        tl_grammar *g = at(v, json, "");
        if (!g) return 1;
        for (int32_t i = 0; i < n; i++) {
            const uint32_t *w;
            tl_grammar_mask(g, &w);
            double a = cpu_us(); tl_grammar_mask(g, &w); double b = cpu_us();
            tl_grammar_mask_within(g, n - i + 1, &w); double c = cpu_us();
            ts[nt] = (c - b) - (b - a);
            sum += ts[nt++];
            if (tl_grammar_accept(g, toks[i])) return fprintf(stderr, "doc %d token %d: %s\n", k, i, tl_last_error()), 1;
        }
        tl_grammar_free(g);
    }
    qsort(ts, nt, sizeof *ts, cmp);
    printf("trace: %d steps, budget = tokens left + 1: mask_within less mask mean %.1f us, p50 %.1f us, p99 %.1f us, max %.1f us\n",
           nt, sum / nt, ts[nt / 2], ts[nt * 99 / 100], ts[nt - 1]);
    free(ts);
    free(sg);
    tl_grammar_vocab_free(v);
    tok_free(tv);
    free(text), free(len), free(kind);
    return 0;
}
