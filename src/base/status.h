/* base/status: status codes and the per-thread error message.
 *
 * Library code never exits: it returns a tl_status and, for anything but
 * TL_OK, records a human-readable message saying what went wrong and where
 * (tl_err). The message lives in thread-local storage, like errno, so the
 * library needs no global mutable state and callers on different threads do
 * not see each other's errors. Owns: nothing else. Calls: libc only. */
#ifndef TL_BASE_STATUS_H
#define TL_BASE_STATUS_H

#include "tallow.h"

/* Record a printf-style message for status s and return s, so error paths
 * read `return tl_err(TL_ERR_FORMAT, "gguf: ...", ...);`. */
tl_status tl_err(tl_status s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prefix the current message with more context ("loading model: " + old). */
tl_status tl_err_prefix(tl_status s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Overflow-checked size arithmetic: return false on overflow. */
static inline int tl_mul_ok(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline int tl_add_ok(size_t a, size_t b, size_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

#endif
