#include "base/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Thread-local so concurrent callers do not clobber each other's message. */
static _Thread_local char tl_errbuf[1024];

tl_status tl_err(tl_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tl_errbuf, sizeof tl_errbuf, fmt, ap);
    va_end(ap);
    return s;
}

tl_status tl_err_prefix(tl_status s, const char *fmt, ...) {
    char old[sizeof tl_errbuf];
    memcpy(old, tl_errbuf, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tl_errbuf, sizeof tl_errbuf, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof tl_errbuf)
        snprintf(tl_errbuf + n, sizeof tl_errbuf - (size_t)n, "%s", old);
    return s;
}

const char *tl_last_error(void) { return tl_errbuf; }

const char *tl_status_str(tl_status s) {
    switch (s) {
    case TL_OK: return "ok";
    case TL_ERR_INVALID: return "invalid argument";
    case TL_ERR_IO: return "i/o error";
    case TL_ERR_FORMAT: return "malformed input";
    case TL_ERR_UNSUPPORTED: return "unsupported";
    case TL_ERR_NOMEM: return "out of memory";
    case TL_ERR_NOT_FOUND: return "not found";
    case TL_ERR_BACKEND: return "backend error";
    case TL_ERR_STATE: return "invalid state";
    case TL_ERR_FULL: return "no room left";
    }
    return "unknown status";
}
