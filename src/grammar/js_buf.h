/* grammar/js_buf: the growable text buffer and GBNF literal quoting used by
 * the JSON Schema converter. Internal to grammar/. */
#ifndef TL_GRAMMAR_JS_BUF_H
#define TL_GRAMMAR_JS_BUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct js_buf {
    char *s;
    size_t n, cap;
    bool oom;
} js_buf;

void jb_put(js_buf *b, const char *s, size_t n);
void jb_str(js_buf *b, const char *s);
void jb_fmt(js_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Append bytes s[0..n) as a GBNF string literal (quotes included). */
void jb_lit(js_buf *b, const char *s, size_t n);
/* Append a GBNF character-class item for code point c (escaped as needed). */
void jb_class_char(js_buf *b, uint32_t c);

#endif
