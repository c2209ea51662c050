/* grammar/gram_frame: lexemes, the parts of a parse whose tokens can be
 * found once and reused wherever the parse around them differs.
 *
 * A state's mask is the union of its stacks' masks, and a stack's mask
 * splits at any node of it, its cut: the tokens the part above the cut (the
 * frame: the stack with the cut replaced by GM_FRAME_END) takes on its own,
 * plus, at every trie node where the frame can end (pop to the cut), the
 * subtrees of the children whose byte the cut's own expansion takes, walked
 * from that expansion. Both parts but the last walks depend only on the
 * frame and on the first bytes of the cut's expansion, so they are kept
 * (a frame entry) and reused: an object's key, with the names of earlier
 * members excluded, is one frame whichever member comes next; a string
 * body is one frame whichever property holds it.
 * Cuts are put where the parse leaves lexical rules: rules that reach no
 * rule recursive through a non-tail reference (their language is regular:
 * strings, numbers, keys, patterns, whitespace). A stack whose top is in a
 * rule that is not lexical has no cut and is walked whole.
 * Owns: per-rule lexical flags, the frame entries of one grammar. Calls:
 * grammar/gbnf. */
#ifndef TL_GRAMMAR_GRAM_FRAME_H
#define TL_GRAMMAR_GRAM_FRAME_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "grammar/gbnf.h"

typedef struct gf_entry {
    int32_t frame;     /* the frame's automaton state */
    uint64_t first[4]; /* the bytes the cut's expansion takes first */
    uint32_t *mask;    /* [n_words] tokens the frame takes on its own */
    /* trie nodes whose parent is a node where the frame can end, whose
     * byte is in first; bit 31 set when that parent is inside a UTF-8
     * character */
    int32_t *exits;
    int32_t n_exits, cap_exits;
} gf_entry;

typedef struct gf_frames {
    int32_t *pos_rule; /* [n_elems] the rule each element position is in */
    uint8_t *lex;      /* [n_rules] 1: lexical */
    gf_entry *e;
    int32_t n, cap;
    int32_t *hash; /* open addressing over e, -1 empty */
    int32_t hash_cap;
    size_t bytes, max_bytes; /* held by entries; past max_bytes they are dropped */
} gf_frames;

tl_status gf_init(gf_frames *f, const gbnf *g, size_t max_bytes);
void gf_free(gf_frames *f);
/* Drop every entry (state ids are about to change). */
void gf_clear(gf_frames *f);
/* The entry of (frame, first), or NULL. */
gf_entry *gf_find(gf_frames *f, int32_t frame, const uint64_t first[4]);
/* A new entry of (frame, first) with a zeroed mask of n_words words; the
 * caller fills it. Entries made before may move. */
tl_status gf_add(gf_frames *f, int32_t frame, const uint64_t first[4], int32_t n_words, gf_entry **out);
tl_status gf_add_exit(gf_frames *f, gf_entry *e, int32_t node);

#endif
