/* tests/test_jinja: the Jinja interpreter must turn every malformed or
 * hostile template into an error status with a message naming the problem
 * and its line/column: never a crash, hang, or unbounded allocation (run
 * under ASan/UBSan in the sanitizer build). Rendering parity with Python's
 * jinja2 is tested separately (test_chat_template.py); the few positive
 * checks here use values fixed by the Jinja/Python language itself.
 * Also: 3000 random byte mutations of the committed real chat templates are
 * parsed and rendered; any status is fine, a crash or leak is not.
 * test_findings replays each class of hostile input a fuzzing pass found
 * (issue 24): each must end within 1 s (release build) and 256 MiB with an
 * error naming the limit, or render what Python's jinja2 renders (time is
 * the process's CPU time, so a busy shared machine does not fail it). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "test_util.h"
#include "text/chat_template.h"
#include "jinja/jinja.h"

static tl_status render_lim(const char *src, const char *vars_json, const jinja_limits *lim, char **out) {
    *out = NULL;
    jinja_template *t;
    jinja_options opt = jinja_hf_options();
    tl_status st = jinja_parse(src, strlen(src), &opt, &t);
    if (st != TL_OK) return st;
    jinja_env *e;
    st = jinja_env_init(lim, &e);
    if (st == TL_OK && vars_json) st = jinja_env_set_json_object(e, vars_json, strlen(vars_json));
    size_t n;
    if (st == TL_OK) st = jinja_render(t, e, out, &n);
    jinja_env_free(e);
    jinja_template_free(t);
    return st;
}

static tl_status render(const char *src, const char *vars_json, char **out) {
    return render_lim(src, vars_json, NULL, out);
}

/* expect failure whose message contains every given fragment */
static void expect_err(const char *src, const char *vars, const char *frag1, const char *frag2) {
    char *out;
    tl_status st = render(src, vars, &out);
    CHECK(st != TL_OK, "template %s rendered '%s' but should fail", src, out ? out : "");
    if (st == TL_OK) {
        free(out);
        return;
    }
    const char *msg = tl_last_error();
    CHECK(frag1 == NULL || strstr(msg, frag1), "message for %s lacks '%s': %s", src, frag1, msg);
    CHECK(frag2 == NULL || strstr(msg, frag2), "message for %s lacks '%s': %s", src, frag2, msg);
}

static void expect_out(const char *src, const char *vars, const char *want) {
    char *out;
    tl_status st = render(src, vars, &out);
    CHECK(st == TL_OK, "template %s failed: %s", src, tl_last_error());
    if (st != TL_OK) return;
    CHECK(!strcmp(out, want), "template %s: got '%s', want '%s'", src, out, want);
    free(out);
}

static void test_syntax_errors(void) {
    expect_err("{{ x", NULL, "line 1 col 1", "unclosed tag '{{'");
    expect_err("ab\n  {% if x", NULL, "line 2 col 3", "unclosed tag '{%'");
    expect_err("{% if x %}never closed", NULL, "line 1", "unclosed 'if'");
    expect_err("{% for m in x %}a{% else %}b", NULL, "unclosed 'for'", NULL);
    expect_err("{% macro m() %}", NULL, "unclosed 'macro'", NULL);
    expect_err("{# comment", NULL, "unclosed comment", NULL);
    expect_err("{{ 'abc }}", NULL, "unterminated string", NULL);
    expect_err("x\n{% endif %}", NULL, "line 2", "endif");
    expect_err("{% if x %}{% endfor %}{% endif %}", NULL, "endfor", NULL);
    expect_err("{% frobnicate %}", NULL, "unknown tag 'frobnicate'", NULL);
    expect_err("{% include 'x.j2' %}", NULL, "unsupported tag", "include");
    expect_err("{% extends 'base' %}", NULL, "unsupported tag", "extends");
    expect_err("{{ x|nosuchfilter }}", NULL, "line 1 col 5", "unknown filter 'nosuchfilter'");
    expect_err("\n\n  {{ x is nosuchtest }}", NULL, "line 3", "unknown test 'nosuchtest'");
    expect_err("{{ 1 + }}", NULL, "expected an expression", NULL);
    expect_err("{{ (1, 2) ]}}", NULL, "expected '}}'", NULL);
    expect_err("{{ [1, 2 }}", NULL, "unclosed tag", NULL); /* brackets keep '}}' inside the tag */
    expect_err("{{ f(a=1, 2) }}", NULL, "positional argument follows keyword", NULL);
    expect_err("{% break %}", NULL, "outside of a for loop", NULL);
    expect_err("{{ x @ y }}", NULL, "unexpected character '@'", NULL);
    expect_err("{% for x in y recursive %}{% endfor %}", NULL, "recursive", NULL);
    expect_err("{{ 99999999999999999999 }}", NULL, "integer literal too large", NULL);
    /* invalid UTF-8 in the template itself */
    expect_err("abc\xff", NULL, "not valid UTF-8", NULL);
}

