/* Grammars against llama.cpp: tests/fixtures/grammar_llamacpp.json holds
 * llama.cpp b11312's verdicts (its GBNF parser and code-point matcher, see
 * tests/fixtures/make_grammar_llamacpp.py) on the conformance and malformed
 * grammars of test_grammar.c, more cases from the GBNF syntax, tallow's JSON
 * grammar and schema grammars. Each grammar must compile here exactly when
 * it compiles there, and each string must get the same verdict: complete
 * sentence, live prefix, or rejected. Differences that are tallow's choice
 * are listed in by_design[] with the reason, and are checked to still be
 * differences (so the list cannot go stale). Token masks over a real
 * vocabulary (SmolLM2-135M-Instruct, skipped without it) must equal
 * llama.cpp's grammar sampler's on every text and end-of-generation token. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tallow.h"
#include "test_util.h"

#define FIXTURE "tests/fixtures/grammar_llamacpp.json"
#define NV 257 /* the 256 single bytes and an end token */

typedef struct {
    const char *name; /* grammar name in the fixture */
    int string;       /* string index; -1: whether it compiles */
    const char *why;
} diff;
static const diff by_design[] = {
    {"test_grammar.c cases[8]", 5, "a 0xff byte: never UTF-8, so tallow rejects it; llama.cpp's decoder reads "
                                   "it as the lead byte of a 4-byte sequence, a live prefix for '.'"},
    {"test_grammar.c bad[5]", -1, "a rule defined twice is an error in tallow; llama.cpp keeps the last definition"},
    {"test_grammar.c bad[8]", -1, "tallow refuses a reversed range [z-a]; llama.cpp compiles it to a class that "
                                  "matches nothing"},
    {"test_grammar.c bad[16]", -1, "tallow refuses a class that matches no character; llama.cpp compiles it "
                                   "(the rule then matches nothing)"},
    {"extra[29]", 0, "[^] (no characters) is any character in tallow, as in regular expressions; llama.cpp's "
                     "parser emits nothing for an empty class, so it matches the empty string"},
    {"extra[29]", 1, "the same: llama.cpp accepts \"\" for [^], tallow wants one character"},
    {"extra[13]", 3, "[^\\u00e9] after the byte c3 (a character U+00C0..U+00FF still to come): tallow keeps "
                     "it alive (c3 a8 would be allowed); llama.cpp's partial-character test for a negated "
                     "class refuses when any excluded character lies in that range"},
    {"extra[30]", -1, "tallow refuses [] (a class that matches nothing); llama.cpp's parser emits nothing "
                      "for it, so it matches the empty string"},
};
#define N_DIFF ((int)(sizeof by_design / sizeof *by_design))

static const diff *find_diff(const char *name, int i) {
    for (int d = 0; d < N_DIFF; d++)
        if (!strcmp(by_design[d].name, name) && by_design[d].string == i) return &by_design[d];
    return NULL;
}

/* A fixture text: a JSON string, or {"hex": ...} for bytes that are not UTF-8. */
static char *text_of(const cJSON *x, size_t *n) {
    if (cJSON_IsString(x)) {
        *n = strlen(x->valuestring);
        char *o = malloc(*n + 1);
        memcpy(o, x->valuestring, *n + 1);
        return o;
    }
    const char *h = cJSON_GetObjectItem(x, "hex")->valuestring;
    size_t l = strlen(h) / 2;
    char *o = malloc(l + 1);
    for (size_t i = 0; i < l; i++) {
        unsigned v = 0;
        sscanf(h + 2 * i, "%2x", &v);
        o[i] = (char)v;
    }
    o[l] = 0;
    *n = l;
    return o;
}

/* 1: complete sentence, 0: a prefix of one, -1: rejected (as test_grammar.c) */
static int run(tl_grammar *g, const char *s, size_t n) {
    tl_grammar_reset(g);
    if (tl_grammar_accept_bytes(g, s, n)) return -1;
    return tl_grammar_can_end(g) ? 1 : 0;
}

/* llama.cpp's token masks over SmolLM2-135M-Instruct's vocabulary after a
 * prefix, against tl_grammar_mask from the same state. */
