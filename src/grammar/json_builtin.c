/* grammar/json_builtin: the GBNF of any JSON object (RFC 8259 syntax), the
 * grammar behind --json and response_format {"type": "json_object"}.
 * Whitespace between tokens is limited to one optional space or newline run
 * of at most 20 characters, so a model cannot stall in endless blanks. */
#include "tallow.h"

static const char json_object_gbnf[] =
    "root   ::= object\n"
    "value  ::= object | array | string | number | \"true\" | \"false\" | \"null\"\n"
    "object ::= \"{\" ws ( member ( \",\" ws member )* )? \"}\"\n"
    "member ::= string \":\" ws value ws\n"
    "array  ::= \"[\" ws ( value ws ( \",\" ws value ws )* )? \"]\"\n"
    "string ::= \"\\\"\" char* \"\\\"\"\n"
    "char   ::= [^\"\\\\\\x00-\\x1f] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" hex hex hex hex )\n"
    "hex    ::= [0-9a-fA-F]\n"
    "number ::= \"-\"? ( \"0\" | [1-9] [0-9]* ) ( \".\" [0-9]+ )? ( [eE] [-+]? [0-9]+ )?\n"
    "ws     ::= [ \\t\\n\\r]{0,20}\n";

const char *tl_grammar_json_gbnf(void) { return json_object_gbnf; }