static void test_runtime_errors(void) {
    expect_err("{{ raise_exception('roles must alternate') }}", NULL, "raise_exception: roles must alternate", "line 1");
    expect_err("{{ x.y }}", NULL, "'x' is undefined", NULL);
    expect_err("{{ u + 1 }}", NULL, "'u' is undefined", NULL);
    expect_err("{{ 'a' + 1 }}", NULL, "unsupported operand", NULL);
    expect_err("{{ 1 / 0 }}", NULL, "division by zero", NULL);
    expect_err("{{ 1 // 0 }}", NULL, "division or modulo by zero", NULL);
    expect_err("{{ 'x' in 5 }}", NULL, "not iterable", NULL);
    expect_err("{% for x in 5 %}{% endfor %}", NULL, "not iterable", NULL);
    expect_err("{% set a, b = [1, 2, 3] %}", NULL, "cannot unpack", NULL);
    expect_err("{% set ns = 1 %}{% set ns.x = 2 %}", NULL, "non-namespace", NULL);
    expect_err("{{ 'abc'.nosuchmethod() }}", NULL, "'nosuchmethod' is undefined", NULL);
    expect_err("{{ [1]|select('odd')|length }}", NULL, "no len()", NULL);
    expect_err("{{ {'a': 1}.items()|tojson }}", NULL, "not JSON serializable", NULL);
    expect_err("{{ 9223372036854775807 + 1 }}", NULL, "integer overflow", NULL);
    expect_err("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", NULL, "takes not more than 1", NULL);
    expect_err("{% if true %}{{ x|nosuch }}{% endif %}", NULL, "unknown filter 'nosuch'", NULL);
}

