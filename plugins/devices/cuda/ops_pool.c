/* ops_pool.c — max pool, average pool and global average pool.
 *
 * TF semantics, as the cpu device and the reference ops: padding never wins a max and is
 * left out of an average's count; a global average pool is the [H, W] window the graph
 * describes it as.
 *
 * Paths:
 *  - forward: cuDNN pooling (max: CUDNN_POOLING_MAX_DETERMINISTIC, NaN never wins;
 *    average: CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING) when cuDNN's symmetric padding
 *    gives the node's own windows, else this device's kernel gpu_k_pool (kernels_pool.cu).
 *    cuDNN pads both sides by the same amount; its window o starts at o * stride - pad,
 *    as TF's does with pad = top / left, so the windows agree exactly when cuDNN, padding
 *    (top, left) on both sides, produces the node's output size: then every window the
 *    node has lies inside cuDNN's padded input, and padding inside it is ignored (max)
 *    or uncounted (average) on both sides. Symmetric padding always qualifies; TF SAME
 *    with an odd total (the extra row at the bottom) does not and takes the kernel.
 *  - max pool backward: cudnnPoolingBackward on the same path as the forward (it reads
 *    x and y, which the core keeps for max pool's backward), else gpu_k_pool_backward.
 *    On the kernel path a training forward records each window's first maximum (one
 *    byte per output element, in a buffer the node owns, allocated at prepare) and the
 *    backward adds dy where those records point instead of scanning every window over
 *    each input element again; the same element gets the same sums either way. Without
 *    a record (windows of more than GPU_POOL_ARGMAX_MAX_WINDOW elements, or a node that
 *    left cuDNN at run time) the backward scans, from x.
 *    Ties: the reference (and oneDNN on the cpu device) gives a window's gradient to its
 *    FIRST maximum in row-major order; cuDNN gives it to one of the tied maxima without
 *    documenting which. The sums agree; where a window holds equal maxima, which input
 *    gets its gradient may differ (with random fp32 data, practically never; after a
 *    ReLU, tied zeros get a gradient the ReLU's backward then masks anyway).
 *  - average pool backward (and global): always gpu_k_pool_backward, which reads neither
 *    x nor y: the core does not keep them for an average pool's backward (op_table.c:
 *    "shapes alone are enough"), so their buffers may already hold other tensors.
 * If cuDNN answers NOT_SUPPORTED for this type and layout (bf16 pooling on an older
 * cuDNN), the node switches to the kernels for good: same results, no error. */
#include <stdlib.h>

#include "gpu_device.h"

typedef struct pool_node {
  gpu_node base;
  gpu_pool_window win;
  gpu_dims x_dims, y_dims;
  int use_cudnn; /* forward, and a max pool's backward, through cuDNN */
  cudnnPoolingDescriptor_t pool_desc;
  cudnnTensorDescriptor_t x_desc, y_desc; /* [N, C, H, W] in the device's type and layout */
  /* training max pool on the kernel path: where each output's window has its first
   * maximum, [N, C, OH, OW] in y's layout, one byte each (gpu_kernels.h); else NULL */
  uint8_t *argmax;
} pool_node;

static cnnb_status pool_forward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  pool_node *s = (pool_node *)n;
  const cnnb_node *node = n->node;
  if (s->use_cudnn) {
    const float one = 1.0f, zero = 0.0f;
    cudnnStatus_t cs = cudnnPoolingForward(d->cudnn, s->pool_desc, &one, s->x_desc, io->inputs[0],
                                           &zero, s->y_desc, io->output);
    if (CUDNN_STATUS_CATEGORY((int)cs) != CUDNN_STATUS_NOT_SUPPORTED)
      return gpu_cudnn(d, cs, node, "pooling forward");
    s->use_cudnn = 0; /* the kernel below computes the same windows */
  }
  /* s->argmax is NULL unless this is a training max pool prepared for the kernel. */
  return gpu_cuda(d,
                  gpu_k_pool(io->output, s->y_dims, io->inputs[0], s->x_dims, d->act, s->win,
                             s->argmax, d->stream),
                  node, "pooling kernel");
}

