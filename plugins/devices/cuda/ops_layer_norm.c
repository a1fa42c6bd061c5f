/* ops_layer_norm.c — layer norm over the channels at each position (ABI 1.14, ConvNeXt's
 * LayerNorm2d) on the device's own kernels (gpu_kernels.h: gpu_k_layer_norm and its
 * backward; cuDNN has no such op this device could use, its batch norm normalises over
 * N, H, W instead). The kernels index either layout, so the node runs in the device's
 * one (NCHW fp32, or NHWC) without converting anything.
 *
 * Training keeps each position's mean and 1 / sqrt(var + epsilon) in fp32 buffers of
 * [N * H * W] the node owns, written by the forward and read by the backward of the same
 * step; inference computes the same statistics and keeps none. Scale and offset are the
 * fp32 params; the backward overwrites their gradients in the fp32 arena with channel
 * sums (dy * x^, dy) whose partial sums go to a buffer the node also owns, then writes
 * dx when one is wanted. */
#include <stdlib.h>

#include "gpu_device.h"

typedef struct layer_norm_node {
  gpu_node base;
  gpu_dtype type;
  gpu_dims dims; /* x, y, dx, dy */
  float epsilon;
  float *stats; /* training: mean [positions] then inv_std [positions]; else NULL */
  int64_t positions;
  void *scratch; /* training: the parameter gradients' partial sums (or NULL: none needed) */
} layer_norm_node;

static float *param(const gpu_node *n, float *base, int32_t which) {
  return gpu_param_ptr(n->g, base, n->node->params[which]);
}

static cnnb_status layer_norm_forward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  layer_norm_node *s = (layer_norm_node *)n;
  float *mean = s->stats, *inv_std = s->stats ? s->stats + s->positions : NULL;
  return gpu_cuda(d,
                  gpu_k_layer_norm(io->output, io->inputs[0], param(n, io->params, 0),
                                   param(n, io->params, 1), s->epsilon, mean, inv_std, s->dims,
                                   s->type, d->stream),
                  n->node, "layer norm forward");
}

static cnnb_status layer_norm_backward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  layer_norm_node *s = (layer_norm_node *)n;
  if (!s->stats)
    return cnnb_error(d->ctx, CNNB_EINTERNAL,
                      "cuda: node '%s': layer norm backward on a device prepared for inference",
                      n->node->name);
  return gpu_cuda(d,
                  gpu_k_layer_norm_backward(io->input_grads[0], param(n, io->grads, 0),
                                            param(n, io->grads, 1), io->output_grad, io->inputs[0],
                                            param(n, io->params, 0), s->stats,
                                            s->stats + s->positions, s->dims, s->type, s->scratch,
                                            d->stream),
                  n->node, "layer norm backward");
}

static void layer_norm_release(gpu_device *d, gpu_node *n) {
  layer_norm_node *s = (layer_norm_node *)n;
  (void)d;
  if (s->stats) cudaFree(s->stats);
  s->stats = NULL;
  if (s->scratch) cudaFree(s->scratch);
  s->scratch = NULL;
}

static const gpu_node_ops layer_norm_ops = {layer_norm_forward, layer_norm_backward,
                                            layer_norm_release};

cnnb_status gpu_prepare_layer_norm(gpu_device *d, const cnnb_graph *g, int32_t index,
                                   gpu_node **out) {
  const cnnb_node *node = cnnb_graph_node(g, index);
  if (node->num_inputs != 1 || node->num_params != 2)
    return cnnb_error(d->ctx, CNNB_EINVAL,
                      "cuda: layer norm '%s' has %d inputs and %d parameters, not 1 and 2 (scale, "
                      "offset)",
                      node->name, node->num_inputs, node->num_params);
  const cnnb_shape xs = cnnb_graph_node(g, node->inputs[0])->shape, ys = node->shape;
  if (xs.n != ys.n || xs.c != ys.c || xs.h != ys.h || xs.w != ys.w)
    return cnnb_error(d->ctx, CNNB_EINVAL,
                      "cuda: layer norm '%s': input [%d, %d, %d, %d], output [%d, %d, %d, %d]",
                      node->name, xs.n, xs.c, xs.h, xs.w, ys.n, ys.c, ys.h, ys.w);
  for (int32_t k = 0; k < 2; k++) {
    const cnnb_param *p = cnnb_graph_param(g, node->params[k]);
    if (p->count != ys.c)
      return cnnb_error(d->ctx, CNNB_EINVAL,
                        "cuda: layer norm '%s': its %s has %lld values for %d channels", node->name,
                        k ? "offset" : "scale", (long long)p->count, ys.c);
  }
  const float epsilon = node->attr.layer_norm.epsilon;
  if (!(epsilon > 0.0f))
    return cnnb_error(d->ctx, CNNB_EINVAL, "cuda: layer norm '%s': epsilon %g must be > 0",
                      node->name, (double)epsilon);
  if (gpu_tensor_dtype(d, g, node->inputs[0]) != gpu_tensor_dtype(d, g, index))
    return cnnb_error(d->ctx, CNNB_EUNSUPPORTED,
                      "cuda: layer norm '%s': its input has another element type than the output",
                      node->name);
  layer_norm_node *s = gpu_node_new(sizeof *s, &layer_norm_ops, g, index);
  if (!s) return gpu_oom(d, node, sizeof *s, "its state");
  cnnb_status st = CNNB_OK;
  s->type = gpu_tensor_dtype(d, g, index);
  s->dims = gpu_dims_of(d, ys);
  s->epsilon = epsilon;
  s->positions = (int64_t)ys.n * ys.h * ys.w;
  if (d->cfg.training) {
    void *stats = NULL;
    GPU_TRY(st,
            gpu_malloc(d, &stats, 2 * (size_t)(s->positions > 0 ? s->positions : 1) * sizeof(float),
                       node, "the layer norm statistics"));
    s->stats = stats;
    const size_t scratch_bytes = gpu_k_bias_grad_scratch_bytes(s->dims);
    if (scratch_bytes)
      GPU_TRY(st, gpu_malloc(d, &s->scratch, scratch_bytes, node,
                             "the parameter gradients' partial sums"));
  }
done:
  if (st != CNNB_OK) {
    layer_norm_release(d, &s->base);
    free(s);
    return st;
  }
  *out = &s->base;
  return CNNB_OK;
}
