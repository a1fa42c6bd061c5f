/* ops_reshape.c — reshape / flatten: the same elements per image in a new [C, H, W],
 * in LOGICAL NCHW order (graph.h).
 *
 * On the fp32 device (NCHW) the bytes already are in logical order: a copy. On the
 * half-precision device (NHWC) the order of a tensor's bytes is its logical order only
 * when its NHWC and NCHW orders coincide (H = W = 1, as dense layers and logits are, or
 * C = 1); when both sides' do, or the shape does not change, it is a copy too.
 * Otherwise the data goes through logical NCHW: x (NHWC) -> fp32 NCHW in transient slot
 * 0 -> read as the output's NCHW -> y (NHWC), and the gradient back the same way. The
 * conversions are the device's own layout kernels (the ones tensor_from_host and
 * tensor_to_host use), through fp32, which holds every fp16 and bf16 value exactly, so
 * the round trip changes no bit; they take any type, where cudnnTransformTensor's
 * support for bf16 is not documented. */
#include "gpu_device.h"

typedef struct reshape_node {
  gpu_node base;
  int64_t count; /* elements of x and of y */
  gpu_dtype type;
  int via_nchw; /* 0: a plain copy; 1: through fp32 logical NCHW */
  gpu_dims x_dims, y_dims;
} reshape_node;

/* dst (dst_dims) = src (src_dims), the same logical NCHW element sequence. */
static cnnb_status move(gpu_device *d, reshape_node *s, void *dst, gpu_dims dst_dims,
                        const void *src, gpu_dims src_dims, const char *what) {
  const cnnb_node *node = s->base.node;
  if (!s->via_nchw) {
    if (dst == src || s->count == 0) return CNNB_OK;
    return gpu_cuda(d,
                    cudaMemcpyAsync(dst, src, (size_t)s->count * gpu_dtype_size(s->type),
                                    cudaMemcpyDeviceToDevice, d->stream),
                    node, what);
  }
  float *logical = gpu_transient(d, 0); /* [N, C, H, W] of src = [N, C', H', W'] of dst */
  cnnb_status st = gpu_cuda(d, gpu_k_to_nchw_f32(logical, src, s->type, src_dims, d->stream), node,
                            what);
  if (st) return st;
  return gpu_cuda(d, gpu_k_from_nchw_f32(dst, s->type, dst_dims, logical, d->stream), node, what);
}

static cnnb_status reshape_forward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  reshape_node *s = (reshape_node *)n;
  return move(d, s, io->output, s->y_dims, io->inputs[0], s->x_dims, "reshape forward");
}

static cnnb_status reshape_backward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  reshape_node *s = (reshape_node *)n;
  if (!io->input_grads[0]) return CNNB_OK;
  return move(d, s, io->input_grads[0], s->x_dims, io->output_grad, s->y_dims, "reshape backward");
}

/* Nothing beyond the head is owned: device.c frees the struct itself. */
static void reshape_release(gpu_device *d, gpu_node *n) {
  (void)d;
  (void)n;
}

static const gpu_node_ops reshape_ops = {reshape_forward, reshape_backward, reshape_release};

/* Whether a tensor of shape s is laid out alike in NHWC and NCHW. */
static int orders_coincide(cnnb_shape s) { return (s.h == 1 && s.w == 1) || s.c == 1; }

cnnb_status gpu_prepare_reshape(gpu_device *d, const cnnb_graph *g, int32_t index, gpu_node **out) {
  const cnnb_node *node = cnnb_graph_node(g, index);
  if (node->num_inputs != 1)
    return cnnb_error(d->ctx, CNNB_EINVAL, "cuda: reshape '%s' has %d inputs, not 1", node->name,
                      node->num_inputs);
  const cnnb_node *in = cnnb_graph_node(g, node->inputs[0]);
  cnnb_shape xs = in->shape, ys = node->shape;
  int64_t count = cnnb_shape_count(ys);
  if (cnnb_shape_count(xs) != count || xs.n != ys.n)
    return cnnb_error(d->ctx, CNNB_EINVAL,
                      "cuda: reshape '%s': [%d, %d, %d, %d] in, [%d, %d, %d, %d] out: not the "
                      "same elements per image",
                      node->name, xs.n, xs.c, xs.h, xs.w, ys.n, ys.c, ys.h, ys.w);
  gpu_dtype type = gpu_tensor_dtype(d, g, index);
  if (gpu_tensor_dtype(d, g, node->inputs[0]) != type)
    return cnnb_error(d->ctx, CNNB_EUNSUPPORTED,
                      "cuda: reshape '%s': input '%s' has another element type than the output",
                      node->name, in->name);
  int same_shape = xs.c == ys.c && xs.h == ys.h && xs.w == ys.w;
  int via_nchw = d->format == CUDNN_TENSOR_NHWC && !same_shape &&
                 !(orders_coincide(xs) && orders_coincide(ys));
  cnnb_status st;
  /* The fp32 logical copy lives within one forward or backward call. */
  if (via_nchw && (st = gpu_transient_reserve(d, 0, (size_t)count * sizeof(float), node)))
    return st;
  reshape_node *s = gpu_node_new(sizeof *s, &reshape_ops, g, index);
  if (!s) return gpu_oom(d, node, sizeof *s, "its state");
  s->count = count;
  s->type = type;
  s->via_nchw = via_nchw;
  s->x_dims = gpu_dims_of(d, xs);
  s->y_dims = gpu_dims_of(d, ys);
  *out = &s->base;
  return CNNB_OK;
}
