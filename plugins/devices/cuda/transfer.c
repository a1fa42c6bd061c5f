/* transfer.c — host <-> device for tensors (device.h's tensor_from_host and
 * tensor_to_host) and the uint8 input extension (cnnb_device_uint8_input).
 *
 * The host side is logical NCHW fp32 (int32 for labels) in plain malloc'd memory; the
 * device side is the tensor's layout and type (gpu_tensor_dtype: the activation type
 * and layout, int32 labels, the fp32 loss). Host data goes through pinned memory (an
 * upload buffer, d->pinned for downloads) so the copy is a real DMA, then, where the
 * layouts differ, through the device staging buffer (d->staging) and a conversion
 * kernel on the stream:
 *   from_host: host -> upload (memcpy) -> staging (H2D) -> gpu_k_from_nchw_f32 -> buffer
 *   to_host:   buffer -> gpu_k_to_nchw_f32 -> staging -> d->pinned (D2H) -> host (memcpy)
 * A tensor whose device bytes are its host bytes (labels; fp32 tensors whose layout is
 * logical NCHW: everything on the fp32 device, the loss on any) skips the staging step.
 *
 * Uploads do not wait for the GPU: the host copies into one of two pinned upload
 * buffers, taken in turn, once the previous copy out of that buffer has finished (its
 * event, recorded after each such copy: with a step's images and labels in different
 * buffers, that copy belongs to the previous step and is long done), and the
 * device-side copy and conversion run in stream order, after the work before them. So
 * the host runs ahead of the GPU while a step is in flight. Downloads synchronize the
 * stream: the host needs the data. */
#include <string.h>

#include "gpu_device.h"

/* Whether tensor bytes of `type` and shape s on this device are their logical host
 * bytes (int32, or fp32 NCHW), so that no conversion is needed. */
static int same_as_host(const gpu_device *d, gpu_dtype type, cnnb_shape s) {
  if (type == GPU_I32) return 1;
  if (type != GPU_F32) return 0;
  return d->format == CUDNN_TENSOR_NCHW || (s.h == 1 && s.w == 1) || s.c == 1;
}

static cnnb_status sync_stream(gpu_device *d, const cnnb_node *node, const char *what) {
  return gpu_cuda(d, cudaStreamSynchronize(d->stream), node, what);
}

/* The next upload buffer, at least `bytes` long, once the copy out of it has finished;
 * *slot says which, for upload_used. Grows it at the first upload of a size (setup). */
static cnnb_status upload_buffer(gpu_device *d, size_t bytes, const cnnb_node *node, int *slot,
                                 void **buf) {
  int i = d->upload_next;
  d->upload_next ^= 1;
  cnnb_status st = gpu_cuda(d, cudaEventSynchronize(d->upload_free[i]), node,
                            "waiting for a pinned upload buffer");
  if (st) return st;
  if (bytes > d->upload_bytes[i] || !d->upload[i]) {
    cudaFreeHost(d->upload[i]);
    d->upload[i] = NULL;
    d->upload_bytes[i] = 0;
    cudaError_t e = cudaMallocHost(&d->upload[i], bytes);
    if (e != cudaSuccess) {
      d->upload[i] = NULL;
      return gpu_cuda(d, e, node, "pinned host memory for uploads");
    }
    d->upload_bytes[i] = bytes;
  }
  *slot = i;
  *buf = d->upload[i];
  return CNNB_OK;
}

/* The copy out of upload buffer `slot` was just enqueued: its next writer waits for it. */
static cnnb_status upload_used(gpu_device *d, int slot, const cnnb_node *node) {
  return gpu_cuda(d, cudaEventRecord(d->upload_free[slot], d->stream), node, "cudaEventRecord");
}

cnnb_status gpu_tensor_from_host(gpu_device *d, const cnnb_graph *g, cnnb_tensor t, void *buffer,
                                 const void *host) {
  const cnnb_node *node = cnnb_graph_node(g, t);
  cnnb_shape shape = node->shape;
  int64_t count = cnnb_shape_count(shape);
  if (count <= 0) return CNNB_OK;
  gpu_dtype type = gpu_tensor_dtype(d, g, t);
  size_t host_bytes = (size_t)count * 4; /* fp32 or int32 */
  const int direct = same_as_host(d, type, shape);
  int slot;
  void *pinned;
  cnnb_status st = direct ? CNNB_OK : gpu_staging_reserve(d, host_bytes);
  if (st || (st = upload_buffer(d, host_bytes, node, &slot, &pinned))) return st;
  memcpy(pinned, host, host_bytes);
  if (direct) {
    st = gpu_cuda(d, cudaMemcpyAsync(buffer, pinned, host_bytes, cudaMemcpyHostToDevice, d->stream),
                  node, "copying a tensor to the GPU");
  } else if (type == GPU_I32) {
    st = cnnb_error(d->ctx, CNNB_EINTERNAL, "cuda: node '%s': int32 tensor not in NCHW",
                    node->name);
  } else {
    /* [N, C, H, W] fp32 in staging, then into the tensor's layout and type. */
    st = gpu_cuda(d,
                  cudaMemcpyAsync(d->staging, pinned, host_bytes, cudaMemcpyHostToDevice,
                                  d->stream),
                  node, "copying a tensor to the GPU");
    if (!st)
      st = gpu_cuda(d,
                    gpu_k_from_nchw_f32(buffer, type, gpu_dims_of(d, shape), d->staging, d->stream),
                    node, "converting a tensor from logical NCHW fp32");
  }
  cnnb_status est = upload_used(d, slot, node);
  return st ? st : est;
}

