/* jinja/jinja: a Jinja2-subset template interpreter for chat templates.
 *
 * Chat templates stored in GGUF files (tokenizer.chat_template) and in HF
 * tokenizer_config.json are Jinja2 programs. This module parses one into an
 * AST and renders it with variables (messages, tools, bos_token, ...), with
 * the semantics HF uses: trim_blocks + lstrip_blocks, Python-style values
 * (str() of None is "None", float repr, list repr), HF's tojson, the
 * loopcontrols extension (break/continue), raise_exception and strftime_now.
 *
 * Safety: every error (syntax, unknown filter, type error, undefined
 * attribute, raise_exception) is a tl_status with a message naming the line
 * and column; nothing aborts. Output size, value memory and executed steps
 * are bounded by jinja_limits, nesting by the constants below, so hostile
 * templates and variables end in an error naming the limit, not a hang, a
 * crash or an unbounded allocation. Every loop whose length the input
 * controls is charged to the step budget before it runs: one step per
 * statement, loop iteration and call, one per element an operation walks,
 * and one per JINJA_BYTES_PER_STEP bytes of string it scans.
 *
 * Owns: templates (AST + copy of the source) and environments (the values
 * and variables of one render, in an arena). Calls: base/status, libc. */
#ifndef TL_JINJA_H
#define TL_JINJA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct jinja_template jinja_template;
typedef struct jinja_env jinja_env;

typedef struct jinja_options {
    bool trim_blocks;   /* drop the first newline after a block tag */
    bool lstrip_blocks; /* strip spaces/tabs before a block tag at line start */
} jinja_options;

/* Fixed limits (hitting one is an error naming it). */
#define JINJA_MAX_NESTING 256      /* parser: brackets, blocks and the template's syntax tree depth */
#define JINJA_MAX_EVAL_DEPTH 1024  /* nested evaluation while rendering (macro recursion x tree depth) */
#define JINJA_MAX_VALUE_DEPTH 256  /* lists/dicts nested inside each other when printed, compared,
                                    * hashed as keys, written as JSON or read from JSON */
#define JINJA_MAX_RANGE 100000     /* items of one range() (jinja2's sandbox MAX_RANGE) */
#define JINJA_MAX_FORMAT_WIDTH (1 << 20) /* width and precision in '%' and format() conversions */
#define JINJA_BYTES_PER_STEP 64    /* bytes of string scanned per step charged */

typedef struct jinja_limits {
    size_t max_output;  /* bytes of rendered text (0: 16 MiB) */
    size_t max_memory;  /* bytes of values made while rendering (0: 256 MiB) */
    uint64_t max_steps; /* steps as counted above (0: 20M) */
    int32_t max_depth;  /* macro call nesting (0: 100) */
} jinja_limits;

/* HF's settings: trim_blocks and lstrip_blocks on. */
jinja_options jinja_hf_options(void);

tl_status jinja_parse(const char *src, size_t len, const jinja_options *opt, jinja_template **out);
void jinja_template_free(jinja_template *t);

/* An environment holds the global variables of a render. lim may be NULL. */
tl_status jinja_env_init(const jinja_limits *lim, jinja_env **out);
void jinja_env_free(jinja_env *e);
/* Set a variable to the value of a JSON document (validated, UTF-8). */
tl_status jinja_env_set_json(jinja_env *e, const char *name, const char *json, size_t len);
/* Set every member of a JSON object as a variable. */
tl_status jinja_env_set_json_object(jinja_env *e, const char *json, size_t len);
/* s == NULL sets none. */
tl_status jinja_env_set_str(jinja_env *e, const char *name, const char *s);
tl_status jinja_env_set_bool(jinja_env *e, const char *name, bool v);

/* Render. On success *out is a malloc'd NUL-terminated string (free()). */
tl_status jinja_render(const jinja_template *t, jinja_env *e, char **out, size_t *out_len);

#endif
