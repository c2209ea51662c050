/* grammar/gbnf: GBNF grammars (the syntax of llama.cpp's grammars) parsed and
 * lowered to a byte-level context-free grammar.
 *
 * Every terminal of the lowered grammar is a set of bytes: a literal becomes
 * the sequence of its UTF-8 bytes, a character class (code point ranges,
 * possibly negated) becomes a rule whose alternatives are the UTF-8 byte-range
 * sequences of those code points. Groups and repetitions become synthetic
 * rules (x* is R ::= x R | empty, so matching it never grows a stack). Working
 * on bytes lets one matcher handle tokens that end inside a character.
 * Left recursion is rejected at compile time (the matcher expands rules
 * top-down and would not terminate on it).
 * Owns: the lowered grammar. Calls: base only. */
#ifndef TL_GRAMMAR_GBNF_H
#define TL_GRAMMAR_GBNF_H

#include <stdint.h>
#include <stddef.h>

#include "base/status.h"

/* Element codes in gbnf.elems: a byte-set id (>= 0), the end of an
 * alternative, or a reference to rule r. */
#define GB_END (-1)
#define GB_REF(r) (-((r) + 2))
#define GB_IS_REF(e) ((e) <= -2)
#define GB_REF_RULE(e) (-(e) - 2)

/* Documented caps: a grammar asking for more is an error naming the cap. */
#define GB_MAX_SRC (16u << 20)    /* bytes of grammar text */
#define GB_MAX_ELEMS (1 << 22)    /* elements after lowering (repetitions expanded) */
#define GB_MAX_RULES (1 << 20)
#define GB_MAX_REPEAT 100000      /* m, n of x{m,n} */

typedef struct gbnf {
    int32_t n_rules;
    char **names;       /* [n_rules] for messages; synthetic rules get derived names */
    int32_t *rule_alt;  /* [n_rules + 1] rule r's alternatives are alts[rule_alt[r] .. rule_alt[r+1]) */
    int32_t *alts;      /* start position of each alternative in elems */
    int32_t n_alts;
    int32_t *elems;     /* each alternative's elements, then GB_END */
    int32_t n_elems;
    uint8_t (*sets)[32]; /* [n_sets] byte bitsets */
    int32_t n_sets;
    int32_t root;
} gbnf;

/* Parse src (len bytes) and lower it. root names the start rule ("root" when
 * NULL). Errors are TL_ERR_FORMAT with "line L, column C: what". */
tl_status gbnf_parse(const char *src, size_t len, const char *root, gbnf **out);
void gbnf_free(gbnf *g);

/* The rules r references: refs[ref_at[r] .. ref_at[r + 1]), each with
 * whether the reference is in tail position (gbnf_graph.c). */
typedef struct gbnf_graph {
    int32_t *ref_at, *refs;
    uint8_t *tail;
} gbnf_graph;
tl_status gbnf_graph_init(gbnf_graph *gr, const gbnf *g);
void gbnf_graph_free(gbnf_graph *gr);
/* Strongly connected components of the reference graph: comp[r] is r's,
 * numbered so that a component only references components numbered below
 * it (and itself). */
tl_status gbnf_scc(const gbnf_graph *gr, int32_t nr, int32_t *comp);

static inline int gbnf_set_has(const gbnf *g, int32_t set, uint8_t b) {
    return (g->sets[set][b >> 3] >> (b & 7)) & 1;
}

#endif
