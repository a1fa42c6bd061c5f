/* util.c — what every op of the cuda device leans on: error messages that name the node
 * and the library's own words, the device's shared scratch memory (grown at prepare,
 * never per step), tensor types and sizes, and cuDNN tensor descriptors. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_device.h"

/* "node 'name' [n,c,h,w]: " or "" when there is no node. */
static const char *node_prefix(const cnnb_node *node, char *buf, size_t size) {
  if (!node) return "";
  snprintf(buf, size, "node '%s' [%d,%d,%d,%d]: ", node->name, node->shape.n, node->shape.c,
           node->shape.h, node->shape.w);
  return buf;
}

static const char *oom_hint(gpu_device *d, char *buf, size_t size) {
  size_t free_bytes = 0, total = 0;
  if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) {
    cudaGetLastError(); /* the query's own failure is not the error being reported */
    return "";
  }
  snprintf(buf, size, " (%.0f of %.0f MiB free on GPU %d; try a smaller --batch_size)",
           (double)free_bytes / 1048576.0, (double)total / 1048576.0, d->ordinal);
  return buf;
}

cnnb_status gpu_oom(gpu_device *d, const cnnb_node *node, size_t bytes, const char *what) {
  char prefix[256], hint[160];
  return cnnb_error(d->ctx, CNNB_ENOMEM,
                    "cuda: %sout of GPU memory: cannot allocate %.1f MiB for %s%s",
                    node_prefix(node, prefix, sizeof prefix), (double)bytes / 1048576.0, what,
                    oom_hint(d, hint, sizeof hint));
}

cnnb_status gpu_cuda(gpu_device *d, cudaError_t e, const cnnb_node *node, const char *what) {
  if (e == cudaSuccess) return CNNB_OK;
  /* A sticky error (a kernel that faulted) stays; a non-sticky one is cleared so the
   * next call does not report it again. */
  cudaGetLastError();
  char prefix[256];
  cnnb_status st = e == cudaErrorMemoryAllocation ? CNNB_ENOMEM : CNNB_EINTERNAL;
  return cnnb_error(d->ctx, st, "cuda: %s%s: %s (%s)", node_prefix(node, prefix, sizeof prefix),
                    what, cudaGetErrorString(e), cudaGetErrorName(e));
}

cnnb_status gpu_launched(gpu_device *d, const cnnb_node *node, const char *what) {
  return gpu_cuda(d, cudaGetLastError(), node, what);
}

cnnb_status gpu_cudnn(gpu_device *d, cudnnStatus_t s, const cnnb_node *node, const char *what) {
  if (s == CUDNN_STATUS_SUCCESS) return CNNB_OK;
  char prefix[256], detail[512] = "";
  /* cuDNN 9 keeps a message for the last error: it usually names the parameter. */
  cudnnGetLastErrorString(detail, sizeof detail);
  /* cuDNN 9 refines its statuses (CUDNN_STATUS_NOT_SUPPORTED_LAYOUT is 3004): classify
   * by category, and both allocation failures (host 4003, device 4004) as memory. */
  const int category = CUDNN_STATUS_CATEGORY((int)s);
  cnnb_status st = s == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
                           s == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED
                       ? CNNB_ENOMEM
                   : category == CUDNN_STATUS_NOT_SUPPORTED ? CNNB_EUNSUPPORTED
                   : category == CUDNN_STATUS_BAD_PARAM     ? CNNB_EINVAL
                                                            : CNNB_EINTERNAL;
  return cnnb_error(d->ctx, st, "cuda: %s%s: cuDNN %s%s%s",
                    node_prefix(node, prefix, sizeof prefix), what, cudnnGetErrorString(s),
                    detail[0] ? ": " : "", detail);
}

