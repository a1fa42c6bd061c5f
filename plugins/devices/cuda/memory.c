/* memory.c — the cuda device's memory: allocations that fail in words, and the device's
 * shared buffers (workspace, transients, ones, staging, pinned), grown at prepare and
 * never per step. */
#include <stdlib.h>

#include "gpu_device.h"

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