#define MODEL "models/SmolLM2-135M-Instruct.Q4_1.gguf"
static void test_masks(const cJSON *j) {
    const cJSON *masks = cJSON_GetObjectItem(j, "masks");
    FILE *f = fopen(MODEL, "rb");
    if (!f) {
        printf("skip: token masks: %s absent (scripts/fetch_model.sh)\n", MODEL);
        return;
    }
    fclose(f);
    tl_model *m = NULL;
    CHECK(tl_model_load(MODEL, NULL, &m) == TL_OK, "load %s: %s", MODEL, tl_last_error());
    if (!m) return;
    tl_grammar_vocab *v = NULL;
    CHECK(tl_grammar_vocab_init(m, &v) == TL_OK, "vocab: %s", tl_last_error());
    int n_vocab = cJSON_GetObjectItem(j, "mask_n_vocab")->valueint, n_mask = 0, n_same = 0, n_policy = 0;
    uint8_t *want = malloc((size_t)n_vocab);
    const cJSON *mk;
    cJSON_ArrayForEach(mk, masks) {
        if (!v || !want) break;
        const char *gname = cJSON_GetObjectItem(mk, "grammar")->valuestring;
        const cJSON *gr = NULL, *x;
        cJSON_ArrayForEach(x, cJSON_GetObjectItem(j, "grammars")) if (!strcmp(cJSON_GetObjectItem(x, "name")->valuestring, gname)) gr = x;
        CHECK(gr != NULL, "mask grammar '%s' in the fixture", gname);
        if (!gr) continue;
        size_t gl, pl;
        char *gb = text_of(cJSON_GetObjectItem(gr, "gbnf"), &gl), *pre = text_of(cJSON_GetObjectItem(mk, "prefix"), &pl);
        const cJSON *al = cJSON_GetObjectItem(mk, "allowed"), *rs = al ? al : cJSON_GetObjectItem(mk, "denied");
        memset(want, al ? 0 : 1, (size_t)n_vocab);
        cJSON_ArrayForEach(x, rs) {
            int a = cJSON_GetArrayItem(x, 0)->valueint, c = cJSON_GetArrayItem(x, 1)->valueint;
            for (int t = a; t < a + c && t < n_vocab; t++) want[t] = al ? 1 : 0;
        }
        tl_grammar *g = NULL;
        const uint32_t *w = NULL;
        CHECK(tl_grammar_init(v, gb, gl, NULL, NULL, &g) == TL_OK, "%s compiles: %s", gname, tl_last_error());
        if (g && tl_grammar_accept_bytes(g, pre, pl) == TL_OK && tl_grammar_mask(g, &w) == TL_OK) {
            int extra = 0, missing = 0, first = -1;
            for (int t = 0; t < n_vocab; t++) {
                bool bit = w[t >> 5] >> (t & 31) & 1;
                size_t l = 0;
                const char *tx = tl_token_text(m, t, &l);
                /* vocabulary policy, not grammar: tallow never lets a grammar
                 * emit a control token (llama.cpp matches its text, and counts
                 * the FIM tokens as end of generation), and llama.cpp cannot
                 * pass a token holding a NUL byte (its decoder reads C strings) */
                if ((tl_token_is_control(m, t) && !tl_token_is_eog(m, t)) || (tx && memchr(tx, 0, l))) {
                    n_policy += bit != want[t];
                    continue;
                }
                if (bit != want[t] && first < 0) first = t;
                extra += bit && !want[t], missing += !bit && want[t];
            }
            size_t tl = 0;
            const char *tt = first >= 0 ? tl_token_text(m, first, &tl) : "";
            CHECK(extra == 0 && missing == 0, "mask of %s after '%.40s': %d tokens allowed only by tallow, %d only by "
                  "llama.cpp (first: %d '%.*s')", gname, pre, extra, missing, first, (int)tl, tt ? tt : "");
            n_same += extra == 0 && missing == 0;
        } else {
            CHECK(0, "%s: prefix '%.40s' accepted and masked: %s", gname, pre, tl_last_error());
        }
        n_mask++;
        tl_grammar_free(g);
        free(gb);
        free(pre);
    }
    printf("%d token masks over %d tokens: %d equal to llama.cpp's on text and end-of-generation tokens; %d "
           "differences on control tokens and NUL bytes (by design)\n", n_mask, n_vocab, n_same, n_policy);
    CHECK(n_mask >= 16 && n_same == n_mask, "every mask compared and equal (%d of %d)", n_same, n_mask);
    free(want);
    tl_grammar_vocab_free(v);
    tl_model_free(m);
}