static void test_limits(void) {
    /* runaway recursion: bounded by max_depth, error not stack overflow */
    expect_err("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}", NULL, "nested deeper than", "recursion");
    /* huge loops: bounded by the step limit */
    jinja_limits lim = {.max_steps = 200000};
    char *out;
    tl_status st = render_lim("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", NULL, &lim, &out);
    CHECK(st != TL_OK && strstr(tl_last_error(), "steps"), "nested huge loop: %s", st == TL_OK ? "rendered" : tl_last_error());
    if (st == TL_OK) free(out);
    /* default limits too (20M steps): must end with an error, in bounded time */
    st = render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", NULL, &out);
    CHECK(st != TL_OK && (strstr(tl_last_error(), "steps") || strstr(tl_last_error(), "memory limit")),
          "huge loop with default limits: %s", st == TL_OK ? "rendered" : tl_last_error());
    if (st == TL_OK) free(out);
    expect_err("{{ range(1000000)|length }}", NULL, "range too big", NULL);
    /* output bound */
    jinja_limits lo = {.max_output = 1 << 20};
    st = render_lim("{% set s = 'x' * 100000 %}{% for i in range(1000) %}{{ s }}{% endfor %}", NULL, &lo, &out);
    CHECK(st != TL_OK && strstr(tl_last_error(), "output exceeds"), "output bound: %s", st == TL_OK ? "rendered" : tl_last_error());
    if (st == TL_OK) free(out);
    /* memory bound: doubling a string */
    jinja_limits lm = {.max_memory = 8 << 20};
    st = render_lim("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s|length }}",
                    NULL, &lm, &out);
    CHECK(st != TL_OK && strstr(tl_last_error(), "memory"), "memory bound: %s", st == TL_OK ? "rendered" : tl_last_error());
    if (st == TL_OK) free(out);
    expect_err("{{ 'ab' * 9223372036854775807 }}", NULL, "memory limit", NULL);
    /* deep nesting in the parser */
    size_t n = 20000;
    char *deep = malloc(2 * n + 16);
    strcpy(deep, "{{ ");
    for (size_t i = 0; i < n; i++) strcat(deep + 3 + i, "(");
    size_t len = strlen(deep);
    for (size_t i = 0; i < n; i++) deep[len + i] = ')';
    strcpy(deep + len + n, " }}");
    expect_err(deep, NULL, "nesting deeper than", NULL);
    /* deep if nesting */
    char *ifs = malloc(n * 20 + 16);
    ifs[0] = 0;
    size_t o = 0;
    for (size_t i = 0; i < 5000; i++) o += (size_t)sprintf(ifs + o, "{%% if 1 %%}");
    expect_err(ifs, NULL, "nesting deeper than", NULL);
    free(ifs);
    free(deep);
    /* deep JSON */
    char *dj = malloc(2 * n + 16);
    strcpy(dj, "{\"a\": ");
    len = strlen(dj);
    for (size_t i = 0; i < n; i++) dj[len + i] = '[';
    dj[len + n] = 0;
    expect_err("x", dj, "json", "nesting");
    free(dj);
}

static void test_json_errors(void) {
    expect_err("x", "{\"a\": }", "json", "byte 6");
    expect_err("x", "{\"a\": 1", "json", NULL);
    expect_err("x", "{\"a\": \"\\ud800\"}", "json", "surrogate");
    expect_err("x", "{\"a\": \"\xc3\x28\"}", "json", "UTF-8");
    expect_err("x", "{\"a\": 1} trailing", "json", "trailing");
    expect_err("x", "[1, 2]", "must be a JSON object", NULL);
    expect_err("x", "{\"a\": 01}", "json", NULL);
    expect_err("x", "{\"a\": \"tab\there\"}", "json", "control character");
}

static void test_positive(void) {
    /* values fixed by Jinja/Python semantics */
    expect_out("{{ 1 + 1 }}|{{ 'a' ~ 2 }}|{{ none }}|{{ true }}|{{ 0.5 }}|{{ [1, 'a'] }}", NULL, "2|a2|None|True|0.5|[1, 'a']");
    expect_out("{%- for m in ms -%}{{ loop.index }}{{ m }}{%- endfor %}", "{\"ms\": [\"x\", \"y\"]}", "1x2y");
    expect_out("  {% if true %}\n  a\n  {% endif %}\nb", NULL, "  a\nb");
    expect_out("{{ s|tojson }}", "{\"s\": \"\\u00e9\\\"\\n\"}", "\"\xc3\xa9\\\"\\n\"");
    expect_out("{% set ns = namespace(k=0) %}{% for i in range(3) %}{% set ns.k = ns.k + i %}{% endfor %}{{ ns.k }}", NULL, "3");
    /* chat_template API with C messages */
    chat_message msgs[2] = {{"user", "Hi \"there\"\n"}, {"assistant", "Hello"}};
    chat_template_args a = {.msgs = msgs, .n_msgs = 2, .add_generation_prompt = true, .bos_token = "<s>"};
    char *out = NULL;
    size_t n = 0;
    const char *src = "{{ bos_token }}{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}"
                      "{% if add_generation_prompt %}>{% endif %}{{ tools is none }}";
    tl_status st = chat_template_render(src, strlen(src), &a, &out, &n);
    CHECK(st == TL_OK, "chat_template_render: %s", tl_last_error());
    if (st == TL_OK) {
        CHECK(!strcmp(out, "<s>[user:Hi \"there\"\n][assistant:Hello]>True"), "got '%s'", out);
        free(out);
    }
}

