/* tools/prefill: evaluate a long token run in a session, chunk by chunk, with a
 * progress line on stderr, so a long prompt shows a sign of life. */
#ifndef TL_TOOLS_PREFILL_H
#define TL_TOOLS_PREFILL_H

#include <stdbool.h>
#include <stdint.h>

#include "tallow.h"

/* Runs shorter than this prefill without a progress line. */
#define PREFILL_PROGRESS_MIN 256

/* tl_session_eval of tokens[0..n) in chunks of n_batch (0: 512). With n >=
 * PREFILL_PROGRESS_MIN it reports progress on stderr: one line rewritten in
 * place (and erased at the end) when stderr is a terminal, else one line per
 * chunk when verbose; nothing otherwise. *logits: the last token's. */
tl_status prefill_eval(tl_session *s, const int32_t *tokens, int32_t n, int32_t n_batch, bool verbose,
                       const float **logits);

#endif
