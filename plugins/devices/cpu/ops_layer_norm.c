/* ops_layer_norm.c — layer norm over the channels at each position (ABI 1.14, ConvNeXt's
 * LayerNorm2d) on oneDNN's layer normalization, which normalises over a tensor's last
 * dimension: the node's output is channels-last (nhwc), and the primitive sees it as a
 * [N * H * W, C] matrix. An input in another layout is converted first, into transient
 * slot 1 (again in backward, which reads x: cheaper than keeping a copy between the two
 * passes), and the input gradient converted back from slot 0.
 *
 * Training keeps each position's mean and variance (the node's [N * H * W] fp32 buffers)
 * for backward; scale and offset are the fp32 params, their gradients written straight
 * into the gradient arena. */
#include <stdlib.h>

#include "cpu_device.h"

typedef struct layer_norm_node {
  cpu_node base;
  float *mean, *var; /* [N * H * W]: this step's statistics, training only */
  cpu_xform x_in;    /* x's layout -> channels-last (no-op when they agree) */
  cpu_xform dx_out;  /* channels-last gradient -> x's layout */
  dnnl_primitive_t fwd, bwd;
  dnnl_memory_t src, dst, mean_m, var_m, scale, shift, diff_dst, diff_src, diff_scale, diff_shift;
} layer_norm_node;

/* x as the primitive reads it: in place when it is channels-last already. */
static cnnb_status channels_last_input(cpu_device *d, layer_norm_node *s, const void *x,
                                       const void **out) {
  if (!cpu_xform_needed(&s->x_in)) {
    *out = x;
    return CNNB_OK;
  }
  *out = cpu_transient(d, 1);
  return cpu_xform_run(d, &s->x_in, x, cpu_transient(d, 1), s->base.node);
}

static cnnb_status layer_norm_forward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  layer_norm_node *s = (layer_norm_node *)n;
  const cnnb_node *node = n->node;
  const void *x;
  cnnb_status st = channels_last_input(d, s, io->inputs[0], &x);
  if (st) return st;
  cpu_bind(s->src, x);
  cpu_bind(s->dst, io->output);
  cpu_bind(s->scale, cpu_param_ptr(n->g, io->params, node->params[0]));
  cpu_bind(s->shift, cpu_param_ptr(n->g, io->params, node->params[1]));
  dnnl_exec_arg_t args[6] = {{DNNL_ARG_SRC, s->src},
                             {DNNL_ARG_DST, s->dst},
                             {DNNL_ARG_SCALE, s->scale},
                             {DNNL_ARG_SHIFT, s->shift}};
  int nargs = 4;
  if (d->cfg.training) {
    cpu_bind(s->mean_m, s->mean);
    cpu_bind(s->var_m, s->var);
    args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_MEAN, s->mean_m};
    args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_VARIANCE, s->var_m};
  }
  return cpu_exec(d, s->fwd, nargs, args, node, "layer norm forward");
}

static cnnb_status layer_norm_backward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  layer_norm_node *s = (layer_norm_node *)n;
  const cnnb_node *node = n->node;
  const void *x;
  cnnb_status st = channels_last_input(d, s, io->inputs[0], &x);
  if (st) return st;
  /* oneDNN always writes dx: into the input's gradient when its layout is channels-last,
   * else into slot 0 (converted below, or dropped when no one wants it). */
  void *dx = io->input_grads[0] && !cpu_xform_needed(&s->dx_out) ? io->input_grads[0]
                                                                 : cpu_transient(d, 0);
  cpu_bind(s->src, x);
  cpu_bind(s->mean_m, s->mean);
  cpu_bind(s->var_m, s->var);
  cpu_bind(s->scale, cpu_param_ptr(n->g, io->params, node->params[0]));
  cpu_bind(s->shift, cpu_param_ptr(n->g, io->params, node->params[1]));
  cpu_bind(s->diff_dst, io->output_grad);
  cpu_bind(s->diff_src, dx);
  cpu_bind(s->diff_scale, cpu_param_ptr(n->g, io->grads, node->params[0]));
  cpu_bind(s->diff_shift, cpu_param_ptr(n->g, io->grads, node->params[1]));
  /* oneDNN 2.6 wants the shift too, though dx does not depend on it. */
  dnnl_exec_arg_t args[9] = {{DNNL_ARG_SRC, s->src},
                             {DNNL_ARG_MEAN, s->mean_m},
                             {DNNL_ARG_VARIANCE, s->var_m},
                             {DNNL_ARG_SCALE, s->scale},
                             {DNNL_ARG_SHIFT, s->shift},
                             {DNNL_ARG_DIFF_DST, s->diff_dst},
                             {DNNL_ARG_DIFF_SRC, s->diff_src},
                             {DNNL_ARG_DIFF_SCALE, s->diff_scale},
                             {DNNL_ARG_DIFF_SHIFT, s->diff_shift}};
  if ((st = cpu_exec(d, s->bwd, 9, args, node, "layer norm backward"))) return st;
  if (io->input_grads[0] && dx != io->input_grads[0])
    return cpu_xform_run(d, &s->dx_out, dx, io->input_grads[0], node);
  return CNNB_OK;
}