/* deterministic xorshift for the mutation test */
static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next_rand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void test_mutations(void) {
    static const char *const files[] = {
        "tests/fixtures/chat_templates/llama-3.1-8b-instruct.jinja",
        "tests/fixtures/chat_templates/mistral-nemo-instruct-2407.jinja",
        "tests/fixtures/chat_templates/deepseek-v3.1.jinja",
        "tests/fixtures/chat_templates/qwen2.5-7b-instruct.jinja",
        "tests/fixtures/chat_templates/llama-2-chat.jinja",
    };
    static const char *const snippets[] = {"{{", "}}", "{%", "%}", "{#", "#}", "-", "(", ")", "[", "]", "'", "\"",
                                           "|", " is ", " not ", "endfor", "endif", "loop.", "namespace(", ",", "\\"};
    const char *messages = "[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\"U\"},"
                           "{\"role\":\"assistant\",\"content\":\"A\",\"tool_calls\":[{\"id\":\"abcdefghi\","
                           "\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":{\"x\":1}}}]},"
                           "{\"role\":\"tool\",\"tool_call_id\":\"abcdefghi\",\"content\":\"r\"},{\"role\":\"user\",\"content\":\"U2\"}]";
    const char *plain = "[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\"U\"},"
                        "{\"role\":\"assistant\",\"content\":\"A\"},{\"role\":\"user\",\"content\":\"U2\"}]";
    const char *tools = "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":\"d\","
                        "\"parameters\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\"}}}}}]";
    int n_files = 0, n_ok = 0, n_err = 0;
    for (size_t fi = 0; fi < sizeof files / sizeof files[0]; fi++) {
        size_t len;
        char *src = test_read_file(files[fi], &len);
        if (!src) continue;
        n_files++;
        /* the unmutated template must render a plain conversation */
        chat_template_args a0 = {.messages_json = plain, .add_generation_prompt = true, .bos_token = "<s>", .eos_token = "</s>"};
        char *out = NULL;
        size_t on;
        tl_status st = chat_template_render(src, len, &a0, &out, &on);
        CHECK(st == TL_OK, "%s: %s", files[fi], tl_last_error());
        free(out);
        chat_template_args a = {.messages_json = messages, .tools_json = tools, .add_generation_prompt = true,
                                .bos_token = "<s>", .eos_token = "</s>"};
        char *buf = malloc(len + 64);
        for (int it = 0; it < 600; it++) {
            memcpy(buf, src, len + 1);
            size_t blen = len;
            int edits = 1 + (int)(next_rand() % 3);
            for (int e = 0; e < edits && blen > 0; e++) {
                size_t pos = (size_t)(next_rand() % blen);
                switch (next_rand() % 3) {
                case 0: /* delete a span */ {
                    size_t k = 1 + (size_t)(next_rand() % 8);
                    if (pos + k > blen) k = blen - pos;
                    memmove(buf + pos, buf + pos + k, blen - pos - k + 1);
                    blen -= k;
                    break;
                }
                case 1: /* overwrite with printable ASCII */
                    buf[pos] = (char)(32 + next_rand() % 95);
                    break;
                default: { /* insert a Jinja-significant snippet */
                    const char *sn = snippets[next_rand() % (sizeof snippets / sizeof snippets[0])];
                    size_t k = strlen(sn);
                    if (blen + k >= len + 63) break;
                    memmove(buf + pos + k, buf + pos, blen - pos + 1);
                    memcpy(buf + pos, sn, k);
                    blen += k;
                }
                }
            }
            out = NULL;
            st = chat_template_render(buf, blen, &a, &out, &on);
            if (st == TL_OK) {
                n_ok++;
                free(out);
            } else {
                n_err++;
                CHECK(strlen(tl_last_error()) > 0, "error without a message");
            }
        }
        free(buf);
        free(src);
    }
    if (n_files == 0) printf("mutations: fixtures not found (run from the source root); skipped\n");
    else printf("mutations: %d files, %d rendered, %d errors, no crash\n", n_files, n_ok, n_err);
}

/* random mutations of a JSON document: the parser must accept or reject,
 * never crash; a rejected document leaves a message naming a byte offset */
static void test_json_mutations(void) {
    const char *doc = "[{\"role\": \"user\", \"content\": \"h\\u00e9llo \\ud83d\\ude00 \\n\\\"q\\\"\"},"
                      " {\"role\": \"assistant\", \"x\": [1, -2.5e3, true, false, null, {}], \"y\": 0.125}]";
    size_t len = strlen(doc);
    char *buf = malloc(len + 16);
    int ok = 0, bad = 0;
    for (int it = 0; it < 3000; it++) {
        memcpy(buf, doc, len + 1);
        size_t blen = len;
        int edits = 1 + (int)(next_rand() % 2);
        for (int e = 0; e < edits; e++) {
            size_t pos = (size_t)(next_rand() % blen);
            if (next_rand() % 2) buf[pos] = (char)(next_rand() % 256);
            else {
                memmove(buf + pos, buf + pos + 1, blen - pos);
                blen--;
            }
        }
        jinja_env *e;
        if (jinja_env_init(NULL, &e) != TL_OK) continue;
        tl_status st = jinja_env_set_json(e, "m", buf, blen);
        if (st == TL_OK) ok++;
        else {
            bad++;
            CHECK(strstr(tl_last_error(), "json") != NULL, "json error message: %s", tl_last_error());
        }
        jinja_env_free(e);
    }
    free(buf);
    printf("json mutations: %d accepted, %d rejected, no crash\n", ok, bad);
}


/* ---- findings of the fuzzing pass (issue 24) ------------------------------- */

#if defined(__SANITIZE_ADDRESS__) || defined(__has_feature)
#if defined(__SANITIZE_ADDRESS__)
#define TJ_SLOW 1
#elif __has_feature(address_sanitizer)
#define TJ_SLOW 1
#endif
#endif
#ifndef TJ_SLOW
#define TJ_SLOW 0
#endif

static double tj_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts); /* CPU time: the machine may be shared */
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static long tj_maxrss_kb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* Render with default limits; want_out: expected output, or NULL and
 * want_err: a fragment the error must contain. Checks 1 s (sanitizer
 * builds: 20 s) and that the peak RSS grew by less than 256 MiB. */
