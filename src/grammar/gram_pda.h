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

/* A state's run: the characters that all lead it to one next state, and how
 * many of them in a row it takes. In a string body the run is the plain
 * characters and next is the state itself (len GM_RUN_INF); in a string of
 * at most N characters, next is the state with one character fewer left and
 * len counts down. A vocabulary subtree whose tokens are all such characters,
 * no more of them than len, is accepted whole without walking it. */
#define GM_RUN_INF 0xffff
#define GM_RUN_CAP 32
#define GM_RUN_MIN_BYTES 8
enum { GM_U8_NO = 0, GM_U8_YES = 1, GM_U8_UNKNOWN = 2 };
typedef struct gm_run {
    uint64_t b[2]; /* the ASCII bytes of the run */
    int32_t next;  /* the state they lead to; GM_DEAD: no run */
    uint16_t len;  /* characters in a row that stay in runs taking b (a lower bound); GM_RUN_INF: unbounded */
    uint8_t u8;    /* GM_U8_YES: every well-formed multi-byte character leads to next too, every prefix of one
                    * stays alive (learnt on first use) */
    uint8_t done;  /* bit 0: b, next, u8 known; bit 1: len known */
} gm_run;

typedef struct gm_pda {
    const gbnf *g;
    uint8_t cls[256]; /* byte -> class */
    uint8_t rep[256]; /* class -> one byte of it */
    uint64_t cls_ascii[256][2]; /* class -> its ASCII bytes */
    uint8_t cls_n_ascii[256];   /* class -> how many */
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
    struct gm_run *run; /* [cap_states] */
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
/* The run of state s (computed once; may make the states it leads to). */
tl_status gm_pda_run(gm_pda *p, int32_t s, const gm_run **out);
/* Whether multi-byte characters are in the runs of s and of the n - 1
 * states after it (s's run must be known, with len >= n). */
tl_status gm_pda_run_u8(gm_pda *p, int32_t s, uint32_t n, bool *out);
/* The node (pos, par), made if new. par may be any negative value below
 * -1 (GM_FRAME_END): a stack that pops to it makes its state accepting, as
 * one that pops past the root does. */
#define GM_FRAME_END (-2)
tl_status gm_pda_node(gm_pda *p, int32_t pos, int32_t par, int32_t *out);
/* The state whose stacks are tops[0..n) (nodes whose top is a byte set;
 * repeats are dropped) and acc. */
tl_status gm_pda_state_of(gm_pda *p, const int32_t *tops, int32_t n, bool acc, int32_t *out);
/* The state of node x expanded (its rule references entered, ended
 * alternatives popped). */
tl_status gm_pda_expand_state(gm_pda *p, int32_t x, int32_t *out);
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
