/* ops_dense.c — the fully connected layer on oneDNN's inner product: forward, backward
 * data, backward weights (and bias).
 *
 * The input is flattened to [N, K] in logical NCHW order, so the layer reads a plain
 * input: a blocked one (a conv or pool output) is converted first, and the plain copy is
 * kept for backward-weights of the same step. Weights stay [units, K] fp32 in the arena;
 * under bf16 a bf16 copy is made each forward, and weight gradients come back in fp32. */
#include <stdlib.h>

#include "cpu_device.h"

typedef struct dense_node {
  cpu_node base;
  int has_bias;
  cpu_xform src_to_plain; /* input layout -> [N, K] plain (when they differ) */
  void *src_plain;
  cpu_xform grad_to_input; /* [N, K] plain gradient -> the input's layout */
  cpu_weights w;
  dnnl_primitive_t fwd, bwd_data, bwd_weights;
  dnnl_memory_t f_src, f_wei, f_bias, f_dst;
  dnnl_memory_t d_diff_src, d_wei, d_diff_dst;
  dnnl_memory_t w_src, w_diff_wei, w_diff_bias, w_diff_dst;
} dense_node;

static cnnb_status dense_forward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  dense_node *s = (dense_node *)n;
  const cnnb_node *node = n->node;
  cnnb_status st;
  const void *src = io->inputs[0];
  if (cpu_xform_needed(&s->src_to_plain)) {
    if ((st = cpu_xform_run(d, &s->src_to_plain, src, s->src_plain, node))) return st;
    src = s->src_plain;
  }
  const void *wei;
  if ((st = cpu_weights_prepare(d, &s->w, cpu_param_ptr(n->g, io->params, node->params[0]), &wei,
                                node)))
    return st;
  cpu_bind(s->f_src, src);
  cpu_bind(s->f_wei, wei);
  cpu_bind(s->f_dst, io->output);
  dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, s->f_src},
                             {DNNL_ARG_WEIGHTS, s->f_wei},
                             {DNNL_ARG_DST, s->f_dst},
                             {DNNL_ARG_BIAS, s->f_bias}};
  if (s->has_bias) cpu_bind(s->f_bias, cpu_param_ptr(n->g, io->params, node->params[1]));
  return cpu_exec(d, s->fwd, s->has_bias ? 4 : 3, args, node, "dense forward");
}

static cnnb_status dense_backward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  dense_node *s = (dense_node *)n;
  const cnnb_node *node = n->node;
  cnnb_status st;
  const void *src = cpu_xform_needed(&s->src_to_plain) ? s->src_plain : io->inputs[0];

  float *dw = cpu_param_ptr(n->g, io->grads, node->params[0]);
  cpu_bind(s->w_src, src);
  cpu_bind(s->w_diff_dst, io->output_grad);
  cpu_bind(s->w_diff_wei, s->w.diff_buf ? s->w.diff_buf : (void *)dw);
  dnnl_exec_arg_t wargs[4] = {{DNNL_ARG_SRC, s->w_src},
                              {DNNL_ARG_DIFF_DST, s->w_diff_dst},
                              {DNNL_ARG_DIFF_WEIGHTS, s->w_diff_wei},
                              {DNNL_ARG_DIFF_BIAS, s->w_diff_bias}};
  if (s->has_bias) cpu_bind(s->w_diff_bias, cpu_param_ptr(n->g, io->grads, node->params[1]));
  if ((st = cpu_exec(d, s->bwd_weights, s->has_bias ? 4 : 3, wargs, node,
                     "dense backward weights")))
    return st;
  if (s->w.diff_buf && (st = cpu_xform_run(d, &s->w.to_arena, s->w.diff_buf, dw, node))) return st;

  if (!io->input_grads[0]) return CNNB_OK;
  const void *wei = s->w.compute_buf
                        ? s->w.compute_buf
                        : (const void *)cpu_param_ptr(n->g, io->params, node->params[0]);
  void *diff_src = cpu_xform_needed(&s->grad_to_input) ? cpu_transient(d, 0) : io->input_grads[0];
  cpu_bind(s->d_diff_src, diff_src);
  cpu_bind(s->d_wei, wei);
  cpu_bind(s->d_diff_dst, io->output_grad);
  dnnl_exec_arg_t dargs[3] = {{DNNL_ARG_DIFF_SRC, s->d_diff_src},
                              {DNNL_ARG_WEIGHTS, s->d_wei},
                              {DNNL_ARG_DIFF_DST, s->d_diff_dst}};
  if ((st = cpu_exec(d, s->bwd_data, 3, dargs, node, "dense backward data"))) return st;
  if (cpu_xform_needed(&s->grad_to_input))
    return cpu_xform_run(d, &s->grad_to_input, diff_src, io->input_grads[0], node);
  return CNNB_OK;
}

