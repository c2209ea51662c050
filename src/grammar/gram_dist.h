/* grammar/gram_dist: the shortest completion of a parse, in bytes.
 *
 * At compile time every rule gets the length of its shortest expansion (a
 * fixpoint over "alternative = sum of its elements, rule = min of its
 * alternatives", a byte set counting 1), and every element position the
 * length of the shortest text from it to the end of its alternative. A
 * stack's distance is then the sum over its nodes (each node is the
 * position of what is left to match at that depth), memoized per node since
 * stacks share their tails; a state's distance is 0 when it may end, else
 * the least over its stacks. Completion pressure (tl_grammar_mask_within)
 * uses it to keep only tokens after which the output can still be closed.
 * Owns: the per-position and per-node tables. Calls: grammar/gbnf, gram_pda. */
#ifndef TL_GRAMMAR_GRAM_DIST_H
#define TL_GRAMMAR_GRAM_DIST_H

#include <stdint.h>

#include "grammar/gbnf.h"
#include "grammar/gram_pda.h"

/* No completion (a rule that never ends, a dead state); sums saturate here. */
#define GD_INF (INT32_MAX / 2)

typedef struct gd_dist {
    int32_t *rule;  /* [n_rules] shortest expansion of each rule */
    int32_t *rest;  /* [n_elems] shortest text from each position to the end of its alternative */
    int32_t *node;  /* [cap_node] memo by node id; -1 not known */
    int32_t cap_node;
    int32_t *chain; /* scratch: nodes whose memo is being filled */
    int32_t cap_chain;
} gd_dist;

tl_status gd_init(gd_dist *d, const gbnf *g);
void gd_free(gd_dist *d);
/* Distance of state st of p (0: it may end; GD_INF: st is GM_DEAD or
 * cannot end). */
tl_status gd_state(gd_dist *d, const gm_pda *p, int32_t st, int32_t *out);

#endif