static void finding(const char *what, const char *src, const char *vars, const char *want_out, const char *want_err) {
    long rss0 = tj_maxrss_kb();
    double t0 = tj_now();
    char *out = NULL;
    tl_status st = render(src, vars, &out);
    double dt = tj_now() - t0;
    long grew = tj_maxrss_kb() - rss0;
    if (want_out) {
        CHECK(st == TL_OK, "%s: failed: %s", what, tl_last_error());
        if (st == TL_OK) CHECK(!strcmp(out, want_out), "%s: got '%.80s', want '%.80s'", what, out, want_out);
    } else {
        CHECK(st != TL_OK, "%s: rendered '%.80s' but should fail", what, out ? out : "");
        if (st != TL_OK) CHECK(strstr(tl_last_error(), want_err) != NULL, "%s: error lacks '%s': %s", what, want_err, tl_last_error());
    }
    free(out);
    CHECK(dt < (TJ_SLOW ? 20.0 : 1.0), "%s: took %.2f s", what, dt);
    CHECK(grew < 256 * 1024, "%s: peak memory grew by %ld KiB", what, grew);
    printf("finding %-44s %7.3f s  %s\n", what, dt, st == TL_OK ? "rendered" : tl_last_error());
}

/* "{{ X op X op ... }}" with n operands */
static char *chain(const char *first, const char *sep, const char *operand, size_t n) {
    size_t fl = strlen(first), sl = strlen(sep), ol = strlen(operand);
    char *s = malloc(fl + n * (sl + ol) + 16), *o = s;
    memcpy(o, "{{ ", 3), o += 3;
    memcpy(o, first, fl), o += fl;
    for (size_t i = 1; i < n; i++) {
        memcpy(o, sep, sl), o += sl;
        memcpy(o, operand, ol), o += ol;
    }
    memcpy(o, " }}", 4);
    return s;
}