static void layer_norm_release(cpu_device *d, cpu_node *n) {
  layer_norm_node *s = (layer_norm_node *)n;
  if (s->fwd) dnnl_primitive_destroy(s->fwd);
  if (s->bwd) dnnl_primitive_destroy(s->bwd);
  dnnl_memory_t mems[] = {s->src,   s->dst,      s->mean_m,   s->var_m,      s->scale,
                          s->shift, s->diff_dst, s->diff_src, s->diff_scale, s->diff_shift};
  for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++)
    if (mems[i]) dnnl_memory_destroy(mems[i]);
  cpu_xform_fini(&s->x_in);
  cpu_xform_fini(&s->dx_out);
  cpu_free(s->mean);
  cpu_free(s->var);
  free(s);
}

static const cpu_node_ops layer_norm_ops = {layer_norm_forward, layer_norm_backward,
                                            layer_norm_release};

/* The node's output: channels-last in the activation type. */
cnnb_status cpu_layout_channels_last(cpu_device *d, const cnnb_graph *g, const cpu_plan *p,
                                     int32_t index, dnnl_memory_desc_t *out) {
  cnnb_shape s = cnnb_graph_node(g, index)->shape;
  const dnnl_dim_t dims[4] = {s.n, s.c, s.h, s.w};
  *out = cpu_md_tag(4, dims, d->act_dt, dnnl_nhwc);
  return CNNB_OK;
}

cnnb_status cpu_prepare_layer_norm(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                                   cpu_node **out) {
  layer_norm_node *s = calloc(1, sizeof *s);
  if (!s) return cpu_oom(d, cnnb_graph_node(g, index), sizeof *s, "its state");
  cpu_node_init(&s->base, &layer_norm_ops, g, p, index);
  const cnnb_node *node = s->base.node;
  const cnnb_shape sh = node->shape;
  const int64_t positions = (int64_t)sh.n * sh.h * sh.w;
  const float eps = node->attr.layer_norm.epsilon;
  const dnnl_memory_desc_t *x = &p->md[node->inputs[0]], *y = &p->md[index];
  /* The same bytes as y, seen as the primitive wants them: [positions, C], C last. */
  const dnnl_dim_t rows[2] = {positions, sh.c}, cols[1] = {sh.c}, stat[1] = {positions};
  const dnnl_memory_desc_t data = cpu_md_tag(2, rows, d->act_dt, dnnl_ab);
  const dnnl_memory_desc_t stats = cpu_md_tag(1, stat, dnnl_f32, dnnl_a);
  const dnnl_memory_desc_t channel = cpu_md_tag(1, cols, dnnl_f32, dnnl_a);
  const unsigned flags = dnnl_use_scale | dnnl_use_shift;
  dnnl_layer_normalization_desc_t desc;
  dnnl_primitive_desc_t fpd = NULL, bpd = NULL;
  cnnb_status st;
  const size_t y_bytes = dnnl_memory_desc_get_size(y);
  if ((st = cpu_xform_init(d, &s->x_in, x, y, node, "layer norm input")) ||
      (cpu_xform_needed(&s->x_in) && (st = cpu_transient_reserve(d, 1, y_bytes, node))))
    goto done;
  CPU_TRY(st, d,
          dnnl_layer_normalization_forward_desc_init(&desc,
                                                     d->cfg.training ? dnnl_forward_training
                                                                     : dnnl_forward_inference,
                                                     &data, &stats, eps, flags),
          node, "layer norm forward");
  if ((st = cpu_pd_create(d, &fpd, &desc, NULL, NULL, node, "layer norm forward")) ||
      (st = cpu_prim_create(d, &s->fwd, fpd, node, "layer norm forward")))
    goto done;
  if ((st = cpu_mem(d, &s->src, &data, node)) || (st = cpu_mem(d, &s->dst, &data, node)) ||
      (st = cpu_mem(d, &s->scale, &channel, node)) ||
      (st = cpu_mem(d, &s->shift, &channel, node)) || (st = cpu_mem(d, &s->mean_m, &stats, node)) ||
      (st = cpu_mem(d, &s->var_m, &stats, node)))
    goto done;
  if (d->cfg.training) {
    s->mean = cpu_alloc((size_t)positions * sizeof(float));
    s->var = cpu_alloc((size_t)positions * sizeof(float));
    if (!s->mean || !s->var) {
      st = cpu_oom(d, node, 2 * (size_t)positions * sizeof(float), "its statistics");
      goto done;
    }
    CPU_TRY(st, d,
            dnnl_layer_normalization_backward_desc_init(&desc, dnnl_backward, &data, &data, &stats,
                                                        eps, flags),
            node, "layer norm backward");
    if ((st = cpu_pd_create(d, &bpd, &desc, NULL, fpd, node, "layer norm backward")) ||
        (st = cpu_prim_create(d, &s->bwd, bpd, node, "layer norm backward")))
      goto done;
    if ((st = cpu_mem(d, &s->diff_dst, &data, node)) ||
        (st = cpu_mem(d, &s->diff_src, &data, node)) ||
        (st = cpu_mem(d, &s->diff_scale, &channel, node)) ||
        (st = cpu_mem(d, &s->diff_shift, &channel, node)) ||
        (st = cpu_xform_init(d, &s->dx_out, y, x, node, "layer norm input gradient")) ||
        (st = cpu_transient_reserve(d, 0, y_bytes, node)))
      goto done;
  }
done:
  if (fpd) dnnl_primitive_desc_destroy(fpd);
  if (bpd) dnnl_primitive_desc_destroy(bpd);
  if (st) {
    layer_norm_release(d, &s->base);
    return st;
  }
  *out = &s->base;
  return CNNB_OK;
}
