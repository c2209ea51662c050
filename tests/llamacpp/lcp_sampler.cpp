// lcp_sampler: llama.cpp's sampler stages on given logits, the oracle behind
// tests/fixtures/sampler_llamacpp.json (made by
// tests/fixtures/make_sampler_llamacpp.py). Uses llama.h's public sampler
// API, and for DRY llama_sampler_init_dry_testing (src/llama-sampler.h: the
// same sampler with its sequence breakers given as token sequences, so no
// vocabulary is needed). Built against a llama.cpp tree, never in tallow's
// build.
//
// stdin, one request a line:
//   V n l_0 .. l_n-1      the logits (token i has logit l_i; "nan", "-inf" allowed)
//   H n t_0 .. t_n-1      the history every chain accepts before it is applied
//   A spec                apply the chain once: "A size" then "id logit p" per
//                         remaining candidate (p as the chain left it, "nan" if unset)
//   D n spec              n draws (the chain then dist(seed 1234)): "D" then "id count" pairs
//   M r t spec            r runs (seeds 1..r) of t steps of a chain ending in mirostat:
//                         per step "M step" then "id count" pairs
// spec: stages in order, each name=args with ':' between args:
//   bias=tok/val[,tok/val]  pen=last_n:repeat:freq:present  dry=mult:base:allowed:last_n[:b1,b2..]
//   top_n_sigma=n  top_k=k  typ_p=p  top_p=p  min_p=p  xtc=p:t:seed  temp=t
//   miro1=tau:eta:seed (m = 100)  miro2=tau:eta:seed
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"
#include "llama-sampler.h"

static std::vector<float> logits;
static std::vector<llama_token> history;

static std::vector<std::string> split(const std::string &s, char c) {
    std::vector<std::string> out;
    std::string cur;
    std::istringstream is(s);
    while (std::getline(is, cur, c)) out.push_back(cur);
    return out;
}

static llama_sampler *chain_of(const std::vector<std::string> &stages, bool accept_history) {
    llama_sampler *ch = llama_sampler_chain_init(llama_sampler_chain_default_params());
    const int32_t nv = (int32_t)logits.size();
    for (const auto &st : stages) {
        size_t eq = st.find('=');
        std::string name = st.substr(0, eq);
        std::vector<std::string> a = split(st.substr(eq + 1), ':');
        auto f = [&](size_t i) { return std::strtof(a.at(i).c_str(), nullptr); };
        auto n = [&](size_t i) { return (int32_t)std::strtol(a.at(i).c_str(), nullptr, 10); };
        llama_sampler *s = nullptr;
        if (name == "bias") {
            std::vector<llama_logit_bias> b;
            for (const auto &p : split(a.at(0), ',')) {
                std::vector<std::string> tv = split(p, '/');
                b.push_back({(llama_token)std::strtol(tv.at(0).c_str(), nullptr, 10), std::strtof(tv.at(1).c_str(), nullptr)});
            }
            s = llama_sampler_init_logit_bias(nv, (int32_t)b.size(), b.data());
        } else if (name == "pen") {
            s = llama_sampler_init_penalties(nv, n(0), f(1), f(2), f(3));
        } else if (name == "dry") {
            std::vector<std::vector<llama_token>> br;
            if (a.size() > 4)
                for (const auto &t : split(a[4], ',')) br.push_back({(llama_token)std::strtol(t.c_str(), nullptr, 10)});
            s = llama_sampler_init_dry_testing(f(0), f(1), n(2), n(3), br);
        } else if (name == "top_n_sigma") {
            s = llama_sampler_init_top_n_sigma(f(0));
        } else if (name == "top_k") {
            s = llama_sampler_init_top_k(n(0));
        } else if (name == "typ_p") {
            s = llama_sampler_init_typical(f(0), 1);
        } else if (name == "top_p") {
            s = llama_sampler_init_top_p(f(0), 1);
        } else if (name == "min_p") {
            s = llama_sampler_init_min_p(f(0), 1);
        } else if (name == "xtc") {
            s = llama_sampler_init_xtc(f(0), f(1), 1, (uint32_t)n(2));
        } else if (name == "temp") {
            s = llama_sampler_init_temp(f(0));
        } else if (name == "miro1") {
            s = llama_sampler_init_mirostat(nv, (uint32_t)n(2), f(0), f(1), 100);
        } else if (name == "miro2") {
            s = llama_sampler_init_mirostat_v2((uint32_t)n(2), f(0), f(1));
        } else if (name == "dist") {
            s = llama_sampler_init_dist((uint32_t)n(0));
        } else {
            std::fprintf(stderr, "lcp_sampler: unknown stage '%s'\n", name.c_str());
            std::exit(2);
        }
        llama_sampler_chain_add(ch, s);
    }
    if (accept_history)
        for (llama_token t : history) llama_sampler_accept(ch, t);
    return ch;
}

