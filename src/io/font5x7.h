/* io/font5x7: a 5x7 pixel bitmap font (digits, lowercase letters, a few
 * marks) for labels drawn into images. Uppercase letters fall back to
 * lowercase; any other character is drawn as '?'.
 * Owns: a constant glyph table. Calls: nothing. */
#ifndef TL_IO_FONT5X7_H
#define TL_IO_FONT5X7_H

#include <stdint.h>

#define FONT5X7_W 5
#define FONT5X7_H 7
#define FONT5X7_ADVANCE 6 /* glyph width plus one column of space */

/* The glyph of c: 7 rows, top first; bit 4 of a row is its leftmost pixel. */
const uint8_t *font5x7_glyph(char c);

#endif