cnnb_status gpu_cublas(gpu_device *d, cublasStatus_t s, const cnnb_node *node, const char *what) {
  if (s == CUBLAS_STATUS_SUCCESS) return CNNB_OK;
  char prefix[256];
  cnnb_status st = s == CUBLAS_STATUS_ALLOC_FAILED    ? CNNB_ENOMEM
                   : s == CUBLAS_STATUS_NOT_SUPPORTED ? CNNB_EUNSUPPORTED
                   : s == CUBLAS_STATUS_INVALID_VALUE ? CNNB_EINVAL
                                                      : CNNB_EINTERNAL;
  return cnnb_error(d->ctx, st, "cuda: %s%s: cuBLAS %s (%s)",
                    node_prefix(node, prefix, sizeof prefix), what, cublasGetStatusName(s),
                    cublasGetStatusString(s));
}

cnnb_status gpu_check_kernel_errors(gpu_device *d) {
  /* On d->stream, after the kernels that may have set them (a non-blocking stream is not
   * ordered after the legacy default stream of plain cudaMemcpy). */
  gpu_kernel_errors e;
  cnnb_status st =
      gpu_cuda(d, cudaMemcpyAsync(&e, d->errors, sizeof e, cudaMemcpyDeviceToHost, d->stream), NULL,
               "reading the kernels' error words");
  if (!st)
    st = gpu_cuda(d, cudaStreamSynchronize(d->stream), NULL, "reading the kernels' error words");
  if (st || e.bad_label_count == 0) return st;
  cudaMemsetAsync(d->errors, 0, sizeof *d->errors, d->stream);
  return cnnb_error(d->ctx, CNNB_EDATA,
                    "cuda: loss: label %d of example %d is outside [0, %d) (%d such labels since "
                    "the last check)",
                    e.first_bad_label, e.first_bad_index, e.classes, e.bad_label_count);
}

/* ---- memory -------------------------------------------------------------------------- */

cnnb_status gpu_malloc(gpu_device *d, void **ptr, size_t bytes, const cnnb_node *node,
                       const char *what) {
  *ptr = NULL;
  cudaError_t e = cudaMalloc(ptr, bytes ? bytes : 1);
  if (e == cudaSuccess) return CNNB_OK;
  *ptr = NULL;
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    return gpu_oom(d, node, bytes, what);
  }
  return gpu_cuda(d, e, node, what);
}

/* Replaces *buf by a buffer of `bytes` when it is smaller (contents not kept). */
static cnnb_status grow(gpu_device *d, void **buf, size_t *have, size_t bytes,
                        const cnnb_node *node, const char *what) {
  if (bytes <= *have && *buf) return CNNB_OK;
  /* Earlier nodes' queued work may still read the old buffer. */
  cnnb_status st = gpu_cuda(d, cudaStreamSynchronize(d->stream), node, what);
  if (st) return st;
  cudaFree(*buf);
  *buf = NULL;
  *have = 0;
  if ((st = gpu_malloc(d, buf, bytes, node, what))) return st;
  *have = bytes;
  return CNNB_OK;
}

cnnb_status gpu_workspace_reserve(gpu_device *d, size_t bytes, const cnnb_node *node) {
  return grow(d, &d->workspace, &d->workspace_bytes, bytes, node, "the cuDNN / cuBLAS workspace");
}

cnnb_status gpu_transient_reserve(gpu_device *d, int slot, size_t bytes, const cnnb_node *node) {
  if (slot < 0 || slot > 1)
    return cnnb_error(d->ctx, CNNB_EINTERNAL, "cuda: transient slot %d does not exist", slot);
  return grow(d, &d->transient[slot], &d->transient_bytes[slot], bytes, node, "a transient buffer");
}

