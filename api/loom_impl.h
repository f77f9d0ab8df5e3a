/* loom_impl.h: loom's internals behind include/loom.h, for the `loom` tool and tests only (not
 * part of the public API): the graph and the GGUF a model holds.
 * Ownership: both belong to the model and live until loom_model_destroy.
 */
#ifndef LOOM_API_IMPL_H
#define LOOM_API_IMPL_H

#include "executor/cuda_backend.h"
#include "executor/executor.h"
#include "ir/ir.h"
#include "loaders/gguf.h"
#include "loom.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The model's verified step graph (lowered, or loaded from a protobuf file). */
const loom_ir_graph *loom_model_graph(const loom_model *m);
/* The model's mapped GGUF file. */
const loom_gguf *loom_model_gguf(const loom_model *m);

/* loom_model_load of a GGUF the caller already opened from path (e.g. to read its tokenizer
 * first): the model takes gguf over (closed with the model, or at once on failure), so the file
 * is opened once. */
loom_status loom_model_load_gguf(loom_gguf *gguf, const char *path,
                                 const loom_model_options *opts, loom_model **out,
                                 loom_error *err);

/* The memory of the session's executor plan (weights, KV cache, activations). */
void loom_session_exec_stats(const loom_session *s, loom_exec_stats *out);

/* The CUDA backend's report (false when the session runs on another backend). */
bool loom_session_cuda_info(loom_session *s, loom_cuda_backend_info *out);

/* The measured copy bandwidth (GB/s, read + write) of the memory the session's weights are read
 * from, as its backend measures it (vtable copy_bandwidth): the device's (CUDA: 1 GiB device to
 * device) or the host's (CPU: 512 MiB by the kernel threads). LOOM_ERR_UNSUPPORTED when the
 * backend does not measure it. */
loom_status loom_session_copy_bandwidth(loom_session *s, double *gbs, loom_error *err);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_API_IMPL_H */
