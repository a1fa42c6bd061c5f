/* ops_conv.c — 2-D convolution on oneDNN: forward (optional bias, optional fused ReLU),
 * backward data and backward weights; strides, explicit pads (the graph resolved SAME
 * and VALID), dilation (oneDNN counts the gaps: d - 1) and groups (depthwise included).
 *
 * Layouts: oneDNN picks the input, weight and output layouts it runs fastest with
 * (format "any"). The output's choice becomes the tensor's layout in the plan; an input
 * in another layout is converted once per step and the copy kept for backward-weights;
 * weights are converted from the arena's plain OIHW fp32 (GOIHW for groups: the same
 * bytes) each step, and weight gradients converted back into it.
 *
 * Backward-weights normally reads the forward's input and the plan's output-gradient
 * layouts as they are. Where oneDNN has no JIT kernel for that pair it would run its
 * reference kernel, ~100x slower: oneDNN 2.6's AVX2 kernels (no AVX-512) have none for a
 * "flat" input of fewer channels than one vector, the 1-channel first layer of LeNet on
 * MNIST (1.5 s of a 1.6 s step). Then oneDNN chooses both layouts, and the input and the
 * gradient are converted for it each step (bwd_weights_own_layouts). */
#include <stdlib.h>
#include <string.h>

#include "cpu_device.h"

typedef struct conv_node {
  cpu_node base;
  int has_bias, fused_relu;
  cpu_xform src_in; /* the input's layout -> the kernel's */
  void *src_buf;    /* converted input, kept for backward-weights */
  cpu_weights w;    /* forward (and backward-data when its layout agrees) */
  cpu_weights wd;   /* backward-data weights in their own layout */
  int wd_own;
  cpu_xform diff_src_out;    /* backward-data's input-gradient layout -> the input's */
  cpu_xform wsrc_in, wdy_in; /* backward-weights' own layouts, when it needs them */
  void *wsrc_buf, *wdy_buf;  /* the input and the output gradient converted for it */

  dnnl_primitive_t fwd, bwd_data, bwd_weights;
  dnnl_memory_t f_src, f_wei, f_bias, f_dst;
  dnnl_memory_t w_src, w_diff_wei, w_diff_bias, w_diff_dst;
  dnnl_memory_t d_diff_src, d_wei, d_diff_dst;
  cpu_fused_relu relu; /* the fused ReLU's backward */
} conv_node;

typedef struct conv_geometry {
  dnnl_dims_t strides, dilates, pad_l, pad_r;
  dnnl_dim_t wei_dims[5];
  int wei_ndims;
  dnnl_dim_t bias_dims[1];
} conv_geometry;

static cnnb_status geometry(cpu_device *d, const cnnb_graph *g, int32_t index, conv_geometry *c) {
  const cnnb_node *n = cnnb_graph_node(g, index);
  cnnb_shape in = cnnb_graph_node(g, n->inputs[0])->shape;
  int32_t groups = n->attr.window.groups > 0 ? n->attr.window.groups : 1;
  int32_t o = n->shape.c;
  if (in.c % groups || o % groups)
    return cnnb_error(d->ctx, CNNB_EINVAL,
                      "cpu: conv2d '%s': %d groups do not divide %d in / %d out channels", n->name,
                      groups, in.c, o);
  memset(c, 0, sizeof *c);
  c->strides[0] = n->attr.window.stride_h;
  c->strides[1] = n->attr.window.stride_w;
  c->dilates[0] = (n->attr.window.dilation_h > 0 ? n->attr.window.dilation_h : 1) - 1;
  c->dilates[1] = (n->attr.window.dilation_w > 0 ? n->attr.window.dilation_w : 1) - 1;
  c->pad_l[0] = n->attr.window.pad_top;
  c->pad_l[1] = n->attr.window.pad_left;
  c->pad_r[0] = n->attr.window.pad_bottom;
  c->pad_r[1] = n->attr.window.pad_right;
  dnnl_dim_t kh = n->attr.window.kernel_h, kw = n->attr.window.kernel_w;
  if (groups == 1) {
    c->wei_ndims = 4;
    dnnl_dim_t dims[4] = {o, in.c, kh, kw};
    memcpy(c->wei_dims, dims, sizeof dims);
  } else {
    c->wei_ndims = 5;
    dnnl_dim_t dims[5] = {groups, o / groups, in.c / groups, kh, kw};
    memcpy(c->wei_dims, dims, sizeof dims);
  }
  c->bias_dims[0] = o;
  if (n->num_params < 1)
    return cnnb_error(d->ctx, CNNB_EINVAL, "cpu: conv2d '%s' has no kernel parameter", n->name);
  int64_t want = (int64_t)o * (in.c / groups) * kh * kw;
  if (cnnb_graph_param(g, n->params[0])->count != want)
    return cnnb_error(d->ctx, CNNB_EINVAL,
                      "cpu: conv2d '%s': kernel has %lld elements, expected %lld", n->name,
                      (long long)cnnb_graph_param(g, n->params[0])->count, (long long)want);
  return CNNB_OK;
}

