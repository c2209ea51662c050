/* grammar/json_builtin: the GBNF of any JSON object (RFC 8259 syntax), the
 * grammar behind --json and response_format {"type": "json_object"}.
 * Whitespace between tokens is limited to one optional space or newline run
 * of at most 20 characters, so a model cannot stall in endless blanks. */
#include "grammar/js_schema.h"
#include "tallow.h"

static const char json_object_gbnf[] = "root   ::= object\n" JS_VALUE_GBNF;

const char *tl_grammar_json_gbnf(void) { return json_object_gbnf; }