static void test_findings(void) {
    /* crashes on tiny templates */
    finding("format index 2^31", "{{ \"{2147483648}\".format(1) }}", NULL, NULL, "out of range");
    finding("format index -1 digits", "{{ \"{99999999999999999999}\".format(1) }}", NULL, NULL, "out of range");
    finding("int(base=1) falls back to float", "{{ \"10\"|int(base=1) }}", NULL, "10", NULL);
    finding("int(base=37)", "{{ \"z\"|int(base=37) }}", NULL, "0", NULL);
    finding("int out of range", "{{ \"99999999999999999999\"|int }}", NULL, NULL, "64-bit");
    finding("%-format width 2^31", "{{ \"%2147483648d\" % 5 }}", NULL, NULL, "JINJA_MAX_FORMAT_WIDTH");
    finding("%-format precision 2^31", "{{ \"%.2147483648f\" % 5 }}", NULL, NULL, "JINJA_MAX_FORMAT_WIDTH");
    finding("%-format wide but legal", "{{ (\"%600s\" % 'x')|length }}", NULL, "600", NULL);
    finding("%-format widths count characters", "{{ \"[%5s|%-4s|%.2s]\" % ('\\u00e9', 'ab', 'xyz') }}", NULL,
            "[    \xc3\xa9|ab  |xy]", NULL);
    finding("%-format negative hex", "{{ \"%x %#X %05d %+d\" % (-255, 255, -42, 7) }}", NULL, "-ff 0XFF -0042 +7", NULL);
    finding("%d of a huge float", "{{ \"%d\" % 1e300 }}", NULL, NULL, "64-bit");
    /* deep values: printed, compared, sorted, hashed, tojson */
    const char *deep = "{% set ns = namespace(x=[], y=[]) %}{% for i in range(100000) %}"
                       "{% set ns.x = [ns.x] %}{% set ns.y = [ns.y] %}{% endfor %}";
    char buf[512];
    snprintf(buf, sizeof buf, "%s{{ ns.x }}", deep);
    finding("100000-deep list printed", buf, NULL, NULL, "JINJA_MAX_VALUE_DEPTH");
    snprintf(buf, sizeof buf, "%s{{ ns.x == ns.y }}", deep);
    finding("100000-deep lists compared (==)", buf, NULL, NULL, "JINJA_MAX_VALUE_DEPTH");
    snprintf(buf, sizeof buf, "%s{{ ns.x < ns.y }}", deep);
    finding("100000-deep lists compared (<)", buf, NULL, NULL, "JINJA_MAX_VALUE_DEPTH");
    snprintf(buf, sizeof buf, "%s{{ [ns.x, ns.y]|sort }}", deep);
    finding("100000-deep lists sorted", buf, NULL, NULL, "JINJA_MAX_VALUE_DEPTH");
    snprintf(buf, sizeof buf, "%s{{ ns.x|tojson }}", deep);
    finding("100000-deep list tojson", buf, NULL, NULL, "JINJA_MAX_VALUE_DEPTH");
    snprintf(buf, sizeof buf, "%s{{ [ns.x, ns.y]|unique|list|length }}", deep);
    finding("100000-deep lists hashed (unique)", buf, NULL, NULL, "JINJA_MAX_VALUE_DEPTH");
    finding("namespace containing itself printed",
            "{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}", NULL, NULL, "JINJA_MAX_VALUE_DEPTH");
    /* long operator chains: built by loops, bounded where the tree is walked */
    static const struct { const char *what, *first, *sep, *operand; } chains[] = {
        {"100000-long + chain", "1", " + ", "1"},
        {"100000-long ~ chain", "'a'", " ~ ", "'a'"},
        {"100000-long | chain", "x", "|", "string"},
        {"100000-long . chain", "x", ".", "a"},
        {"100000-long and chain", "1", " and ", "1"},
        {"100000-long or chain", "0", " or ", "0"},
        {"100000-long [0] chain", "x", "", "[0]"},
        {"100000-long () chain", "x", "", "()"},
        {"100000-long is chain", "x", " is ", "defined"},
        {"100000-long if-else chain", "1", " if 1 else ", "1"},
    };
    for (size_t i = 0; i < sizeof chains / sizeof chains[0]; i++) {
        char *src = chain(chains[i].first, chains[i].sep, chains[i].operand, 100000);
        finding(chains[i].what, src, NULL, NULL, "JINJA_MAX_NESTING");
        free(src);
    }
    {
        char *src = chain("1", " + ", "1", 200); /* a long but legal chain */
        finding("200-long + chain", src, NULL, "200", NULL);
        free(src);
    }
    /* 40,000 elifs: walked as a chain, not nested */
    {
        size_t n = 40000, o = 0;
        char *src = malloc(n * 40 + 64);
        o += (size_t)sprintf(src + o, "{%% set x = %zu %%}{%% if x == 0 %%}0", n - 1);
        for (size_t i = 1; i < n; i++) o += (size_t)sprintf(src + o, "{%% elif x == %zu %%}%zu", i, i);
        strcpy(src + o, "{% else %}none{% endif %}");
        finding("40000 elifs", src, NULL, "39999", NULL);
        free(src);
    }
    /* loops sized by the input: charged before they run */
    finding("'' * 10**18", "{{ ('' * 1000000000000000000)|length }}", NULL, "0", NULL);
    finding("[] * 10**18", "{{ ([] * 1000000000000000000)|length }}", NULL, "0", NULL);
    finding("1 ** 10**18", "{{ 1 ** 1000000000000000000 }}", NULL, "1", NULL);
    finding("(-1) ** (10**18+1)", "{{ (-1) ** 1000000000000000001 }}", NULL, "-1", NULL);
    finding("2 ** 10**18", "{{ 2 ** 1000000000000000000 }}", NULL, NULL, "overflow");
    finding("2 ** 62", "{{ 2 ** 62 }}", NULL, "4611686018427387904", NULL);
    finding("'ab' * 10**7", "{{ ('ab' * 10000000)|length }}", NULL, "20000000", NULL);
    finding("[1,2] * 10**6", "{{ ([1, 2] * 1000000)|length }}", NULL, "2000000", NULL);
    finding("'x' * 10**9", "{{ ('x' * 1000000000)|length }}", NULL, NULL, "memory limit");
    finding("batch fill 10**18", "{{ [1]|batch(1000000000000000000, fill_with=0)|list|length }}", NULL, NULL, "max_steps");
    /* linear substring search and slicing */
    const char *big = "{% set a = 'ab' * 600000 %}{% set h = a ~ a %}";
    snprintf(buf, sizeof buf, "%s{{ h.count(a) }} {{ h.find(a ~ 'b') }} {{ h.rfind(a) }} {{ (a in h)|string }}", big);
    finding("1.2M needle in 2.4M haystack", buf, NULL, "2 -1 1200000 True", NULL);
    snprintf(buf, sizeof buf, "%s{{ h.split(a)|length }} {{ h.rsplit(a)|length }} {{ h.replace(a, 'x') }}", big);
    finding("split/replace by a 1.2M separator", buf, NULL, "3 3 xx", NULL);
    finding("worst case for naive search", "{% set h = 'a' * 2000000 %}{% set nd = 'a' * 1000000 ~ 'b' %}"
            "{{ h.find(nd) }} {{ h.rfind(nd) }} {{ h.count(nd) }}", NULL, "-1 -1 0", NULL);
    finding("s[::2] of 200k ASCII", "{{ ('ab' * 100000)[::2]|length }} {{ ('ab' * 100000)[1::2][:3] }}", NULL,
            "100000 bbb", NULL);
    finding("s[::-3] of 200k non-ASCII", "{% set s = '\\u00e9a' * 100000 %}{{ s[::-3]|length }} {{ s[::-3][:2] }} {{ s[-1] }}",
            NULL, "66667 a\xc3\xa9 a", NULL);
    finding("str indexing in a loop", "{% set s = '\\u00e9' * 20000 %}{% for i in range(20000) %}{{ s[i] if i > 19998 }}{% endfor %}",
            NULL, "\xc3\xa9", NULL);
    /* objects with many keys */
    {
        size_t n = 200000, o = 0;
        char *js = malloc(n * 24 + 64);
        o += (size_t)sprintf(js + o, "{\"m\": {");
        for (size_t i = 0; i < n; i++) o += (size_t)sprintf(js + o, "%s\"k%zu\": %zu", i ? ", " : "", i, i);
        strcpy(js + o, "}}");
        finding("200000-key JSON object", "{{ m|length }} {{ m.k199999 }} {{ m['k7'] }}", js, "200000 199999 7", NULL);
        finding("200000-key object, tojson sorted", "{{ (m|tojson(sort_keys=True))[:12] }}", js, "{\"k0\": 0, \"k", NULL);
        finding("200000-key object copied by dict()", "{{ dict(m)|length }} {{ 'k5' in dict(m) }}", js, "200000 True", NULL);
        free(js);
    }
    finding("unique of 100000 ints", "{{ (range(100000)|list + range(100000)|list)|unique|list|length }}", NULL, "100000", NULL);
    /* signed overflow (UBSan) in slice steps and range */
    finding("slice step INT64_MAX", "{{ [1, 2, 3][::9223372036854775807] }}", NULL, "[1]", NULL);
    finding("slice step INT64_MIN", "{{ [1, 2, 3][::-9223372036854775807 - 1] }} {{ 'abc'[::-9223372036854775807 - 1] }}",
            NULL, "[3] c", NULL);
    finding("slice bounds INT64_MIN", "{{ 'abc'[-9223372036854775807 - 1:9223372036854775807] }}", NULL, "abc", NULL);
    finding("range near INT64_MAX", "{{ range(9223372036854775806, 9223372036854775807)|list }}", NULL,
            "[9223372036854775806]", NULL);
    finding("range spanning int64", "{{ range(-9223372036854775807, 9223372036854775807, 4611686018427387904)|list }}", NULL,
            "[-9223372036854775807, -4611686018427387903, 1, 4611686018427387905]", NULL);
    finding("range step INT64_MIN", "{{ range(0, -9223372036854775807 - 1, -9223372036854775807 - 1)|list }}", NULL, "[0]", NULL);
    finding("range too big", "{{ range(-9223372036854775807, 9223372036854775807)|length }}", NULL, NULL, "JINJA_MAX_RANGE");
    /* runaway recursion through deep expressions */
    {
        char *src = malloc(4096);
        size_t o = (size_t)sprintf(src, "{%% macro r(n) %%}{{ ");
        for (int i = 0; i < 120; i++) o += (size_t)sprintf(src + o, "'a' ~ (");
        o += (size_t)sprintf(src + o, "r(n + 1)");
        for (int i = 0; i < 120; i++) o += (size_t)sprintf(src + o, ")");
        strcpy(src + o, " }}{% endmacro %}{{ r(0) }}");
        finding("deep macro recursion", src, NULL, NULL, "JINJA_MAX_EVAL_DEPTH");
        free(src);
    }
}

int main(void) {
    test_findings();
    test_syntax_errors();
    test_runtime_errors();
    test_limits();
    test_json_errors();
    test_positive();
    test_mutations();
    test_json_mutations();
    return test_finish();
}