static cnnb_status pool_backward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  pool_node *s = (pool_node *)n;
  const cnnb_node *node = n->node;
  void *dx = io->input_grads[0];
  if (!dx) return CNNB_OK; /* nothing trainable upstream: no gradient wanted */
  if (s->win.max && s->use_cudnn) {
    const float one = 1.0f, zero = 0.0f;
    cudnnStatus_t cs = cudnnPoolingBackward(d->cudnn, s->pool_desc, &one, s->y_desc, io->output,
                                            s->y_desc, io->output_grad, s->x_desc, io->inputs[0],
                                            &zero, s->x_desc, dx);
    if (CUDNN_STATUS_CATEGORY((int)cs) != CUDNN_STATUS_NOT_SUPPORTED)
      return gpu_cudnn(d, cs, node, "max pooling backward");
    s->use_cudnn = 0;
  }
  /* An average pool passes x and y along unread (see the top of this file). A max pool
   * with a record reads it, written by this step's forward (same stream, earlier). */
  return gpu_cuda(d,
                  gpu_k_pool_backward(dx, s->x_dims, io->inputs[0], io->output, io->output_grad,
                                      s->y_dims, d->act, s->win, s->argmax, d->stream),
                  node, "pooling backward kernel");
}

static void pool_release(gpu_device *d, gpu_node *n) {
  pool_node *s = (pool_node *)n;
  if (s->pool_desc) cudnnDestroyPoolingDescriptor(s->pool_desc);
  s->pool_desc = NULL;
  if (s->x_desc) gpu_tensor_desc_free(&s->x_desc);
  if (s->y_desc) gpu_tensor_desc_free(&s->y_desc);
  if (s->argmax) cudaFree(s->argmax);
  s->argmax = NULL;
}

static const gpu_node_ops pool_ops = {pool_forward, pool_backward, pool_release};

/* The node's window: a global average pool's is its input's [H, W], unpadded. */
static cnnb_status read_window(gpu_device *d, const cnnb_node *node, cnnb_shape xs,
                               gpu_pool_window *win, int32_t *pad_bottom, int32_t *pad_right) {
  if (node->op == CNNB_OP_GLOBAL_AVG_POOL) {
    *win = (gpu_pool_window){xs.h, xs.w, 1, 1, 0, 0, 0};
    *pad_bottom = *pad_right = 0;
    return CNNB_OK;
  }
  *win = (gpu_pool_window){node->attr.window.kernel_h,  node->attr.window.kernel_w,
                           node->attr.window.stride_h,  node->attr.window.stride_w,
                           node->attr.window.pad_top,   node->attr.window.pad_left,
                           node->op == CNNB_OP_MAX_POOL};
  *pad_bottom = node->attr.window.pad_bottom;
  *pad_right = node->attr.window.pad_right;
  if (win->kernel_h < 1 || win->kernel_w < 1 || win->stride_h < 1 || win->stride_w < 1 ||
      win->pad_top < 0 || win->pad_left < 0 || *pad_bottom < 0 || *pad_right < 0)
    return cnnb_error(d->ctx, CNNB_EINVAL,
                      "cuda: node '%s': pool window %dx%d stride %dx%d pads %d,%d,%d,%d "
                      "(top,bottom,left,right) is not a valid window",
                      node->name, win->kernel_h, win->kernel_w, win->stride_h, win->stride_w,
                      win->pad_top, *pad_bottom, win->pad_left, *pad_right);
  return CNNB_OK;
}

/* Sets s->use_cudnn (and the descriptor) when cuDNN's symmetric padding reproduces the
 * node's windows (see the top of this file). */