/* The forward primitive descriptor with dst `dst` (format any in the plan, the plan's
 * layout in prepare). */
static cnnb_status forward_pd(cpu_device *d, const cnnb_graph *g, const conv_geometry *c,
                              int32_t index, const dnnl_memory_desc_t *dst,
                              dnnl_primitive_desc_t *pd) {
  const cnnb_node *n = cnnb_graph_node(g, index);
  cnnb_shape in = cnnb_graph_node(g, n->inputs[0])->shape;
  dnnl_dim_t src_dims[4] = {in.n, in.c, in.h, in.w};
  dnnl_memory_desc_t src_md = cpu_md_any(4, src_dims, d->act_dt);
  dnnl_memory_desc_t wei_md = cpu_md_any(c->wei_ndims, c->wei_dims, d->act_dt);
  dnnl_memory_desc_t bias_md = cpu_md_tag(1, c->bias_dims, dnnl_f32, dnnl_a);
  int has_bias = n->num_params > 1;
  dnnl_convolution_desc_t desc;
  dnnl_primitive_attr_t attr = NULL;
  cnnb_status st;
  CPU_TRY(st, d,
          dnnl_dilated_convolution_forward_desc_init(
              &desc, d->cfg.training ? dnnl_forward_training : dnnl_forward_inference,
              dnnl_convolution_direct, &src_md, &wei_md, has_bias ? &bias_md : NULL, dst,
              c->strides, c->dilates, c->pad_l, c->pad_r),
          n, "conv2d forward descriptor");
  /* The device's attributes (NULL) unless a ReLU is fused: then with its post-op. */
  if (n->fused_relu && (st = cpu_fused_relu_attr(d, n, &attr))) goto done;
  st = cpu_pd_create(d, pd, &desc, attr, NULL, n, "conv2d forward");
done:
  if (attr) dnnl_primitive_attr_destroy(attr);
  return st;
}

cnnb_status cpu_layout_conv(cpu_device *d, const cnnb_graph *g, const cpu_plan *p, int32_t index,
                            dnnl_memory_desc_t *out) {
  const cnnb_node *n = cnnb_graph_node(g, index);
  conv_geometry c;
  cnnb_status st = geometry(d, g, index, &c);
  if (st) return st;
  dnnl_dim_t dst_dims[4] = {n->shape.n, n->shape.c, n->shape.h, n->shape.w};
  dnnl_memory_desc_t dst_any = cpu_md_any(4, dst_dims, d->act_dt);
  dnnl_primitive_desc_t pd;
  if ((st = forward_pd(d, g, &c, index, &dst_any, &pd))) return st;
  *out = *cpu_pd_md(pd, dnnl_query_dst_md, 0);
  dnnl_primitive_desc_destroy(pd);
  return CNNB_OK;
}

