/* ops_batch_norm.c — batch normalization on oneDNN, with the following ReLU fused when
 * the graph says so (oneDNN's fuse_norm_relu keeps the mask in a workspace).
 *
 * Training normalises with the batch's statistics and then moves the running averages
 * in the stats arena as TF's fused batch norm does:
 *   running_mean = decay * running_mean + (1 - decay) * batch_mean
 *   running_var  = decay * running_var  + (1 - decay) * batch_var * m / (m - 1)
 * (m = N*H*W: the moving variance gets the Bessel-corrected batch variance, while the
 * normalisation itself uses the biased one). Inference normalises with the running
 * statistics. Offset-only batch norm (tf_cnn_benchmarks' default) uses oneDNN's shift
 * alone: the scale is a fixed 1 with no gradient. */
#include <stdlib.h>

#include "cpu_device.h"

typedef struct bn_node {
  cpu_node base;
  int use_scale, fused;
  int32_t channels;
  double m; /* elements per channel in the batch */
  size_t dx_bytes;
  float decay;
  float *mean, *var; /* this step's batch statistics [C] */
  void *ws;          /* fused relu's mask */
  dnnl_primitive_t fwd, bwd;
  dnnl_memory_t src, dst, mean_m, var_m, scale, shift, ws_m;
  dnnl_memory_t b_src, b_mean, b_var, b_scale, b_shift, b_ws, diff_dst, diff_src, diff_scale,
      diff_shift;
} bn_node;

static cnnb_status bn_forward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  bn_node *s = (bn_node *)n;
  const cnnb_node *node = n->node;
  int training = d->cfg.training;
  float *shift = cpu_param_ptr(n->g, io->params, node->params[s->use_scale ? 1 : 0]);
  float *run_mean = cpu_param_ptr(n->g, io->stats, node->stats[0]);
  float *run_var = cpu_param_ptr(n->g, io->stats, node->stats[1]);
  cpu_bind(s->src, io->inputs[0]);
  cpu_bind(s->dst, io->output);
  cpu_bind(s->shift, shift);
  cpu_bind(s->mean_m, training ? s->mean : run_mean);
  cpu_bind(s->var_m, training ? s->var : run_var);
  dnnl_exec_arg_t args[8] = {{DNNL_ARG_SRC, s->src},
                             {DNNL_ARG_DST, s->dst},
                             {DNNL_ARG_SHIFT, s->shift},
                             {DNNL_ARG_MEAN, s->mean_m},
                             {DNNL_ARG_VARIANCE, s->var_m}};
  int nargs = 5;
  if (s->use_scale) {
    cpu_bind(s->scale, cpu_param_ptr(n->g, io->params, node->params[0]));
    args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCALE, s->scale};
  }
  if (s->ws) {
    cpu_bind(s->ws_m, s->ws);
    args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_WORKSPACE, s->ws_m};
  }
  cnnb_status st = cpu_exec(d, s->fwd, nargs, args, node, "batch norm forward");
  if (st || !training) return st;
  float decay = s->decay, bessel = s->m > 1.0 ? (float)(s->m / (s->m - 1.0)) : 1.0f;
  for (int32_t c = 0; c < s->channels; c++) {
    run_mean[c] = decay * run_mean[c] + (1.0f - decay) * s->mean[c];
    run_var[c] = decay * run_var[c] + (1.0f - decay) * s->var[c] * bessel;
  }
  return CNNB_OK;
}