int main(void) {
    char *txt = test_read_file(FIXTURE, NULL);
    cJSON *j = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    CHECK(j != NULL, "fixture %s readable", FIXTURE);
    if (!j) return test_finish();
    static char bytes[256];
    const char *t[NV];
    size_t l[NV];
    uint8_t k[NV];
    for (int i = 0; i < 256; i++) bytes[i] = (char)i, t[i] = &bytes[i], l[i] = 1, k[i] = 0;
    t[256] = "</s>", l[256] = 4, k[256] = 1;
    tl_grammar_vocab *v = NULL;
    CHECK(tl_grammar_vocab_init_pieces(NV, t, l, k, &v) == TL_OK, "vocab: %s", tl_last_error());
    int n_gram = 0, n_str = 0, agree = 0, known = 0, seen_diff = 0;
    const cJSON *gr;
    cJSON_ArrayForEach(gr, cJSON_GetObjectItem(j, "grammars")) {
        const char *name = cJSON_GetObjectItem(gr, "name")->valuestring;
        size_t gl;
        char *gb = text_of(cJSON_GetObjectItem(gr, "gbnf"), &gl);
        bool lcp_ok = cJSON_IsTrue(cJSON_GetObjectItem(gr, "llamacpp_compiles"));
        tl_grammar *g = NULL;
        tl_status st = tl_grammar_init(v, gb, gl, NULL, NULL, &g);
        const diff *d = find_diff(name, -1);
        n_gram++;
        if (d) {
            seen_diff++;
            CHECK((st == TL_OK) != lcp_ok, "%s: listed difference (%s) still differs", name, d->why);
            printf("by design: %s compiles: tallow %s, llama.cpp %s: %s\n", name, st ? "no" : "yes",
                   lcp_ok ? "yes" : "no", d->why);
        } else {
            CHECK((st == TL_OK) == lcp_ok, "%s: tallow %s it (%s), llama.cpp %s it; grammar:\n%.300s", name,
                  st ? "refuses" : "compiles", st ? tl_last_error() : "", lcp_ok ? "compiles" : "refuses", gb);
        }
        int i = 0;
        const cJSON *s, *w = cJSON_GetObjectItem(gr, "llamacpp")->child;
        cJSON_ArrayForEach(s, cJSON_GetObjectItem(gr, "strings")) {
            if (!g || !w) break;
            size_t sl;
            char *str = text_of(s, &sl);
            int want = w->valueint, got = run(g, str, sl);
            const diff *sd = find_diff(name, i);
            n_str++;
            if (sd) {
                seen_diff++;
                known++;
                CHECK(got != want, "%s string %d: listed difference (%s) still differs", name, i, sd->why);
            } else {
                agree += got == want;
                CHECK(got == want, "%s: string %d '%.80s': tallow %d, llama.cpp %d (1 complete, 0 prefix, -1 "
                      "rejected)", name, i, str, got, want);
            }
            free(str);
            w = w->next;
            i++;
        }
        tl_grammar_free(g);
        free(gb);
    }
    printf("%d grammars, %d strings: %d agree with llama.cpp, %d listed differences\n", n_gram, n_str, agree, known);
    CHECK(n_gram >= 50 && n_str >= 200, "fixture has the expected size (%d grammars, %d strings)", n_gram, n_str);
    CHECK(seen_diff == N_DIFF, "every listed difference is in the fixture (%d of %d)", seen_diff, N_DIFF);
    tl_grammar_vocab_free(v);
    test_masks(j);
    cJSON_Delete(j);
    return test_finish();
}