static cnnb_status conv_forward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  conv_node *s = (conv_node *)n;
  const cnnb_node *node = n->node;
  cnnb_status st;
  const void *src = io->inputs[0];
  if (cpu_xform_needed(&s->src_in)) {
    if ((st = cpu_xform_run(d, &s->src_in, src, s->src_buf, node))) return st;
    src = s->src_buf;
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
  return cpu_exec(d, s->fwd, s->has_bias ? 4 : 3, args, node, "conv2d forward");
}

static cnnb_status conv_backward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  conv_node *s = (conv_node *)n;
  const cnnb_node *node = n->node;
  cnnb_status st;
  const void *dy = io->output_grad;
  if (s->fused_relu) {
    if ((st = cpu_fused_relu_backward(d, &s->relu, io->output, io->output_grad, cpu_transient(d, 0),
                                      node)))
      return st;
    dy = cpu_transient(d, 0); /* dy masked by the fused ReLU */
  }

  float *dw = cpu_param_ptr(n->g, io->grads, node->params[0]);
  const void *wsrc = cpu_xform_needed(&s->src_in) ? s->src_buf : io->inputs[0];
  const void *wdy = dy;
  if (cpu_xform_needed(&s->wsrc_in)) {
    if ((st = cpu_xform_run(d, &s->wsrc_in, wsrc, s->wsrc_buf, node))) return st;
    wsrc = s->wsrc_buf;
  }
  if (cpu_xform_needed(&s->wdy_in)) {
    if ((st = cpu_xform_run(d, &s->wdy_in, wdy, s->wdy_buf, node))) return st;
    wdy = s->wdy_buf;
  }
  cpu_bind(s->w_src, wsrc);
  cpu_bind(s->w_diff_dst, wdy);
  cpu_bind(s->w_diff_wei, s->w.diff_buf ? s->w.diff_buf : (void *)dw);
  dnnl_exec_arg_t wargs[4] = {{DNNL_ARG_SRC, s->w_src},
                              {DNNL_ARG_DIFF_DST, s->w_diff_dst},
                              {DNNL_ARG_DIFF_WEIGHTS, s->w_diff_wei},
                              {DNNL_ARG_DIFF_BIAS, s->w_diff_bias}};
  if (s->has_bias) cpu_bind(s->w_diff_bias, cpu_param_ptr(n->g, io->grads, node->params[1]));
  if ((st = cpu_exec(d, s->bwd_weights, s->has_bias ? 4 : 3, wargs, node,
                     "conv2d backward weights")))
    return st;
  if (s->w.diff_buf && (st = cpu_xform_run(d, &s->w.to_arena, s->w.diff_buf, dw, node))) return st;

  if (!io->input_grads[0]) return CNNB_OK;
  const float *arena_w = cpu_param_ptr(n->g, io->params, node->params[0]);
  const void *wei;
  if (s->wd_own) {
    if ((st = cpu_weights_prepare(d, &s->wd, arena_w, &wei, node))) return st;
  } else {
    wei = s->w.compute_buf ? s->w.compute_buf : (const void *)arena_w; /* converted in forward */
  }
  void *diff_src = cpu_xform_needed(&s->diff_src_out) ? cpu_transient(d, 1) : io->input_grads[0];
  cpu_bind(s->d_diff_src, diff_src);
  cpu_bind(s->d_wei, wei);
  cpu_bind(s->d_diff_dst, dy);
  dnnl_exec_arg_t dargs[3] = {{DNNL_ARG_DIFF_SRC, s->d_diff_src},
                              {DNNL_ARG_WEIGHTS, s->d_wei},
                              {DNNL_ARG_DIFF_DST, s->d_diff_dst}};
  if ((st = cpu_exec(d, s->bwd_data, 3, dargs, node, "conv2d backward data"))) return st;
  if (cpu_xform_needed(&s->diff_src_out))
    return cpu_xform_run(d, &s->diff_src_out, diff_src, io->input_grads[0], node);
  return CNNB_OK;
}

