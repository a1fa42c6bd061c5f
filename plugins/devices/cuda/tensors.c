/* tensors.c — a tensor's type and size on the cuda device, a prepared node's common
 * head, and cuDNN tensor descriptors. */
#include <stdlib.h>

#include "gpu_device.h"

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
