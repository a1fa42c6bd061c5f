/* device.c — the cuda device's implementation behind the plugin (plugin.c forwards
 * here): creation (GPU, stream, cuDNN and cuBLAS handles, precision and layout, flags),
 * memory, tensor sizes, and the dispatch of prepare / forward / backward to the op
 * families (ops_*.c) through the op table (ops.c), which supports_op answers from.
 *
 * Every entry point first makes the instance's GPU current: one thread drives all the
 * replicas of a process (--num_gpus=N), one after another. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv_algo.h"
#include "gpu_device.h"
#include "gpu_impl.h"

static const char *precision_name(uint32_t p) {
  return p == CNNB_PRECISION_FP32   ? "fp32"
         : p == CNNB_PRECISION_BF16 ? "bf16"
         : p == CNNB_PRECISION_FP16 ? "fp16"
                                    : "unknown";
}

/* Makes d's GPU current on the calling thread. */
static cnnb_status enter(gpu_device *d) {
  return gpu_cuda(d, cudaSetDevice(d->ordinal), NULL, "cudaSetDevice");
}

/* Which GPU replica `index` of this process drives. Under mpirun each rank takes its
 * own GPUs on its node (Horovod's local-rank rule): local rank r with N replicas a
 * process uses GPUs r*N .. r*N+N-1 of those visible, or its own N when the launcher
 * shows it no others. */
static int ordinal_of(gpu_device *d, int32_t index, int count, cnnb_status *st) {
  /* Open MPI's name first (the project's MPI), then MPICH / Intel MPI's, MVAPICH's and
   * Slurm's: without one, every rank of a node would pile onto the same GPUs. */
  static const char *const local_rank_vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                                "MV2_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"};
  const char *local = NULL;
  for (size_t i = 0; !local && i < sizeof local_rank_vars / sizeof *local_rank_vars; i++)
    local = getenv(local_rank_vars[i]);
  int64_t per_process = d->cfg.local_replicas; /* 0 from a host before ABI 1.8 */
  int64_t rank = local ? strtol(local, NULL, 10) : 0;
  if (per_process < 1) per_process = 1;
  int64_t ordinal = rank * per_process + index;
  /* --gpu_indices (tf_cnn_benchmarks' list): the node's replicas, in the order above, take
   * the GPUs it names instead of 0, 1, 2, ... */
  const char *indices = cnnb_flag_declared(d->ctx, "gpu_indices")
                            ? cnnb_flag_string(d->ctx, "gpu_indices")
                            : "";
  if (indices && *indices) {
    int64_t k = 0, picked = -1;
    for (const char *p = indices; *p && picked < 0; k++) {
      char *end = NULL;
      long v = strtol(p, &end, 10);
      if (end == p || v < 0 || (*end && *end != ',')) {
        *st = cnnb_error(d->ctx, CNNB_EINVAL,
                         "--gpu_indices=%s: expected GPU numbers separated by commas (0,2,1)",
                         indices);
        return 0;
      }
      if (k == ordinal) picked = v;
      p = *end ? end + 1 : end;
    }
    if (picked < 0) {
      *st = cnnb_error(d->ctx, CNNB_EINVAL,
                       "--gpu_indices=%s names %lld GPU(s); replica %d%s is the node's %lld-th "
                       "(--num_gpus=%lld per process%s)",
                       indices, (long long)k, (int)index, local ? " of this local rank" : "",
                       (long long)ordinal + 1, (long long)per_process,
                       local ? ", times the ranks on this node" : "");
      return 0;
    }
    ordinal = picked;
  } else if (ordinal >= count && count == per_process) {
    /* A launcher that shows each rank only its own GPUs (CUDA_VISIBLE_DEVICES per rank):
     * this rank's N replicas are the N GPUs it sees. */
    ordinal = index;
  }
  *st = CNNB_OK;
  if (ordinal >= count)
    *st =
        cnnb_error(d->ctx, CNNB_EINVAL,
                   "cuda: replica %d%s needs GPU %lld, but this machine shows %d (--num_gpus=%lld "
                   "per process%s)",
                   (int)index, local ? " of this local rank" : "", (long long)ordinal, count,
                   (long long)per_process, local ? ", times the ranks on this node" : "");
  return (int)ordinal;
}

static void device_destroy(void *device);

