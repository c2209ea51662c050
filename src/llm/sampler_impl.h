/* llm/sampler_impl: the sampler's state, shared by sampler.c (the fixed
 * fast path: penalties, top-k, top-p, min-p, temperature) and
 * sampler_chain.c (the configurable chain with every stage). Internal. */
#ifndef TL_LLM_SAMPLER_IMPL_H
#define TL_LLM_SAMPLER_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "tallow.h"

typedef struct smp_cand {
    int32_t id;
    float logit;
} smp_cand;

/* Chain stages, named as in --samplers (llama.cpp's names). */
typedef enum smp_stage {
    SMP_PENALTIES, SMP_DRY, SMP_TOP_N_SIGMA, SMP_TOP_K, SMP_TYPICAL, SMP_TOP_P, SMP_MIN_P, SMP_XTC,
    SMP_TEMPERATURE, SMP_N_STAGES
} smp_stage;

#define SMP_MAX_CHAIN 16

struct tl_sampler {
    tl_sampler_params p;
    int32_t n_vocab;
    smp_cand *cand;   /* [n_vocab] */
    float *prob;      /* [n_vocab] */
    int32_t *recent;  /* ring of the last repeat_last_n tokens */
    int32_t n_recent, recent_head;
    int32_t *count;   /* [n_vocab] occurrences of each token in the ring */
    tl_logit_bias *bias; /* [p.n_logit_bias] */
    uint64_t rng;
    tl_grammar *grammar; /* borrowed; NULL: none */
    int32_t budget;      /* tokens left to generate; -1: no budget */
    /* the configurable chain (used when a stage of it is on or the order
     * is not the default) */
    bool chain;
    smp_stage order[SMP_MAX_CHAIN];
    int32_t n_order;
    int32_t *dry_hist;  /* ring of the last dry_last_n tokens */
    int32_t n_dry, dry_head;
    int32_t *dry_work;  /* [3 * dry_last_n + 2] scratch: history, z-array */
    int32_t *dry_len;   /* [n_vocab] longest repeat each token would extend, -1 none */
    uint8_t *breaker;   /* [n_vocab] 1: a DRY sequence breaker */
    float mu;           /* mirostat's running 2 * tau estimate */
};

uint64_t smp_rand(tl_sampler *s);
tl_status smp_chain_init(tl_sampler *s);
void smp_chain_accept(tl_sampler *s, int32_t tok);
void smp_chain_reset(tl_sampler *s);
/* Sample from cand[0..n) (biases, penalties not yet applied beyond those
 * of the fast path: see sampler.c) with the configured chain. */
int32_t smp_chain_sample(tl_sampler *s, int32_t n);

#endif