static void dense_release(cpu_device *d, cpu_node *n) {
  dense_node *s = (dense_node *)n;
  dnnl_primitive_t prims[] = {s->fwd, s->bwd_data, s->bwd_weights};
  for (size_t i = 0; i < sizeof prims / sizeof *prims; i++)
    if (prims[i]) dnnl_primitive_destroy(prims[i]);
  dnnl_memory_t mems[] = {s->f_src,      s->f_wei,       s->f_bias,     s->f_dst,
                          s->d_diff_src, s->d_wei,       s->d_diff_dst, s->w_src,
                          s->w_diff_wei, s->w_diff_bias, s->w_diff_dst};
  for (size_t i = 0; i < sizeof mems / sizeof *mems; i++)
    if (mems[i]) dnnl_memory_destroy(mems[i]);
  cpu_xform_fini(&s->src_to_plain);
  cpu_xform_fini(&s->grad_to_input);
  cpu_free(s->src_plain);
  cpu_weights_fini(&s->w);
  free(s);
}

static const cpu_node_ops dense_ops = {dense_forward, dense_backward, dense_release};

cnnb_status cpu_prepare_dense(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                              cpu_node **out) {
  dense_node *s = calloc(1, sizeof *s);
  if (!s) return cpu_oom(d, cnnb_graph_node(g, index), sizeof *s, "its state");
  cpu_node_init(&s->base, &dense_ops, g, p, index);
  const cnnb_node *node = s->base.node;
  cnnb_tensor in = node->inputs[0];
  cnnb_shape is = cnnb_graph_node(g, in)->shape;
  dnnl_dim_t N = is.n, K = (dnnl_dim_t)is.c * is.h * is.w, U = node->shape.c;
  dnnl_dim_t src_dims[2] = {N, K}, wei_dims[2] = {U, K}, dst_dims[2] = {N, U}, bias_dims[1] = {U};
  dnnl_data_type_t dt = d->act_dt;
  s->has_bias = node->num_params > 1;
  dnnl_primitive_desc_t fpd = NULL, dpd = NULL, wpd = NULL;
  dnnl_inner_product_desc_t desc;
  cnnb_status st = CNNB_OK;

  if (node->num_params < 1 || cnnb_graph_param(g, node->params[0])->count != U * K) {
    st = cnnb_error(d->ctx, CNNB_EINVAL, "cpu: dense '%s': weights are not [%lld, %lld]",
                    node->name, (long long)U, (long long)K);
    goto done;
  }
  dnnl_memory_desc_t src_md = cpu_md_tag(2, src_dims, dt, dnnl_ab);
  dnnl_memory_desc_t wei_md = cpu_md_tag(2, wei_dims, dt, dnnl_ab);
  dnnl_memory_desc_t wei_plain = cpu_md_tag(2, wei_dims, dnnl_f32, dnnl_ab);
  dnnl_memory_desc_t bias_md = cpu_md_tag(1, bias_dims, dnnl_f32, dnnl_a);
  dnnl_memory_desc_t dst_md = cpu_md_tag(2, dst_dims, dt, dnnl_ab);

  /* The input's bytes are [N, K] plain exactly when its layout is plain NCHW. */
  dnnl_memory_desc_t in_plain = cpu_md_nchw(is, dt);
  if ((st = cpu_xform_init(d, &s->src_to_plain, &p->md[in], &in_plain, node, "dense input")))
    goto done;
  if (cpu_xform_needed(&s->src_to_plain) &&
      !(s->src_plain = cpu_alloc(dnnl_memory_desc_get_size(&in_plain)))) {
    st = cpu_oom(d, node, dnnl_memory_desc_get_size(&in_plain), "the input in plain layout");
    goto done;
  }

  CPU_TRY(st, d,
          dnnl_inner_product_forward_desc_init(
              &desc, d->cfg.training ? dnnl_forward_training : dnnl_forward_inference, &src_md,
              &wei_md, s->has_bias ? &bias_md : NULL, &dst_md),
          node, "dense forward descriptor");
  if ((st = cpu_pd_create(d, &fpd, &desc, NULL, NULL, node, "dense forward"))) goto done;
  if ((st = cpu_prim_create(d, &s->fwd, fpd, node, "dense forward"))) goto done;
  if ((st = cpu_weights_init_fwd(d, &s->w, &wei_plain, &wei_md, node))) goto done;
  if ((st = cpu_mem(d, &s->f_src, &src_md, node)) || (st = cpu_mem(d, &s->f_wei, &wei_md, node)) ||
      (st = cpu_mem(d, &s->f_bias, &bias_md, node)) || (st = cpu_mem(d, &s->f_dst, &dst_md, node)))
    goto done;

  if (d->cfg.training) {
    /* Weight gradients straight into the fp32 arena when oneDNN takes that layout. */
    dnnl_memory_desc_t dwei_md = wei_plain;
    CPU_TRY(st, d,
            dnnl_inner_product_backward_weights_desc_init(&desc, &src_md, &dwei_md,
                                                          s->has_bias ? &bias_md : NULL, &dst_md),
            node, "dense backward weights descriptor");
    st = cpu_pd_try(d, &wpd, &desc, NULL, fpd, node, "dense backward weights");
    if (st != CNNB_OK && st != CNNB_EUNSUPPORTED) goto done;
    if (st == CNNB_EUNSUPPORTED) {
      dwei_md = cpu_md_any(2, wei_dims, dnnl_f32);
      CPU_TRY(st, d,
              dnnl_inner_product_backward_weights_desc_init(&desc, &src_md, &dwei_md,
                                                            s->has_bias ? &bias_md : NULL, &dst_md),
              node, "dense backward weights descriptor");
      if ((st = cpu_pd_create(d, &wpd, &desc, NULL, fpd, node, "dense backward weights")))
        goto done;
      dwei_md = *cpu_pd_md(wpd, dnnl_query_diff_weights_md, 0);
    }
    if ((st = cpu_prim_create(d, &s->bwd_weights, wpd, node, "dense backward weights"))) goto done;
    if ((st = cpu_weights_init_bwd(d, &s->w, &wei_plain, &dwei_md, node))) goto done;
    if ((st = cpu_mem(d, &s->w_src, &src_md, node)) ||
        (st = cpu_mem(d, &s->w_diff_wei, &dwei_md, node)) ||
        (st = cpu_mem(d, &s->w_diff_bias, &bias_md, node)) ||
        (st = cpu_mem(d, &s->w_diff_dst, &dst_md, node)))
      goto done;

    CPU_TRY(st, d, dnnl_inner_product_backward_data_desc_init(&desc, &src_md, &wei_md, &dst_md),
            node, "dense backward data descriptor");
    if ((st = cpu_pd_create(d, &dpd, &desc, NULL, fpd, node, "dense backward data"))) goto done;
    if ((st = cpu_prim_create(d, &s->bwd_data, dpd, node, "dense backward data"))) goto done;
    if ((st = cpu_mem(d, &s->d_diff_src, &src_md, node)) ||
        (st = cpu_mem(d, &s->d_wei, &wei_md, node)) ||
        (st = cpu_mem(d, &s->d_diff_dst, &dst_md, node)))
      goto done;
    if ((st = cpu_xform_init(d, &s->grad_to_input, &in_plain, &p->md[in], node,
                             "dense input gradient")))
      goto done;
    if (cpu_xform_needed(&s->grad_to_input) &&
        (st = cpu_transient_reserve(d, 0, dnnl_memory_desc_get_size(&in_plain), node)))
      goto done;
  }
done:
  if (fpd) dnnl_primitive_desc_destroy(fpd);
  if (dpd) dnnl_primitive_desc_destroy(dpd);
  if (wpd) dnnl_primitive_desc_destroy(wpd);
  if (st) {
    dense_release(d, &s->base);
    return st;
  }
  *out = &s->base;
  return CNNB_OK;
}
