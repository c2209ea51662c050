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

static inline int test_finish(void) {
    printf("%d passed, %d failed\n", test_n_pass, test_n_fail);
    return test_n_fail ? 1 : 0;
}

#endif