// One application of ch to a fresh copy of the logits; returns the array.
static llama_token_data_array apply(llama_sampler *ch, std::vector<llama_token_data> &buf) {
    buf.resize(logits.size());
    for (size_t i = 0; i < logits.size(); i++) buf[i] = {(llama_token)i, logits[i], NAN};
    llama_token_data_array cur = {buf.data(), buf.size(), -1, false};
    llama_sampler_apply(ch, &cur);
    return cur;
}

static void print_hist(const std::map<llama_token, int> &h) {
    for (const auto &kv : h) std::printf("%d %d\n", kv.first, kv.second);
}

int main() {
    std::string line;
    std::vector<llama_token_data> buf;
    while (std::getline(std::cin, line)) {
        std::istringstream is(line);
        std::string cmd;
        is >> cmd;
        if (cmd == "V" || cmd == "H") {
            size_t n;
            is >> n;
            std::vector<std::string> w(n);
            for (auto &x : w) is >> x;
            if (cmd == "V") {
                logits.assign(n, 0.0f);
                for (size_t i = 0; i < n; i++) logits[i] = std::strtof(w[i].c_str(), nullptr);
            } else {
                history.assign(n, 0);
                for (size_t i = 0; i < n; i++) history[i] = (llama_token)std::strtol(w[i].c_str(), nullptr, 10);
            }
            continue;
        }
        std::vector<std::string> stages;
        long n_draw = 0, n_run = 0, n_step = 0;
        if (cmd == "D") is >> n_draw;
        if (cmd == "M") is >> n_run >> n_step;
        for (std::string s; is >> s;) stages.push_back(s);
        if (cmd == "A") {
            llama_sampler *ch = chain_of(stages, true);
            llama_token_data_array cur = apply(ch, buf);
            std::printf("A %zu\n", cur.size);
            for (size_t i = 0; i < cur.size; i++)
                std::printf("%d %.9g %.9g\n", cur.data[i].id, cur.data[i].logit, cur.data[i].p);
            llama_sampler_free(ch);
        } else if (cmd == "D") {
            stages.push_back("dist=1234");
            llama_sampler *ch = chain_of(stages, true);
            std::map<llama_token, int> h;
            for (long d = 0; d < n_draw; d++) {
                llama_token_data_array cur = apply(ch, buf);
                h[cur.selected >= 0 ? cur.data[cur.selected].id : -1]++;
            }
            std::printf("D\n");
            print_hist(h);
            llama_sampler_free(ch);
        } else if (cmd == "M") {
            std::vector<std::map<llama_token, int>> h(n_step);
            for (long r = 0; r < n_run; r++) {
                std::vector<std::string> st = stages;
                std::string &last = st.back(); // mirostat's seed: the run number
                last = last.substr(0, last.rfind(':') + 1) + std::to_string(r + 1);
                llama_sampler *ch = chain_of(st, true);
                for (long t = 0; t < n_step; t++) {
                    llama_token_data_array cur = apply(ch, buf);
                    h[t][cur.data[cur.selected].id]++;
                }
                llama_sampler_free(ch);
            }
            for (long t = 0; t < n_step; t++) {
                std::printf("M %ld\n", t);
                print_hist(h[t]);
            }
        }
        std::printf("END\n");
        std::fflush(stdout);
    }
    return 0;
}
