// l2_prefetch_proto.cu: a standalone experiment (session 8, lead; not part of the kernel
// library) on the 4B decode Q4_K matmuls (v11, gemv_mma.cu, included below), answering:
//   1. How much faster are they when their weights are L2-resident (one copy replayed) rather
//      than streamed from DRAM (copies rotating over 330 MB)?
//   2. Does a block that asks L2 for its whole 16-row tile before the PDL wait (v1: 128-byte
//      prefetch.global.L2 lines, v2: one cp.async.bulk.prefetch.L2) help, alone and in a graph
//      of the layer's four matmuls? Does a side stream that bulk-prefetches the next matmul's
//      weights (the pair's during QK + O, down's during the pair) help?
//   3. Wave quantization: the pair's 608 tiles on 528 block slots (1.15 waves); the pair as
//      one-matrix tiles (1216 blocks, the same dots); one matrix of 4224 / 8448 / 9728 rows.
//   4. What the SwiGLU epilogue costs (epi 7: g * u without silu; 8-10: other silu forms).
// Every variant's outputs are compared bit for bit with the unchanged kernel's. Measured
// (H200, 2026-11-30 14:00-14:12 UTC): bench/NOTES.md 7.14.
// Build: the experiment patches gemv_mma.cu (bench/l2_prefetch_proto.patch: the l2all field,
// SPLIT_NCH, the extra epilogues), so it builds against commit 58ea965's kernels:
//   D=$(mktemp -d); git archive 58ea965 kernels include | tar -x -C $D
//   patch -d $D -p1 < bench/l2_prefetch_proto.patch; mkdir $D/bench; cp bench/l2_prefetch_proto.cu $D/bench/
//   (cd $D && nvcc -O3 -std=c++17 -arch=sm_90a -I. -Iinclude -o l2_prefetch_proto bench/l2_prefetch_proto.cu)
// (-DSPLIT_NCH=1: the one-matrix pair tiles with the pair's single mma chain, the same bits.)
// Run: ./l2_prefetch_proto [--quick]   (--quick: the bit checks only, for compute-sanitizer)
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "kernels/cuda/gemv_mma.cu"

static bool g_pdl = true;
namespace loom_cuda {
loom_status cuda_fail(loom_error *err, cudaError_t e, const char *stmt, const char *func,
                      const char *file, int line) {
    fprintf(stderr, "%s: %s at %s (%s:%d)\n", stmt, cudaGetErrorString(e), func, file, line);
    if (err) err->status = LOOM_ERR_CUDA;
    return LOOM_ERR_CUDA;
}
bool pdl_on() { return g_pdl; }
int gemv_mma_split() { return 0; }
int mma_q4k_variant() { return 1; }
int gemv_triple_mixed() { return 1; }
int sm_count() {
    static int n = 0;
    if (!n) cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, 0);
    return n;
}
int cc_major() {
    static int n = 0;
    if (!n) cudaDeviceGetAttribute(&n, cudaDevAttrComputeCapabilityMajor, 0);
    return n;
}
}  // namespace loom_cuda
extern "C" loom_status loom_error_set(loom_error *err, loom_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (err) {
        err->status = st;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    } else {
        vfprintf(stderr, fmt, ap);
    }
    va_end(ap);
    return st;
}