static cnnb_status check_precision(gpu_device *d, uint32_t precision) {
  int major = d->prop.major;
  const char *can = major >= 8 ? "fp32, fp16, bf16" : major >= 7 ? "fp32, fp16" : "fp32";
  if (precision == CNNB_PRECISION_FP32) return CNNB_OK;
  if (precision == CNNB_PRECISION_FP16 && major >= 7) return CNNB_OK;
  if (precision == CNNB_PRECISION_BF16 && major >= 8) return CNNB_OK;
  if (precision == CNNB_PRECISION_FP16 || precision == CNNB_PRECISION_BF16)
    return cnnb_error(d->ctx, CNNB_EUNSUPPORTED,
                      "cuda: %s needs tensor cores of compute capability %s, %s is %d.%d; it "
                      "supports %s",
                      precision_name(precision), precision == CNNB_PRECISION_FP16 ? "7.0" : "8.0",
                      d->prop.name, d->prop.major, d->prop.minor, can);
  return cnnb_error(d->ctx, CNNB_EINVAL, "cuda: unknown precision %u; it supports %s", precision,
                    can);
}

/* The activations' layout: half precision runs NHWC (tensor cores want channels last);
 * fp32 runs the layout the user asked for (--data_format), else NHWC where TF32 tensor
 * cores run it (sm_80 and newer, TF32 allowed: PyTorch's channels_last), else NCHW,
 * cuDNN's fastest plain-FMA layout. */
static cudnnTensorFormat_t choose_format(gpu_device *d) {
  const uint32_t asked = d->cfg.data_format;
  if (d->act != GPU_F32) {
    if (asked == CNNB_DATA_FORMAT_NCHW)
      cnnb_log(d->ctx, CNNB_LOG_INFO,
               "cuda: --data_format=NCHW applies to fp32 only: %s runs NHWC on tensor cores",
               precision_name(d->cfg.precision));
    return CUDNN_TENSOR_NHWC;
  }
  if (asked == CNNB_DATA_FORMAT_NCHW) return CUDNN_TENSOR_NCHW;
  if (asked == CNNB_DATA_FORMAT_NHWC) return CUDNN_TENSOR_NHWC;
  return d->prop.major >= 8 && d->allow_tf32 ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
}

static void describe_into(gpu_device *d) {
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  size_t cudnn = cudnnGetVersion();
  int cublas = 0;
  cublasGetVersion(d->cublas, &cublas);
  const char *layout = d->format == CUDNN_TENSOR_NHWC ? "NHWC" : "NCHW";
  snprintf(d->description, sizeof d->description,
           "GPU %d: %s (sm_%d%d, %.0f GiB; CUDA %d.%d, driver %d.%d, cuDNN %zu.%zu.%zu, cuBLAS "
           "%d.%d; %s %s%s)",
           d->ordinal, d->prop.name, d->prop.major, d->prop.minor,
           (double)d->prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), runtime / 1000,
           runtime % 1000 / 10, driver / 1000, driver % 1000 / 10, cudnn / 10000, cudnn / 100 % 100,
           cudnn % 100, cublas / 10000, cublas / 100 % 100, precision_name(d->cfg.precision),
           layout, d->act == GPU_F32 ? (d->allow_tf32 ? ", TF32 on" : ", TF32 off") : "");
}

