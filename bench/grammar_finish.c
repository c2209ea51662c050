/* bench/grammar_finish: the cost of completion pressure per step.
 *   bench_grammar_finish TOKENIZER_DIR
 * The built-in JSON grammar over the tokenizer's vocabulary, fed three
 * prefixes (inside a string, inside an array, before a value); at each the
 * thread CPU time of the cached tl_grammar_mask, of tl_grammar_mask_within
 * with the budget equal to the distance (pressure binds: every allowed token
 * is fed and measured), and with 16 tokens to spare (the per-state bound
 * skips the scan). Medians of 21 calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "tallow.h"
#include "text/tokenizer.h"
static double cpu_us(void) { struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec * 1e6 + t.tv_nsec / 1e3; }
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv) {
    if (argc != 2) return fprintf(stderr, "usage: %s TOKENIZER_DIR\n", argv[0]), 2;
    tok_vocab *tv;
    if (tok_load_hf_json(argv[1], &tv)) return fprintf(stderr, "%s\n", tl_last_error()), 1;
    int32_t nv = tok_n_vocab(tv);
    const char **text = malloc(nv * sizeof *text); size_t *len = malloc(nv * sizeof *len); uint8_t *kind = malloc(nv);
    for (int32_t i = 0; i < nv; i++) { text[i] = tok_piece(tv, i, &len[i]); kind[i] = tok_is_eog(tv, i) ? 1 : tok_is_control(tv, i) ? 2 : 0; }
    tl_grammar_vocab *v;
    if (tl_grammar_vocab_init_pieces(nv, text, len, kind, &v)) return fprintf(stderr, "%s\n", tl_last_error()), 1;
    const char *prefixes[] = {"{\"a\": \"hello wor", "{\"a\": [1, 2", "{\"a\": {\"b\": "};
    for (int k = 0; k < 3; k++) {
        const char *gs = tl_grammar_json_gbnf();
        tl_grammar *g;
        if (tl_grammar_init(v, gs, strlen(gs), NULL, NULL, &g)) return fprintf(stderr, "%s\n", tl_last_error()), 1;
        tl_grammar_accept_bytes(g, prefixes[k], strlen(prefixes[k]));
        int32_t d; tl_grammar_distance(g, &d);
        const uint32_t *w; double tm[21], tw[21];
        for (int r = 0; r < 21; r++) {
            double a = cpu_us(); tl_grammar_mask(g, &w); double b = cpu_us();
            tl_grammar_mask_within(g, d, &w); double c = cpu_us();
            tm[r] = b - a; tw[r] = c - b;
        }
        int na = 0, nw = 0; tl_grammar_mask(g, &w); for (int i = 0; i < nv; i++) na += w[i >> 5] >> (i & 31) & 1;
        tl_grammar_mask_within(g, d, &w); for (int i = 0; i < nv; i++) nw += w[i >> 5] >> (i & 31) & 1;
        double t16[21];
        for (int r = 0; r < 21; r++) { double a = cpu_us(); tl_grammar_mask_within(g, d + 16, &w); t16[r] = cpu_us() - a; }
        qsort(t16, 21, sizeof *t16, cmp);
        double first = tw[0]; qsort(tm, 21, sizeof *tm, cmp); qsort(tw, 21, sizeof *tw, cmp);
        printf("%-22s distance %d: allowed %d, within %d; mask (cached) p50 %.1f us; mask_within first %.0f us, p50 %.0f us; "
               "budget d+16 p50 %.1f us\n",
               prefixes[k], d, na, nw, tm[10], first, tw[10], t16[10]);
        tl_grammar_free(g);
    }
    tl_grammar_vocab_free(v);
    tok_free(tv);
    free(text), free(len), free(kind);
    return 0;
}