static void conv_release(cpu_device *d, cpu_node *n) {
  conv_node *s = (conv_node *)n;
  dnnl_primitive_t prims[] = {s->fwd, s->bwd_data, s->bwd_weights};
  for (size_t i = 0; i < sizeof prims / sizeof *prims; i++)
    if (prims[i]) dnnl_primitive_destroy(prims[i]);
  dnnl_memory_t mems[] = {s->f_src,      s->f_wei,      s->f_bias,      s->f_dst,
                          s->w_src,      s->w_diff_wei, s->w_diff_bias, s->w_diff_dst,
                          s->d_diff_src, s->d_wei,      s->d_diff_dst};
  for (size_t i = 0; i < sizeof mems / sizeof *mems; i++)
    if (mems[i]) dnnl_memory_destroy(mems[i]);
  cpu_fused_relu_fini(&s->relu);
  cpu_xform_fini(&s->src_in);
  cpu_xform_fini(&s->diff_src_out);
  cpu_xform_fini(&s->wsrc_in);
  cpu_xform_fini(&s->wdy_in);
  cpu_free(s->wsrc_buf);
  cpu_free(s->wdy_buf);
  cpu_weights_fini(&s->w);
  cpu_weights_fini(&s->wd);
  cpu_free(s->src_buf);
  free(s);
}

static const cpu_node_ops conv_ops = {conv_forward, conv_backward, conv_release};

static int pd_is_reference(const_dnnl_primitive_desc_t pd) {
  const char *impl = NULL;
  return dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success &&
         impl && strncmp(impl, "ref", 3) == 0;
}

/* A converted copy of a tensor in layout `from` for backward-weights' layout `to`: the
 * conversion and its buffer, nothing when the two agree. */
static cnnb_status own_layout(cpu_device *d, cpu_xform *x, void **buf,
                              const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                              const cnnb_node *node, const char *what) {
  cnnb_status st = cpu_xform_init(d, x, from, to, node, what);
  if (st || !cpu_xform_needed(x)) return st;
  if (!(*buf = cpu_alloc(dnnl_memory_desc_get_size(to))))
    return cpu_oom(d, node, dnnl_memory_desc_get_size(to), "%s", what);
  return CNNB_OK;
}

/* When backward-weights on the forward's layouts (`*wpd`) is oneDNN's reference kernel,
 * asks again with the input and output-gradient layouts left to oneDNN; takes the answer
 * when it is a JIT kernel, with the conversions into its layouts (see the top). */
static cnnb_status bwd_weights_own_layouts(cpu_device *d, conv_node *s, const conv_geometry *c,
                                           const dnnl_memory_desc_t *src_md,
                                           const dnnl_memory_desc_t *dst_md,
                                           const dnnl_memory_desc_t *bias_md,
                                           const_dnnl_primitive_desc_t fpd,
                                           dnnl_primitive_desc_t *wpd, const cnnb_node *node) {
  if (!pd_is_reference(*wpd)) return CNNB_OK;
  dnnl_memory_desc_t src_any = cpu_md_any(src_md->ndims, src_md->dims, src_md->data_type);
  dnnl_memory_desc_t dst_any = cpu_md_any(dst_md->ndims, dst_md->dims, dst_md->data_type);
  dnnl_memory_desc_t dwei_any = cpu_md_any(c->wei_ndims, c->wei_dims, dnnl_f32);
  dnnl_convolution_desc_t desc;
  dnnl_primitive_desc_t pd = NULL;
  cnnb_status st;
  CPU_TRY(st, d,
          dnnl_dilated_convolution_backward_weights_desc_init(
              &desc, dnnl_convolution_direct, &src_any, &dwei_any, s->has_bias ? bias_md : NULL,
              &dst_any, c->strides, c->dilates, c->pad_l, c->pad_r),
          node, "conv2d backward weights descriptor (own layouts)");
  if (cpu_pd_try(d, &pd, &desc, NULL, fpd, node, "conv2d backward weights (own layouts)") ||
      pd_is_reference(pd))
    goto done; /* no better kernel: keep the first */
  if ((st = own_layout(d, &s->wsrc_in, &s->wsrc_buf, src_md, cpu_pd_md(pd, dnnl_query_src_md, 0),
                       node, "conv2d input for backward weights")) ||
      (st = own_layout(d, &s->wdy_in, &s->wdy_buf, dst_md, cpu_pd_md(pd, dnnl_query_diff_dst_md, 0),
                       node, "conv2d output gradient for backward weights")))
    goto done;
  dnnl_primitive_desc_destroy(*wpd);
  *wpd = pd;
  pd = NULL;
done:
  if (pd) dnnl_primitive_desc_destroy(pd);
  return st;
}

