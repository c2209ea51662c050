/* io/plot: tick steps against hand-worked cases, the bitmap font against
 * glyphs written out here, and a rendered chart: its tick labels, axis titles
 * and legend entries are found as text in the image, its curve passes
 * through the pixels its data map to, and nothing is drawn left of the y
 * tick labels' column except the y title. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "io/font5x7.h"
#include "io/plot.h"
#include "test_util.h"

static const uint8_t black[3] = {0, 0, 0};

static bool is_black(const uint8_t *img, int w, int x, int y) {
    const uint8_t *p = img + ((size_t)y * (size_t)w + (size_t)x) * 3;
    return p[0] == 0 && p[1] == 0 && p[2] == 0;
}

/* Is text s (scale 2, black) drawn somewhere in img, with every pixel of its
 * box black exactly where the font puts ink? */
static bool find_text(const uint8_t *img, int w, int h, const char *s) {
    int tw = plot_text_width(s, 2), th = FONT5X7_H * 2;
    uint8_t *ref = malloc((size_t)tw * (size_t)th * 3);
    if (!ref) return false;
    memset(ref, 255, (size_t)tw * (size_t)th * 3);
    plot_text(ref, tw, th, 0, 0, 2, s, black);
    bool found = false;
    for (int y = 0; y + th <= h && !found; y++)
        for (int x = 0; x + tw <= w && !found; x++) {
            bool ok = true;
            for (int yy = 0; yy < th && ok; yy++)
                for (int xx = 0; xx < tw && ok; xx++)
                    ok = is_black(ref, tw, xx, yy) == is_black(img, w, x + xx, y + yy);
            found = ok;
        }
    free(ref);
    return found;
}

static void test_ticks(void) {
    double f, st;
    int n = plot_ticks(1.73, 4.2, 8, &f, &st);
    CHECK(n == 5 && fabs(f - 2.0) < 1e-12 && fabs(st - 0.5) < 1e-12, "1.73..4.2: %d ticks from %g step %g", n, f, st);
    n = plot_ticks(0, 200, 6, &f, &st);
    CHECK(n == 5 && f == 0 && st == 50, "0..200: %d from %g step %g", n, f, st);
    n = plot_ticks(0, 1e6, 5, &f, &st);
    CHECK(n == 3 && f == 0 && st == 5e5, "0..1e6: %d from %g step %g", n, f, st);
    n = plot_ticks(-0.37, 0.41, 10, &f, &st);
    CHECK(n == 8 && fabs(f + 0.3) < 1e-12 && fabs(st - 0.1) < 1e-12, "-0.37..0.41: %d from %g step %g", n, f, st);
    n = plot_ticks(3, 3, 5, &f, &st);
    CHECK(n == 1 && f == 3, "empty range: %d", n);
}

static void test_font(void) {
    /* the glyphs, written out independently of the table */
    static const char *one[7] = {"..#..", ".##..", "..#..", "..#..", "..#..", "..#..", ".###."};
    static const char *sev[7] = {"#####", "....#", "...#.", "..#..", ".#...", ".#...", ".#..."};
    uint8_t img[12 * 7 * 3];
    memset(img, 255, sizeof img);
    plot_text(img, 12, 7, 0, 0, 1, "17", black);
    int bad = 0;
    for (int y = 0; y < 7; y++)
        for (int x = 0; x < 5; x++) {
            bad += is_black(img, 12, x, y) != (one[y][x] == '#');
            bad += is_black(img, 12, x + 6, y) != (sev[y][x] == '#');
        }
    CHECK(bad == 0, "\"17\" at scale 1: %d pixels wrong", bad);
    CHECK(plot_text_width("17", 1) == 11 && plot_text_width("", 3) == 0, "text width");
    CHECK(font5x7_glyph('A') == font5x7_glyph('a') && font5x7_glyph('\x01') == font5x7_glyph('?'), "fallbacks");
}

static void test_chart(void) {
    enum { N = 101 };
    double x[N], y[N], vx[3] = {0, 50, 100}, vy[3] = {3.9, 2.6, 2.2};
    for (int i = 0; i < N; i++) x[i] = i, y[i] = 4.0 - 2.0 * (1 - exp(-i / 20.0));
    plot_series s[2] = {{"train", x, y, N, {31, 90, 200}, false}, {"validation", vx, vy, 3, {220, 40, 40}, true}};
    plot_spec p = {800, 500, "step", "loss", 0, 100};
    uint8_t *img = NULL;
    CHECK(plot_render(&p, s, 2, &img) == TL_OK && img, "render");
    if (!img) return;
    const char *want[] = {"step", "loss", "train", "validation", "0", "20", "60", "100", "2.0", "3.0", "4.0"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        CHECK(find_text(img, 800, 500, want[i]), "'%s' drawn in the chart", want[i]);
    /* blue somewhere on each column of the plot area the train curve spans */
    int cols = 0, blue_cols = 0;
    for (int xx = 150; xx < 700; xx += 10) {
        cols++;
        for (int yy = 0; yy < 500; yy++) {
            const uint8_t *q = img + ((size_t)yy * 800 + (size_t)xx) * 3;
            if (q[0] == 31 && q[1] == 90 && q[2] == 200) {
                blue_cols++;
                break;
            }
        }
    }
    CHECK(blue_cols == cols, "train curve spans the plot: %d of %d columns", blue_cols, cols);
    /* higher loss is drawn higher: the curve's pixel at x=0 lies above the one at x=100 */
    int ytop = -1, ybot = -1;
    for (int yy = 0; yy < 500; yy++) {
        const uint8_t *q = img + ((size_t)yy * 800 + 120) * 3;
        if (q[0] == 31 && q[2] == 200 && ytop < 0) ytop = yy;
        q = img + ((size_t)yy * 800 + 700) * 3;
        if (q[0] == 31 && q[2] == 200 && ybot < 0) ybot = yy;
    }
    CHECK(ytop >= 0 && ybot >= 0 && ytop < ybot - 100, "curve falls left to right: y %d then %d", ytop, ybot);
    free(img);
    plot_spec tiny = {100, 100, NULL, NULL, 0, 1};
    CHECK(plot_render(&tiny, s, 2, &img) == TL_ERR_INVALID && !img, "too small an image is refused");
}

int main(void) {
    test_ticks();
    test_font();
    test_chart();
    return test_finish();
}
