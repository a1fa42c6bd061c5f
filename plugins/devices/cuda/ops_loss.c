/* ops_loss.c — softmax cross-entropy with sparse labels, the mean over the batch: the
 * graph's end. Logits [N, K, 1, 1] in the activation type, labels int32 [N], the loss one
 * fp32. Forward (gpu_k_xent_forward) keeps the softmax probabilities [N, K] fp32 in a
 * buffer of the node's own for backward, and counts labels outside [0, K) in the
 * device's error words, which the next synchronizing call reports (transfer.c's
 * tensor_to_host reads them after the loss is copied back).
 *
 * Backward starts from io->loss_scale, not from a loss gradient (the executor gives
 * none), as the cpu device does: d loss / d logits = loss_scale * (softmax - t) / N, t
 * the one-hot label smoothed by attr.loss.label_smoothing (1.14), a zero loss_scale taken
 * as 1 (it would silently zero every gradient). */
#include "gpu_device.h"

typedef struct xent_node {
  gpu_node base;
  int32_t n, k;
  float smoothing; /* attr.loss.label_smoothing */
  gpu_dtype type;  /* of the logits and their gradient */
  float *probs;    /* [N, K] fp32, device memory */
} xent_node;

static cnnb_status xent_forward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  xent_node *s = (xent_node *)n;
  return gpu_cuda(d,
                  gpu_k_xent_forward(io->output, s->probs, io->inputs[0], s->type, io->inputs[1],
                                     s->n, s->k, s->smoothing, d->errors, d->stream),
                  n->node, "softmax cross-entropy forward");
}

static cnnb_status xent_backward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  xent_node *s = (xent_node *)n;
  void *dlogits = io->input_grads[0];
  if (!dlogits) return CNNB_OK;
  /* The kernel divides by N itself. */
  float scale = io->loss_scale != 0.0f ? io->loss_scale : 1.0f;
  return gpu_cuda(d,
                  gpu_k_xent_backward(dlogits, s->type, s->probs, io->inputs[1], s->n, s->k,
                                      s->smoothing, scale, d->stream),
                  n->node, "softmax cross-entropy backward");
}

static void xent_release(gpu_device *d, gpu_node *n) {
  xent_node *s = (xent_node *)n;
  if (s->probs) cudaFree(s->probs);
  s->probs = NULL;
}

static const gpu_node_ops xent_ops = {xent_forward, xent_backward, xent_release};

cnnb_status gpu_prepare_softmax_xent(gpu_device *d, const cnnb_graph *g, int32_t index,
                                     gpu_node **out) {
  const cnnb_node *node = cnnb_graph_node(g, index);
  if (node->num_inputs != 2)
    return cnnb_error(d->ctx, CNNB_EINVAL, "cuda: loss '%s' needs logits and labels, has %d inputs",
                      node->name, node->num_inputs);
  cnnb_tensor lt = node->inputs[0], yt = node->inputs[1];
  const cnnb_node *logits = cnnb_graph_node(g, lt), *labels = cnnb_graph_node(g, yt);
  cnnb_shape ls = logits->shape;
  if (ls.n < 1 || cnnb_shape_count(labels->shape) != ls.n || gpu_tensor_dtype(d, g, yt) != GPU_I32)
    return cnnb_error(d->ctx, CNNB_EINVAL,
                      "cuda: loss '%s': second input '%s' is not %d int32 labels", node->name,
                      labels->name, ls.n);
  if (gpu_tensor_dtype(d, g, index) != GPU_F32 || cnnb_shape_count(node->shape) != 1)
    return cnnb_error(d->ctx, CNNB_EINTERNAL, "cuda: loss '%s': the loss is not one fp32",
                      node->name);
  /* The kernels read row i of the logits as K contiguous values: true of NCHW, and of
   * NHWC when H = W = 1 (logits are [N, K, 1, 1]). */
  if (d->format == CUDNN_TENSOR_NHWC && !(ls.h == 1 && ls.w == 1) && ls.c != 1)
    return cnnb_error(d->ctx, CNNB_EUNSUPPORTED,
                      "cuda: loss '%s': logits '%s' are [%d, %d, %d, %d]; with NHWC activations "
                      "the loss takes [N, K, 1, 1] only",
                      node->name, logits->name, ls.n, ls.c, ls.h, ls.w);
  int64_t k = cnnb_shape_count(ls) / ls.n;
  if (k < 1 || k > INT32_MAX)
    return cnnb_error(d->ctx, CNNB_EINVAL, "cuda: loss '%s': %lld classes", node->name,
                      (long long)k);
  size_t bytes = (size_t)ls.n * (size_t)k * sizeof(float);
  void *probs = NULL;
  cnnb_status st = gpu_malloc(d, &probs, bytes, node, "the softmax probabilities");
  if (st) return st;
  xent_node *s = gpu_node_new(sizeof *s, &xent_ops, g, index);
  if (!s) {
    cudaFree(probs);
    return gpu_oom(d, node, sizeof *s, "its state");
  }
  s->n = ls.n;
  s->k = (int32_t)k;
  s->smoothing = node->attr.loss.label_smoothing;
  s->type = gpu_tensor_dtype(d, g, lt);
  s->probs = probs;
  *out = &s->base;
  return CNNB_OK;
}