static cnnb_status choose_cudnn(gpu_device *d, pool_node *s, const cnnb_node *node, cnnb_shape xs,
                                cnnb_shape ys) {
  cnnb_status st = CNNB_OK;
  const gpu_pool_window *w = &s->win;
  s->use_cudnn = 0;
  /* A window lying wholly in the padding has no cuDNN meaning; the kernel gives the
   * reference's -inf / 0 for it. */
  if (w->pad_top >= w->kernel_h || w->pad_left >= w->kernel_w) return CNNB_OK;
  /* A window wider than the input padded by pad_top on both sides (TF SAME on a map
   * smaller than the window, whose extra row goes at the bottom: 3x3/2 on 2x2) makes
   * cudnnGetPooling2dForwardOutputDim answer BAD_PARAM (seen on cuDNN 9.19): the kernel
   * takes these. */
  if ((int64_t)xs.h + 2 * w->pad_top < w->kernel_h || (int64_t)xs.w + 2 * w->pad_left < w->kernel_w)
    return CNNB_OK;
  cudnnPoolingMode_t mode = w->max ? CUDNN_POOLING_MAX_DETERMINISTIC
                                   : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
  GPU_TRY(st, gpu_cudnn(d, cudnnCreatePoolingDescriptor(&s->pool_desc), node,
                        "creating the pooling descriptor"));
  /* NOT_PROPAGATE_NAN: a NaN never wins a max, as in the reference's `v > best`. */
  GPU_TRY(st, gpu_cudnn(d,
                        cudnnSetPooling2dDescriptor(s->pool_desc, mode, CUDNN_NOT_PROPAGATE_NAN,
                                                    w->kernel_h, w->kernel_w, w->pad_top,
                                                    w->pad_left, w->stride_h, w->stride_w),
                        node, "setting the pooling descriptor"));
  int on = 0, oc = 0, oh = 0, ow = 0;
  GPU_TRY(st,
          gpu_cudnn(d,
                    cudnnGetPooling2dForwardOutputDim(s->pool_desc, s->x_desc, &on, &oc, &oh, &ow),
                    node, "pooling output size"));
  if (on == ys.n && oc == ys.c && oh == ys.h && ow == ys.w) s->use_cudnn = 1;
done:
  if (!s->use_cudnn && s->pool_desc) {
    cudnnDestroyPoolingDescriptor(s->pool_desc);
    s->pool_desc = NULL;
  }
  return st;
}

cnnb_status gpu_prepare_pool(gpu_device *d, const cnnb_graph *g, int32_t index, gpu_node **out) {
  const cnnb_node *node = cnnb_graph_node(g, index);
  if (node->op != CNNB_OP_MAX_POOL && node->op != CNNB_OP_AVG_POOL &&
      node->op != CNNB_OP_GLOBAL_AVG_POOL)
    return cnnb_error(d->ctx, CNNB_EINTERNAL, "cuda: node '%s': op %u is not a pool", node->name,
                      node->op);
  if (node->num_inputs != 1)
    return cnnb_error(d->ctx, CNNB_EINVAL, "cuda: node '%s': a pool takes 1 input, not %d",
                      node->name, node->num_inputs);
  pool_node *s = gpu_node_new(sizeof *s, &pool_ops, g, index);
  if (!s) return gpu_oom(d, node, sizeof *s, "its state");
  cnnb_status st = CNNB_OK;
  const cnnb_shape xs = cnnb_graph_node(g, node->inputs[0])->shape; /* [N, C, H, W] */
  const cnnb_shape ys = node->shape;                                /* [N, C, OH, OW] */
  int32_t pad_bottom = 0, pad_right = 0;
  GPU_TRY(st, read_window(d, node, xs, &s->win, &pad_bottom, &pad_right));
  if (ys.n != xs.n || ys.c != xs.c) {
    st = cnnb_error(d->ctx, CNNB_EINVAL,
                    "cuda: node '%s' [%d, %d, %d, %d]: a pool keeps its input's [%d, %d, ...]",
                    node->name, ys.n, ys.c, ys.h, ys.w, xs.n, xs.c);
    goto done;
  }
  s->x_dims = gpu_dims_of(d, xs);
  s->y_dims = gpu_dims_of(d, ys);
  GPU_TRY(st, gpu_tensor_desc(d, &s->x_desc, xs, node));
  GPU_TRY(st, gpu_tensor_desc(d, &s->y_desc, ys, node));
  GPU_TRY(st, choose_cudnn(d, s, node, xs, ys));
  if (d->cfg.training && s->win.max && !s->use_cudnn &&
      (int64_t)s->win.kernel_h * s->win.kernel_w <= GPU_POOL_ARGMAX_MAX_WINDOW) {
    void *argmax = NULL;
    GPU_TRY(st, gpu_malloc(d, &argmax, (size_t)cnnb_shape_count(ys), node,
                           "the max pool's argmax record"));
    s->argmax = argmax;
  }
done:
  if (st != CNNB_OK) {
    pool_release(d, &s->base);
    free(s);
    return st;
  }
  *out = &s->base;
  return CNNB_OK;
}