cnnb_status cpu_prepare_conv(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                             cpu_node **out) {
  conv_node *s = calloc(1, sizeof *s);
  if (!s) return cpu_oom(d, cnnb_graph_node(g, index), sizeof *s, "its state");
  cpu_node_init(&s->base, &conv_ops, g, p, index);
  const cnnb_node *node = s->base.node;
  cnnb_tensor in = node->inputs[0];
  const dnnl_memory_desc_t *dst_md = &p->md[index];
  dnnl_primitive_desc_t fpd = NULL, wpd = NULL, dpd = NULL;
  conv_geometry c;
  cnnb_status st = geometry(d, g, index, &c);
  if (st) goto done;
  s->has_bias = node->num_params > 1;
  s->fused_relu = node->fused_relu != 0;
  dnnl_memory_desc_t wei_plain = cpu_md_tag(c.wei_ndims, c.wei_dims, dnnl_f32,
                                            c.wei_ndims == 4 ? dnnl_oihw : dnnl_goihw);
  dnnl_memory_desc_t bias_md = cpu_md_tag(1, c.bias_dims, dnnl_f32, dnnl_a);

  if ((st = forward_pd(d, g, &c, index, dst_md, &fpd))) goto done;
  if ((st = cpu_prim_create(d, &s->fwd, fpd, node, "conv2d forward"))) goto done;
  dnnl_memory_desc_t src_md = *cpu_pd_md(fpd, dnnl_query_src_md, 0);
  dnnl_memory_desc_t wei_md = *cpu_pd_md(fpd, dnnl_query_weights_md, 0);
  if ((st = cpu_xform_init(d, &s->src_in, &p->md[in], &src_md, node, "conv2d input"))) goto done;
  if (cpu_xform_needed(&s->src_in) &&
      !(s->src_buf = cpu_alloc(dnnl_memory_desc_get_size(&src_md)))) {
    st = cpu_oom(d, node, dnnl_memory_desc_get_size(&src_md), "the input in the kernel's layout");
    goto done;
  }
  if ((st = cpu_weights_init_fwd(d, &s->w, &wei_plain, &wei_md, node))) goto done;
  if ((st = cpu_mem(d, &s->f_src, &src_md, node)) || (st = cpu_mem(d, &s->f_wei, &wei_md, node)) ||
      (st = cpu_mem(d, &s->f_bias, &bias_md, node)) || (st = cpu_mem(d, &s->f_dst, dst_md, node)))
    goto done;

  if (d->cfg.training) {
    dnnl_convolution_desc_t desc;
    dnnl_memory_desc_t dwei_any = cpu_md_any(c.wei_ndims, c.wei_dims, dnnl_f32);
    CPU_TRY(st, d,
            dnnl_dilated_convolution_backward_weights_desc_init(
                &desc, dnnl_convolution_direct, &src_md, &dwei_any, s->has_bias ? &bias_md : NULL,
                dst_md, c.strides, c.dilates, c.pad_l, c.pad_r),
            node, "conv2d backward weights descriptor");
    if ((st = cpu_pd_create(d, &wpd, &desc, NULL, fpd, node, "conv2d backward weights"))) goto done;
    if ((st = bwd_weights_own_layouts(d, s, &c, &src_md, dst_md, &bias_md, fpd, &wpd, node)))
      goto done;
    if ((st = cpu_prim_create(d, &s->bwd_weights, wpd, node, "conv2d backward weights"))) goto done;
    dnnl_memory_desc_t dwei_md = *cpu_pd_md(wpd, dnnl_query_diff_weights_md, 0);
    if ((st = cpu_weights_init_bwd(d, &s->w, &wei_plain, &dwei_md, node))) goto done;
    if ((st = cpu_mem(d, &s->w_src, cpu_pd_md(wpd, dnnl_query_src_md, 0), node)) ||
        (st = cpu_mem(d, &s->w_diff_wei, &dwei_md, node)) ||
        (st = cpu_mem(d, &s->w_diff_bias, &bias_md, node)) ||
        (st = cpu_mem(d, &s->w_diff_dst, cpu_pd_md(wpd, dnnl_query_diff_dst_md, 0), node)))
      goto done;

    cnnb_shape is = cnnb_graph_node(g, in)->shape;
    dnnl_dim_t src_dims[4] = {is.n, is.c, is.h, is.w};
    dnnl_memory_desc_t dsrc_any = cpu_md_any(4, src_dims, d->act_dt);
    dnnl_memory_desc_t wei_any = cpu_md_any(c.wei_ndims, c.wei_dims, d->act_dt);
    CPU_TRY(st, d,
            dnnl_dilated_convolution_backward_data_desc_init(&desc, dnnl_convolution_direct,
                                                             &dsrc_any, &wei_any, dst_md, c.strides,
                                                             c.dilates, c.pad_l, c.pad_r),
            node, "conv2d backward data descriptor");
    if ((st = cpu_pd_create(d, &dpd, &desc, NULL, fpd, node, "conv2d backward data"))) goto done;
    if ((st = cpu_prim_create(d, &s->bwd_data, dpd, node, "conv2d backward data"))) goto done;
    dnnl_memory_desc_t dsrc_md = *cpu_pd_md(dpd, dnnl_query_diff_src_md, 0);
    dnnl_memory_desc_t dwei_data_md = *cpu_pd_md(dpd, dnnl_query_weights_md, 0);
    if (!cpu_md_same(&dwei_data_md, &wei_md)) {
      s->wd_own = 1;
      if ((st = cpu_weights_init_fwd(d, &s->wd, &wei_plain, &dwei_data_md, node))) goto done;
    }
    if ((st = cpu_xform_init(d, &s->diff_src_out, &dsrc_md, &p->md[in], node,
                             "conv2d input gradient")))
      goto done;
    if (cpu_xform_needed(&s->diff_src_out) &&
        (st = cpu_transient_reserve(d, 1, dnnl_memory_desc_get_size(&dsrc_md), node)))
      goto done;
    if ((st = cpu_mem(d, &s->d_diff_src, &dsrc_md, node)) ||
        (st = cpu_mem(d, &s->d_wei, &dwei_data_md, node)) ||
        (st = cpu_mem(d, &s->d_diff_dst, dst_md, node)))
      goto done;
    if (s->fused_relu &&
        (st = cpu_fused_relu_prepare(d, &s->relu, dst_md, node, "conv2d fused relu")))
      goto done;
  }
done:
  if (fpd) dnnl_primitive_desc_destroy(fpd);
  if (wpd) dnnl_primitive_desc_destroy(wpd);
  if (dpd) dnnl_primitive_desc_destroy(dpd);
  if (st) {
    conv_release(d, &s->base);
    return st;
  }
  *out = &s->base;
  return CNNB_OK;
}
