/* tests/test_util: a minimal assertion harness shared by the C tests.
 * CHECK records a failure and continues; a test's main returns
 * test_finish(), which prints "N passed, N failed" for that binary and exits
 * non-zero on any failure. Return TEST_SKIP (77) with a printed reason to
 * skip (ctest reports it as skipped). */
#ifndef TL_TEST_UTIL_H
#define TL_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#define TEST_SKIP 77

static int test_n_pass, test_n_fail;

#define CHECK(cond, ...)                                                         \
    do {                                                                         \
        if (cond) {                                                              \
            test_n_pass++;                                                       \
        } else {                                                                 \
            test_n_fail++;                                                       \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);      \
            fprintf(stderr, __VA_ARGS__);                                        \
            fprintf(stderr, "\n");                                               \
        }                                                                        \
    } while (0)

/* A whole file as a NUL-terminated malloc'd string (its length in *len when
 * len is non-NULL), or NULL if it cannot be read. */
static inline char *test_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *b = NULL;
    long n = fseek(f, 0, SEEK_END) ? -1 : ftell(f);
    if (n >= 0 && !fseek(f, 0, SEEK_SET) && (b = malloc((size_t)n + 1)) && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) {
        b[n] = 0;
        if (len) *len = (size_t)n;
    }
    return b;
}

static inline int test_finish(void) {
    printf("%d passed, %d failed\n", test_n_pass, test_n_fail);
    return test_n_fail ? 1 : 0;
}

#endif
