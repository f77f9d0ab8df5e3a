/* threads.c: the CPU kernels' shared infrastructure: a small persistent thread pool, the F16
 * decode table and the weight argument checks.
 *
 * One job at a time: a caller takes `pool_busy` (trylock; on failure it simply runs the whole
 * range itself, which also covers nested calls from a worker), publishes the job, bumps the
 * generation and wakes the workers. Worker i runs range i of the static split
 * [n*i/parts, n*(i+1)/parts), the caller runs range 0, and every spawned worker acknowledges
 * each generation so the caller knows when the job is finished. Workers are created lazily
 * (the first job that wants them) and live for the rest of the process, detached; the pool
 * never shrinks, a smaller thread count just leaves some idle. A child of fork() starts with
 * an empty pool (pthread_atfork). The scratch workspaces (cpu_workspace.h) grow here too.
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "kernels/cpu/cpu_internal.h"

/* Below this much work (multiply-adds) a job stays on the calling thread: waking workers costs
 * some microseconds. */
enum { PARALLEL_MIN_COST = 1 << 16 };

static pthread_mutex_t pool_busy = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_work = PTHREAD_COND_INITIALIZER;
static pthread_cond_t pool_done = PTHREAD_COND_INITIALIZER;
static int pool_spawned;         /* workers alive (ids 1 .. pool_spawned) */
static uint64_t pool_generation; /* bumped per job */
static uint64_t pool_spawn_generation[LOOM_CPU_MAX_THREADS + 1];
static int pool_pending;         /* workers that have not yet finished the current job */
static struct {
    loom_cpu_range_fn fn;
    void *ctx;
    int64_t n;
    int parts;
} pool_job;

static int configured_threads; /* 0 = default; guarded by the "no concurrent use" contract */

static int default_threads(void) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    if (cores > LOOM_CPU_MAX_THREADS) cores = LOOM_CPU_MAX_THREADS;
    return (int)cores;
}

void loom_cpu_set_threads(int n) {
    if (n < 0) n = 0;
    if (n > LOOM_CPU_MAX_THREADS) n = LOOM_CPU_MAX_THREADS;
    __atomic_store_n(&configured_threads, n, __ATOMIC_RELAXED);
}

int loom_cpu_get_threads(void) {
    int n = __atomic_load_n(&configured_threads, __ATOMIC_RELAXED);
    return n > 0 ? n : default_threads();
}

static void run_part(loom_cpu_range_fn fn, void *ctx, int64_t n, int parts, int i) {
    int64_t begin = n * i / parts, end = n * (i + 1) / parts;
    if (begin < end) fn(ctx, begin, end, i);
}

static void *worker_main(void *arg) {
    int id = (int)(intptr_t)arg;
    pthread_mutex_lock(&pool_mu);
    /* The generation current when it was spawned: the job it first serves comes after. */
    uint64_t seen = pool_spawn_generation[id];
    for (;;) {
        while (pool_generation == seen) pthread_cond_wait(&pool_work, &pool_mu);
        seen = pool_generation;
        loom_cpu_range_fn fn = pool_job.fn;
        void *ctx = pool_job.ctx;
        int64_t n = pool_job.n;
        int parts = pool_job.parts;
        pthread_mutex_unlock(&pool_mu);
        if (id < parts) run_part(fn, ctx, n, parts, id);
        pthread_mutex_lock(&pool_mu);
        if (--pool_pending == 0) pthread_cond_signal(&pool_done);
    }
    return NULL;
}

