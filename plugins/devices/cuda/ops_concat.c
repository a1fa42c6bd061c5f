/* ops_concat.c — the ops that place tensors side by side along channels: concat
 * (Inception, DenseNet) and pad_channels (ABI 1.2, the CIFAR ResNets' shortcut: zero
 * channels before and after x). Neither computes anything, so neither has a kernel:
 * each is a few strided copies on the stream.
 *
 * A range of channels [c0, c0 + cn) of a [N, C, H, W] tensor is, in either layout, a
 * matrix of equally spaced rows of equal width (a "slab"):
 *  - NCHW: one row per image, cn * H * W elements at c0 * H * W, pitch C * H * W;
 *  - NHWC: one row per pixel (N * H * W rows), cn elements at c0, pitch C.
 * So copying input i into its place in the output, or the output gradient's slice back
 * into input i's gradient, is one cudaMemcpy2DAsync between two slabs of equal width. */
#include "gpu_device.h"

typedef struct slab {
  size_t offset; /* bytes from the buffer's start to the first row */
  size_t pitch;  /* bytes from one row to the next */
  size_t width;  /* bytes per row */
  size_t rows;
} slab;

/* Channels [c0, c0 + cn) of a tensor of shape s (s.c channels in all), element size
 * `elt`, in the device's layout. */
static slab channel_slab(const gpu_device *d, cnnb_shape s, int32_t c0, int32_t cn, size_t elt) {
  slab r;
  if (d->format == CUDNN_TENSOR_NHWC) {
    r.rows = (size_t)s.n * (size_t)s.h * (size_t)s.w;
    r.pitch = (size_t)s.c * elt;
    r.offset = (size_t)c0 * elt;
    r.width = (size_t)cn * elt;
  } else {
    size_t plane = (size_t)s.h * (size_t)s.w * elt;
    r.rows = (size_t)s.n;
    r.pitch = (size_t)s.c * plane;
    r.offset = (size_t)c0 * plane;
    r.width = (size_t)cn * plane;
  }
  return r;
}

/* dst's slab = src's slab (equal widths and row counts). */
static cnnb_status copy_slab(gpu_device *d, void *dst, slab ds, const void *src, slab ss,
                             const cnnb_node *node, const char *what) {
  if (ds.width == 0 || ds.rows == 0) return CNNB_OK;
  if (ds.width != ss.width || ds.rows != ss.rows)
    return cnnb_error(d->ctx, CNNB_EINTERNAL,
                      "cuda: node '%s': %s: slabs differ (%zu x %zu bytes, %zu x %zu bytes)",
                      node->name, what, ds.rows, ds.width, ss.rows, ss.width);
  return gpu_cuda(d,
                  cudaMemcpy2DAsync((char *)dst + ds.offset, ds.pitch,
                                    (const char *)src + ss.offset, ss.pitch, ds.width, ds.rows,
                                    cudaMemcpyDeviceToDevice, d->stream),
                  node, what);
}

/* The slab's pitch is within what cudaMemcpy2D takes (prepare time). */
static cnnb_status check_pitch(gpu_device *d, slab s, const cnnb_node *node, const char *op) {
  if (s.pitch <= d->prop.memPitch) return CNNB_OK;
  return cnnb_error(d->ctx, CNNB_EUNSUPPORTED,
                    "cuda: %s '%s': a row pitch of %zu bytes exceeds the GPU's 2-D copy limit "
                    "of %zu",
                    op, node->name, s.pitch, (size_t)d->prop.memPitch);
}

static int same_nhw(cnnb_shape a, cnnb_shape b) { return a.n == b.n && a.h == b.h && a.w == b.w; }

/* These nodes own nothing beyond their head: device.c frees the struct itself. */
static void slab_release(gpu_device *d, gpu_node *n) {
  (void)d;
  (void)n;
}

/* ---- concat ------------------------------------------------------------------------ */

typedef struct concat_node {
  gpu_node base;
  size_t elt; /* bytes per element of every input and the output */
} concat_node;

/* Input i's channels in the output: forward copies x_i into them, backward copies
 * them out of dy into dx_i. The offsets come from the graph, in input order. */
static cnnb_status concat_run(gpu_device *d, gpu_node *n, const cnnb_node_io *io, int backward) {
  concat_node *s = (concat_node *)n;
  const cnnb_node *node = n->node;
  cnnb_shape ys = node->shape;
  int32_t offset = 0;
  cnnb_status st;
  for (int32_t i = 0; i < node->num_inputs; i++) {
    cnnb_shape xs = cnnb_graph_node(n->g, node->inputs[i])->shape;
    slab out = channel_slab(d, ys, offset, xs.c, s->elt);
    slab in = channel_slab(d, xs, 0, xs.c, s->elt);
    offset += xs.c;
    if (!backward) {
      st = copy_slab(d, io->output, out, io->inputs[i], in, node, "concat forward copy");
    } else {
      if (!io->input_grads[i]) continue;
      st = copy_slab(d, io->input_grads[i], in, io->output_grad, out, node, "concat backward copy");
    }
    if (st) return st;
  }
  return CNNB_OK;
}

static cnnb_status concat_forward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  return concat_run(d, n, io, 0);
}

static cnnb_status concat_backward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  return concat_run(d, n, io, 1);
}

static const gpu_node_ops concat_ops = {concat_forward, concat_backward, slab_release};

