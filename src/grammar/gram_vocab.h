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

typedef struct gv_node {
    int32_t end;          /* this node's subtree is nodes [self, end) */
    int32_t tok_lo;       /* tokens ending here: toks[tok_lo .. tok_lo + tok_n) */
    int32_t tok_n;
    uint16_t depth;       /* 1 for a token's first byte */
    uint8_t byte;
} gv_node;

struct tl_grammar_vocab {
    int32_t n_vocab, n_text, n_nodes;
    size_t max_len;
    gv_node *nodes; /* preorder */
    int32_t *toks;  /* text tokens sorted by bytes */
    uint8_t *kind;  /* [n_vocab] */
    char *blob;     /* the text of token i is blob[off[i] .. off[i + 1]) */
    size_t *off;    /* [n_vocab + 1] */
};

#endif