static cnnb_status device_create(cnnb_ctx *ctx, const char *name, const cnnb_device_config *cfg,
                                 void **out) {
  *out = NULL;
  if (!cfg) return cnnb_error(ctx, CNNB_EINVAL, "cuda: no device configuration");
  gpu_device *d = calloc(1, sizeof *d);
  if (!d) return cnnb_error(ctx, CNNB_ENOMEM, "cuda: out of memory");
  d->ctx = ctx;
  /* What the host's struct holds (an older host's is shorter); the rest stays zero. */
  memcpy(&d->cfg, cfg, cfg->struct_size < sizeof d->cfg ? cfg->struct_size : sizeof d->cfg);
  if (!d->cfg.precision) d->cfg.precision = CNNB_PRECISION_FP32;
  cnnb_status st;
  int count = 0;
  GPU_TRY(st, gpu_cuda(d, cudaGetDeviceCount(&count), NULL, "cudaGetDeviceCount"));
  d->ordinal = ordinal_of(d, cfg->device_index, count, &st);
  if (st) goto done;
  GPU_TRY(st, enter(d));
  GPU_TRY(st, gpu_cuda(d, cudaGetDeviceProperties(&d->prop, d->ordinal), NULL,
                       "cudaGetDeviceProperties"));
  GPU_TRY(st, check_precision(d, d->cfg.precision));
  cudaError_t image = gpu_k_image_check();
  if (image == cudaErrorNoKernelImageForDevice || image == cudaErrorInvalidDeviceFunction) {
    st = cnnb_error(ctx, CNNB_EUNSUPPORTED,
                    "cuda: %s (sm_%d%d) is older than every GPU this build has code for "
                    "(CUDA architectures %s); rebuild with -DCMAKE_CUDA_ARCHITECTURES=%d%d",
                    d->prop.name, d->prop.major, d->prop.minor, GPU_BUILT_ARCHITECTURES,
                    d->prop.major, d->prop.minor);
    goto done;
  }
  GPU_TRY(st, gpu_cuda(d, image, NULL, "checking the kernels' GPU code"));
  d->act = d->cfg.precision == CNNB_PRECISION_FP16   ? GPU_F16
           : d->cfg.precision == CNNB_PRECISION_BF16 ? GPU_BF16
                                                     : GPU_F32;
  d->act_cudnn = d->act == GPU_F16    ? CUDNN_DATA_HALF
                 : d->act == GPU_BF16 ? CUDNN_DATA_BFLOAT16
                                      : CUDNN_DATA_FLOAT;
  /* The plugin's flags (plugin.c). A ctx without the host's flag table (a test harness
   * creating the device directly) gets exact fp32 (the conformance suites' fp32
   * tolerances forbid TF32), cuDNN's heuristic choice, and the default workspace cap. */
  const int have_flags = cnnb_flag_declared(ctx, "cuda_allow_tf32");
  d->allow_tf32 = have_flags && cnnb_flag_bool(ctx, "cuda_allow_tf32");
  d->format = choose_format(d);
  d->autotune = have_flags && cnnb_flag_bool(ctx, "cudnn_autotune");
  /* tf_cnn_benchmarks' switches, true there and here by default. */
  d->winograd_nonfused = !have_flags || cnnb_flag_bool(ctx, "winograd_nonfused");
  d->bn_persistent = !have_flags || cnnb_flag_bool(ctx, "batchnorm_persistent");
  int64_t workspace_mb = have_flags ? cnnb_flag_int(ctx, "cudnn_workspace_mb")
                                    : GPU_DEFAULT_WORKSPACE_MB;
  if (workspace_mb < 0) {
    st = cnnb_error(ctx, CNNB_EINVAL, "--cudnn_workspace_mb=%lld: must be >= 0",
                    (long long)workspace_mb);
    goto done;
  }
  d->workspace_limit = (size_t)workspace_mb << 20;
  /* The autotune cache file: kept as the flag says it ("" is none); conv_algo.c resolves
   * "auto" and reads the file at the first choice. A ctx without flags has none, so a
   * test harness never writes into the user's cache directory. */
  const char *cache = have_flags && cnnb_flag_declared(ctx, "cudnn_autotune_cache")
                          ? cnnb_flag_string(ctx, "cudnn_autotune_cache")
                          : "";
  if (cache && cache[0] && !(d->autotune_cache = strdup(cache))) {
    st = cnnb_error(ctx, CNNB_ENOMEM, "cuda: out of memory");
    goto done;
  }

  GPU_TRY(st, gpu_cuda(d, cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking), NULL,
                       "cudaStreamCreate"));
  /* CNNB_EXT_CUDA_STREAM's answer, fixed from here on (get_extension runs on any thread). */
  d->stream_ext.struct_size = sizeof d->stream_ext;
  d->stream_ext.ordinal = d->ordinal;
  d->stream_ext.stream = d->stream;
  GPU_TRY(st, gpu_cudnn(d, cudnnCreate(&d->cudnn), NULL, "cudnnCreate"));
  GPU_TRY(st, gpu_cudnn(d, cudnnSetStream(d->cudnn, d->stream), NULL, "cudnnSetStream"));
  GPU_TRY(st, gpu_cublas(d, cublasCreate(&d->cublas), NULL, "cublasCreate"));
  GPU_TRY(st, gpu_cublas(d, cublasSetStream(d->cublas, d->stream), NULL, "cublasSetStream"));
  /* The dense layers name their compute type per call (ops_dense.c); the handle's mode
   * backs it up: TF32 for fp32 only when allowed, and for half precision no split-K
   * reduction in half (the sums stay fp32 whatever the output type). */
  cublasMath_t math = d->act != GPU_F32
                          ? (cublasMath_t)(CUBLAS_DEFAULT_MATH |
                                           CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)
                      : d->allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                      : CUBLAS_PEDANTIC_MATH;
  GPU_TRY(st, gpu_cublas(d, cublasSetMathMode(d->cublas, math), NULL, "cublasSetMathMode"));
  for (int i = 0; i < 2; i++)
    GPU_TRY(st, gpu_cuda(d, cudaEventCreateWithFlags(&d->upload_free[i], cudaEventDisableTiming),
                         NULL, "cudaEventCreate"));
  GPU_TRY(st, gpu_malloc(d, (void **)&d->errors, sizeof *d->errors, NULL, "kernel error words"));
  /* Everything on d->stream: a non-blocking stream is not ordered after the legacy
   * default stream that plain cudaMemset / cudaMemcpy use. */
  GPU_TRY(st, gpu_cuda(d, cudaMemsetAsync(d->errors, 0, sizeof *d->errors, d->stream), NULL,
                       "cudaMemsetAsync"));
  describe_into(d);
  cnnb_log(ctx, CNNB_LOG_DEBUG, "cuda: %s (%s)", d->description, name);
  *out = d;
  return CNNB_OK;
