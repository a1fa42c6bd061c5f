/* gpu_device.h — what the cuda device's implementation files share: the device, the
 * per-node state every op embeds, the error helpers, and the shared scratch memory.
 *
 * The device lives in two shared objects (README.md says why): the plugin
 * (plugin.c: descriptor, flags, the driver probe --list_plugins shows) links no CUDA
 * library; this implementation (libcnnb_cuda_impl.so, everything else) links cuDNN,
 * cuBLAS and the CUDA runtime and is loaded only when a run creates a cuda device.
 *
 * Layouts: one per device, fixed at create (device.c, choose_format), so no per-graph
 * plan is needed:
 *  - fp32: NHWC with TF32 tensor cores on sm_80 and newer (PyTorch's channels_last), NCHW
 *    where TF32 is forbidden or the GPU is older (cuDNN's fastest plain-FMA layout), or
 *    what --data_format names;
 *  - fp16 / bf16: NHWC in that type (tensor cores want channels last).
 * A tensor whose H = W = 1 (dense layers, logits) is the same in both. Labels are int32
 * [N], the loss one fp32. Gradients use their tensor's layout and type.
 * Parameters never change layout: the arenas hold plain fp32 (kernel OIHW, dense
 * [units, K]); a half-precision node converts its weights each step into a buffer it
 * owns (OHWI for NHWC convolutions) and its weight gradients back into the fp32 arena.
 *
 * Streams: every kernel, cuDNN and cuBLAS call of an instance goes to its one stream, in
 * call order, so nodes never race and shared scratch (workspace, transient buffers) is
 * safe to reuse from node to node. Nothing synchronizes the host except synchronize(),
 * copy_to_host, tensor_to_host and all_finite.
 *
 * Threading (device.h): calls on one instance come from one thread at a time, but a
 * process with --num_gpus=N calls N instances from the same thread: every entry point
 * makes its GPU current first (gpu_enter). */
#ifndef CNNB_GPU_DEVICE_H
#define CNNB_GPU_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>
#include <cudnn.h>
#include <cublas_v2.h>

#include <cnnb/cnnb.h>

#include "gpu_kernels.h"

typedef struct gpu_device gpu_device;
typedef struct gpu_node gpu_node;
typedef struct gpu_algo_cache gpu_algo_cache;

struct gpu_device {
  cnnb_ctx *ctx;
  cnnb_device_config cfg;
  int ordinal; /* the CUDA device this instance drives */
  struct cudaDeviceProp prop;
  cudaStream_t stream;
  cudnnHandle_t cudnn;
  cublasHandle_t cublas;

  gpu_dtype act;              /* activations and their gradients */
  cudnnDataType_t act_cudnn;  /* the same, as cuDNN names it */
  cudnnTensorFormat_t format; /* CUDNN_TENSOR_NCHW (fp32) or CUDNN_TENSOR_NHWC (half) */
  int allow_tf32;             /* --cuda_allow_tf32 */
  int autotune;               /* --cudnn_autotune: time the heuristics' top candidates */
  int winograd_nonfused;  /* --winograd_nonfused: cuDNN's WINOGRAD_NONFUSED algorithms allowed */
  int bn_persistent;      /* --batchnorm_persistent: SPATIAL_PERSISTENT batch norm allowed */
  size_t workspace_limit; /* --cudnn_workspace_mb, bytes: the most one algorithm may use */
  char *autotune_cache;   /* --cudnn_autotune_cache: "auto" or a path (conv_algo.c opens it
                             at the first choice); NULL: none */

