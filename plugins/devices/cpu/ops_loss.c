/* ops_loss.c — softmax cross-entropy with sparse labels, mean over the batch, in plain C
 * (it is [N, classes]: tiny next to any layer before it).
 *
 * With label smoothing s (attr.loss, 1.14) the target t is (1 - s) onehot(label) + s / K.
 * Forward keeps the softmax probabilities; backward starts from io->loss_scale (the
 * core's loss scaling): d loss / d logits = loss_scale * (softmax - t) / N.
 * The logits are read as plain fp32 [N, K]: a bf16 or blocked producer is converted. */
#include <math.h>
#include <stdlib.h>

#include "cpu_device.h"

typedef struct xent_node {
  cpu_node base;
  int32_t n, k;
  float smoothing;          /* attr.loss.label_smoothing */
  cpu_xform logits_to_f32;  /* producer layout -> plain f32 [N, K] */
  cpu_xform grad_to_logits; /* plain f32 [N, K] -> producer layout */
  float *logits;            /* [N, K] when converted */
  float *probs;             /* [N, K] softmax of this step */
  float *grad;              /* [N, K] when the gradient needs converting */
} xent_node;

static cnnb_status xent_forward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  xent_node *s = (xent_node *)n;
  cnnb_status st;
  const float *x = io->inputs[0];
  if (cpu_xform_needed(&s->logits_to_f32)) {
    if ((st = cpu_xform_run(d, &s->logits_to_f32, io->inputs[0], s->logits, n->node))) return st;
    x = s->logits;
  }
  const int32_t *labels = io->inputs[1];
  double total = 0.0;
  for (int32_t i = 0; i < s->n; i++) {
    const float *row = x + (size_t)i * s->k;
    float *p = s->probs + (size_t)i * s->k;
    int32_t label = labels[i];
    if (label < 0 || label >= s->k)
      return cnnb_error(d->ctx, CNNB_EDATA,
                        "cpu: loss '%s': label %d of example %d is outside [0, %d)", n->node->name,
                        label, i, s->k);
    float max = row[0];
    for (int32_t j = 1; j < s->k; j++)
      if (row[j] > max) max = row[j];
    double sum = 0.0, shifted_sum = 0.0;
    for (int32_t j = 0; j < s->k; j++) {
      p[j] = expf(row[j] - max);
      sum += p[j];
      shifted_sum += (double)(row[j] - max);
    }
    float inv = (float)(1.0 / sum);
    for (int32_t j = 0; j < s->k; j++) p[j] *= inv;
    /* -sum_j t_j log p_j, log p_j = (row[j] - max) - log(sum) */
    total += log(sum) - (1.0 - s->smoothing) * (double)(row[label] - max) -
             s->smoothing * shifted_sum / s->k;
  }
  *(float *)io->output = (float)(total / s->n);
  return CNNB_OK;
}

static cnnb_status xent_backward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  xent_node *s = (xent_node *)n;
  if (!io->input_grads[0]) return CNNB_OK;
  const int32_t *labels = io->inputs[1];
  /* A zero scale would silently zero every gradient: take it as "unscaled". */
  float scale = (io->loss_scale != 0.0f ? io->loss_scale : 1.0f) / (float)s->n;
  const float spread = s->smoothing / (float)s->k, peak = 1.0f - s->smoothing;
  float *g = cpu_xform_needed(&s->grad_to_logits) ? s->grad : io->input_grads[0];
  for (int32_t i = 0; i < s->n; i++) {
    const float *p = s->probs + (size_t)i * s->k;
    float *row = g + (size_t)i * s->k;
    for (int32_t j = 0; j < s->k; j++) row[j] = scale * (p[j] - spread);
    row[labels[i]] -= scale * peak;
  }
  if (cpu_xform_needed(&s->grad_to_logits))
    return cpu_xform_run(d, &s->grad_to_logits, s->grad, io->input_grads[0], n->node);
  return CNNB_OK;
}

static void xent_release(cpu_device *d, cpu_node *n) {
  xent_node *s = (xent_node *)n;
  cpu_xform_fini(&s->logits_to_f32);
  cpu_xform_fini(&s->grad_to_logits);
  cpu_free(s->logits);
  cpu_free(s->probs);
  cpu_free(s->grad);
  free(s);
}

static const cpu_node_ops xent_ops = {xent_forward, xent_backward, xent_release};

cnnb_status cpu_prepare_softmax_xent(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                                     cpu_node **out) {
  const cnnb_node *node = cnnb_graph_node(g, index);
  if (node->num_inputs != 2)
    return cnnb_error(d->ctx, CNNB_EINVAL, "cpu: loss '%s' needs logits and labels, has %d inputs",
                      node->name, node->num_inputs);
  cnnb_tensor lt = node->inputs[0], yt = node->inputs[1];
  cnnb_shape ls = cnnb_graph_node(g, lt)->shape;
  if (p->md[yt].data_type != dnnl_s32 || cnnb_shape_count(cnnb_graph_node(g, yt)->shape) != ls.n)
    return cnnb_error(d->ctx, CNNB_EINVAL, "cpu: loss '%s': second input is not %d int32 labels",
                      node->name, ls.n);
  xent_node *s = calloc(1, sizeof *s);
  if (!s) return cpu_oom(d, cnnb_graph_node(g, index), sizeof *s, "its state");
  cpu_node_init(&s->base, &xent_ops, g, p, index);
  s->n = ls.n;
  s->k = (int32_t)(cnnb_shape_count(ls) / ls.n);
  s->smoothing = node->attr.loss.label_smoothing;
  dnnl_memory_desc_t plain = cpu_md_nchw(ls, dnnl_f32);
  size_t bytes = (size_t)s->n * (size_t)s->k * sizeof(float);
  cnnb_status st = cpu_xform_init(d, &s->logits_to_f32, &p->md[lt], &plain, node, "logits to fp32");
  if (!st && d->cfg.training)
    st = cpu_xform_init(d, &s->grad_to_logits, &plain, &p->md[lt], node, "logits gradient");
  if (!st) {
    s->probs = cpu_alloc(bytes);
    if (cpu_xform_needed(&s->logits_to_f32)) s->logits = cpu_alloc(bytes);
    if (cpu_xform_needed(&s->grad_to_logits)) s->grad = cpu_alloc(bytes);
    if (!s->probs || (cpu_xform_needed(&s->logits_to_f32) && !s->logits) ||
        (cpu_xform_needed(&s->grad_to_logits) && !s->grad))
      st = cpu_oom(d, node, bytes, "the loss's probabilities and conversions");
  }
  if (st) {
    xent_release(d, &s->base);
    return st;
  }
  *out = &s->base;
  return CNNB_OK;
}