done:
  device_destroy(d);
  return st;
}

static void device_destroy(void *device) {
  gpu_device *d = device;
  if (!d) return;
  if (d->stream) {
    cudaSetDevice(d->ordinal);
    cudaStreamSynchronize(d->stream);
  }
  gpu_step_graph_discard(d);
  gpu_algo_cache_free(d);
  cudaFree(d->workspace);
  cudaFree(d->transient[0]);
  cudaFree(d->transient[1]);
  cudaFree(d->ones);
  cudaFree(d->errors);
  cudaFree(d->staging);
  cudaFreeHost(d->pinned);
  for (int i = 0; i < 2; i++) {
    cudaFreeHost(d->upload[i]);
    if (d->upload_free[i]) cudaEventDestroy(d->upload_free[i]);
  }
  if (d->cublas) cublasDestroy(d->cublas);
  if (d->cudnn) cudnnDestroy(d->cudnn);
  if (d->stream) cudaStreamDestroy(d->stream);
  free(d->autotune_cache);
  free(d);
}

static const char *device_describe(void *device) { return ((gpu_device *)device)->description; }

/* Arenas and buffers are zeroed: the host relies on fresh optimizer slots being zero. */
static cnnb_status device_alloc(void *device, size_t bytes, void **ptr) {
  gpu_device *d = device;
  cnnb_status st = enter(d);
  if (st) return st;
  if ((st = gpu_malloc(d, ptr, bytes ? bytes : 1, NULL, "a buffer"))) return st;
  if ((st = gpu_cuda(d, cudaMemsetAsync(*ptr, 0, bytes ? bytes : 1, d->stream), NULL,
                     "cudaMemsetAsync"))) {
    cudaFree(*ptr);
    *ptr = NULL;
  }
  return st;
}

static void device_free(void *device, void *ptr) {
  gpu_device *d = device;
  cudaSetDevice(d->ordinal);
  cudaFree(ptr);
}

/* Pageable host memory: the upload returns once the runtime has staged the bytes (the
 * host buffer may change after), and it runs after the stream's earlier work. */
static cnnb_status device_copy_to_device(void *device, void *dst, const void *src, size_t bytes) {
  gpu_device *d = device;
  cnnb_status st = enter(d);
  if (st) return st;
  return gpu_cuda(d, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, d->stream), NULL,
                  "copy to the GPU");
}

static cnnb_status device_copy_to_host(void *device, void *dst, const void *src, size_t bytes) {
  gpu_device *d = device;
  cnnb_status st = enter(d);
  if (st) return st;
  if ((st = gpu_cuda(d, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, d->stream), NULL,
                     "copy from the GPU")))
    return st;
  if ((st = gpu_cuda(d, cudaStreamSynchronize(d->stream), NULL, "copy from the GPU"))) return st;
  return gpu_check_kernel_errors(d);
}