cnnb_status gpu_ones_reserve(gpu_device *d, int64_t count, const cnnb_node *node) {
  if (count <= d->ones_count && d->ones) return CNNB_OK;
  size_t have = (size_t)d->ones_count * sizeof(float);
  cnnb_status st = grow(d, (void **)&d->ones, &have, (size_t)count * sizeof(float), node, "ones");
  if (st) return st;
  d->ones_count = 0; /* until filled: a failed fill is retried by the next reserve */
  float one = 1.0f;
  /* The constant once, at setup: cuMemsetD32 would need the driver API. */
  float *host = malloc((size_t)count * sizeof(float));
  if (!host) return cnnb_error(d->ctx, CNNB_ENOMEM, "cuda: out of memory");
  for (int64_t i = 0; i < count; i++) host[i] = one;
  st = gpu_cuda(d,
                cudaMemcpyAsync(d->ones, host, (size_t)count * sizeof(float),
                                cudaMemcpyHostToDevice, d->stream),
                node, "filling ones");
  /* The pageable source must outlive the copy. */
  cnnb_status sst = gpu_cuda(d, cudaStreamSynchronize(d->stream), node, "filling ones");
  if (!st) st = sst;
  free(host);
  if (!st) d->ones_count = count;
  return st;
}

cnnb_status gpu_staging_reserve(gpu_device *d, size_t bytes) {
  return grow(d, &d->staging, &d->staging_bytes, bytes, NULL, "the conversion staging buffer");
}

cnnb_status gpu_pinned_reserve(gpu_device *d, size_t bytes) {
  if (bytes <= d->pinned_bytes && d->pinned) return CNNB_OK;
  /* A copy into the old pinned buffer may still be queued. */
  cnnb_status st = gpu_cuda(d, cudaStreamSynchronize(d->stream), NULL, "growing the pinned buffer");
  if (st) return st;
  cudaFreeHost(d->pinned);
  d->pinned = NULL;
  d->pinned_bytes = 0;
  cudaError_t e = cudaMallocHost(&d->pinned, bytes);
  if (e != cudaSuccess) {
    d->pinned = NULL;
    return gpu_cuda(d, e, NULL, "pinned host memory for downloads");
  }
  d->pinned_bytes = bytes;
  return CNNB_OK;
}

/* ---- tensors ------------------------------------------------------------------------- */

gpu_dtype gpu_tensor_dtype(const gpu_device *d, const cnnb_graph *g, cnnb_tensor t) {
  uint32_t op = cnnb_graph_node(g, t)->op;
  if (op == CNNB_OP_LABELS) return GPU_I32;
  if (op == CNNB_OP_SOFTMAX_XENT) return GPU_F32; /* the loss */
  return d->act;
}

size_t gpu_tensor_bytes(const gpu_device *d, const cnnb_graph *g, cnnb_tensor t) {
  const cnnb_node *n = cnnb_graph_node(g, t);
  return (size_t)cnnb_shape_count(n->shape) * gpu_dtype_size(gpu_tensor_dtype(d, g, t));
}

void *gpu_node_new(size_t size, const gpu_node_ops *ops, const cnnb_graph *g, int32_t index) {
  gpu_node *n = calloc(1, size);
  if (!n) return NULL;
  n->ops = ops;
  n->g = g;
  n->node = cnnb_graph_node(g, index);
  n->index = index;
  return n;
}

cnnb_status gpu_tensor_desc_as(gpu_device *d, cudnnTensorDescriptor_t *desc, cnnb_shape s,
                               cudnnDataType_t type, cudnnTensorFormat_t format,
                               const cnnb_node *node) {
  cnnb_status st = gpu_cudnn(d, cudnnCreateTensorDescriptor(desc), node,
                             "cudnnCreateTensorDescriptor");
  if (st) {
    *desc = NULL;
    return st;
  }
  if ((st = gpu_cudnn(d, cudnnSetTensor4dDescriptor(*desc, format, type, s.n, s.c, s.h, s.w), node,
                      "cudnnSetTensor4dDescriptor")))
    gpu_tensor_desc_free(desc);
  return st;
}

cnnb_status gpu_tensor_desc(gpu_device *d, cudnnTensorDescriptor_t *desc, cnnb_shape s,
                            const cnnb_node *node) {
  return gpu_tensor_desc_as(d, desc, s, d->act_cudnn, d->format, node);
}

void gpu_tensor_desc_free(cudnnTensorDescriptor_t *desc) {
  if (*desc) cudnnDestroyTensorDescriptor(*desc);
  *desc = NULL;
}