#define CK(x)                                                                             \
    do {                                                                                  \
        cudaError_t e_ = (x);                                                             \
        if (e_ != cudaSuccess) {                                                          \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)
#define LK(x)                                                                             \
    do {                                                                                  \
        if ((x) != LOOM_OK) { fprintf(stderr, "%s:%d %s failed\n", __FILE__, __LINE__, #x); exit(1); } \
    } while (0)

using namespace loom_cuda;

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint64_t rnd() { g_rng ^= g_rng << 13; g_rng ^= g_rng >> 7; g_rng ^= g_rng << 17; return g_rng; }
static uint16_t f16(float v) { __half h = __float2half(v); return *(uint16_t *)&h; }

// Q4_K matrix rows x K with random quants and small f16 d / dmin.
static uint8_t *q4k_dev(int64_t rows, int64_t K) {
    const int64_t nb = rows * K / 256;
    std::vector<uint8_t> h((size_t)nb * 144);
    for (size_t i = 0; i < h.size(); i++) h[i] = (uint8_t)rnd();
    for (int64_t b = 0; b < nb; b++) {
        uint16_t d = f16(1e-3f * (1 + (rnd() % 100) / 100.f)), m = f16(5e-4f);
        memcpy(&h[b * 144], &d, 2);
        memcpy(&h[b * 144 + 2], &m, 2);
    }
    uint8_t *p;
    CK(cudaMalloc(&p, h.size()));
    CK(cudaMemcpy(p, h.data(), h.size(), cudaMemcpyHostToDevice));
    return p;
}
static float *fdev(int64_t n, float amp) {
    std::vector<float> h(n);
    for (auto &v : h) v = amp * ((float)(rnd() >> 40) / 16777216.f - 0.5f);
    float *p;
    CK(cudaMalloc(&p, n * 4));
    CK(cudaMemcpy(p, h.data(), n * 4, cudaMemcpyHostToDevice));
    return p;
}

struct Layer { uint8_t *qk, *o, *gate, *up, *down; };
static const int64_t kH = 2560, kF = 9728, kQK = 5120, kA = 4096;
static float *g_x, *g_q, *g_att, *g_h;
static cudaStream_t g_s;

static Seg seg(const uint8_t *w, int64_t rows, int64_t K, float *y, const float *resid) {
    Seg s = {};
    s.w = w; s.y = y; s.resid = resid; s.rows = rows; s.row_bytes = K / 256 * 144;
    s.type = LOOM_GGML_Q4_K; s.wide = 1;
    return s;
}
static void mm_qk(const Layer &l) { Seg s = seg(l.qk, kQK, kH, g_q, nullptr); LK(mma_matmul(&s, 1, EPI_PLAIN, g_x, kH, 1, nullptr, nullptr, g_s)); }
static void mm_o(const Layer &l) { Seg s = seg(l.o, kH, kA, g_x, g_x); LK(mma_matmul(&s, 1, EPI_ADD, g_att, kA, 1, nullptr, nullptr, g_s)); }
static void mm_pair(const Layer &l) {
    Seg s[2] = {seg(l.gate, kF, kH, g_h, nullptr), seg(l.up, kF, kH, nullptr, nullptr)};
    LK(mma_matmul(s, 2, EPI_SWIGLU, g_x, kH, 1, nullptr, nullptr, g_s));
}
static void mm_down(const Layer &l) { Seg s = seg(l.down, kH, kF, g_x, g_x); LK(mma_matmul(&s, 1, EPI_ADD, g_h, kF, 1, nullptr, nullptr, g_s)); }

// Side-stream prefetch: a small kernel that asks L2 for n bytes at p (64 KB bulk pieces).
__global__ void side_prefetch(const uint8_t *p, int64_t n) {
    const int64_t piece = 65536;
    for (int64_t o = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * piece; o < n;
         o += (int64_t)gridDim.x * blockDim.x * piece)
        bulk_prefetch_l2(p + o, (uint32_t)(n - o < piece ? n - o : piece));
}
static cudaStream_t g_s1;
static cudaEvent_t g_ev[64];
static int g_nev;
static void side(const uint8_t *p, int64_t n) {  // fork from g_s at this point
    cudaEvent_t e = g_ev[g_nev++];
    CK(cudaEventRecord(e, g_s));
    CK(cudaStreamWaitEvent(g_s1, e, 0));
    side_prefetch<<<8, 32, 0, g_s1>>>(p, n);
    CK(cudaGetLastError());
}
static void side_join() {
    cudaEvent_t e = g_ev[g_nev++];
    CK(cudaEventRecord(e, g_s1));
    CK(cudaStreamWaitEvent(g_s, e, 0));
}

// Median us per replay / per unit of a graph built by `body`.
template <typename F>
static double time_graph(F body, int units, int reps = 15) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(g_s, cudaStreamCaptureModeGlobal));
    body();
    CK(cudaStreamEndCapture(g_s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphLaunch(ge, g_s));
    CK(cudaStreamSynchronize(g_s));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    std::vector<double> t;
    for (int r = 0; r < reps; r++) {
        CK(cudaEventRecord(a, g_s));
        CK(cudaGraphLaunch(ge, g_s));
        CK(cudaEventRecord(b, g_s));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms * 1000.0 / units);
    }
    std::sort(t.begin(), t.end());
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    return t[t.size() / 2];
}

int main(int argc, char **argv) {
    const bool quick = argc > 1 && !strcmp(argv[1], "--quick");
    CK(cudaStreamCreateWithFlags(&g_s, cudaStreamNonBlocking));
    // copy bandwidth (read + write)
    {
        const size_t n = 1ull << 30;
        void *a, *b;
        CK(cudaMalloc(&a, n));
        CK(cudaMalloc(&b, n));
        CK(cudaMemset(a, 1, n));
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        std::vector<double> v;
        for (int r = 0; r < 7; r++) {
            CK(cudaEventRecord(e0, g_s));
            CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, g_s));
            CK(cudaEventRecord(e1, g_s));
            CK(cudaEventSynchronize(e1));
            float ms;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            v.push_back(2.0 * n / (ms * 1e-3) / 1e9);
        }
        std::sort(v.begin(), v.end());
        printf("copy %.0f GB/s\n", v[3]);
        CK(cudaFree(a));
        CK(cudaFree(b));
    }
    const int L = quick ? 1 : 6;  // 6 x 55 MB: beyond L2
    std::vector<Layer> ly(L);
    for (auto &l : ly) {
        l.qk = q4k_dev(kQK, kH); l.o = q4k_dev(kH, kA); l.gate = q4k_dev(kF, kH);
        l.up = q4k_dev(kF, kH); l.down = q4k_dev(kH, kF);
    }
    g_x = fdev(kH, 2.f); g_q = fdev(kQK, 1.f); g_att = fdev(kA, 2.f); g_h = fdev(kF, 2.f);
    float *x0 = fdev(kH, 2.f), *h0 = fdev(kF, 2.f);
    // correctness: each variant gives the same bits as variant 0 (one layer, each matmul once)
    {
        std::vector<std::vector<float>> ref;
        int bad = 0;
        for (int v = 0; v <= 2; v++) {
            g_l2all = v;
            CK(cudaMemcpy(g_x, x0, kH * 4, cudaMemcpyDeviceToDevice));
            CK(cudaMemcpy(g_h, h0, kF * 4, cudaMemcpyDeviceToDevice));
            mm_qk(ly[0]); mm_o(ly[0]); mm_pair(ly[0]); mm_down(ly[0]);
            CK(cudaStreamSynchronize(g_s));
            std::vector<float> out(kQK + kH + kF);
            CK(cudaMemcpy(out.data(), g_q, kQK * 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(out.data() + kQK, g_x, kH * 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(out.data() + kQK + kH, g_h, kF * 4, cudaMemcpyDeviceToHost));
            if (v == 0) ref.push_back(out);
            else if (memcmp(out.data(), ref[0].data(), out.size() * 4)) { bad++; printf("variant %d: bits differ\n", v); }
        }
        printf("bits: variants 1, 2 == 0: %s\n", bad ? "NO" : "yes");
        if (quick) return bad != 0;
    }
    const double bq = kQK * kH / 256 * 144, bo = kH * kA / 256 * 144, bp = 2.0 * kF * kH / 256 * 144,
                 bd = kH * kF / 256 * 144, blayer = bq + bo + bp + bd;
    cudaDeviceProp pr;
    CK(cudaGetDeviceProperties(&pr, 0));
    printf("%s, L2 %d MB, %d layers of %.1f MB rotating\n", pr.name, pr.l2CacheSize >> 20, L, blayer / 1e6);
    printf("%-26s %10s %10s %10s   (us; GB/s at v0 / best)\n", "row", "v0", "v1 lines", "v2 bulk");
    struct Row { const char *name; void (*f)(const Layer &); double bytes; };
    Row rows[] = {{"QK 5120x2560", mm_qk, bq}, {"O 2560x4096 + add", mm_o, bo},
                  {"pair 2x9728x2560 swiglu", mm_pair, bp}, {"down 2560x9728 + add", mm_down, bd}};
    for (int hot = 0; hot <= 1; hot++) {
        for (auto &r : rows) {
            double t[3];
            for (int v = 0; v <= 2; v++) {
                g_l2all = v;
                t[v] = time_graph([&] { for (int i = 0; i < 24; i++) r.f(ly[hot ? 0 : i % L]); }, 24);
            }
            const double best = std::min(t[1], t[2]);
            printf("%-20s %-5s %10.2f %10.2f %10.2f   %6.0f / %6.0f\n", r.name, hot ? "L2" : "DRAM",
                   t[0], t[1], t[2], r.bytes / t[0] / 1e3, r.bytes / best / 1e3);
        }
    }
    for (int v = 0; v <= 2; v++) {
        g_l2all = v;
        for (int pdl = 1; pdl >= 0; pdl--) {
            g_pdl = pdl;
            const double t = time_graph([&] {
                for (int i = 0; i < 12; i++) { const Layer &l = ly[i % L]; mm_qk(l); mm_o(l); mm_pair(l); mm_down(l); }
            }, 12);
            printf("layer graph (4 matmuls) v%d pdl %d: %.2f us/layer = %.0f GB/s\n", v, pdl, t, blayer / t / 1e3);
        }
        g_pdl = true;
    }
    // The pair as ONE-matrix tiles: gate's and up's 608 tiles each a block of their own (1216
    // blocks, the same dots as the pair without epilogue), S = 1 (the pair's) or 2.
    {
        float *yg, *yu, *yg2, *yu2;
        CK(cudaMalloc(&yg, kF * 4)); CK(cudaMalloc(&yu, kF * 4));
        CK(cudaMalloc(&yg2, kF * 4)); CK(cudaMalloc(&yu2, kF * 4));
        auto split_pair = [&](const Layer &l, float *a_, float *b_, int S) {
            MmaArgs a = {};
            Seg sg[2] = {seg(l.gate, kF, kH, a_, nullptr), seg(l.up, kF, kH, b_, nullptr)};
            a.nseg = 2;
            fill_tiles(a.seg, a.tile0, sg, 2);
            a.epi = EPI_PLAIN; a.x = g_x; a.K = kH; a.n = 1;
            CK((launch_q4k<1, 1>(a, false, false, S, 1, g_s)));
        };
        auto pair_plain = [&](const Layer &l) {
            Seg sg[2] = {seg(l.gate, kF, kH, yg, nullptr), seg(l.up, kF, kH, yu, nullptr)};
            LK(mma_matmul(sg, 2, EPI_PLAIN, g_x, kH, 1, nullptr, nullptr, g_s));
        };
        {
            std::vector<float> hx(kH);
            CK(cudaMemcpy(hx.data(), g_x, kH * 4, cudaMemcpyDeviceToHost));
            int nonfin = 0;
            for (float v : hx) nonfin += !isfinite(v);
            printf("x after the layer graphs: %d non-finite of %lld\n", nonfin, (long long)kH);
        }
        g_l2all = 0;
        pair_plain(ly[0]);
        split_pair(ly[0], yg2, yu2, 1);
        CK(cudaStreamSynchronize(g_s));
        std::vector<float> h1(2 * kF), h2(2 * kF);
        CK(cudaMemcpy(h1.data(), yg, kF * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(h1.data() + kF, yu, kF * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(h2.data(), yg2, kF * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(h2.data() + kF, yu2, kF * 4, cudaMemcpyDeviceToHost));
        printf("split pair (S=1) == pair without epilogue: %s\n", memcmp(h1.data(), h2.data(), 8 * kF) ? "NO" : "yes");
        CK(cudaMemcpy(g_x, x0, kH * 4, cudaMemcpyDeviceToDevice));  // finite x again (the layer graphs' adds grow it)
        {
            std::vector<float> hx(kH);
            CK(cudaMemcpy(hx.data(), g_x, kH * 4, cudaMemcpyDeviceToHost));
            int nonfin = 0;
            for (float v : hx) nonfin += !isfinite(v);
            printf("x reset: %d non-finite\n", nonfin);
        }
        for (int hot = 0; hot <= 1; hot++) {
            const double t0 = time_graph([&] { for (int i = 0; i < 24; i++) mm_pair(ly[hot ? 0 : i % L]); }, 24);
            const double t1 = time_graph([&] { for (int i = 0; i < 24; i++) pair_plain(ly[hot ? 0 : i % L]); }, 24);
            const double t2 = time_graph([&] { for (int i = 0; i < 24; i++) split_pair(ly[hot ? 0 : i % L], yg2, yu2, 1); }, 24);
            const double t3 = time_graph([&] { for (int i = 0; i < 24; i++) split_pair(ly[hot ? 0 : i % L], yg2, yu2, 2); }, 24);
            auto mm_prod = [&](const Layer &l) {
                Seg sg[2] = {seg(l.gate, kF, kH, g_h, nullptr), seg(l.up, kF, kH, nullptr, nullptr)};
                LK(mma_matmul(sg, 2, 7, g_x, kH, 1, nullptr, nullptr, g_s));
            };
            const double t4 = time_graph([&] { for (int i = 0; i < 24; i++) mm_prod(ly[hot ? 0 : i % L]); }, 24);
            for (int e = 8; e <= 10; e++) {
                auto mm_e = [&](const Layer &l) {
                    Seg sg[2] = {seg(l.gate, kF, kH, g_h, nullptr), seg(l.up, kF, kH, nullptr, nullptr)};
                    LK(mma_matmul(sg, 2, e, g_x, kH, 1, nullptr, nullptr, g_s));
                };
                const double te = time_graph([&] { for (int i = 0; i < 24; i++) mm_e(ly[hot ? 0 : i % L]); }, 24);
                printf("pair %s epi %d (8: __expf + rcp, 9: expf + rcp, 10: __expf + div): %.2f\n", hot ? "L2" : "DRAM", e, te);
            }
            const double t5 = time_graph([&] { for (int i = 0; i < 24; i++) mm_pair(ly[hot ? 0 : i % L]); }, 24);
            printf("pair %s: g*u (no silu) %.2f, swiglu again %.2f\n", hot ? "L2" : "DRAM", t4, t5);
            printf("pair %s: swiglu %.2f, two outputs %.2f, one-matrix tiles S1 %.2f, S2 %.2f us\n",
                   hot ? "L2" : "DRAM", t0, t1, t2, t3);
        }
        // wave test: one matrix of 8448 rows (528 tiles = one wave at 4 an SM) vs 9728 (608)
        for (int64_t rows : {4224L, 8448L, 9728L}) {
            const double t = time_graph([&] {
                for (int i = 0; i < 24; i++) {
                    Seg sg = seg(ly[i % L].gate, rows, kH, yg2, nullptr);
                    LK(mma_matmul(&sg, 1, EPI_PLAIN, g_x, kH, 1, nullptr, nullptr, g_s));
                }
            }, 24);
            printf("gate rows %lld (%lld tiles, S %d): %.2f us\n", (long long)rows, (long long)rows / 16,
                   mma_pick_split(rows / 16, kH / 256), t);
        }
    }
    // side-stream prefetch of the next matmuls' weights: the pair's during QK + O, down's
    // during the pair (gate and up are separate allocations)
    CK(cudaStreamCreateWithFlags(&g_s1, cudaStreamNonBlocking));
    for (auto &e : g_ev) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    for (int v = 0; v <= 2; v += 2) {
        g_l2all = v;
        const double t = time_graph([&] {
            g_nev = 0;
            for (int i = 0; i < 12; i++) {
                const Layer &l = ly[i % L];
                side(l.gate, (int64_t)(bp / 2));
                side(l.up, (int64_t)(bp / 2));
                mm_qk(l); mm_o(l);
                side(l.down, (int64_t)bd);
                mm_pair(l); mm_down(l);
            }
            side_join();
        }, 12);
        printf("layer graph + side prefetch v%d: %.2f us/layer = %.0f GB/s\n", v, t, blayer / t / 1e3);
    }
    return 0;
}