static cnnb_status device_fill_zero(void *device, void *ptr, size_t bytes) {
  gpu_device *d = device;
  cnnb_status st = enter(d);
  if (st) return st;
  return gpu_cuda(d, cudaMemsetAsync(ptr, 0, bytes, d->stream), NULL, "fill_zero");
}

static cnnb_status device_synchronize(void *device) {
  gpu_device *d = device;
  cnnb_status st = enter(d);
  if (st) return st;
  if ((st = gpu_cuda(d, cudaStreamSynchronize(d->stream), NULL, "synchronize"))) return st;
  return gpu_check_kernel_errors(d);
}

static cnnb_status check_tensor(gpu_device *d, const cnnb_graph *g, cnnb_tensor t) {
  if (t < 0 || t >= cnnb_graph_num_nodes(g))
    return cnnb_error(d->ctx, CNNB_EINVAL, "cuda: tensor %d is not in the graph", t);
  return CNNB_OK;
}

static cnnb_status device_tensor_bytes(void *device, const cnnb_graph *g, cnnb_tensor t,
                                       size_t *bytes) {
  gpu_device *d = device;
  cnnb_status st = check_tensor(d, g, t);
  if (st) return st;
  const cnnb_node *n = cnnb_graph_node(g, t);
  if (!gpu_op_find(n->op))
    return cnnb_error(d->ctx, CNNB_EUNSUPPORTED,
                      "cuda: node '%s': op %u is not one this device runs", n->name, n->op);
  *bytes = gpu_tensor_bytes(d, g, t);
  return CNNB_OK;
}

static cnnb_status device_tensor_from_host(void *device, const cnnb_graph *g, cnnb_tensor t,
                                           void *buffer, const void *host) {
  gpu_device *d = device;
  cnnb_status st = check_tensor(d, g, t);
  if (st == CNNB_OK) st = enter(d);
  return st ? st : gpu_tensor_from_host(d, g, t, buffer, host);
}

static cnnb_status device_tensor_to_host(void *device, const cnnb_graph *g, cnnb_tensor t,
                                         const void *buffer, void *host) {
  gpu_device *d = device;
  cnnb_status st = check_tensor(d, g, t);
  if (st == CNNB_OK) st = enter(d);
  return st ? st : gpu_tensor_to_host(d, g, t, buffer, host);
}

static cnnb_status device_input_uint8(void *device, const cnnb_graph *g, cnnb_tensor t,
                                      void *buffer, const uint8_t *host, const float *scale,
                                      const float *offset) {
  gpu_device *d = device;
  cnnb_status st = check_tensor(d, g, t);
  if (st == CNNB_OK) st = enter(d);
  return st ? st : gpu_input_from_host_uint8(d, g, t, buffer, host, scale, offset);
}

static cnnb_status device_prepare(void *device, const cnnb_graph *g, int32_t index, void **state) {
  gpu_device *d = device;
  *state = NULL;
  cnnb_status st = enter(d);
  if (st) return st;
  if (index < 0 || index >= cnnb_graph_num_nodes(g))
    return cnnb_error(d->ctx, CNNB_EINVAL, "cuda: node %d is not in the graph", index);
  const cnnb_node *n = cnnb_graph_node(g, index);
  const gpu_op *op = gpu_op_find(n->op);
  if (!op)
    return cnnb_error(d->ctx, CNNB_EUNSUPPORTED,
                      "cuda: node '%s': op %u is not one this device runs", n->name, n->op);
  gpu_node *node = NULL;
  if ((st = op->prepare(d, g, index, &node)) != CNNB_OK) return st;
  *state = node;
  return CNNB_OK;
}

static void device_release(void *device, void *state) {
  gpu_device *d = device;
  gpu_node *n = state;
  if (!n) return;
  cudaSetDevice(d->ordinal);
  /* Kernels of this node may still be queued: let them finish before its buffers go. */
  cudaStreamSynchronize(d->stream);
  if (n->ops->release) n->ops->release(d, n);
  free(n);
}