static cnnb_status bn_backward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  bn_node *s = (bn_node *)n;
  const cnnb_node *node = n->node;
  void *dx = io->input_grads[0];
  if (!dx) {
    /* oneDNN computes scale/offset gradients only together with dx. Only a batch norm
     * with nothing trainable upstream (on the images) gets here: its scratch is made on
     * first use rather than kept for every batch norm. */
    cnnb_status st = cpu_transient_reserve(d, 0, s->dx_bytes, node);
    if (st) return st;
    dx = cpu_transient(d, 0);
  }
  cpu_bind(s->b_src, io->inputs[0]);
  cpu_bind(s->b_mean, s->mean);
  cpu_bind(s->b_var, s->var);
  cpu_bind(s->diff_dst, io->output_grad);
  cpu_bind(s->diff_src, dx);
  cpu_bind(s->diff_shift, cpu_param_ptr(n->g, io->grads, node->params[s->use_scale ? 1 : 0]));
  dnnl_exec_arg_t args[11] = {
      {DNNL_ARG_SRC, s->b_src},         {DNNL_ARG_MEAN, s->b_mean},
      {DNNL_ARG_VARIANCE, s->b_var},    {DNNL_ARG_DIFF_DST, s->diff_dst},
      {DNNL_ARG_DIFF_SRC, s->diff_src}, {DNNL_ARG_DIFF_SHIFT, s->diff_shift}};
  int nargs = 6;
  /* oneDNN 2.6 counts the shift among backward's inputs (it reads none of it). */
  cpu_bind(s->b_shift, cpu_param_ptr(n->g, io->params, node->params[s->use_scale ? 1 : 0]));
  args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SHIFT, s->b_shift};
  if (s->use_scale) {
    cpu_bind(s->b_scale, cpu_param_ptr(n->g, io->params, node->params[0]));
    cpu_bind(s->diff_scale, cpu_param_ptr(n->g, io->grads, node->params[0]));
    args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCALE, s->b_scale};
    args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_SCALE, s->diff_scale};
  }
  if (s->ws) {
    cpu_bind(s->b_ws, s->ws);
    args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_WORKSPACE, s->b_ws};
  }
  return cpu_exec(d, s->bwd, nargs, args, node, "batch norm backward");
}

static void bn_release(cpu_device *d, cpu_node *n) {
  bn_node *s = (bn_node *)n;
  if (s->fwd) dnnl_primitive_destroy(s->fwd);
  if (s->bwd) dnnl_primitive_destroy(s->bwd);
  dnnl_memory_t mems[] = {s->src,        s->dst,       s->mean_m, s->var_m,    s->scale,
                          s->shift,      s->ws_m,      s->b_src,  s->b_mean,   s->b_var,
                          s->b_scale,    s->b_shift,   s->b_ws,   s->diff_dst, s->diff_src,
                          s->diff_scale, s->diff_shift};
  for (size_t i = 0; i < sizeof mems / sizeof *mems; i++)
    if (mems[i]) dnnl_memory_destroy(mems[i]);
  cpu_free(s->mean);
  cpu_free(s->var);
  cpu_free(s->ws);
  free(s);
}

static const cpu_node_ops bn_ops = {bn_forward, bn_backward, bn_release};