cnnb_status gpu_prepare_concat(gpu_device *d, const cnnb_graph *g, int32_t index, gpu_node **out) {
  const cnnb_node *node = cnnb_graph_node(g, index);
  cnnb_shape ys = node->shape;
  gpu_dtype type = gpu_tensor_dtype(d, g, index);
  size_t elt = gpu_dtype_size(type);
  if (node->num_inputs < 1)
    return cnnb_error(d->ctx, CNNB_EINVAL, "cuda: concat '%s' has no inputs", node->name);
  int64_t channels = 0;
  for (int32_t i = 0; i < node->num_inputs; i++) {
    const cnnb_node *in = cnnb_graph_node(g, node->inputs[i]);
    if (!same_nhw(in->shape, ys))
      return cnnb_error(d->ctx, CNNB_EINVAL,
                        "cuda: concat '%s': input '%s' is [%d, %d, %d, %d], output "
                        "[%d, %d, %d, %d]: N, H, W must agree",
                        node->name, in->name, in->shape.n, in->shape.c, in->shape.h, in->shape.w,
                        ys.n, ys.c, ys.h, ys.w);
    if (gpu_tensor_dtype(d, g, node->inputs[i]) != type)
      return cnnb_error(d->ctx, CNNB_EUNSUPPORTED,
                        "cuda: concat '%s': input '%s' has another element type than the output",
                        node->name, in->name);
    channels += in->shape.c;
  }
  if (channels != ys.c)
    return cnnb_error(d->ctx, CNNB_EINVAL,
                      "cuda: concat '%s': inputs have %lld channels in all, the output %d",
                      node->name, (long long)channels, ys.c);
  /* The output's pitch is the largest any copy uses. */
  cnnb_status st = check_pitch(d, channel_slab(d, ys, 0, ys.c, elt), node, "concat");
  if (st) return st;
  concat_node *s = gpu_node_new(sizeof *s, &concat_ops, g, index);
  if (!s) return gpu_oom(d, node, sizeof *s, "its state");
  s->elt = elt;
  *out = &s->base;
  return CNNB_OK;
}

/* ---- pad_channels ------------------------------------------------------------------ */

typedef struct pad_node {
  gpu_node base;
  slab before, middle, after; /* the output's channel ranges: zeros, x, zeros */
  slab x;                     /* all of x (and of its gradient) */
} pad_node;

static cnnb_status zero_slab(gpu_device *d, void *buffer, slab s, const cnnb_node *node) {
  if (s.width == 0 || s.rows == 0) return CNNB_OK;
  return gpu_cuda(d,
                  cudaMemset2DAsync((char *)buffer + s.offset, s.pitch, 0, s.width, s.rows,
                                    d->stream),
                  node, "pad_channels zero fill");
}

static cnnb_status pad_forward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  pad_node *s = (pad_node *)n;
  cnnb_status st;
  if ((st = zero_slab(d, io->output, s->before, n->node)) ||
      (st = zero_slab(d, io->output, s->after, n->node)))
    return st;
  return copy_slab(d, io->output, s->middle, io->inputs[0], s->x, n->node,
                   "pad_channels forward copy");
}

/* The zero channels are constants: only the middle of dy flows back to x. */
static cnnb_status pad_backward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  pad_node *s = (pad_node *)n;
  if (!io->input_grads[0]) return CNNB_OK;
  return copy_slab(d, io->input_grads[0], s->x, io->output_grad, s->middle, n->node,
                   "pad_channels backward copy");
}

static const gpu_node_ops pad_ops = {pad_forward, pad_backward, slab_release};

cnnb_status gpu_prepare_pad(gpu_device *d, const cnnb_graph *g, int32_t index, gpu_node **out) {
  const cnnb_node *node = cnnb_graph_node(g, index);
  if (node->num_inputs != 1)
    return cnnb_error(d->ctx, CNNB_EINVAL, "cuda: pad_channels '%s' has %d inputs, not 1",
                      node->name, node->num_inputs);
  const cnnb_node *in = cnnb_graph_node(g, node->inputs[0]);
  cnnb_shape ys = node->shape, xs = in->shape;
  int32_t before = node->attr.pad.before, after = node->attr.pad.after;
  if (before < 0 || after < 0 || !same_nhw(xs, ys) ||
      (int64_t)ys.c != (int64_t)before + xs.c + after)
    return cnnb_error(d->ctx, CNNB_EINVAL,
                      "cuda: pad_channels '%s': pads %d, %d take [%d, %d, %d, %d] to "
                      "[%d, %d, %d, %d]",
                      node->name, before, after, xs.n, xs.c, xs.h, xs.w, ys.n, ys.c, ys.h, ys.w);
  gpu_dtype type = gpu_tensor_dtype(d, g, index);
  if (gpu_tensor_dtype(d, g, node->inputs[0]) != type)
    return cnnb_error(d->ctx, CNNB_EUNSUPPORTED,
                      "cuda: pad_channels '%s': input '%s' has another element type than the "
                      "output",
                      node->name, in->name);
  size_t elt = gpu_dtype_size(type);
  slab whole = channel_slab(d, ys, 0, ys.c, elt);
  cnnb_status st = check_pitch(d, whole, node, "pad_channels");
  if (st) return st;
  pad_node *s = gpu_node_new(sizeof *s, &pad_ops, g, index);
  if (!s) return gpu_oom(d, node, sizeof *s, "its state");
  s->before = channel_slab(d, ys, 0, before, elt);
  s->middle = channel_slab(d, ys, before, xs.c, elt);
  s->after = channel_slab(d, ys, before + xs.c, after, elt);
  s->x = channel_slab(d, xs, 0, xs.c, elt);
  *out = &s->base;
  return CNNB_OK;
}