  /* One cuDNN / cuBLAS workspace for all nodes (they run one after another on the
   * stream), grown at prepare to the largest need, never per step. */
  void *workspace;
  size_t workspace_bytes;
  /* Two buffers for data that lives inside one forward or backward call (a masked
   * gradient, a padded input), sized at prepare; see gpu_transient_reserve. */
  void *transient[2];
  size_t transient_bytes[2];
  /* fp32 ones, for batch norms without a learned scale (cuDNN always wants one) and
   * bias gradients as a GEMV; grown at prepare. */
  float *ones;
  int64_t ones_count;
  /* Errors kernels find (a label outside [0, classes)): device words the loss kernel
   * sets, read back at the next synchronizing call (gpu_check_kernel_errors). */
  gpu_kernel_errors *errors; /* device memory */

  /* Host <-> device staging (transfer.c): pinned host memory for downloads and small
   * results (d->pinned), two pinned upload buffers used in turn (a step's images and its
   * labels each get one, so neither waits for the other's copy), each with the event
   * recorded after the copy out of it, and a device buffer for logical data before its
   * conversion (d->staging); grown on first use per size, freed at destroy. */
  void *pinned;
  size_t pinned_bytes;
  void *upload[2];
  size_t upload_bytes[2];
  cudaEvent_t upload_free[2];
  int upload_next;
  void *staging;
  size_t staging_bytes;

  gpu_algo_cache *algos;              /* convolution algorithms chosen per shape (conv_algo.c) */
  cnnb_device_cuda_stream stream_ext; /* CNNB_EXT_CUDA_STREAM's answer */
  cudaGraphExec_t step_exec;          /* --cuda_graphs: the recorded step (step_graph.c), or NULL */
  char description[256];
};

/* ---- node state ------------------------------------------------------------------ */

typedef struct gpu_node_ops {
  cnnb_status (*forward)(gpu_device *d, gpu_node *n, const cnnb_node_io *io);
  cnnb_status (*backward)(gpu_device *d, gpu_node *n, const cnnb_node_io *io);
  void (*release)(gpu_device *d, gpu_node *n); /* frees what the op added; not n itself */
} gpu_node_ops;

/* The head of every op's state (each op's struct embeds it first). device.c frees the
 * whole struct after ops->release. */
struct gpu_node {
  const gpu_node_ops *ops;
  const cnnb_graph *g;
  const cnnb_node *node;
  int32_t index;
};

typedef cnnb_status (*gpu_prepare_fn)(gpu_device *d, const cnnb_graph *g, int32_t index,
                                      gpu_node **out);

/* One graph op the device runs. supports_op and prepare both look ops up here (ops.c),
 * so the device never says it runs an op it cannot dispatch. */
typedef struct gpu_op {
  uint32_t op; /* cnnb_op */
  gpu_prepare_fn prepare;
} gpu_op;
const gpu_op *gpu_op_find(uint32_t op);

/* Allocates an op's state of `size` bytes (zeroed) with its head filled; NULL when out
 * of memory (the caller reports it with gpu_oom; tensors.c). */
void *gpu_node_new(size_t size, const gpu_node_ops *ops, const cnnb_graph *g, int32_t index);

/* The ops' prepares (ops_*.c). */
cnnb_status gpu_prepare_source(gpu_device *d, const cnnb_graph *g, int32_t index, gpu_node **out);
cnnb_status gpu_prepare_conv(gpu_device *d, const cnnb_graph *g, int32_t index, gpu_node **out);
cnnb_status gpu_prepare_dense(gpu_device *d, const cnnb_graph *g, int32_t index, gpu_node **out);
cnnb_status gpu_prepare_batch_norm(gpu_device *d, const cnnb_graph *g, int32_t index,
                                   gpu_node **out);
