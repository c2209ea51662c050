/* grammar/gram_inside: the part of a token mask that a run of characters
 * decides on its own.
 *
 * A state whose run leads back to itself (a string body) accepts every
 * token made only of the run's characters, whatever the parse around it.
 * Which tokens those are, and where the other tokens first leave the run
 * (the exits: trie nodes at a character boundary whose byte, or whose
 * character, is not in the run), depends only on the run's bytes and on
 * whether it takes multi-byte characters, not on the state. So it is found
 * once per run: a mask of the tokens inside and the list of exits. A state's
 * mask is then that mask plus a walk of the exits' subtrees from the state,
 * which is where the parse around the string decides (closing quotes,
 * escapes). Many states share one run: the string bodies of every property.
 * Owns: the inside sets of one grammar. Calls: grammar/gram_vocab. */
#ifndef TL_GRAMMAR_GRAM_INSIDE_H
#define TL_GRAMMAR_GRAM_INSIDE_H

#include <stdbool.h>
#include <stdint.h>

#include "grammar/gram_pda.h"
#include "grammar/gram_vocab.h"

#define GI_MAX_SETS 8

typedef struct gi_set {
    uint64_t b[2];   /* the run's ASCII bytes */
    bool u8;         /* the run takes every well-formed multi-byte character */
    uint32_t *mask;  /* [n_words] tokens made only of the run's characters */
    int32_t *exits;  /* trie nodes where a path first leaves the run, in preorder */
    int32_t n_exits;
} gi_set;

typedef struct gi_cache {
    gi_set sets[GI_MAX_SETS];
    int32_t n;
} gi_cache;

/* The inside set of run (b, u8), found once; *out NULL when the cache is
 * full (the caller walks the whole trie instead). */
tl_status gi_get(gi_cache *c, const tl_grammar_vocab *v, const uint64_t b[2], bool u8, const gi_set **out);
void gi_free(gi_cache *c);
/* Whether the automaton takes node i's whole subtree from t0, the state at
 * the last character boundary on the path (mid: node i is inside a
 * character): the subtree's bytes are all in t0's run (multi-byte
 * characters too if there are any, or node i is inside one) and no token
 * below is longer than the run. Every token below then ends at a state of
 * the run's chain (t0, its next, that one's next, ...), one step per
 * character, or inside a character after one. */
tl_status gi_bulk(gm_pda *p, const tl_grammar_vocab *v, int32_t i, int32_t t0, bool mid, bool *out);

#endif