/* A child of fork() has none of the workers: it starts over with an empty, idle pool. */
static void pool_after_fork_child(void) {
    pthread_mutex_init(&pool_busy, NULL);
    pthread_mutex_init(&pool_mu, NULL);
    pthread_cond_init(&pool_work, NULL);
    pthread_cond_init(&pool_done, NULL);
    pool_spawned = 0;
    pool_pending = 0;
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void register_atfork(void) { pthread_atfork(NULL, NULL, pool_after_fork_child); }

/* Spawns workers up to `want` (ids 1..want); returns how many exist. Called with pool_busy
 * held and no job in flight. */
static int ensure_workers(int want) {
    pthread_once(&atfork_once, register_atfork);
    while (pool_spawned < want) {
        pthread_t th;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_mutex_lock(&pool_mu);
        pool_spawn_generation[pool_spawned + 1] = pool_generation;
        int rc = pthread_create(&th, &attr, worker_main, (void *)(intptr_t)(pool_spawned + 1));
        if (rc == 0) pool_spawned++;
        pthread_mutex_unlock(&pool_mu);
        pthread_attr_destroy(&attr);
        if (rc != 0) break; /* run with the workers we have */
    }
    return pool_spawned;
}

void loom_cpu_parallel_for(int64_t n, int64_t cost_per_item, loom_cpu_range_fn fn, void *ctx) {
    if (n <= 0) return;
    int parts = loom_cpu_get_threads();
    if (parts > n) parts = (int)n;
    if (cost_per_item < 1) cost_per_item = 1;
    if (parts <= 1 || n * cost_per_item < PARALLEL_MIN_COST ||
        pthread_mutex_trylock(&pool_busy) != 0) {
        fn(ctx, 0, n, 0);
        return;
    }
    int workers = ensure_workers(parts - 1);
    if (parts > workers + 1) parts = workers + 1;

    pthread_mutex_lock(&pool_mu);
    pool_job.fn = fn;
    pool_job.ctx = ctx;
    pool_job.n = n;
    pool_job.parts = parts;
    pool_pending = workers;
    pool_generation++;
    pthread_cond_broadcast(&pool_work);
    pthread_mutex_unlock(&pool_mu);

    run_part(fn, ctx, n, parts, 0);

    pthread_mutex_lock(&pool_mu);
    while (pool_pending > 0) pthread_cond_wait(&pool_done, &pool_mu);
    pthread_mutex_unlock(&pool_mu);
    pthread_mutex_unlock(&pool_busy);
}

/* ------------------------------------------------------------------------------------------- */

static float f16_table[1 << 16];
static pthread_once_t f16_once = PTHREAD_ONCE_INIT;

static void f16_table_init(void) {
    for (uint32_t h = 0; h < (1u << 16); h++) f16_table[h] = loom_fp16_to_fp32((uint16_t)h);
}

const float *loom_cpu_f16_table(void) {
    pthread_once(&f16_once, f16_table_init);
    return f16_table;
}

/* ------------------------------------------------------------------------------------------- */

loom_status loom_cpu_check_weight(const char *who, const char *what, const loom_kweight *w,
                                  loom_error *err) {
    if (!w) return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "%s: %s is NULL", who, what);
    const loom_ggml_type_info *info = loom_ggml_type_get((uint32_t)w->type);
    if (!info || !info->computable)
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                              "%s: %s has type %s (id %d); supported: F32, F16, BF16, Q8_0, Q4_K, "
                              "Q5_K, Q6_K",
                              who, what, info ? info->name : "unknown", (int)w->type);
    if (w->rows < 0 || w->cols < 0)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "%s: %s has negative shape [%lld, %lld]",
                              who, what, (long long)w->rows, (long long)w->cols);
    if (w->cols % info->block_size != 0)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT,
                              "%s: %s row length %lld is not a multiple of %s's block size %lld",
                              who, what, (long long)w->cols, info->name,
                              (long long)info->block_size);
    if (loom_ggml_row_bytes((uint32_t)w->type, w->cols) < 0)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "%s: %s row of %lld values overflows",
                              who, what, (long long)w->cols);
    if (!w->data && w->rows > 0 && w->cols > 0)
        return loom_error_set(err, LOOM_ERR_INVALID_ARGUMENT, "%s: %s data is NULL", who, what);
    if (w->layout != LOOM_WEIGHT_ROWS)
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                              "%s: %s has layout %d; the CPU kernels read rows back to back "
                              "(LOOM_WEIGHT_ROWS) only",
                              who, what, (int)w->layout);
    return LOOM_OK;
}

int64_t loom_cpu_weight_row_bytes(const loom_kweight *w) {
    int64_t b = loom_ggml_row_bytes((uint32_t)w->type, w->cols);
    LOOM_ASSERT(b >= 0);
    return b;
}

void loom_cpu_workspace_free(loom_cpu_workspace *ws) {
    if (!ws) return;
    free(ws->data);
    ws->data = NULL;
    ws->cap = 0;
}

float *loom_cpu_workspace_reserve(loom_cpu_workspace *ws, size_t n, const char *who,
                                  loom_error *err) {
    if (ws->cap >= n && ws->data) return ws->data;
    loom_cpu_workspace_free(ws);
    ws->data = n <= SIZE_MAX / sizeof(float) ? malloc((n ? n : 1) * sizeof(float)) : NULL;
    if (!ws->data) {
        loom_error_set(err, LOOM_ERR_OUT_OF_MEMORY, "%s: %zu floats of scratch", who, n);
        return NULL;
    }
    ws->cap = n;
    return ws->data;
}