cnnb_status gpu_prepare_pool(gpu_device *d, const cnnb_graph *g, int32_t index, gpu_node **out);
cnnb_status gpu_prepare_lrn(gpu_device *d, const cnnb_graph *g, int32_t index, gpu_node **out);
cnnb_status gpu_prepare_relu(gpu_device *d, const cnnb_graph *g, int32_t index, gpu_node **out);
cnnb_status gpu_prepare_relu6(gpu_device *d, const cnnb_graph *g, int32_t index, gpu_node **out);
/* sigmoid, silu, hard_sigmoid, hard_swish, gelu (ABI 1.14) */
cnnb_status gpu_prepare_act(gpu_device *d, const cnnb_graph *g, int32_t index, gpu_node **out);
cnnb_status gpu_prepare_add(gpu_device *d, const cnnb_graph *g, int32_t index, gpu_node **out);
/* multiply, channel_scale (ops_multiply.c), layer_norm (ops_layer_norm.c): ABI 1.14 */
cnnb_status gpu_prepare_multiply(gpu_device *d, const cnnb_graph *g, int32_t index, gpu_node **out);
cnnb_status gpu_prepare_channel_scale(gpu_device *d, const cnnb_graph *g, int32_t index,
                                      gpu_node **out);
cnnb_status gpu_prepare_layer_norm(gpu_device *d, const cnnb_graph *g, int32_t index,
                                   gpu_node **out);
/* slice_channels, channel_shuffle (ops_channels.c): ABI 1.14 */
cnnb_status gpu_prepare_slice_channels(gpu_device *d, const cnnb_graph *g, int32_t index,
                                       gpu_node **out);
cnnb_status gpu_prepare_channel_shuffle(gpu_device *d, const cnnb_graph *g, int32_t index,
                                        gpu_node **out);
cnnb_status gpu_prepare_dropout(gpu_device *d, const cnnb_graph *g, int32_t index, gpu_node **out);
cnnb_status gpu_prepare_concat(gpu_device *d, const cnnb_graph *g, int32_t index, gpu_node **out);
cnnb_status gpu_prepare_pad(gpu_device *d, const cnnb_graph *g, int32_t index, gpu_node **out);
cnnb_status gpu_prepare_reshape(gpu_device *d, const cnnb_graph *g, int32_t index, gpu_node **out);
cnnb_status gpu_prepare_pad_spatial(gpu_device *d, const cnnb_graph *g, int32_t index,
                                    gpu_node **out);
cnnb_status gpu_prepare_softmax_xent(gpu_device *d, const cnnb_graph *g, int32_t index,
                                     gpu_node **out);

/* ---- CNNB_EXT_STEP_GRAPH (step_graph.c) -------------------------------------------- */

extern const cnnb_device_step_graph gpu_step_graph;
/* Frees the recorded step, if any (destroy, and before a new recording). */
void gpu_step_graph_discard(gpu_device *d);

/* ---- errors (errors.c) ----------------------------------------------------------- */

/* CNNB_OK, or an error "cuda: node '<name>' [n,c,h,w]: <what>: <library's message>"
 * (node may be NULL: "cuda: <what>: ..."). Out-of-memory statuses become CNNB_ENOMEM,
 * everything else CNNB_EINTERNAL (CNNB_EUNSUPPORTED for cuDNN's NOT_SUPPORTED). */
cnnb_status gpu_cuda(gpu_device *d, cudaError_t e, const cnnb_node *node, const char *what);
cnnb_status gpu_cudnn(gpu_device *d, cudnnStatus_t s, const cnnb_node *node, const char *what);
cnnb_status gpu_cublas(gpu_device *d, cublasStatus_t s, const cnnb_node *node, const char *what);
/* The last kernel launch's error (cudaGetLastError), as gpu_cuda. */
cnnb_status gpu_launched(gpu_device *d, const cnnb_node *node, const char *what);
/* CNNB_ENOMEM "cuda: node ...: out of GPU memory: cannot allocate <MiB> for <what>" with
 * how much the GPU has free; node may be NULL. */
cnnb_status gpu_oom(gpu_device *d, const cnnb_node *node, size_t bytes, const char *what);

/* st = call's status; on failure jump to the function's `done:` label. */
#define GPU_TRY(st, expr)                      \
  do {                                         \
    if (((st) = (expr)) != CNNB_OK) goto done; \
  } while (0)

