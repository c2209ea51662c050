/* grammar/gram_pda: the matcher of a lowered grammar as a lazily built
 * deterministic automaton over byte classes.
 *
 * A parse position is a stack of grammar positions, stored hash-consed as
 * nodes (position of the next element, parent node), so equal stacks are one
 * node id and stacks share their tails. A state is the sorted set of stacks
 * whose top is a byte set (after expanding rule references and popping ended
 * alternatives), plus whether the start rule may end here. States are
 * interned, and each state's transition on a byte class is computed once, on
 * first use: after warm-up advancing by a byte is one table load, which is
 * what makes walking the vocabulary trie cheap. Bytes that no byte set of the
 * grammar tells apart share a class.
 * Owns: nodes, states, transitions. Calls: grammar/gbnf. */
#ifndef TL_GRAMMAR_GRAM_PDA_H
#define TL_GRAMMAR_GRAM_PDA_H

#include <stdbool.h>
#include <stdint.h>

#include "grammar/gbnf.h"

#define GM_DEAD (-1)
#define GM_UNKNOWN (-2)
/* Caps that bound memory; beyond them the caller compacts (states) or the
 * grammar is refused (nodes, stacks per state). */
#define GM_MAX_NODES (1 << 24)
#define GM_MAX_STACKS (1 << 16)

typedef struct gm_pda {
    const gbnf *g;
    uint8_t cls[256]; /* byte -> class */
    uint8_t rep[256]; /* class -> one byte of it */
    uint64_t cls_ascii[256][2]; /* class -> its ASCII bytes */
    int32_t n_cls;
    /* nodes */
    int32_t *npos, *npar, *nseen;
    int32_t n_nodes, cap_nodes;
    int32_t *nhash;
    int32_t nhash_cap;
    /* states */
    int32_t *s_off, *s_len; /* into pool */
    uint8_t *s_acc;
    int32_t n_states, cap_states;
    int32_t *pool;
    int64_t n_pool, cap_pool;
    int32_t *trans; /* [cap_states * n_cls] */
    uint64_t (*loop)[4]; /* [cap_states] ASCII bytes known to lead from a state to itself ([0..1]) or not ([2..3]) */
    uint8_t *loop_ok;    /* [cap_states] bit 1: utf8 computed; bit 2: utf8 */
    int32_t *shash;
    int32_t shash_cap;
    /* scratch */
    int32_t gen;
    int32_t *work, *outl;
    int32_t cap_work, cap_out;
} gm_pda;

tl_status gm_pda_init(gm_pda *p, const gbnf *g);
void gm_pda_free(gm_pda *p);
/* The start state (the root rule's alternatives expanded). */
tl_status gm_pda_start(gm_pda *p, int32_t *out);
/* Next state of state s on byte class c (GM_DEAD if none), computed once. */
tl_status gm_pda_step(gm_pda *p, int32_t s, int32_t c, int32_t *out);
static inline bool gm_pda_accepting(const gm_pda *p, int32_t s) { return s >= 0 && p->s_acc[s]; }
/* Whether every ASCII byte b in want has next(s, b) == s. Learns one byte
 * class at a time and stops at the first that leaves s. */
tl_status gm_pda_loops_ascii(gm_pda *p, int32_t s, const uint64_t want[2], bool *out);
/* Whether every well-formed multi-byte UTF-8 character leads from s back
 * to s (and every prefix of one stays alive): the grammar takes any
 * non-ASCII character here and stays put. */
tl_status gm_pda_utf8_loop(gm_pda *p, int32_t s, bool *out);
/* Drop every state but s, which becomes state 0 (ids change: callers drop
 * anything keyed by state id). */
tl_status gm_pda_compact(gm_pda *p, int32_t s);

static inline tl_status gm_pda_next(gm_pda *p, int32_t s, uint8_t b, int32_t *out) {
    int32_t c = p->cls[b];
    int32_t t = p->trans[(int64_t)s * p->n_cls + c];
    if (t != GM_UNKNOWN) {
        *out = t;
        return TL_OK;
    }
    return gm_pda_step(p, s, c, out);
}

#endif
