/* grammar/gram_within: the distance each allowed token leaves, per state,
 * for completion pressure (tl_grammar_mask_within).
 *
 * Which tokens a budget keeps depends on the budget, but the distance a
 * token leaves after state st (the shortest completion of the state it
 * leads to) does not: it is found once per state and kept as a profile, so
 * a later step at st with any budget is a filter over that profile. A
 * profile lists only the tokens whose distance differs from the state's own
 * (in a string body almost every token stays in the string, at the same
 * distance), sorted by distance; the rest of the mask are "base" tokens at
 * the state's distance. Profiles are found by one walk of the vocabulary
 * trie from st (prefixes shared, a distance asked once per state reached);
 * a state whose run leads back to itself uses the run's inside set: its
 * tokens end at st (or, cut inside a multi-byte character, at the state
 * that character's first bytes lead to), so only the exits are walked; a
 * subtree that a run takes whole, with no token cut inside a character, is
 * skipped when every state of the run's chain it can end at is as far
 * from the end as st (a string of at most N characters).
 * Profiles are kept within a byte budget; when full they start over.
 * Owns: the profiles and per-state distances of one grammar. Calls:
 * grammar/gram_pda, gram_dist, gram_inside, gram_vocab. */
#ifndef TL_GRAMMAR_GRAM_WITHIN_H
#define TL_GRAMMAR_GRAM_WITHIN_H

#include <stddef.h>
#include <stdint.h>

#include "grammar/gram_dist.h"
#include "grammar/gram_inside.h"
#include "grammar/gram_pda.h"
#include "grammar/gram_vocab.h"

typedef struct gw_prof {
    uint64_t *pair; /* [n] (distance << 32 | token) of the listed tokens, ascending */
    int32_t n;
    int32_t base;   /* the distance every other text token of the state's mask leaves */
    int32_t n_base; /* how many of them */
    int32_t hi;     /* the longest distance any text token of the mask leaves (0: none) */
} gw_prof;

typedef struct gw_cache {
    const tl_grammar_vocab *v;
    gw_prof *p; /* kept profiles */
    int32_t n, cap;
    int32_t *slot; /* [cap_slot] by state: its profile in p, -1 none */
    int32_t cap_slot;
    int32_t *sd; /* [cap_sd] by state: its distance, -1 not known */
    int32_t cap_sd;
    size_t bytes, max_bytes; /* held by kept profiles; past max_bytes they are dropped */
    uint64_t *pair, *tmp;    /* scratch: the profile being found, and the sort's other half */
    int32_t n_pair, cap_pair;
    int32_t *stk, *bst; /* scratch by trie depth: the state, the state at the last character boundary */
    gw_prof one;   /* the last profile too large to keep (its pairs are in the scratch) */
} gw_cache;

tl_status gw_init(gw_cache *c, const tl_grammar_vocab *v, size_t max_bytes);
void gw_free(gw_cache *c);
/* Drop every profile and distance (state ids are about to change). */
void gw_clear(gw_cache *c);
/* The kept profile of state st, or NULL. */
const gw_prof *gw_find(const gw_cache *c, int32_t st);
/* Find the profile of state st, whose mask holds n_text text tokens; in:
 * the inside set of st's run when the run leads back to st (NULL: the
 * whole trie is walked). *out stays valid until the next gw_make or
 * gw_clear. */
tl_status gw_make(gw_cache *c, gm_pda *p, gd_dist *d, const gi_set *in, int32_t st, int32_t n_text,
                  const gw_prof **out);
/* Write to out st's mask w less every text token whose distance is over
 * left (pr: st's profile; the end-of-generation tokens eog[0..n_eog) that w
 * holds stay); returns how many tokens out holds. */
int32_t gw_filter(const gw_prof *pr, const uint32_t *w, int32_t n_words, const int32_t *eog, int32_t n_eog,
                  int32_t left, uint32_t *out);

#endif
