/* tests/fuzz/fuzz_util: what the libFuzzer harnesses share: a private
 * scratch folder (on /dev/shm when there is one: inputs are written there as
 * the files a path-taking loader reads), whole-file writes, splitting one
 * input into parts, and the sink that keeps reads from being optimized out.
 * Test code: may read the environment (TALLOW_TOKENIZERS) and print.
 * Owns: the scratch folder (removed at exit). Calls: libc, POSIX. */
#ifndef TL_FUZZ_UTIL_H
#define TL_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile unsigned fuzz_sink;
static char fuzz_dir_path[256];

static inline void fuzz_dir_cleanup(void) {
    if (!fuzz_dir_path[0]) return;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fuzz_dir_path);
    if (system(cmd) != 0) fprintf(stderr, "fuzz: could not remove %s\n", fuzz_dir_path);
}

/* A folder of our own for this process's files. */
static inline const char *fuzz_dir(void) {
    if (fuzz_dir_path[0]) return fuzz_dir_path;
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/tallow-fuzz-XXXXXX", base);
    if (!mkdtemp(fuzz_dir_path)) {
        perror("fuzz: mkdtemp");
        abort();
    }
    atexit(fuzz_dir_cleanup);
    return fuzz_dir_path;
}

/* fuzz_dir()/name, in a static buffer per slot (0..3). */
static inline const char *fuzz_path(int slot, const char *name) {
    static char p[4][512];
    snprintf(p[slot], sizeof p[slot], "%s/%s", fuzz_dir(), name);
    return p[slot];
}

static inline void fuzz_write(const char *path, const uint8_t *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        perror(path);
        abort();
    }
}

/* Split an input into a part of length given by its first two bytes (little
 * endian, clamped) and the rest: how one fuzz input carries two files. */
static inline void fuzz_split2(const uint8_t *data, size_t size, const uint8_t **a, size_t *an, const uint8_t **b,
                        size_t *bn) {
    size_t k = size >= 2 ? (size_t)data[0] | (size_t)data[1] << 8 : 0;
    size_t body = size >= 2 ? size - 2 : 0;
    if (k > body) k = body;
    *a = data + (size >= 2 ? 2 : size);
    *an = k;
    *b = *a + k;
    *bn = body - k;
}

#endif