cnnb_status gpu_tensor_to_host(gpu_device *d, const cnnb_graph *g, cnnb_tensor t,
                               const void *buffer, void *host) {
  const cnnb_node *node = cnnb_graph_node(g, t);
  cnnb_shape shape = node->shape;
  int64_t count = cnnb_shape_count(shape);
  if (count <= 0) return CNNB_OK;
  gpu_dtype type = gpu_tensor_dtype(d, g, t);
  size_t host_bytes = (size_t)count * 4; /* fp32 or int32 */
  const int direct = same_as_host(d, type, shape);
  cnnb_status st = direct ? CNNB_OK : gpu_staging_reserve(d, host_bytes);
  if (st || (st = gpu_pinned_reserve(d, host_bytes))) return st;
  if (direct) {
    st = gpu_cuda(d,
                  cudaMemcpyAsync(d->pinned, buffer, host_bytes, cudaMemcpyDeviceToHost, d->stream),
                  node, "copying a tensor from the GPU");
  } else if (type == GPU_I32) {
    st = cnnb_error(d->ctx, CNNB_EINTERNAL, "cuda: node '%s': int32 tensor not in NCHW",
                    node->name);
  } else {
    st = gpu_cuda(d, gpu_k_to_nchw_f32(d->staging, buffer, type, gpu_dims_of(d, shape), d->stream),
                  node, "converting a tensor to logical NCHW fp32");
    if (!st)
      st = gpu_cuda(d,
                    cudaMemcpyAsync(d->pinned, d->staging, host_bytes, cudaMemcpyDeviceToHost,
                                    d->stream),
                    node, "copying a tensor from the GPU");
  }
  cnnb_status sst = sync_stream(d, node, "waiting for a copy from the GPU");
  if (st) return st;
  if (sst) return sst;
  /* A label outside [0, classes) seen by the loss since the last check: the values read
   * back (the loss first of all) are not to be trusted. */
  if ((st = gpu_check_kernel_errors(d))) return st;
  memcpy(host, d->pinned, host_bytes);
  return CNNB_OK;
}

/* The staging layout of one uint8 batch: the pixels, then at a 16-byte boundary the C
 * scales and the C offsets (fp32), so one copy moves all of it. */
static size_t align16(size_t x) { return (x + 15) / 16 * 16; }

cnnb_status gpu_input_from_host_uint8(gpu_device *d, const cnnb_graph *g, cnnb_tensor t,
                                      void *buffer, const uint8_t *host, const float *scale,
                                      const float *offset) {
  const cnnb_node *node = cnnb_graph_node(g, t);
  cnnb_shape shape = node->shape;
  int64_t count = cnnb_shape_count(shape);
  if (count <= 0) return CNNB_OK;
  gpu_dtype type = gpu_tensor_dtype(d, g, t);
  if (type == GPU_I32)
    return cnnb_error(d->ctx, CNNB_EINVAL, "cuda: node '%s': uint8 pixels into an int32 tensor",
                      node->name);
  size_t pixels = (size_t)count; /* [N, H, W, C] uint8 */
  size_t floats_at = align16(pixels);
  size_t channel_bytes = (size_t)shape.c * sizeof(float);
  size_t total = floats_at + 2 * channel_bytes; /* pixels | pad | scale[C] | offset[C] */
  int slot;
  void *upload;
  cnnb_status st = gpu_staging_reserve(d, total);
  if (st || (st = upload_buffer(d, total, node, &slot, &upload))) return st;
  char *pinned = upload;
  memcpy(pinned, host, pixels);
  memcpy(pinned + floats_at, scale, channel_bytes);
  memcpy(pinned + floats_at + channel_bytes, offset, channel_bytes);
  char *staging = d->staging;
  st = gpu_cuda(d, cudaMemcpyAsync(staging, pinned, total, cudaMemcpyHostToDevice, d->stream), node,
                "copying uint8 pixels to the GPU");
  if (!st)
    st = gpu_cuda(d,
                  gpu_k_from_uint8_nhwc(buffer, type, gpu_dims_of(d, shape),
                                        (const uint8_t *)staging,
                                        (const float *)(staging + floats_at),
                                        (const float *)(staging + floats_at + channel_bytes),
                                        d->stream),
                  node, "normalizing uint8 pixels");
  cnnb_status est = upload_used(d, slot, node);
  return st ? st : est;
}
