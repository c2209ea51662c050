#include "prefill.h"

#include <stdio.h>
#include <unistd.h>

#include "base/timer.h"

tl_status prefill_eval(tl_session *s, const int32_t *tokens, int32_t n, int32_t n_batch, bool verbose,
                       const float **logits) {
    bool tty = isatty(STDERR_FILENO);
    bool show = n >= PREFILL_PROGRESS_MIN && (tty || verbose);
    if (!show) return tl_session_eval(s, tokens, n, logits);
    int32_t chunk = n_batch > 0 ? n_batch : 512;
    int64_t t0 = tl_time_us();
    for (int32_t done = 0; done < n;) {
        int32_t k = n - done < chunk ? n - done : chunk;
        tl_status st = tl_session_eval(s, tokens + done, k, done + k == n ? logits : NULL);
        if (st != TL_OK) {
            if (tty) fputc('\n', stderr);
            return st;
        }
        done += k;
        double sec = (double)(tl_time_us() - t0) / 1e6;
        fprintf(stderr, "%sprefill: %d/%d tokens (%.0f t/s)%s", tty ? "\r" : "", done, n,
                sec > 0 ? done / sec : 0.0, tty ? "" : "\n");
    }
    /* on a terminal the line goes away: the text that follows starts clean */
    if (tty) fputs("\r\033[K", stderr);
    return TL_OK;
}