cnnb_status cpu_prepare_batch_norm(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                                   cpu_node **out) {
  bn_node *s = calloc(1, sizeof *s);
  if (!s) return cpu_oom(d, cnnb_graph_node(g, index), sizeof *s, "its state");
  cpu_node_init(&s->base, &bn_ops, g, p, index);
  const cnnb_node *node = s->base.node;
  const dnnl_memory_desc_t *md = &p->md[index];
  const dnnl_memory_desc_t *in_md = &p->md[node->inputs[0]];
  dnnl_primitive_desc_t fpd = NULL, bpd = NULL;
  dnnl_batch_normalization_desc_t desc;
  cnnb_status st = CNNB_OK;
  cnnb_shape sh = node->shape;
  s->channels = sh.c;
  s->m = (double)sh.n * sh.h * sh.w;
  s->decay = node->attr.batch_norm.decay;
  s->use_scale = node->num_params == 2;
  s->fused = node->fused_relu != 0;
  float eps = node->attr.batch_norm.epsilon;
  if (node->num_params < 1 || node->num_stats != 2) {
    st = cnnb_error(d->ctx, CNNB_EINVAL, "cpu: batch norm '%s' needs an offset and two statistics",
                    node->name);
    goto done;
  }
  unsigned flags = dnnl_use_shift | (s->use_scale ? dnnl_use_scale : 0u) |
                   (s->fused ? dnnl_fuse_norm_relu : 0u);
  dnnl_dim_t cdims[1] = {sh.c};
  dnnl_memory_desc_t cmd = cpu_md_tag(1, cdims, dnnl_f32, dnnl_a);
  CPU_TRY(st, d,
          dnnl_batch_normalization_forward_desc_init(
              &desc, d->cfg.training ? dnnl_forward_training : dnnl_forward_inference, in_md, eps,
              flags | (d->cfg.training ? 0u : dnnl_use_global_stats)),
          node, "batch norm forward descriptor");
  if ((st = cpu_pd_create(d, &fpd, &desc, NULL, NULL, node, "batch norm forward"))) goto done;
  if ((st = cpu_prim_create(d, &s->fwd, fpd, node, "batch norm forward"))) goto done;
  if ((st = cpu_mem(d, &s->src, in_md, node)) || (st = cpu_mem(d, &s->dst, md, node)) ||
      (st = cpu_mem(d, &s->mean_m, &cmd, node)) || (st = cpu_mem(d, &s->var_m, &cmd, node)) ||
      (st = cpu_mem(d, &s->scale, &cmd, node)) || (st = cpu_mem(d, &s->shift, &cmd, node)))
    goto done;
  if (!(s->mean = cpu_alloc((size_t)sh.c * sizeof(float))) ||
      !(s->var = cpu_alloc((size_t)sh.c * sizeof(float)))) {
    st = cpu_oom(d, node, (size_t)sh.c * sizeof(float), "the batch statistics");
    goto done;
  }
  const dnnl_memory_desc_t *ws_md = cpu_pd_md(fpd, dnnl_query_workspace_md, 0);
  if (ws_md && ws_md->ndims > 0 && dnnl_memory_desc_get_size(ws_md) > 0) {
    if (!(s->ws = cpu_alloc(dnnl_memory_desc_get_size(ws_md)))) {
      st = cpu_oom(d, node, dnnl_memory_desc_get_size(ws_md), "the batch norm workspace");
      goto done;
    }
    if ((st = cpu_mem(d, &s->ws_m, ws_md, node)) || (st = cpu_mem(d, &s->b_ws, ws_md, node)))
      goto done;
  }
  if (d->cfg.training) {
    s->dx_bytes = dnnl_memory_desc_get_size(in_md);
    CPU_TRY(st, d,
            dnnl_batch_normalization_backward_desc_init(&desc, dnnl_backward, md, in_md, eps,
                                                        flags),
            node, "batch norm backward descriptor");
    if ((st = cpu_pd_create(d, &bpd, &desc, NULL, fpd, node, "batch norm backward"))) goto done;
    if ((st = cpu_prim_create(d, &s->bwd, bpd, node, "batch norm backward"))) goto done;
    if ((st = cpu_mem(d, &s->b_src, in_md, node)) || (st = cpu_mem(d, &s->b_mean, &cmd, node)) ||
        (st = cpu_mem(d, &s->b_var, &cmd, node)) || (st = cpu_mem(d, &s->b_scale, &cmd, node)) ||
        (st = cpu_mem(d, &s->b_shift, &cmd, node)) || (st = cpu_mem(d, &s->diff_dst, md, node)) ||
        (st = cpu_mem(d, &s->diff_src, in_md, node)) ||
        (st = cpu_mem(d, &s->diff_scale, &cmd, node)) ||
        (st = cpu_mem(d, &s->diff_shift, &cmd, node)))
      goto done;
  }
done:
  if (fpd) dnnl_primitive_desc_destroy(fpd);
  if (bpd) dnnl_primitive_desc_destroy(bpd);
  if (st) {
    bn_release(d, &s->base);
    return st;
  }
  *out = &s->base;
  return CNNB_OK;
}
