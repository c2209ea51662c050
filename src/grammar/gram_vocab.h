/* grammar/gram_vocab: the vocabulary trie behind token masks (see
 * gram_vocab.c). Internal to grammar/; the handle is public as
 * tl_grammar_vocab. */
#ifndef TL_GRAMMAR_GRAM_VOCAB_H
#define TL_GRAMMAR_GRAM_VOCAB_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* Token kinds: text advances a grammar by its bytes; end-of-generation is
 * allowed where the grammar may end; the rest (other control tokens, empty
 * or over-long text) never. */
enum { GV_TEXT = 0, GV_EOG = 1, GV_NEVER = 2 };
#define GV_MAX_TOKEN_BYTES 4096

/* The UTF-8 decoder's states: 0 at a character boundary, GV_U8_BAD after an
 * ill-formed byte, others in the middle of a character. */
#define GV_U8_BAD 8
int gv_u8_step(int st, uint8_t b);

typedef struct gv_node {
    int32_t end;          /* this node's subtree is nodes [self, end) */
    int32_t tok_lo;       /* tokens ending here: toks[tok_lo .. tok_lo + tok_n) */
    int32_t tok_n;
    uint16_t depth;       /* 1 for a token's first byte */
    uint8_t byte;
} gv_node;

/* A token cut inside a character, with that character's bytes (packed, so
 * a pass over all of them reads no token text). */
typedef struct gv_mid {
    int32_t tok;
    uint8_t n;       /* 1-3 */
    uint8_t tail[3];
} gv_mid;

struct tl_grammar_vocab {
    int32_t n_vocab, n_text, n_nodes;
    size_t max_len;
    gv_node *nodes; /* preorder */
    /* per node: the bytes anywhere strictly below it, and the first of the
     * tokens in its subtree (they are toks[sub_lo[i] .. sub_lo[end[i]]));
     * sub_lo has a sentinel entry at n_nodes */
    uint64_t (*below)[4];
    int32_t *sub_lo;
    /* per node: bit 0 set when the node ends a whole UTF-8 character, bit 1
     * when every token below continues it as well-formed UTF-8 (possibly
     * cut short), bit 2 when the bytes up to the node are ill-formed, bit 3
     * when a token at or below the node ends inside a well-formed character */
    uint8_t *u8_clean;
    /* per node: the most characters any token below starts after the node */
    uint16_t *maxc;
    int32_t *toks;  /* text tokens sorted by bytes */
    /* text tokens whose bytes end inside a UTF-8 character, well-formed up
     * to there (a lead byte and fewer continuation bytes than it needs) */
    struct gv_mid *mid;
    int32_t n_mid;
    uint8_t *kind;  /* [n_vocab] */
    char *blob;     /* the text of token i is blob[off[i] .. off[i + 1]) */
    size_t *off;    /* [n_vocab + 1] */
};

#endif
