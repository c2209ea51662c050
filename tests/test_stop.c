/* Stop strings: for random texts, stop lists and chunkings, the streamed
 * output equals the text before the first stop string (computed here with
 * strstr on the whole text), is never ahead of it, and the held bytes at the
 * end come out by flush when nothing matched. Edge cases: empty list, empty
 * string refused, a match across chunks, overlapping candidates. */
#include <stdlib.h>
#include <string.h>

#include "tallow.h"
#include "test_util.h"

static uint64_t rng = 7;
static unsigned rnd(unsigned n) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (unsigned)(rng % n);
}

static void one(const char *text, const char *const *stops, int n) {
    tl_stop *s = NULL;
    CHECK(tl_stop_init(stops, n, &s) == TL_OK, "init");
    if (!s) return;
    /* reference: earliest match of any stop string */
    size_t tl = strlen(text), cut = tl;
    bool want_stop = false;
    for (int i = 0; i < n; i++) {
        const char *m = strstr(text, stops[i]);
        if (m && (size_t)(m - text) < cut) cut = (size_t)(m - text), want_stop = true;
        else if (m && (size_t)(m - text) == cut) want_stop = true;
    }
    char got[512];
    size_t ng = 0, pos = 0;
    bool stopped = false;
    while (pos < tl && !stopped) {
        size_t k = 1 + rnd(4);
        if (pos + k > tl) k = tl - pos;
        const char *o;
        size_t no;
        CHECK(tl_stop_push(s, text + pos, k, &o, &no, &stopped) == TL_OK, "push");
        memcpy(got + ng, o, no);
        ng += no;
        CHECK(ng <= cut && !memcmp(got, text, ng), "output is a prefix of the answer ('%s')", text);
        pos += k;
    }
    if (!stopped) {
        const char *o;
        size_t no;
        tl_stop_flush(s, &o, &no);
        memcpy(got + ng, o, no);
        ng += no;
    }
    CHECK(stopped == want_stop, "stopped %d want %d on '%s'", stopped, want_stop, text);
    CHECK(ng == cut && !memcmp(got, text, cut), "output '%.*s' is the text before the stop in '%s'", (int)ng, got, text);
    tl_stop_free(s);
}

int main(void) {
    const char *a[] = {"abc", "bcd", "cc", "<|end|>"};
    for (int it = 0; it < 3000; it++) {
        char t[64];
        int n = 1 + (int)rnd(40);
        for (int i = 0; i < n; i++) t[i] = "abcd<|end>"[rnd(10)];
        t[n] = 0;
        one(t, a, 1 + (int)rnd(4));
    }
    one("hello world", NULL, 0);
    one("xx<|end|>yy", a, 4);
    one("aab", (const char *[]){"ab", "aab"}, 2);
    tl_stop *s = NULL;
    CHECK(tl_stop_init((const char *[]){""}, 1, &s) == TL_ERR_INVALID && !s, "empty stop string refused");
    return test_finish();
}
