/* grammar/gbnf_build: the builder behind gbnf_parse: rules under
 * construction, byte sets, and the lowering of classes and repetitions.
 * Internal to grammar/. */
#ifndef TL_GRAMMAR_GBNF_BUILD_H
#define TL_GRAMMAR_GBNF_BUILD_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "grammar/gbnf.h"

typedef struct gb_rule {
    char *name;
    int32_t *buf; /* alternatives, each closed by GB_END */
    int32_t n, cap;
    bool defined;
    size_t first_use; /* source offset of the first reference (for errors) */
} gb_rule;

typedef struct gb_ranges {
    uint32_t (*v)[2];
    int32_t n, cap;
} gb_ranges;

typedef struct gp_state {
    const char *src;
    size_t len, pos;
    bool nested;
    gb_rule *rules;
    int32_t n_rules, cap_rules;
    uint8_t (*sets)[32];
    int32_t n_sets, cap_sets;
    int32_t *set_hash; /* open addressing over sets, -1 empty */
    int32_t hash_cap;
    int64_t total; /* elements over all rules, against GB_MAX_ELEMS */
    int32_t *name_hash; /* open addressing over rule names (the first rule of a name), -1 empty */
    int32_t name_cap;
    int32_t u8_tail[4]; /* rule + 1 of k full continuation bytes (80-BF){k}, 0 until made */
} gp_state;

/* TL_ERR_FORMAT "grammar: line L, column C: what" for source offset at. */
tl_status gb_fail(const gp_state *p, size_t at, const char *what);
int32_t gb_alt_len(const gp_state *p, int32_t rule);
tl_status gb_emit(gp_state *p, int32_t rule, int32_t e);
tl_status gb_end_alt(gp_state *p, int32_t rule);
tl_status gb_emit_codepoint(gp_state *p, int32_t rule, uint32_t cp);
tl_status gb_ranges_add(gb_ranges *r, uint32_t lo, uint32_t hi);
/* Emit a reference matching one code point of r (its complement if neg). */
tl_status gb_emit_class(gp_state *p, int32_t rule, gb_ranges *r, bool neg, size_t at);
/* Replace the atom at buf[atom_start..] by its repetition lo..hi (hi -1: unbounded). */
tl_status gb_emit_repeat(gp_state *p, int32_t rule, int32_t atom_start, int32_t lo, int32_t hi);
tl_status gb_new_rule(gp_state *p, int32_t parent, int32_t *out);
tl_status gb_rule_ref(gp_state *p, const char *name, size_t n, size_t at, int32_t *out);
tl_status gb_rule_define(gp_state *p, const char *name, size_t n, size_t at, int32_t *out);
tl_status gb_finish(gp_state *p, const char *root, gbnf **out);
/* Point every reference to a rule, and the root, at one representative of
 * the rules equal to it (gbnf_dedup.c). */
tl_status gb_dedup(gbnf *g);
void gb_state_free(gp_state *p);

#endif
