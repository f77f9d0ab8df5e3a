/* sampler.c: token sampling for loom.h (greedy, temperature, top-k, top-p).
 *
 * Order of filters, as in llama.cpp's classic chain: top-k on the raw logits, softmax at the
 * temperature, then top-p keeps the smallest prefix of the sorted candidates whose probability
 * reaches p (at least one). The draw uses a xorshift64* generator seeded through splitmix64, so a
 * given seed and call sequence always gives the same tokens on every machine. Ties in sorting
 * are broken by the lower token id, which keeps the result independent of qsort's order.
 */
#include <math.h>
#include <stdlib.h>

#include "loom.h"

struct loom_sampler {
    loom_sampler_options opt;
    uint64_t state;
    /* Scratch reused between calls: candidate ids and their probabilities. */
    int32_t cap;
    struct cand { float v; int32_t id; } *cand;
};

void loom_sampler_options_init(loom_sampler_options *o) {
    o->temperature = 0.0f;
    o->top_k = 0;
    o->top_p = 1.0f;
    o->seed = 0;
}

static uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Uniform in [0, 1) with 24 bits, from xorshift64*. */
static float next_uniform(loom_sampler *s) {
    s->state ^= s->state >> 12;
    s->state ^= s->state << 25;
    s->state ^= s->state >> 27;
    uint64_t r = s->state * 0x2545f4914f6cdd1dull;
    return (float)(r >> 40) / 16777216.0f;
}

loom_status loom_sampler_create(const loom_sampler_options *opts, loom_sampler **out,
                                loom_error *err) {
    *out = NULL;
    loom_sampler_options o;
    loom_sampler_options_init(&o);
    if (opts) o = *opts;
    if (isnan(o.temperature) || isnan(o.top_p) || o.top_k < 0 || o.top_p <= 0.0f)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "sampler: invalid options (temperature %g, top_k %d, top_p %g): "
                              "need top_k >= 0 and top_p > 0",
                              (double)o.temperature, o.top_k, (double)o.top_p);
    loom_sampler *s = calloc(1, sizeof *s);
    if (!s) return loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "sampler: out of memory");
    s->opt = o;
    s->state = splitmix64(o.seed);
    if (s->state == 0) s->state = 0x9e3779b97f4a7c15ull; /* xorshift must not start at 0 */
    *out = s;
    return LOOM_OK;
}

void loom_sampler_destroy(loom_sampler *s) {
    if (!s) return;
    free(s->cand);
    free(s);
}

static int32_t argmax(const float *x, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static int cmp_cand(const void *a, const void *b) {
    const struct cand *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

int32_t loom_sampler_sample(loom_sampler *s, const float *logits, int32_t n_vocab) {
    LOOM_ASSERT(n_vocab > 0);
    if (!s || s->opt.temperature <= 0.0f || s->opt.top_k == 1) return argmax(logits, n_vocab);
    if (s->cap < n_vocab) {
        struct cand *c = realloc(s->cand, (size_t)n_vocab * sizeof *c);
        if (!c) return argmax(logits, n_vocab); /* degrade to greedy rather than fail */
        s->cand = c;
        s->cap = n_vocab;
    }
    struct cand *c = s->cand;
    for (int32_t i = 0; i < n_vocab; i++) c[i] = (struct cand){logits[i], i};
    qsort(c, (size_t)n_vocab, sizeof *c, cmp_cand);
    int32_t n = n_vocab;
    if (s->opt.top_k > 0 && s->opt.top_k < n) n = s->opt.top_k;
    /* Softmax at the temperature over the n best (c[0] is the max). */
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) {
        c[i].v = expf((c[i].v - c[0].v) / s->opt.temperature);
        sum += c[i].v;
    }
    if (s->opt.top_p < 1.0f) {
        double cum = 0.0;
        int32_t keep = n;
        for (int32_t i = 0; i < n; i++) {
            cum += c[i].v / sum;
            if (cum >= s->opt.top_p) { keep = i + 1; break; }
        }
        n = keep;
        sum = 0.0;
        for (int32_t i = 0; i < n; i++) sum += c[i].v;
    }
    double r = (double)next_uniform(s) * sum, acc = 0.0;
    for (int32_t i = 0; i < n; i++) {
        acc += c[i].v;
        if (r < acc) return c[i].id;
    }
    return c[n - 1].id;
}