/* Errors the kernels recorded since the last check (labels out of range), as an
 * CNNB_EDATA naming them; synchronizes the stream. */
cnnb_status gpu_check_kernel_errors(gpu_device *d);

/* ---- memory (memory.c) ------------------------------------------------------------- */

/* cudaMalloc with the error as gpu_oom; *ptr NULL on failure. */
cnnb_status gpu_malloc(gpu_device *d, void **ptr, size_t bytes, const cnnb_node *node,
                       const char *what);
/* Grows the shared workspace to at least `bytes` (prepare time). */
cnnb_status gpu_workspace_reserve(gpu_device *d, size_t bytes, const cnnb_node *node);
/* Grows transient buffer `slot` (0 or 1) to at least `bytes` (prepare time). Its
 * contents live only within one forward or backward call of one node. */
cnnb_status gpu_transient_reserve(gpu_device *d, int slot, size_t bytes, const cnnb_node *node);
static inline void *gpu_transient(const gpu_device *d, int slot) { return d->transient[slot]; }
/* Grows d->ones to at least `count` fp32 ones (prepare time). */
cnnb_status gpu_ones_reserve(gpu_device *d, int64_t count, const cnnb_node *node);
/* Grows the device staging buffer (data before its conversion) / the pinned download
 * buffer to at least `bytes`. */
cnnb_status gpu_staging_reserve(gpu_device *d, size_t bytes);
cnnb_status gpu_pinned_reserve(gpu_device *d, size_t bytes);

/* ---- tensors and cuDNN descriptors (tensors.c) ------------------------------------- */

/* The element type and size of tensor t's activation (and gradient) on this device. */
gpu_dtype gpu_tensor_dtype(const gpu_device *d, const cnnb_graph *g, cnnb_tensor t);
size_t gpu_tensor_bytes(const gpu_device *d, const cnnb_graph *g, cnnb_tensor t);

/* A 4-D descriptor of shape s in the device's activation type and layout. */
cnnb_status gpu_tensor_desc(gpu_device *d, cudnnTensorDescriptor_t *desc, cnnb_shape s,
                            const cnnb_node *node);
/* The same in an explicit type and format (fp32 parameter tensors, logical NCHW views). */
cnnb_status gpu_tensor_desc_as(gpu_device *d, cudnnTensorDescriptor_t *desc, cnnb_shape s,
                               cudnnDataType_t type, cudnnTensorFormat_t format,
                               const cnnb_node *node);
void gpu_tensor_desc_free(cudnnTensorDescriptor_t *desc);

/* Activation dims in device order for the generic kernels (gpu_kernels.h). */
static inline gpu_dims gpu_dims_of(const gpu_device *d, cnnb_shape s) {
  gpu_dims dims = {s.n, s.c, s.h, s.w, d->format == CUDNN_TENSOR_NHWC};
  return dims;
}

/* The parameter (or stat) `index` of a graph, in its arena at `base`. */
static inline float *gpu_param_ptr(const cnnb_graph *g, float *base, int32_t index) {
  return base + cnnb_graph_param(g, index)->offset;
}

/* ---- the optimizer and loss scaling (update.c) ------------------------------------ */

cnnb_status gpu_update(gpu_device *d, const cnnb_update *u);
cnnb_status gpu_all_finite(gpu_device *d, const float *grads, int64_t count, int32_t *finite);

/* ---- host <-> device (transfer.c) -------------------------------------------------- */

cnnb_status gpu_tensor_from_host(gpu_device *d, const cnnb_graph *g, cnnb_tensor t, void *buffer,
                                 const void *host);
cnnb_status gpu_tensor_to_host(gpu_device *d, const cnnb_graph *g, cnnb_tensor t,
                               const void *buffer, void *host);
cnnb_status gpu_input_from_host_uint8(gpu_device *d, const cnnb_graph *g, cnnb_tensor t,
                                      void *buffer, const uint8_t *host, const float *scale,
                                      const float *offset);

#endif
