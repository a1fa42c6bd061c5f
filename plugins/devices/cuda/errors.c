/* errors.c — the cuda device's failures in words: each names the node and gives the
 * library's own words (CUDA, cuDNN, cuBLAS), out of memory with what is free on the GPU,
 * and the errors the kernels record on the device (a label out of range). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>

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
