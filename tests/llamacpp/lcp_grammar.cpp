// lcp_grammar: llama.cpp's own verdict on GBNF grammars and strings, the
// oracle behind tests/fixtures/grammar_llamacpp.json (made by
// tests/fixtures/make_grammar_llamacpp.py). Built against a llama.cpp tree
// (its internal src/llama-grammar.h: the parser and the code-point matcher
// the sampler uses, exported by libllama.so), never in tallow's build.
//
// stdin, one request a line, texts hex-encoded so any bytes pass:
//   G <hex>   compile this grammar (start rule "root"); prints "G 1" or "G 0"
//   S <hex>   feed this string to the last grammar from its start; prints
//             "S 1" (a complete sentence), "S 0" (a live prefix), "S -1"
//             (rejected), "S x" (no grammar compiled)
//   L <hex>   load this GGUF's vocabulary (vocab_only); prints "L n_vocab"
//   T <hex>   the token mask after this prefix: the last grammar, compiled
//             against that vocabulary, fed the prefix, then applied to every
//             token (llama_grammar_apply_impl, what the grammar sampler
//             does); prints "T" and the allowed token ids, or "T x"
// A prefix ending inside a UTF-8 sequence is live when some parser stack
// could still match the character it would complete to (the check llama.cpp
// makes for a token that ends mid-character).
#include <cstdio>
#include <cstdint>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "llama.h"
#include "llama-grammar.h"

static std::string unhex(const std::string &h) {
    std::string out;
    for (size_t i = 0; i + 1 < h.size(); i += 2) out.push_back((char)std::stoi(h.substr(i, 2), nullptr, 16));
    return out;
}

static void quiet(ggml_log_level, const char *, void *) {}

static int verdict(const std::string &gbnf, const std::string &s) {
    llama_grammar *g = llama_grammar_init_impl(nullptr, gbnf.c_str(), "root", false, nullptr, 0, nullptr, 0);
    if (!g) return 2;
    int v;
    try {
        llama_grammar_accept_str(*g, s);
        const llama_partial_utf8 part = g->partial_utf8;
        if (part.n_remain < 0) {
            v = -1;
        } else if (part.n_remain > 0) {
            static const uint32_t end[1] = {0};
            v = -1;
            for (const auto &stack : g->stacks) {
                llama_grammar_candidates c = {{0, end, part, 0}};
                if (!stack.empty() && llama_grammar_reject_candidates_for_stack(g->rules, stack, c).empty()) v = 0;
            }
        } else {
            v = 0;
            for (const auto &stack : g->stacks)
                if (stack.empty()) v = 1;
        }
    } catch (const std::exception &) {
        v = -1; // every stack died on some code point
    }
    llama_grammar_free_impl(g);
    return v;
}

static const llama_vocab *vocab;

static void mask(const std::string &gbnf, const std::string &prefix) {
    llama_grammar *g = vocab ? llama_grammar_init_impl(vocab, gbnf.c_str(), "root", false, nullptr, 0, nullptr, 0)
                             : nullptr;
    if (!g) {
        std::printf("T x\n");
        return;
    }
    try {
        llama_grammar_accept_str(*g, prefix);
    } catch (const std::exception &) {
        llama_grammar_free_impl(g);
        std::printf("T x\n");
        return;
    }
    const int32_t n = llama_vocab_n_tokens(vocab);
    std::vector<llama_token_data> d(n);
    for (int32_t i = 0; i < n; i++) d[i] = {i, 0.0f, 0.0f};
    llama_token_data_array cur = {d.data(), d.size(), -1, false};
    llama_grammar_apply_impl(*g, &cur);
    std::printf("T");
    for (int32_t i = 0; i < n; i++)
        if (d[i].logit == 0.0f) std::printf(" %d", i);
    std::printf("\n");
    llama_grammar_free_impl(g);
}

int main() {
    llama_log_set(quiet, nullptr);
    std::string line, gbnf;
    bool have = false;
    while (std::getline(std::cin, line)) {
        if (line.size() < 2) continue;
        std::string arg = unhex(line.substr(2));
        if (line[0] == 'G') {
            gbnf = arg;
            llama_grammar *g = llama_grammar_init_impl(nullptr, gbnf.c_str(), "root", false, nullptr, 0, nullptr, 0);
            have = g != nullptr;
            if (g) llama_grammar_free_impl(g);
            std::printf("G %d\n", have ? 1 : 0);
        } else if (line[0] == 'L') {
            llama_model_params mp = llama_model_default_params();
            mp.vocab_only = true;
            llama_model *m = llama_model_load_from_file(arg.c_str(), mp);
            vocab = m ? llama_model_get_vocab(m) : nullptr;
            std::printf("L %d\n", vocab ? llama_vocab_n_tokens(vocab) : -1);
        } else if (line[0] == 'T') {
            mask(gbnf, arg);
        } else if (line[0] == 'S') {
            if (!have) std::printf("S x\n");
            else std::printf("S %d\n", verdict(gbnf, arg));
        }
        std::fflush(stdout);
    }
    return 0;
}