static cnnb_status check_io(gpu_device *d, const gpu_node *n, const cnnb_node_io *io,
                            const char *what) {
  if (!n || !io) return cnnb_error(d->ctx, CNNB_EINVAL, "cuda: %s without node state or io", what);
  if (io->num_inputs != n->node->num_inputs)
    return cnnb_error(d->ctx, CNNB_EINVAL, "cuda: node '%s' has %d inputs, io gives %d",
                      n->node->name, n->node->num_inputs, io->num_inputs);
  return enter(d);
}

static cnnb_status device_forward(void *device, void *state, const cnnb_node_io *io) {
  gpu_device *d = device;
  gpu_node *n = state;
  cnnb_status st = check_io(d, n, io, "forward");
  return st ? st : n->ops->forward(d, n, io);
}

static cnnb_status device_backward(void *device, void *state, const cnnb_node_io *io) {
  gpu_device *d = device;
  gpu_node *n = state;
  cnnb_status st = check_io(d, n, io, "backward");
  if (st) return st;
  if (!d->cfg.training)
    return cnnb_error(d->ctx, CNNB_EINVAL,
                      "cuda: node '%s': backward on a device created for inference (forward_only)",
                      n->node->name);
  return n->ops->backward(d, n, io);
}

static cnnb_status device_accumulate(void *device, const cnnb_graph *g, cnnb_tensor t, void *dst,
                                     const void *src) {
  gpu_device *d = device;
  cnnb_status st = enter(d);
  if (st) return st;
  if (t < 0 || t >= cnnb_graph_num_nodes(g))
    return cnnb_error(d->ctx, CNNB_EINVAL, "cuda: accumulate: tensor %d is not in the graph", t);
  gpu_dtype type = gpu_tensor_dtype(d, g, t);
  int64_t count = (int64_t)(gpu_tensor_bytes(d, g, t) / gpu_dtype_size(type));
  return gpu_cuda(d, gpu_k_accumulate(dst, src, type, count, d->stream), cnnb_graph_node(g, t),
                  "gradient accumulation");
}

static cnnb_status device_update(void *device, const cnnb_update *update) {
  gpu_device *d = device;
  cnnb_status st = enter(d);
  return st ? st : gpu_update(d, update);
}

static cnnb_status device_all_finite(void *device, const float *grads, int64_t count,
                                     int32_t *finite) {
  gpu_device *d = device;
  cnnb_status st = enter(d);
  return st ? st : gpu_all_finite(d, grads, count, finite);
}

static int32_t device_supports_op(void *device, uint32_t op) { return gpu_op_find(op) != NULL; }

static const void *device_get_extension(void *device, const char *id) {
  gpu_device *d = device;
  static const int32_t yes = 1;
  if (strcmp(id, CNNB_EXT_CUDA_STREAM) == 0) return &d->stream_ext; /* filled by create */
  if (strcmp(id, CNNB_EXT_STEP_GRAPH) == 0) return &gpu_step_graph;
  if (strcmp(id, CNNB_EXT_FUSED_RELU_ADD) == 0) return &yes;
  return NULL;
}

static const cnnb_device_vtable vtable = {
    .struct_size = sizeof(cnnb_device_vtable),
    .create = device_create,
    .destroy = device_destroy,
    .describe = device_describe,
    .alloc = device_alloc,
    .free = device_free,
    .copy_to_device = device_copy_to_device,
    .copy_to_host = device_copy_to_host,
    .fill_zero = device_fill_zero,
    .synchronize = device_synchronize,
    .tensor_bytes = device_tensor_bytes,
    .tensor_from_host = device_tensor_from_host,
    .tensor_to_host = device_tensor_to_host,
    .prepare = device_prepare,
    .release = device_release,
    .forward = device_forward,
    .backward = device_backward,
    .accumulate = device_accumulate,
    .update = device_update,
    .all_finite = device_all_finite,
    .supports_op = device_supports_op,
    .get_extension = device_get_extension,
};

static const cnnb_device_uint8_input uint8_input = {
    .struct_size = sizeof(cnnb_device_uint8_input),
    .input_from_host_uint8 = device_input_uint8,
};

static const gpu_impl impl = {
    .struct_size = sizeof(gpu_impl),
    .version = GPU_DEVICE_VERSION,
    .vtable = &vtable,
    .uint8_input = &uint8_input,
};

__attribute__((visibility("default"))) const gpu_impl *cnnb_cuda_impl_entry(void);
const gpu_impl *cnnb_cuda_impl_entry(void) { return &impl; }
