// cupti_trace.cu: cupti_trace.h on CUPTI's activity API (host code only). CUPTI hands over
// filled buffers through a callback (on one of its threads, or in cuptiActivityFlushAll);
// each kernel and memcpy record is copied out under a mutex into a growing array.
#include <cupti.h>
#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "bench/cupti_trace.h"

namespace {

constexpr size_t kBufBytes = 8 << 20;

std::mutex g_mu;
loom_kernel_rec *g_recs = nullptr;
size_t g_n = 0, g_cap = 0;
uint64_t g_dropped = 0;
bool g_oom = false;

// "void loom_cuda::(anonymous namespace)::gemv_mma_q4k<1, 2, true, true, 3, true>(loom_cuda::
// (anonymous namespace)::MmaArgs)" -> "gemv_mma_q4k<1, 2, true, true, 3, true>": the argument
// list (the parentheses that close the name) and everything up to the last "::" or space outside
// brackets and parentheses dropped.
void short_name(const char *mangled, char *out, size_t len) {
    int st = 0;
    char *d = abi::__cxa_demangle(mangled, nullptr, nullptr, &st);
    const char *s = st == 0 && d ? d : mangled;
    size_t end = strlen(s);
    if (end > 0 && s[end - 1] == ')') {  // back to the '(' that opens the argument list
        int depth = 0;
        for (size_t i = end; i-- > 0;) {
            if (s[i] == ')') depth++;
            else if (s[i] == '(' && --depth == 0) {
                end = i;
                break;
            }
        }
    }
    size_t start = 0;
    int depth = 0;
    for (size_t i = 0; i < end; i++) {
        if (s[i] == '<' || s[i] == '(') depth++;
        else if (s[i] == '>' || s[i] == ')') depth--;
        else if (depth == 0 && s[i] == ' ') start = i + 1;
        else if (depth == 0 && s[i] == ':' && s[i + 1] == ':') start = ++i + 1;
    }
    size_t n = end > start ? end - start : 0;
    if (n >= len) n = len - 1;
    memcpy(out, s + start, n);
    out[n] = '\0';
    free(d);
}

const char *copy_kind(uint8_t k) {
    switch (k) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "HtoH";
    default: return "other";
    }
}

void CUPTIAPI buffer_requested(uint8_t **buf, size_t *size, size_t *max_records) {
    *buf = static_cast<uint8_t *>(aligned_alloc(8, kBufBytes));
    *size = *buf ? kBufBytes : 0;
    *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t, size_t valid) {
    std::lock_guard<std::mutex> lock(g_mu);
    CUpti_Activity *r = nullptr;
    while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
        if (r->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && r->kind != CUPTI_ACTIVITY_KIND_MEMCPY)
            continue;
        if (g_n == g_cap) {
            size_t cap = g_cap ? 2 * g_cap : 4096;
            void *p = realloc(g_recs, cap * sizeof *g_recs);
            if (!p) {
                g_oom = true;
                break;
            }
            g_recs = static_cast<loom_kernel_rec *>(p);
            g_cap = cap;
        }
        loom_kernel_rec &o = g_recs[g_n++];
        memset(&o, 0, sizeof o);
        if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            const auto *c = reinterpret_cast<const CUpti_ActivityMemcpy6 *>(r);
            o.start = c->start;
            o.end = c->end;
            o.correlation = c->correlationId;
            o.graph = c->graphId;
            o.bytes = c->bytes;
            snprintf(o.name, sizeof o.name, "memcpy %s", copy_kind(c->copyKind));
            continue;
        }
        const auto *k = reinterpret_cast<const CUpti_ActivityKernel10 *>(r);
        o.start = k->start;
        o.end = k->end;
        o.correlation = k->correlationId;
        o.graph = k->graphId;
        o.grid[0] = k->gridX, o.grid[1] = k->gridY, o.grid[2] = k->gridZ;
        o.block[0] = k->blockX, o.block[1] = k->blockY, o.block[2] = k->blockZ;
        o.smem = k->staticSharedMemory + k->dynamicSharedMemory;
        short_name(k->name ? k->name : "?", o.name, sizeof o.name);
    }
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS)
        g_dropped += dropped;
    free(buf);
}

int fail(CUptiResult r, const char *what, char *err, size_t len) {
    const char *s = nullptr;
    if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS) s = "unknown CUPTI error";
    snprintf(err, len, "%s: %s (CUPTI %d)", what, s, (int)r);
    return -1;
}

}  // namespace

extern "C" int loom_cupti_start(char *err, size_t err_len) {
    CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    if (r != CUPTI_SUCCESS) return fail(r, "cuptiActivityRegisterCallbacks", err, err_len);
    r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (r != CUPTI_SUCCESS) return fail(r, "cuptiActivityEnable(CONCURRENT_KERNEL)", err, err_len);
    r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
    if (r != CUPTI_SUCCESS) return fail(r, "cuptiActivityEnable(MEMCPY)", err, err_len);
    return 0;
}

extern "C" int loom_cupti_stop(loom_kernel_rec **recs, size_t *n, uint64_t *dropped, char *err,
                               size_t err_len) {
    CUptiResult r = cuptiActivityFlushAll(0);
    CUptiResult r2 = cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (r2 == CUPTI_SUCCESS) r2 = cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMCPY);
    std::lock_guard<std::mutex> lock(g_mu);
    *recs = g_recs;
    *n = g_n;
    *dropped = g_dropped;
    const bool oom = g_oom;
    g_recs = nullptr;
    g_n = g_cap = 0;
    g_dropped = 0;
    g_oom = false;
    if (r != CUPTI_SUCCESS) return fail(r, "cuptiActivityFlushAll", err, err_len);
    if (r2 != CUPTI_SUCCESS) return fail(r2, "cuptiActivityDisable", err, err_len);
    if (oom) {
        snprintf(err, err_len, "out of memory copying CUPTI's records (%zu kept)", *n);
        return -1;
    }
    return 0;
}
